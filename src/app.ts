import crypto from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { startAdminServer } from './accounts/admin.js';
import { TOKEN_REVOKED_CHANNEL } from './accounts/principal-cache.js';
import { createAccounts, type IssuedToken } from './accounts/service.js';
import type { Anchorer } from './anchor/anchorer.js';
import { anchorStats } from './anchor/batches.js';
import { REGISTRY_CHANGED_CHANNEL } from './anchor/leaves.js';
import { anchorNetwork, startAnchorer, verifyAgainst } from './anchor/service.js';
import { type BackfillFamily, backfillFamily } from './backfill/families.js';
import { createBackfills } from './backfill/jobs.js';
import { registerBackfillRoutes } from './backfill/routes.js';
import { type BackfillRunner, createBackfillRunner } from './backfill/runner.js';
import { type Config, ConfigError } from './config.js';
import { registerConsoleRoutes } from './console/routes.js';
import { createMetrics } from './http/metrics.js';
import { createHttpServer } from './http/server.js';
import { createIdempotency } from './idempotency/service.js';
import { createDispatcher, type NotificationDispatcher } from './notify/dispatcher.js';
import { createDnsResolve, createEgress } from './notify/egress.js';
import { createFeedSequencer } from './notify/feed.js';
import { createEventFeed, type EventFeed } from './notify/feed-reader.js';
import { registerFeedRoutes } from './notify/feed-routes.js';
import { outboxStats } from './notify/outbox.js';
import { createRetryPolicy } from './notify/retry-policy.js';
import { registerPassRoutes } from './registry/pass-routes.js';
import { registerRegistryRoutes } from './registry/routes.js';
import { createRegistries } from './registry/service.js';
import { createEnvelope, type Envelope } from './secrets/envelope.js';
import { loadMasterKey } from './secrets/master-key.js';
import { closeServer, type StopStep, stopAll } from './shared/shutdown.js';
import { createThrottle } from './shared/throttle.js';
import { urlSecretRedactor } from './shared/url-secrets.js';
import { type Db, openStore, type Store } from './store/db.js';
import { acquireDataDirLock, DataDirInUseError, type DataDirLock, dataDirHolder } from './store/lock.js';
import { settings } from './store/schema.js';
import { registerSubscriptionRoutes } from './subscriptions/routes.js';
import { createSubscriptions } from './subscriptions/service.js';
import { registerTransactionRoutes } from './transactions/routes.js';
import { createTransactions } from './transactions/service.js';
import { packageVersion } from './version.js';
import { createAddressIndex } from './watch/address-index.js';
import { createRiskEnricher } from './watch/risk/enricher.js';
import { createWatcher, type Watcher } from './watch/watcher.js';

export const PGLITE_SUBDIR = 'pglite';

export { packageVersion };

/** Refused start: a misconfiguration the operator must fix, reported as one line. */
export class StartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StartupError';
  }
}

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

/**
 * Binds the database to the first master key that touches it, so a service started later with
 * another key refuses to start instead of writing records nobody can read together.
 */
