import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { loadNetworks, type NetworkCatalog } from './chains/networks.js';
import { ConfigError } from './errors.js';
import type { RateLimit } from './http-kit/rate-limit.js';
import { parseRiskConfig, type RiskConfig } from './risk-config.js';
import { parseMasterKey } from './secrets/master-key.js';
import { type Cidr, parseAllowCidrs } from './shared/cidr.js';
import { parseDuration, parseSchedule } from './shared/durations.js';

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export { ConfigError };

export type Role = 'api' | 'dispatcher' | 'watcher';
export const ROLES: readonly Role[] = ['api', 'dispatcher', 'watcher'];

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  /** PostgreSQL server; when absent the embedded PGlite database in `dataDir` is used. */
  databaseUrl: string | undefined;
  /** The embedded database on a worker thread of its own instead of the service's event loop. */
  pgliteWorker: boolean;
  logLevel: LogLevel;
  /** LOG_FORMAT: `json` (one object a line), `pretty` (for people), or unset: pretty on a terminal. */
  logFormat: 'json' | 'pretty' | undefined;
  /** 32-byte key wrapping per-record data keys; when absent it is generated into `dataDir`. */
  masterKey: Buffer | undefined;
  bodyLimit: number;
  /** What this process does; all of them by default. */
  roles: ReadonlySet<Role>;
  networks: NetworkCatalog;
  /** Callback addresses allowed although private or loopback (development and tests only). */
  allowCidrs: Cidr[];
  /** DNS servers for callback host names (host:port); the system resolver when empty. */
  dnsServers: string[];
  /** LEDGERHOOK_RETRY_SCHEDULE; undefined: the delivery policy's own (docs/webhooks.md, notify/retry-policy.ts). */
  retryScheduleMs: number[] | undefined;
  deliveryTimeoutMs: number;
  connectTimeoutMs: number;
  disableAfterMs: number;
  dispatchConcurrency: number;
  /** How long a claimed notification is held before another dispatcher may take it. */
  dispatchLeaseMs: number;
  /** How often followers ask their node for a new head. */
  watchPollIntervalMs: number;
  /** A pending EVM transaction gone from the node's pool this long is withdrawn (`dropped: true`). */
  mempoolDropAfterMs: number;
  /**
   * How long one EVM block's traces may keep failing before it is committed without its internal
   * transfers, as a trace gap (a node without the block's state: at once); 0: wait for ever.
   */
  traceWaitMs: number;
  /** Backfills: node requests per second per process (0: unlimited), blocks per chunk, jobs at once. */
  backfill: { requestsPerSecond: number; blocksPerChunk: number; concurrency: number };
  pollIntervalMs: number;
  /** API requests per account and process; undefined: unlimited. */
  rateLimit: RateLimit | undefined;
  /** Test notifications per account and process (POST /subscription/{id}/test). */
  testRateLimit: RateLimit | undefined;
  /** Requests for public pass pages (GET /pass/{id}) per client IP and process; undefined: unlimited. */
  passRateLimit: RateLimit | undefined;
  /** How long an API token's account is served from memory (0: read on every request). */
  authCacheTtlMs: number;
  /** How long a registry read by id is served from memory (dropped at once on a change's NOTIFY). */
  registryCacheTtlMs: number;
  /** A client must send a request's headers within this. */
  headersTimeoutMs: number;
  /** ... and the whole request, headers and body, within this. */
  requestTimeoutMs: number;
  /** A PostgreSQL query not answered within this fails (503 for an API request). */
  dbQueryTimeoutMs: number;
  /** Opening a PostgreSQL connection, or waiting for a free one, fails after this. */
  dbConnectTimeoutMs: number;
  /** /readyz answers 503 when the database has not answered within this. */
  readyTimeoutMs: number;
  /** The whole of a graceful stop; whatever has not stopped by then is left behind and the process exits. */
  shutdownTimeoutMs: number;
  /** Risk scores for `addressesRiskRatio`; undefined when no provider is configured. */
  risk: RiskConfig | undefined;
  anchor: AnchorSettings;
  /** Where clients reach this service (receipt URLs in events); the listening address by default. */
  publicUrl: string | undefined;
}

/** Registry anchoring (LEDGERHOOK_ANCHOR_*); off while `network` is undefined. */
export interface AnchorSettings {
  network: string | undefined;
  /** The signing key: an EVM private key (0x…) or an Algorand mnemonic. */
  key: string | undefined;
  intervalMs: number;
  /** LEDGERHOOK_ANCHOR_INTERVAL was given (--devnet's shorter default yields to it). */
  intervalSet: boolean;
  batchSize: number;
  /** Depth at which a batch is anchored; the network's subscription default when undefined. */
  confirmations: number | undefined;
  replaceAfterMs: number;
}

type Env = Record<string, string | undefined>;

