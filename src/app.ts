import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import pinoPretty from 'pino-pretty';
import { startAdminServer } from './accounts/admin.js';
import { TOKEN_REVOKED_CHANNEL } from './accounts/principal-cache.js';
import { type Accounts, createAccounts, type IssuedToken } from './accounts/service.js';
import type { Anchorer } from './anchor/anchorer.js';
import { anchorStats } from './anchor/batches.js';
import { REGISTRY_CHANGED_CHANNEL } from './anchor/leaves.js';
import { anchorNetwork, startAnchorer, verifyAgainst } from './anchor/service.js';
import { type BackfillFamily, backfillFamily } from './backfill/families.js';
import { type Backfills, createBackfills } from './backfill/jobs.js';
import { registerBackfillRoutes } from './backfill/routes.js';
import { type BackfillRunner, createBackfillRunner } from './backfill/runner.js';
import type { Network } from './chains/networks.js';
import { type Config, ConfigError } from './config.js';
import { registerConsoleRoutes } from './console/routes.js';
import { LedgerhookError } from './errors.js';
import { backupRoute } from './http/admin-backup.js';
import { doctorRoute } from './http/admin-doctor.js';
import { tracesFillRoute } from './http/admin-traces.js';
import { createMetrics, type Metrics } from './http/metrics.js';
import { createHttpServer, type ServedRoutes } from './http/server.js';
import { createIdempotency } from './idempotency/service.js';
import { createDispatcher, type NotificationDispatcher } from './notify/dispatcher.js';
import { createDnsResolve, createEgress, type Egress } from './notify/egress.js';
import { createFeedSequencer } from './notify/feed.js';
import { createEventFeed, type EventFeed } from './notify/feed-reader.js';
import { registerFeedRoutes } from './notify/feed-routes.js';
import { outboxStats } from './notify/outbox.js';
import { createRetryPolicy } from './notify/retry-policy.js';
import { registerPassRoutes } from './registry/pass-routes.js';
import { registerRegistryRoutes } from './registry/routes.js';
import { createRegistries, type Registries } from './registry/service.js';
import { createEnvelope, type Envelope } from './secrets/envelope.js';
import { loadMasterKey, MASTER_KEY_FILE } from './secrets/master-key.js';
import { closeServer, type StopStep, stopAll } from './shared/shutdown.js';
import { createThrottle } from './shared/throttle.js';
import { urlSecretRedactor } from './shared/url-secrets.js';
import { type Db, openStore, type Store } from './store/db.js';
import { acquireDataDirLock, DataDirInUseError, type DataDirLock, dataDirHolder } from './store/lock.js';
import { settings } from './store/schema.js';
import { registerSubscriptionRoutes } from './subscriptions/routes.js';
import { createSubscriptions, type Subscriptions } from './subscriptions/service.js';
import { registerTransactionRoutes } from './transactions/routes.js';
import { createTransactions, type Transactions } from './transactions/service.js';
import { packageVersion } from './version.js';
import { createAddressIndex } from './watch/matching/address-index.js';
import { createRiskEnricher } from './watch/risk/enricher.js';
import { registerTraceGapRoutes } from './watch/trace-gaps/routes.js';
import { createWatcher, type Watcher } from './watch/watcher.js';

export const PGLITE_SUBDIR = 'pglite';

export { packageVersion };

/** Refused start: a misconfiguration the operator must fix, reported as one line. */
export class StartupError extends LedgerhookError {}

export interface OpenedStore {
  store: Store;
  /** Releases the data directory (embedded database only). */
  lock: DataDirLock | undefined;
}

/**
 * A failure to open a PostgreSQL database, as the operator should read it: what DATABASE_URL gets
 * wrong (no such database, refused credentials), or that the server cannot be reached.
 */