async function checkMasterKey(db: Db, envelope: Envelope): Promise<void> {
  await db.insert(settings).values({ key: 'master_key_id', value: envelope.keyId }).onConflictDoNothing();
  const [row] = await db.select().from(settings).where(eq(settings.key, 'master_key_id'));
  if (row && row.value !== envelope.keyId) {
    throw new StartupError(
      `LEDGERHOOK_MASTER_KEY does not match this database: its records use master key ${row.value}, the configured key is ${envelope.keyId}`,
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
  return destination ? pino(options, destination) : pino(options);
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
  const { store, lock } = await openConfiguredStore(config, logger);
  /** The parts that use the store, stopped together before it closes. */
  const steps: StopStep[] = [];
  const reserveMs = shutdownReserveMs(config.shutdownTimeoutMs);
  let dispatcher: NotificationDispatcher | undefined;
  let closing: Promise<string[]> | undefined;
  const shutdown = async (): Promise<string[]> => {
    const deadline = Date.now() + config.shutdownTimeoutMs;
    // First of all, before any await: from here on nothing is claimed or sent.
    dispatcher?.stopClaiming();
    const late = await stopAll(steps.splice(0), deadline - reserveMs, logger);
    late.push(...(await stopAll([{ name: 'database', stop: () => store.close() }], deadline, logger)));
    lock?.release();
    return late;
  };
  const close = () => {
    closing ??= shutdown();
    return closing;
  };
  try {
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
    await checkMasterKey(store.db, envelope);
    const accounts = createAccounts({ db: store.db, principalCacheTtlMs: config.authCacheTtlMs });
    // A token revoked by another process (or the CLI on the same PostgreSQL) is refused here at once.
    const stopTokenListener = await store.listen(TOKEN_REVOKED_CHANNEL, (tokenId) =>
      accounts.onTokenRevoked(tokenId),
    );
    steps.push({ name: 'token revocation listener', stop: () => stopTokenListener() });
    const idempotency = createIdempotency({ db: store.db, envelope });
    const egress = createEgress({
      allowCidrs: config.allowCidrs,
      resolve: config.dnsServers.length > 0 ? createDnsResolve(config.dnsServers) : undefined,
      connectTimeoutMs: config.connectTimeoutMs,
    });
    steps.push({
      name: 'dispatcher',
      stop: async (until) => {
        // Deliveries in flight may finish until the reserve for recording their results and
        // releasing the rest; never longer than a request may take anyway.
        const graceMs = Math.min(config.deliveryTimeoutMs + 1_000, until - reserveMs - Date.now());
        await dispatcher?.stop(Math.max(0, graceMs));
        await egress.close();
      },
    });
    let watcher: Watcher | undefined;
    let watching: Promise<void> | undefined;
    // Marks this instance's subscription NOTIFYs: its watchers applied those changes already.
    const origin = crypto.randomUUID();
    const subscriptions = createSubscriptions({
      db: store.db,
      envelope,
      idempotency,
      networks: config.networks,
      urls: { checkUrl: async (url) => void (await egress.checkUrl(url)) },
      onChange: (change) => watcher?.onSubscriptionChange(change),
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
    let anchorer: Anchorer | undefined;
    // One throttle for every backfill of this process, so together they stay within it.
    const backfillThrottle = createThrottle(config.backfill.requestsPerSecond);
    const families = new Map<string, BackfillFamily | undefined>();
    const familyOf = (name: string): BackfillFamily | undefined => {
      if (!families.has(name)) {
        const network = config.networks.find(name);
        families.set(
          name,
          network &&
            backfillFamily(network, { throttle: backfillThrottle, chunk: config.backfill.blocksPerChunk }),
        );
      }
      return families.get(name);
    };
    let backfillRunner: BackfillRunner | undefined;
    const backfills = createBackfills({
      db: store.db,
      networks: config.networks,
      family: familyOf,
      onCreated: () => backfillRunner?.wake(),
    });

    const metrics = createMetrics();
    metrics.observe({
      outbox: () => outboxStats(store.db),
      subscriptions: () => subscriptions.countByState(),
      // The watcher, when this process has the role, is created below.
      followers: () => watcher?.status() ?? [],
      mempools: () => watcher?.mempoolStatus() ?? [],
      watchedAddresses: () => watcher?.addressCounts() ?? {},
      ...(anchoredOn ? { anchoring: () => anchorStats(store.db) } : {}),
      anchorer: () => anchorer?.status(),
    });
    if (config.roles.has('dispatcher')) {
      dispatcher = createDispatcher({
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
      await dispatcher.start();
    }

    if (config.roles.has('watcher')) {
      const networks = config.networks;
      const risk = createRiskEnricher(config.risk, { logger, networks });
      steps.push({ name: 'risk providers', stop: () => risk.close() });
      metrics.observe({ risk: () => risk.status() });
      watcher = createWatcher({
        db: store.db,
        networks,
        index: createAddressIndex((name) => networks.find(name)?.family),
        logger,
        pollIntervalMs: config.watchPollIntervalMs,
        alwaysFollow: options.alwaysFollow,
        tryLock: (name) => store.tryLock(name),
        listen: (channel, onNotify) => store.listen(channel, onNotify),
        risk,
        origin,
      });
      const started = watcher;
      steps.push({ name: 'chain watchers', stop: () => started.stop() });
      // Loading the watched addresses (a million take seconds, mostly in the database) runs
      // while the HTTP server is built on this thread; it is awaited before the server listens.
      watching = watcher.start();
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
      backfillRunner = runner;
      steps.push({ name: 'backfills', stop: () => runner.stop() });
      runner.start();
    }

    // The pull feed is served with the API, and its sequencer runs beside it (one pass at a time
    // across processes, by an advisory lock).
    let feed: EventFeed | undefined;
    if (config.roles.has('api')) {
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
      steps.push({
        name: 'event feed',
        stop: async () => {
          await events.stop();
          await sequencer.stop();
        },
      });
      await events.start();
      await sequencer.start();
      metrics.observe({ feedWaiting: () => events.waiting() });
      feed = events;
    }

    // Every role serves health, readiness and metrics; the API role adds /api/v1.
    const transactions = createTransactions({ db: store.db, networks: config.networks });
    const http = await createHttpServer({
      logger,
      accounts,
      // Each domain's routes, in the order the OpenAPI document lists them.
      routes: config.roles.has('api')
        ? {
            api: [
              (api) =>
                registerRegistryRoutes(api, registries, {
                  verify: (receipt, content) => verifyAgainst(config.networks, receipt, content),
                }),
              (api) =>
                registerSubscriptionRoutes(api, subscriptions, { testRateLimit: config.testRateLimit }),
              (api) => registerBackfillRoutes(api, backfills),
              (api) => registerTransactionRoutes(api, transactions),
              ...(feed ? [(api: FastifyInstance) => registerFeedRoutes(api, feed)] : []),
            ],
            pages: [(pages) => registerPassRoutes(pages, registries)],
            open: [(app) => registerConsoleRoutes(app, logger)],
          }
        : undefined,
      metrics,
      checkReady: () => store.ping(),
      watchStatus: () => watcher?.status() ?? [],
      bodyLimit: config.bodyLimit,
      headersTimeoutMs: config.headersTimeoutMs,
      requestTimeoutMs: config.requestTimeoutMs,
      readyTimeoutMs: config.readyTimeoutMs,
      version: packageVersion(),
      rateLimit: config.rateLimit,
      passRateLimit: config.passRateLimit,
    });
    steps.push({ name: 'HTTP server', stop: (until) => closeServer(http, until - reserveMs) });
    await watching;
    const url = await http.listen({ host: config.host, port: config.port }).catch((err: unknown) => {
      throw listenError(err, config.host, config.port);
    });

    // Anchoring is chain work: the watcher role's, once the receipt URLs' base is known.
    if (config.roles.has('watcher') && anchoredOn !== undefined) {
      const base = config.publicUrl ?? url;
      const started = startAnchorer({
        db: store.db,
        network: anchoredOn,
        settings: config.anchor,
        logger,
        tryLock: (name) => store.tryLock(name),
        receiptUrl: (id) => `${base}/api/v1/registry/${id}/proof`,
      });
      anchorer = started;
      steps.push({ name: 'anchorer', stop: () => started.stop() });
    }

    // Only now that the service serves: a token printed before a failed start would be lost.
    const first = await accounts.bootstrap();
    if (first) (options.announceToken ?? announceTokenOnConsole)(first);

    if (store.kind === 'pglite') {
      const admin = await startAdminServer({ accounts, dataDir: config.dataDir, logger });
      steps.push({ name: 'admin endpoint', stop: (until) => admin.close(until - reserveMs) });
    }
    logger.info({ url, database: store.kind, roles: [...config.roles] }, 'ledgerhook is serving');
    return { http, url, store, dispatcher, anchorer, close };
  } catch (err) {
    await close();
    throw err;
  }
}