function readInt(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `must be an integer (got "${raw}")`);
  const value = Number(raw.trim());
  if (value < min || value > max)
    throw new ConfigError(name, `must be between ${min} and ${max} (got ${value})`);
  return value;
}

function readDatabaseUrl(env: Env): string | undefined {
  const raw = env.DATABASE_URL;
  if (raw === undefined || raw.trim() === '') return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('DATABASE_URL', 'is not a valid URL (expected postgres://user@host:5432/db)');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new ConfigError('DATABASE_URL', `must use postgres:// or postgresql:// (got "${url.protocol}")`);
  }
  return raw;
}

function readOnOff(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (!raw) return fallback;
  if (raw === 'on' || raw === '1' || raw === 'true') return true;
  if (raw === 'off' || raw === '0' || raw === 'false') return false;
  throw new ConfigError(name, 'must be on or off');
}

function readDuration(env: Env, name: string, fallback: number, min: number, max = Infinity): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const ms = parseDuration(raw, name);
  if (ms < min) throw new ConfigError(name, `must be at least ${min} ms`);
  if (ms > max) throw new ConfigError(name, `must be at most ${max} ms`);
  return ms;
}

/** Timers cannot run longer than about 24.8 days; a day is more than any of these timeouts needs. */
const MAX_TIMEOUT_MS = 86_400_000;

export function parseRoles(text: string | undefined, variable = 'LEDGERHOOK_ROLES'): ReadonlySet<Role> {
  if (!text || text.trim() === '' || text.trim() === 'all') return new Set(ROLES);
  const roles = text.split(',').map((r) => r.trim());
  for (const role of roles) {
    if (!ROLES.includes(role as Role))
      throw new ConfigError(variable, `has an unknown role "${role}" (use ${ROLES.join(', ')} or all)`);
  }
  return new Set(roles as Role[]);
}

/** Parses `<requests>/<duration>` (`1000/1s`, `60/1m`), or `off` (undefined: no limit). */
export function parseRateLimit(text: string, variable: string): RateLimit | undefined {
  const value = text.trim();
  if (value === 'off') return undefined;
  const m = /^(\d+)\/(.+)$/.exec(value);
  if (!m || Number(m[1]) < 1 || Number(m[1]) > 1_000_000) {
    throw new ConfigError(
      variable,
      `must be <requests>/<duration> such as 1000/1s or 60/1m, or off (got "${value}")`,
    );
  }
  const windowMs = parseDuration(m[2]!, variable);
  if (windowMs < 100 || windowMs > 86_400_000)
    throw new ConfigError(variable, 'needs a window from 100ms to 1d');
  return { max: Number(m[1]), windowMs };
}

function readHost(env: Env): string {
  const host = (env.HOST ?? '127.0.0.1').trim();
  if (host === '') throw new ConfigError('HOST', 'must not be empty');
  // Digits and dots only is meant as an IPv4 address; anything else is a host name, checked by listening.
  if (/^[\d.]+$/.test(host) && !net.isIPv4(host))
    throw new ConfigError(
      'HOST',
      `is not a valid IPv4 address (got "${host}"; each of the 4 parts is 0-255)`,
    );
  return host;
}