function databaseError(err: unknown, databaseUrl: string): unknown {
  const e = err as { code?: string; message?: string; cause?: { code?: string } } | undefined;
  const code = e?.code ?? e?.cause?.code;
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    return err;
  }
  const server = `${url.hostname}:${url.port || '5432'}`;
  const database = decodeURIComponent(url.pathname.slice(1)) || url.username;
  switch (code) {
    case '3D000':
      return new ConfigError(
        'DATABASE_URL',
        `names database "${database}", which does not exist on ${server}; create it (createdb ${database}) or correct the URL`,
      );
    case '28P01':
    case '28000':
      return new ConfigError('DATABASE_URL', `was refused by ${server}: ${e?.message}`);
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
      return new StartupError(`cannot reach the database server ${server} (DATABASE_URL): ${code}`);
    default:
      return err;
  }
}

/** Opens the configured database, migrated, holding the data directory when it is embedded. */
export async function openConfiguredStore(config: Config, logger?: Logger): Promise<OpenedStore> {
  try {
    return await openMigratedStore(config, logger);
  } catch (err) {
    throw config.databaseUrl ? databaseError(err, config.databaseUrl) : err;
  }
}

async function openMigratedStore(config: Config, logger?: Logger): Promise<OpenedStore> {
  const lock = config.databaseUrl ? undefined : acquireDataDirLock(config.dataDir);
  try {
    const store = await openStore(
      config.databaseUrl
        ? {
            databaseUrl: config.databaseUrl,
            onError: (err) => logger?.warn({ err }, 'database connection lost'),
            queryTimeoutMs: config.dbQueryTimeoutMs,
            connectTimeoutMs: config.dbConnectTimeoutMs,
          }
        : {
            pgliteDir: path.join(config.dataDir, PGLITE_SUBDIR),
            pgliteWorker: config.pgliteWorker,
          },
    );
    try {
      await store.migrate();
    } catch (err) {
      await store.close();
      throw err;
    }
    return { store, lock };
  } catch (err) {
    lock?.release();
    throw err;
  }
}

/** The id of the master key the database's records are sealed under, once a service has started on it. */
async function recordedMasterKeyId(db: Db): Promise<string | undefined> {
  const [row] = await db.select().from(settings).where(eq(settings.key, 'master_key_id'));
  return row?.value;
}

/**
 * Binds the database to the first master key that touches it, so a service started later with
 * another key refuses to start instead of writing records nobody can read together. A wrong key
 * is a configuration mistake (exit code 2), named by where the key came from.
 */
async function checkMasterKey(db: Db, envelope: Envelope, source: string): Promise<void> {
  await db.insert(settings).values({ key: 'master_key_id', value: envelope.keyId }).onConflictDoNothing();
  const recorded = await recordedMasterKeyId(db);
  if (recorded !== undefined && recorded !== envelope.keyId) {
    throw new ConfigError(
      source,
      `does not match this database: its records use master key ${recorded}, the configured key is ${envelope.keyId}; give the key it was first started with`,
    );
  }
}

export interface RunningApp {
  http: FastifyInstance;
  /** Present when this process has the dispatcher role. */
  dispatcher: NotificationDispatcher | undefined;
  /** Present when this process anchors registries (watcher role, anchoring configured). */
  anchorer: Anchorer | undefined;
  /** Base URL the API listens on. */
  url: string;
  store: Store;
  /**
   * Stops everything within `config.shutdownTimeoutMs` (see {@link startApp}); resolves with the
   * parts that had not stopped by their deadline and were left behind (empty when all went well).
   */
  close(): Promise<string[]>;
}

export interface StartOptions {
  /** Networks to follow from the start, with or without subscriptions (the devnet). */
  alwaysFollow?: string[];
  /** The log; by default createServiceLogger(config, logDestination). */
  logger?: Logger;
  /** Where the default log goes (standard output unless given). */
  logDestination?: DestinationStream;
  /** Where the first-start token is shown; the console by default. */
  announceToken?: (issued: IssuedToken) => void;
}

