import fs from 'node:fs';
import path from 'node:path';
import { eq } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { startAdminServer } from './accounts/admin.js';
import { createAccounts, type IssuedToken } from './accounts/service.js';
import type { Config } from './config.js';
import { createMetrics } from './http/metrics.js';
import { createHttpServer } from './http/server.js';
import { createIdempotency } from './idempotency/service.js';
import { createDispatcher, type NotificationDispatcher } from './notify/dispatcher.js';
import { createDnsResolve, createEgress } from './notify/egress.js';
import { createRetryPolicy } from './notify/retry-policy.js';
import { createRegistries } from './registry/service.js';
import { createEnvelope, type Envelope } from './secrets/envelope.js';
import { loadMasterKey } from './secrets/master-key.js';
import { type Db, openStore, type Store } from './store/db.js';
import { acquireDataDirLock, type DataDirLock } from './store/lock.js';
import { settings } from './store/schema.js';
import { createSubscriptions } from './subscriptions/service.js';
import { createTransactions } from './transactions/service.js';
import { createAddressIndex } from './watch/address-index.js';
import { createWatcher, type Watcher } from './watch/watcher.js';

export const PGLITE_SUBDIR = 'pglite';

export function packageVersion(): string {
  const pkg = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

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

/** Opens the configured database, migrated, holding the data directory when it is embedded. */
export async function openConfiguredStore(config: Config, logger?: Logger): Promise<OpenedStore> {
  const lock = config.databaseUrl ? undefined : acquireDataDirLock(config.dataDir);
  try {
    const store = await openStore(
      config.databaseUrl
        ? {
            databaseUrl: config.databaseUrl,
            onError: (err) => logger?.warn({ err }, 'database connection lost'),
          }
        : { pgliteDir: path.join(config.dataDir, PGLITE_SUBDIR) },
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
  /** Base URL the API listens on. */
  url: string;
  store: Store;
  close(): Promise<void>;
}

export interface StartOptions {
  /** Networks to follow from the start, with or without subscriptions (the devnet). */
  alwaysFollow?: string[];
  logger?: Logger;
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

/** The composition root: store, services, HTTP API and admin endpoint, started in that order. */
export async function startApp(config: Config, options: StartOptions = {}): Promise<RunningApp> {
  const logger = options.logger ?? pino({ level: config.logLevel });
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
  const { store, lock } = await openConfiguredStore(config, logger);
  const closers: Array<() => Promise<void>> = [
    async () => {
      await store.close();
      lock?.release();
    },
  ];
  const close = async () => {
    for (const closer of closers.splice(0).reverse()) await closer();
  };
  try {
    await checkMasterKey(store.db, envelope);
    const accounts = createAccounts({ db: store.db });
    const idempotency = createIdempotency({ db: store.db, envelope });
    const egress = createEgress({
      allowCidrs: config.allowCidrs,
      resolve: config.dnsServers.length > 0 ? createDnsResolve(config.dnsServers) : undefined,
      connectTimeoutMs: config.connectTimeoutMs,
    });
    closers.push(() => egress.close());
    let watcher: Watcher | undefined;
    const subscriptions = createSubscriptions({
      db: store.db,
      envelope,
      networks: config.networks,
      urls: { checkUrl: async (url) => void (await egress.checkUrl(url)) },
      onChange: (change) => watcher?.onSubscriptionChange(change),
    });
    const registries = createRegistries({ db: store.db, envelope, idempotency, callbacks: subscriptions });

    const first = await accounts.bootstrap();
    if (first) (options.announceToken ?? announceTokenOnConsole)(first);

    const metrics = createMetrics();
    let dispatcher: NotificationDispatcher | undefined;
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
      const started = dispatcher;
      closers.push(() => started.stop());
    }

    if (config.roles.has('watcher')) {
      const networks = config.networks;
      watcher = createWatcher({
        db: store.db,
        networks,
        index: createAddressIndex((name) => networks.find(name)?.family),
        logger,
        pollIntervalMs: config.watchPollIntervalMs,
        alwaysFollow: options.alwaysFollow,
        tryLock: (name) => store.tryLock(name),
        listen: (channel, onNotify) => store.listen(channel, onNotify),
      });
      await watcher.start();
      const started = watcher;
      closers.push(() => started.stop());
    }

    // Every role serves health, readiness and metrics; the API role adds /api/v1.
    const http = await createHttpServer({
      logger,
      accounts,
      registries,
      subscriptions,
      transactions: createTransactions({ db: store.db, networks: config.networks }),
      serveApi: config.roles.has('api'),
      metrics,
      checkReady: () => store.ping(),
      watchStatus: () => watcher?.status() ?? [],
      bodyLimit: config.bodyLimit,
      version: packageVersion(),
    });
    closers.push(() => http.close());
    const url = await http.listen({ host: config.host, port: config.port });

    if (store.kind === 'pglite') {
      const admin = await startAdminServer({ accounts, dataDir: config.dataDir, logger });
      closers.push(() => admin.close());
    }
    logger.info({ url, database: store.kind, roles: [...config.roles] }, 'ledgerhook is serving');
    return { http, url, store, dispatcher, close };
  } catch (err) {
    await close();
    throw err;
  }
}