/** The data directory, which must be a directory if it exists (it is created otherwise). */
function readDataDir(env: Env, cwd: string): string {
  const dir = path.resolve(cwd, env.LEDGERHOOK_DATA_DIR?.trim() || './data');
  let stat: fs.Stats | undefined;
  try {
    stat = fs.statSync(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR')
      throw new ConfigError(
        'LEDGERHOOK_DATA_DIR',
        `${dir} cannot be a directory: part of its path is a file`,
      );
    if (code !== 'ENOENT') throw new ConfigError('LEDGERHOOK_DATA_DIR', `${dir} cannot be read (${code})`);
  }
  if (stat && !stat.isDirectory())
    throw new ConfigError('LEDGERHOOK_DATA_DIR', `${dir} is a file, not a directory`);
  return dir;
}

/** DNS servers as node's resolver takes them: an IP address, optionally with a port. */
export function parseDnsServers(text: string | undefined, variable = 'LEDGERHOOK_DNS_SERVERS'): string[] {
  const servers = (text ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  for (const server of servers) {
    const match = /^\[([^\]]+)\](?::(\d+))?$/.exec(server) ?? /^([^:]+)(?::(\d+))?$/.exec(server);
    const [address, port] = match ? [match[1]!, match[2]] : [server, undefined];
    const valid =
      (match ? net.isIP(address) !== 0 : net.isIPv6(server)) &&
      (port === undefined || (Number(port) >= 1 && Number(port) <= 65535));
    if (!valid) {
      throw new ConfigError(
        variable,
        `has "${server}", which is not an IP address with an optional port (e.g. 1.1.1.1, 127.0.0.1:5353 or [::1]:53)`,
      );
    }
  }
  return servers;
}

function readRisk(env: Env, networks: NetworkCatalog, cwd: string): RiskConfig | undefined {
  return parseRiskConfig(
    {
      networks: env.LEDGERHOOK_RISK_NETWORKS,
      lists: env.LEDGERHOOK_RISK_LISTS,
      url: env.LEDGERHOOK_RISK_URL,
      token: env.LEDGERHOOK_RISK_TOKEN,
      // Short: a notification waits this long for its scores at most.
      timeoutMs: readDuration(env, 'LEDGERHOOK_RISK_TIMEOUT', 250, 10, 10_000),
      cacheTtlMs: readDuration(env, 'LEDGERHOOK_RISK_CACHE_TTL', 600_000, 0, MAX_TIMEOUT_MS),
    },
    networks,
    cwd,
  );
}

function readAnchor(env: Env): AnchorSettings {
  const network = env.LEDGERHOOK_ANCHOR_NETWORK?.trim() || undefined;
  const key = env.LEDGERHOOK_ANCHOR_KEY?.trim() || undefined;
  if (network !== undefined && key === undefined) {
    throw new ConfigError(
      'LEDGERHOOK_ANCHOR_KEY',
      `must be set to anchor on ${network} (LEDGERHOOK_ANCHOR_NETWORK)`,
    );
  }
  const confirmations = env.LEDGERHOOK_ANCHOR_CONFIRMATIONS?.trim()
    ? readInt(env, 'LEDGERHOOK_ANCHOR_CONFIRMATIONS', 1, 1, 1000)
    : undefined;
  return {
    network,
    key,
    intervalMs: readDuration(env, 'LEDGERHOOK_ANCHOR_INTERVAL', 60_000, 100, MAX_TIMEOUT_MS),
    intervalSet: Boolean(env.LEDGERHOOK_ANCHOR_INTERVAL?.trim()),
    batchSize: readInt(env, 'LEDGERHOOK_ANCHOR_BATCH', 10_000, 1, 100_000),
    confirmations,
    replaceAfterMs: readDuration(env, 'LEDGERHOOK_ANCHOR_REPLACE_AFTER', 180_000, 100, MAX_TIMEOUT_MS),
  };
}

function readPublicUrl(env: Env): string | undefined {
  const raw = env.LEDGERHOOK_PUBLIC_URL?.trim();
  if (!raw) return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('LEDGERHOOK_PUBLIC_URL', `must be an absolute http(s) URL (got "${raw}")`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError('LEDGERHOOK_PUBLIC_URL', `must be an absolute http(s) URL (got "${raw}")`);
  }
  return raw.replace(/\/+$/, '');
}

export function loadConfig(env: Env = process.env, cwd = process.cwd()): Config {
  const port = readInt(env, 'PORT', 8080, 0, 65535);
  const host = readHost(env);
  const logLevel = (env.LOG_LEVEL?.trim() || 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')} (got "${env.LOG_LEVEL}")`);
  }
  const logFormat = env.LOG_FORMAT?.trim() || undefined;
  if (logFormat !== undefined && logFormat !== 'json' && logFormat !== 'pretty') {
    throw new ConfigError('LOG_FORMAT', `must be json or pretty (got "${env.LOG_FORMAT}")`);
  }
  const masterKeyRaw = env.LEDGERHOOK_MASTER_KEY;
  const networks = loadNetworks(env);
  const config: Config = {
    port,
    host,
    dataDir: readDataDir(env, cwd),
    databaseUrl: readDatabaseUrl(env),
    pgliteWorker: readOnOff(env, 'LEDGERHOOK_PGLITE_WORKER', true),
    logLevel,
    logFormat,
    masterKey: masterKeyRaw && masterKeyRaw.trim() !== '' ? parseMasterKey(masterKeyRaw) : undefined,
    bodyLimit: readInt(env, 'LEDGERHOOK_BODY_LIMIT', 1024 * 1024, 1024, 64 * 1024 * 1024),
    roles: parseRoles(env.LEDGERHOOK_ROLES),
    networks,
    allowCidrs: parseAllowCidrs(env.LEDGERHOOK_ALLOW_CIDRS),
    dnsServers: parseDnsServers(env.LEDGERHOOK_DNS_SERVERS),
    retryScheduleMs: env.LEDGERHOOK_RETRY_SCHEDULE?.trim()
      ? parseSchedule(env.LEDGERHOOK_RETRY_SCHEDULE)
      : undefined,
    deliveryTimeoutMs: readDuration(env, 'LEDGERHOOK_DELIVERY_TIMEOUT', 15_000, 100),
    connectTimeoutMs: readDuration(env, 'LEDGERHOOK_CONNECT_TIMEOUT', 5_000, 100),
    disableAfterMs: readDuration(env, 'LEDGERHOOK_DISABLE_AFTER', 5 * 86_400_000, 1),
    dispatchConcurrency: readInt(env, 'LEDGERHOOK_DISPATCH_CONCURRENCY', 256, 1, 10_000),
    pollIntervalMs: readDuration(env, 'LEDGERHOOK_POLL_INTERVAL', 1_000, 10),
    dispatchLeaseMs: 0,
    watchPollIntervalMs: readDuration(env, 'LEDGERHOOK_WATCH_POLL_INTERVAL', 2_000, 10),
    mempoolDropAfterMs: readDuration(env, 'LEDGERHOOK_MEMPOOL_DROP_AFTER', 3_600_000, 1),
    // A bare 0 as well as 0s: "never give up" is how operators will write it.
    traceWaitMs:
      env.LEDGERHOOK_TRACE_WAIT?.trim() === '0'
        ? 0
        : readDuration(env, 'LEDGERHOOK_TRACE_WAIT', 60_000, 0, MAX_TIMEOUT_MS),
    backfill: {
      requestsPerSecond: readInt(env, 'LEDGERHOOK_BACKFILL_RPS', 20, 0, 100_000),
      blocksPerChunk: readInt(env, 'LEDGERHOOK_BACKFILL_BLOCKS', 100, 1, 10_000),
      concurrency: readInt(env, 'LEDGERHOOK_BACKFILL_CONCURRENCY', 2, 1, 100),
    },
    rateLimit: parseRateLimit(env.LEDGERHOOK_RATE_LIMIT?.trim() || '1000/1s', 'LEDGERHOOK_RATE_LIMIT'),
    testRateLimit: parseRateLimit(
      env.LEDGERHOOK_TEST_RATE_LIMIT?.trim() || '60/1m',
      'LEDGERHOOK_TEST_RATE_LIMIT',
    ),
    passRateLimit: parseRateLimit(
      env.LEDGERHOOK_PASS_RATE_LIMIT?.trim() || '60/1m',
      'LEDGERHOOK_PASS_RATE_LIMIT',
    ),
    authCacheTtlMs: readDuration(env, 'LEDGERHOOK_AUTH_CACHE_TTL', 1_000, 0, 60_000),
    registryCacheTtlMs: readDuration(env, 'LEDGERHOOK_REGISTRY_CACHE_TTL', 1_000, 0, 60_000),
    headersTimeoutMs: readDuration(env, 'LEDGERHOOK_HEADERS_TIMEOUT', 10_000, 100, MAX_TIMEOUT_MS),
    requestTimeoutMs: readDuration(env, 'LEDGERHOOK_REQUEST_TIMEOUT', 30_000, 100, MAX_TIMEOUT_MS),
    dbQueryTimeoutMs: readDuration(env, 'LEDGERHOOK_DB_QUERY_TIMEOUT', 10_000, 100, MAX_TIMEOUT_MS),
    dbConnectTimeoutMs: readDuration(env, 'LEDGERHOOK_DB_CONNECT_TIMEOUT', 5_000, 100, MAX_TIMEOUT_MS),
    readyTimeoutMs: readDuration(env, 'LEDGERHOOK_READY_TIMEOUT', 2_000, 100, MAX_TIMEOUT_MS),
    // 8 s: inside the 10 s after which `docker stop` kills (Kubernetes and systemd wait longer), so
    // the process itself releases its claims and data directory. At least 1 s: closing takes some.
    shutdownTimeoutMs: readDuration(env, 'LEDGERHOOK_SHUTDOWN_TIMEOUT', 8_000, 1_000),
    risk: readRisk(env, networks, cwd),
    anchor: readAnchor(env),
    publicUrl: readPublicUrl(env),
  };
  // Node refuses a headers timeout longer than the request's, which includes the headers.
  if (config.headersTimeoutMs > config.requestTimeoutMs) {
    throw new ConfigError(
      'LEDGERHOOK_HEADERS_TIMEOUT',
      `must not exceed LEDGERHOOK_REQUEST_TIMEOUT (${config.requestTimeoutMs} ms)`,
    );
  }
  // The lease must outlive any request, so a live dispatcher never loses a claim to another.
  const minimumLease = config.deliveryTimeoutMs + config.connectTimeoutMs + 1_000;
  config.dispatchLeaseMs = readDuration(
    env,
    'LEDGERHOOK_DISPATCH_LEASE',
    Math.max(60_000, 4 * config.deliveryTimeoutMs),
    1,
  );
  if (config.dispatchLeaseMs < minimumLease) {
    throw new ConfigError(
      'LEDGERHOOK_DISPATCH_LEASE',
      `must exceed the delivery and connect timeouts (at least ${minimumLease} ms)`,
    );
  }
  return config;
}