export function announceTokenOnConsole(issued: IssuedToken): void {
  process.stdout.write(
    [
      '',
      'Ledgerhook created the default account. Its API token is shown only this once:',
      '',
      `  ${issued.token}`,
      '',
      'Send it as "Authorization: Bearer <token>". More tokens: ledgerhook token create',
      '',
      '',
    ].join('\n'),
  );
}

/** What stopping keeps back from its deadline for closing the database (and for recording results before it). */
export function shutdownReserveMs(shutdownTimeoutMs: number): number {
  return Math.min(1_000, Math.floor(shutdownTimeoutMs / 4));
}

/** A listen failure as the operator should read it: which setting is wrong, or what holds the port. */
function listenError(err: unknown, host: string, port: number): unknown {
  switch ((err as NodeJS.ErrnoException | undefined)?.code) {
    case 'EADDRINUSE':
      return new StartupError(
        `port ${port} on ${host} is already in use by another program; stop it or set PORT to a free port`,
      );
    case 'EACCES':
      return new ConfigError('PORT', `${port} may not be listened on by this user; use a port above 1023`);
    case 'EADDRNOTAVAIL':
      return new ConfigError('HOST', `${host} cannot be listened on: it is not an address of this machine`);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_FAIL':
      return new ConfigError(
        'HOST',
        `${host} cannot be listened on: it is neither an IP address nor a host name that resolves`,
      );
    default:
      return err;
  }
}

/**
 * Checks that HOST and PORT can be listened on before anything else is done (the database opened,
 * a key generated), so a taken port or a wrong address fails at once with one line.
 */
async function checkListenable(host: string, port: number): Promise<void> {
  const probe = net.createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.listen({ host, port }, () => resolve());
    });
  } catch (err) {
    throw listenError(err, host, port);
  }
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}

/**
 * The service's log at the configured level. Node URLs often carry a provider's API key (in the
 * path, the query or the user part), and libraries quote the URL in their errors: below `debug`,
 * every line has those parts blanked out (see shared/url-secrets.ts). At `debug` and `trace` the
 * operator asked for everything, and gets it.
 */
export function createServiceLogger(config: Config, destination?: DestinationStream): Logger {
  const urls = config.networks.list().flatMap((n) => [...n.rpcUrls, ...n.wsUrls, ...n.indexerUrls]);
  if (config.risk?.url) urls.push(config.risk.url);
  const verbose = config.logLevel === 'debug' || config.logLevel === 'trace';
  const redact = verbose ? undefined : urlSecretRedactor(urls);
  const options: LoggerOptions = {
    level: config.logLevel,
    ...(redact ? { hooks: { streamWrite: redact } } : {}),
  };
  if (destination) return pino(options, destination);
  // For a person at a terminal: a line of time, level, message and fields, from the same JSON
  // (so redacted the same way), written synchronously as pino's own destination is.
  const pretty = (config.logFormat ?? (process.stdout.isTTY ? 'pretty' : 'json')) === 'pretty';
  if (!pretty) return pino(options);
  return pino(
    options,
    pinoPretty({
      sync: true,
      colorize: process.stdout.isTTY === true,
      translateTime: 'SYS:yyyy-mm-dd HH:MM:ss.l',
      ignore: 'pid,hostname',
    }),
  );
}

/**
 * The parts made after the parts that reach them, or only in a process with their role: stopping,
 * the subscriptions, the metrics, the backfills and the readiness probe find them here once they exist.
 */
interface LateParts {
  dispatcher?: NotificationDispatcher;
  watcher?: Watcher;
  anchorer?: Anchorer;
  backfillRunner?: BackfillRunner;
}

/** Stopping as {@link startApp} describes it; each part registers its step as it starts. */
interface Shutdown {
  /** The parts that use the store, stopped together before it closes. */
  steps: StopStep[];
  /** What stopping keeps back from its deadline for closing the database. */
  reserveMs: number;
  /** Stops everything, once; a second call gets the first one's result. */
  close(): Promise<string[]>;
}

