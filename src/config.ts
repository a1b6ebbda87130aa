import path from 'node:path';
import { loadNetworks, type NetworkCatalog } from './chains/networks.js';
import { ConfigError } from './errors.js';
import { type Cidr, parseAllowCidrs } from './notify/egress.js';
import { DEFAULT_RETRY_SCHEDULE_MS, parseDuration, parseSchedule } from './notify/retry-policy.js';

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
  logLevel: LogLevel;
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
  retryScheduleMs: number[];
  deliveryTimeoutMs: number;
  connectTimeoutMs: number;
  disableAfterMs: number;
  dispatchConcurrency: number;
  /** How long a claimed notification is held before another dispatcher may take it. */
  dispatchLeaseMs: number;
  /** How often followers ask their node for a new head. */
  watchPollIntervalMs: number;
  pollIntervalMs: number;
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

/** Accepts 64 hex characters or base64 of exactly 32 bytes. */
export function parseMasterKey(raw: string, variable = 'LEDGERHOOK_MASTER_KEY'): Buffer {
  const text = raw.trim();
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) {
    const key = Buffer.from(text, 'base64');
    if (key.length === 32) return key;
  }
  throw new ConfigError(variable, 'must be 32 bytes, as 64 hex characters or base64');
}

function readDuration(env: Env, name: string, fallback: number, min: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const ms = parseDuration(raw, name);
  if (ms < min) throw new ConfigError(name, `must be at least ${min} ms`);
  return ms;
}

export function parseRoles(text: string | undefined, variable = 'LEDGERHOOK_ROLES'): ReadonlySet<Role> {
  if (!text || text.trim() === '' || text.trim() === 'all') return new Set(ROLES);
  const roles = text.split(',').map((r) => r.trim());
  for (const role of roles) {
    if (!ROLES.includes(role as Role))
      throw new ConfigError(variable, `has an unknown role "${role}" (use ${ROLES.join(', ')} or all)`);
  }
  return new Set(roles as Role[]);
}

export function loadConfig(env: Env = process.env, cwd = process.cwd()): Config {
  const port = readInt(env, 'PORT', 8080, 0, 65535);
  const host = (env.HOST ?? '127.0.0.1').trim();
  if (host === '') throw new ConfigError('HOST', 'must not be empty');
  const dataDirRaw = env.LEDGERHOOK_DATA_DIR?.trim() || './data';
  const logLevel = (env.LOG_LEVEL?.trim() || 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')} (got "${env.LOG_LEVEL}")`);
  }
  const masterKeyRaw = env.LEDGERHOOK_MASTER_KEY;
  const config: Config = {
    port,
    host,
    dataDir: path.resolve(cwd, dataDirRaw),
    databaseUrl: readDatabaseUrl(env),
    logLevel,
    masterKey: masterKeyRaw && masterKeyRaw.trim() !== '' ? parseMasterKey(masterKeyRaw) : undefined,
    bodyLimit: readInt(env, 'LEDGERHOOK_BODY_LIMIT', 1024 * 1024, 1024, 64 * 1024 * 1024),
    roles: parseRoles(env.LEDGERHOOK_ROLES),
    networks: loadNetworks(env),
    allowCidrs: parseAllowCidrs(env.LEDGERHOOK_ALLOW_CIDRS),
    dnsServers: (env.LEDGERHOOK_DNS_SERVERS ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    retryScheduleMs: env.LEDGERHOOK_RETRY_SCHEDULE?.trim()
      ? parseSchedule(env.LEDGERHOOK_RETRY_SCHEDULE)
      : DEFAULT_RETRY_SCHEDULE_MS,
    deliveryTimeoutMs: readDuration(env, 'LEDGERHOOK_DELIVERY_TIMEOUT', 15_000, 100),
    connectTimeoutMs: readDuration(env, 'LEDGERHOOK_CONNECT_TIMEOUT', 5_000, 100),
    disableAfterMs: readDuration(env, 'LEDGERHOOK_DISABLE_AFTER', 5 * 86_400_000, 1),
    dispatchConcurrency: readInt(env, 'LEDGERHOOK_DISPATCH_CONCURRENCY', 256, 1, 10_000),
    pollIntervalMs: readDuration(env, 'LEDGERHOOK_POLL_INTERVAL', 1_000, 10),
    dispatchLeaseMs: 0,
    watchPollIntervalMs: readDuration(env, 'LEDGERHOOK_WATCH_POLL_INTERVAL', 2_000, 10),
  };
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