/** The backfill family of each configured network, made once on first use. */
type FamilyOf = (name: string) => BackfillFamily | undefined;

/** The domain services every role builds, over the store. */
interface Services {
  accounts: Accounts;
  egress: Egress;
  /** Marks this instance's subscription NOTIFYs. */
  origin: string;
  subscriptions: Subscriptions;
  registries: Registries;
  familyOf: FamilyOf;
  backfills: Backfills;
}

/** Stopping: the dispatcher stops claiming first, then the steps, then the database (with a reserve of its own). */
function createShutdown(config: Config, opened: OpenedStore, logger: Logger, parts: LateParts): Shutdown {
  const { store, lock } = opened;
  /** The parts that use the store, stopped together before it closes. */
  const steps: StopStep[] = [];
  const reserveMs = shutdownReserveMs(config.shutdownTimeoutMs);
  let closing: Promise<string[]> | undefined;
  const shutdown = async (): Promise<string[]> => {
    const deadline = Date.now() + config.shutdownTimeoutMs;
    // First of all, before any await: from here on nothing is claimed or sent.
    parts.dispatcher?.stopClaiming();
    const late = await stopAll(steps.splice(0), deadline - reserveMs, logger);
    late.push(...(await stopAll([{ name: 'database', stop: () => store.close() }], deadline, logger)));
    lock?.release();
    return late;
  };
  const close = () => {
    closing ??= shutdown();
    return closing;
  };
  return { steps, reserveMs, close };
}

/** The envelope that seals records at rest, its master key loaded (or generated) and bound to the database. */
async function openEnvelope(config: Config, store: Store, logger: Logger): Promise<Envelope> {
  const keyFile = path.join(config.dataDir, MASTER_KEY_FILE);
  // A database that already has a key (a restored backup, a data directory whose master.key was
  // lost) must not get a new one generated beside it: the operator gives the kept key.
  const recorded =
    config.masterKey || fs.existsSync(keyFile) ? undefined : await recordedMasterKeyId(store.db);
  if (recorded !== undefined) {
    throw new ConfigError(
      'LEDGERHOOK_MASTER_KEY',
      `is not set and ${keyFile} does not exist, but this database's records use master key ${recorded}; set LEDGERHOOK_MASTER_KEY to that key or copy its master.key into ${config.dataDir}`,
    );
  }
  // After the database opened: a database that cannot be used leaves no key generated behind.
  const { key: masterKey, generated } = loadMasterKey(config.masterKey, config.dataDir);
  if (generated) {
    logger.info(
      { file: path.join(config.dataDir, 'master.key') },
      'generated a master key for encryption at rest; back it up',
    );
  }
  if (generated && config.databaseUrl) {
    logger.warn(
      'with DATABASE_URL and several processes, set LEDGERHOOK_MASTER_KEY so they all share one master key',
    );
  }
  const envelope = createEnvelope(masterKey);
  await checkMasterKey(store.db, envelope, config.masterKey ? 'LEDGERHOOK_MASTER_KEY' : keyFile);
  return envelope;
}

/**
 * The delivery side's egress (every webhook URL is checked and sent through it), and the
 * dispatcher's stop step, registered before the dispatcher (dispatcher role) is made.
 */
function createDeliveryEgress(config: Config, shutdown: Shutdown, parts: LateParts): Egress {
  const { reserveMs } = shutdown;
  const egress = createEgress({
    allowCidrs: config.allowCidrs,
    resolve: config.dnsServers.length > 0 ? createDnsResolve(config.dnsServers) : undefined,
    connectTimeoutMs: config.connectTimeoutMs,
  });
  shutdown.steps.push({
    name: 'dispatcher',
    stop: async (until) => {
      // Deliveries in flight may finish until the reserve for recording their results and
      // releasing the rest; never longer than a request may take anyway.
      const graceMs = Math.min(config.deliveryTimeoutMs + 1_000, until - reserveMs - Date.now());
      await parts.dispatcher?.stop(Math.max(0, graceMs));
      await egress.close();
    },
  });
  return egress;
}

/** The backfill family of each network, sharing one throttle. */
function backfillFamilies(config: Config): FamilyOf {
  // One throttle for every backfill of this process, so together they stay within it.
  const backfillThrottle = createThrottle(config.backfill.requestsPerSecond);
  const families = new Map<string, BackfillFamily | undefined>();
  const familyOf = (name: string): BackfillFamily | undefined => {
    if (!families.has(name)) {
      const network = config.networks.find(name);
      families.set(
        name,
        network &&
          backfillFamily(network, {
            throttle: backfillThrottle,
            chunk: config.backfill.blocksPerChunk,
            traceWaitMs: config.traceWaitMs,
          }),
      );
    }
    return families.get(name);
  };
  return familyOf;
}

/**
 * The domain services, in this order: accounts (with the token revocation listener), idempotency,
 * the delivery egress, subscriptions, registries (with the registry change listener), backfills.
 */
async function createServices(deps: {
  config: Config;
  store: Store;
  envelope: Envelope;
  anchoredOn: Network | undefined;
  shutdown: Shutdown;
  parts: LateParts;
}): Promise<Services> {
  const { config, store, envelope, anchoredOn, shutdown, parts } = deps;
  const { steps } = shutdown;
  const accounts = createAccounts({ db: store.db, principalCacheTtlMs: config.authCacheTtlMs });
  // A token revoked by another process (or the CLI on the same PostgreSQL) is refused here at once.
  const stopTokenListener = await store.listen(TOKEN_REVOKED_CHANNEL, (tokenId) =>
    accounts.onTokenRevoked(tokenId),
  );
  steps.push({ name: 'token revocation listener', stop: () => stopTokenListener() });
  const idempotency = createIdempotency({ db: store.db, envelope });
  const egress = createDeliveryEgress(config, shutdown, parts);
  // Marks this instance's subscription NOTIFYs: its watchers applied those changes already.
  const origin = crypto.randomUUID();
  const subscriptions = createSubscriptions({
    db: store.db,
    envelope,
    idempotency,
    networks: config.networks,
    urls: { checkUrl: async (url) => void (await egress.checkUrl(url)) },
    onChange: (change) => parts.watcher?.onSubscriptionChange(change),
    origin,
    notifyOthers: store.kind !== 'pglite',
  });
  const registries = createRegistries({
    db: store.db,
    envelope,
    idempotency,
    callbacks: subscriptions,
    anchorNetwork: anchoredOn?.name,
    rowCacheTtlMs: config.registryCacheTtlMs,
  });
  if (config.roles.has('api') && config.registryCacheTtlMs > 0) {
    // Revocations and anchoring (here or in another process) drop the registries kept in memory.
    const stopRegistryListener = await store.listen(REGISTRY_CHANGED_CHANNEL, (id) =>
      registries.onRegistryChanged(id),
    );
    steps.push({ name: 'registry change listener', stop: () => stopRegistryListener() });
  }
  const familyOf = backfillFamilies(config);
  const backfills = createBackfills({
    db: store.db,
    networks: config.networks,
    family: familyOf,
    onCreated: () => parts.backfillRunner?.wake(),
  });
  return { accounts, egress, origin, subscriptions, registries, familyOf, backfills };
}

/** The service's metrics, reading from the parts that exist now and from those made later. */
function createServiceMetrics(
  store: Store,
  subscriptions: Subscriptions,
  anchoredOn: Network | undefined,
  parts: LateParts,
): Metrics {
  const metrics = createMetrics();
  metrics.observe({
    outbox: () => outboxStats(store.db),
    subscriptions: () => subscriptions.countByState(),
    // The watcher, when this process has the role, is created later (startWatching).
    followers: () => parts.watcher?.status() ?? [],
    mempools: () => parts.watcher?.mempoolStatus() ?? [],
    watchedAddresses: () => parts.watcher?.addressCounts() ?? {},
    mismatchedLogs: () => parts.watcher?.mismatchedLogs() ?? {},
    ...(anchoredOn ? { anchoring: () => anchorStats(store.db) } : {}),
    anchorer: () => parts.anchorer?.status(),
  });
  return metrics;
}

/** The delivery side's dispatcher (dispatcher role), started; stopped by the step of createDeliveryEgress. */
async function startDispatcher(deps: {
  config: Config;
  store: Store;
  envelope: Envelope;
  egress: Egress;
  metrics: Metrics;
  logger: Logger;
  parts: LateParts;
}): Promise<void> {
  const { config, store, envelope, egress, metrics, logger, parts } = deps;
  const dispatcher = createDispatcher({
    store,
    observer: metrics.delivery,
    releaseAllClaimsOnStart: store.kind === 'pglite',
    envelope,
    httpDispatcher: egress.dispatcher,
    policy: createRetryPolicy(config.retryScheduleMs),
    logger,
    concurrency: config.dispatchConcurrency,
    pollIntervalMs: config.pollIntervalMs,
    requestTimeoutMs: config.deliveryTimeoutMs,
    leaseMs: config.dispatchLeaseMs,
    disableAfterMs: config.disableAfterMs,
    userAgent: `Ledgerhook/${packageVersion()}`,
  });
  parts.dispatcher = dispatcher;
  await dispatcher.start();
}

/**
 * The watcher side (watcher role): the risk providers, the chain watchers and the backfill runner.
 * Resolves to the loading of the watched addresses, which the HTTP server awaits before it listens.
 */
function startWatching(deps: {
  config: Config;
  alwaysFollow: string[] | undefined;
  store: Store;
  logger: Logger;
  metrics: Metrics;
  origin: string;
  familyOf: FamilyOf;
  shutdown: Shutdown;
  parts: LateParts;
}): Promise<void> {
  const { config, store, logger, metrics, origin, familyOf, parts } = deps;
  const { steps } = deps.shutdown;
  const networks = config.networks;
  const risk = createRiskEnricher(config.risk, { logger, networks });
  steps.push({ name: 'risk providers', stop: () => risk.close() });
  metrics.observe({ risk: () => risk.status() });
  const watcher = createWatcher({
    db: store.db,
    networks,
    index: createAddressIndex((name) => networks.find(name)?.family),
    logger,
    pollIntervalMs: config.watchPollIntervalMs,
    mempoolDropAfterMs: config.mempoolDropAfterMs,
    traceWaitMs: config.traceWaitMs,
    alwaysFollow: deps.alwaysFollow,
    tryLock: (name) => store.tryLock(name),
    listen: (channel, onNotify) => store.listen(channel, onNotify),
    risk,
    origin,
    handoff: parts.dispatcher?.handoff,
  });
  parts.watcher = watcher;
  steps.push({ name: 'chain watchers', stop: () => watcher.stop() });
  // Loading the watched addresses (a million take seconds, mostly in the database) runs
  // while the HTTP server is built on this thread; it is awaited before the server listens.
  const watching = watcher.start();
  watching.catch(() => {});
  // Backfills are chain work too: the watcher role runs them, whichever process took them.
  const runner = createBackfillRunner({
    db: store.db,
    family: familyOf,
    logger,
    pollIntervalMs: config.pollIntervalMs,
    tryLock: (name) => store.tryLock(name),
    concurrency: config.backfill.concurrency,
  });
  parts.backfillRunner = runner;
  steps.push({ name: 'backfills', stop: () => runner.stop() });
  runner.start();
  return watching;
}

/**
 * The pull feed (api role), served with the API, and its sequencer beside it (one pass at a time
 * across processes, by an advisory lock).
 */
async function startEventFeed(deps: {
  config: Config;
  store: Store;
  logger: Logger;
  subscriptions: Subscriptions;
  metrics: Metrics;
  shutdown: Shutdown;
}): Promise<EventFeed> {
  const { config, store, logger, subscriptions, metrics, shutdown } = deps;
  const events = createEventFeed({
    db: store.db,
    listen: (channel, onNotify) => store.listen(channel, onNotify),
    checkSubscription: async (accountId, id) => void (await subscriptions.get(accountId, id)),
  });
  const sequencer = createFeedSequencer({
    store,
    logger,
    pollIntervalMs: config.pollIntervalMs,
    onSequenced: (accounts) => events.signal(accounts),
  });
  // Registered before starting, so that a failed start still stops what did start.
  shutdown.steps.push({
    name: 'event feed',
    stop: async () => {
      await events.stop();
      await sequencer.stop();
    },
  });
  await events.start();
  await sequencer.start();
  metrics.observe({ feedWaiting: () => events.waiting() });
  return events;
}

/** Each domain's routes (api role), in the order the OpenAPI document lists them. */
function servedRoutes(deps: {
  config: Config;
  store: Store;
  logger: Logger;
  services: Services;
  transactions: Transactions;
  feed: EventFeed | undefined;
}): ServedRoutes {
  const { config, store, logger, transactions, feed } = deps;
  const { registries, subscriptions, backfills } = deps.services;
  return {
    api: [
      (api) =>
        registerRegistryRoutes(api, registries, {
          verify: (receipt, content) => verifyAgainst(config.networks, receipt, content),
        }),
      (api) => registerSubscriptionRoutes(api, subscriptions, { testRateLimit: config.testRateLimit }),
      (api) => registerBackfillRoutes(api, backfills),
      (api) => registerTransactionRoutes(api, transactions),
      (api) => registerTraceGapRoutes(api, { db: store.db, networks: config.networks }),
      ...(feed ? [(api: FastifyInstance) => registerFeedRoutes(api, feed)] : []),
    ],
    pages: [(pages) => registerPassRoutes(pages, registries)],
    open: [(app) => registerConsoleRoutes(app, logger)],
  };
}

/**
 * The HTTP server: every role serves health, readiness and metrics; the API role adds /api/v1.
 * It listens once the watched addresses are loaded (`watching`).
 */
async function startHttpServer(deps: {
  config: Config;
  store: Store;
  logger: Logger;
  services: Services;
  metrics: Metrics;
  feed: EventFeed | undefined;
  watching: Promise<void> | undefined;
  shutdown: Shutdown;
  parts: LateParts;
}): Promise<{ http: FastifyInstance; url: string }> {
  const { config, store, logger, services, metrics, feed, shutdown, parts } = deps;
  // Every role serves health, readiness and metrics; the API role adds /api/v1.
  const transactions = createTransactions({ db: store.db, networks: config.networks });
  const http = await createHttpServer({
    logger,
    accounts: services.accounts,
    // Each domain's routes, in the order the OpenAPI document lists them.
    routes: config.roles.has('api')
      ? servedRoutes({ config, store, logger, services, transactions, feed })
      : undefined,
    metrics,
    checkReady: () => store.ping(),
    watchStatus: () => parts.watcher?.status() ?? [],
    bodyLimit: config.bodyLimit,
    headersTimeoutMs: config.headersTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    readyTimeoutMs: config.readyTimeoutMs,
    version: packageVersion(),
    rateLimit: config.rateLimit,
    passRateLimit: config.passRateLimit,
  });
  shutdown.steps.push({
    name: 'HTTP server',
    stop: (until) => closeServer(http, until - shutdown.reserveMs),
  });
  await deps.watching;
  const url = await http.listen({ host: config.host, port: config.port }).catch((err: unknown) => {
    throw listenError(err, config.host, config.port);
  });
  return { http, url };
}

/** The anchoring side (watcher role, anchoring configured), once the receipt URLs' base (`url`) is known. */
function startAnchoring(deps: {
  config: Config;
  store: Store;
  logger: Logger;
  network: Network;
  url: string;
  shutdown: Shutdown;
  parts: LateParts;
}): void {
  const { config, store, logger, network, shutdown, parts } = deps;
  const base = config.publicUrl ?? deps.url;
  const started = startAnchorer({
    db: store.db,
    network,
    settings: config.anchor,
    logger,
    tryLock: (name) => store.tryLock(name),
    receiptUrl: (id) => `${base}/api/v1/registry/${id}/proof`,
  });
  parts.anchorer = started;
  shutdown.steps.push({ name: 'anchorer', stop: () => started.stop() });
}

/**
 * The composition root: store, services, HTTP API and admin endpoint, started in that order.
 *
 * Stopping (`close`) is bounded by `config.shutdownTimeoutMs`. At its very start the dispatcher
 * stops claiming, so nothing is claimed or sent after it begins. Then the HTTP server, the admin
 * endpoint, the chain watchers and the dispatcher (whose deliveries in flight get a grace period)
 * stop together; the database closes last, with a reserve of the deadline of its own. A part that
 * has not stopped by its deadline is left behind, so that stopping always ends.
 */
export async function startApp(config: Config, options: StartOptions = {}): Promise<RunningApp> {
  const logger = options.logger ?? createServiceLogger(config, options.logDestination);
  // The cheap refusals first, before a key is generated or the database opened.
  const holder = config.databaseUrl ? undefined : dataDirHolder(config.dataDir);
  if (holder !== undefined) throw new DataDirInUseError(config.dataDir, holder);
  await checkListenable(config.host, config.port);
  const anchoredOn = anchorNetwork(config.anchor, config.networks);
  const opened = await openConfiguredStore(config, logger);
  const { store } = opened;
  const parts: LateParts = {};
  const shutdown = createShutdown(config, opened, logger, parts);
  const { close } = shutdown;
  try {
    const envelope = await openEnvelope(config, store, logger);
    const services = await createServices({ config, store, envelope, anchoredOn, shutdown, parts });
    const { accounts, subscriptions } = services;
    const metrics = createServiceMetrics(store, subscriptions, anchoredOn, parts);
    if (config.roles.has('dispatcher')) {
      await startDispatcher({ config, store, envelope, egress: services.egress, metrics, logger, parts });
    }
    const watching = config.roles.has('watcher')
      ? startWatching({
          config,
          alwaysFollow: options.alwaysFollow,
          store,
          logger,
          metrics,
          origin: services.origin,
          familyOf: services.familyOf,
          shutdown,
          parts,
        })
      : undefined;
    const feed = config.roles.has('api')
      ? await startEventFeed({ config, store, logger, subscriptions, metrics, shutdown })
      : undefined;
    const { http, url } = await startHttpServer({
      config,
      store,
      logger,
      services,
      metrics,
      feed,
      watching,
      shutdown,
      parts,
    });
    // Anchoring is chain work: the watcher role's, once the receipt URLs' base is known.
    if (config.roles.has('watcher') && anchoredOn !== undefined) {
      startAnchoring({ config, store, logger, network: anchoredOn, url, shutdown, parts });
    }

    // Only now that the service serves: a token printed before a failed start would be lost.
    const first = await accounts.bootstrap();
    if (first) (options.announceToken ?? announceTokenOnConsole)(first);

    if (store.kind === 'pglite') {
      const admin = await startAdminServer({
        accounts,
        dataDir: config.dataDir,
        logger,
        routes: [
          backupRoute(store),
          doctorRoute(store),
          tracesFillRoute({ store, networks: config.networks, logger, traceWaitMs: config.traceWaitMs }),
        ],
      });
      shutdown.steps.push({
        name: 'admin endpoint',
        stop: (until) => admin.close(until - shutdown.reserveMs),
      });
    }
    logger.info({ url, database: store.kind, roles: [...config.roles] }, 'ledgerhook is serving');
    return { http, url, store, dispatcher: parts.dispatcher, anchorer: parts.anchorer, close };
  } catch (err) {
    await close();
    throw err;
  }
}
