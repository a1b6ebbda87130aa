import type { FastifyInstance } from 'fastify';
import type { DestinationStream, Logger } from 'pino';
import { startAdminServer } from '../accounts/admin.js';
import type { Accounts, IssuedToken } from '../accounts/service.js';
import type { Anchorer } from '../anchor/anchorer.js';
import { anchorNetwork } from '../anchor/service.js';
import type { Config } from '../config.js';
import { backupRoute } from '../http/admin-backup.js';
import { doctorRoute } from '../http/admin-doctor.js';
import { tracesFillRoute } from '../http/admin-traces.js';
import type { NotificationDispatcher } from '../notify/dispatcher.js';
import type { Store } from '../store/db.js';
import { DataDirInUseError, dataDirHolder } from '../store/lock.js';
import { startAnchoring } from './anchoring.js';
import { startDispatcher } from './delivery.js';
import { startEventFeed } from './event-feed.js';
import { checkListenable, startHttpServer } from './http-server.js';
import { createServiceLogger } from './logger.js';
import { checkMasterKeyFile, openEnvelope } from './master-key.js';
import { createServiceMetrics, createServices } from './services.js';
import { createShutdown, type LateParts, type Shutdown } from './shutdown.js';
import { openConfiguredStore } from './store.js';
import { startWatching } from './watching.js';

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

/**
 * The admin endpoint (embedded database only): the commands that need the data directory held by
 * this process (backup, doctor, traces fill) ask it here.
 */
async function startAdminEndpoint(deps: {
  config: Config;
  store: Store;
  logger: Logger;
  accounts: Accounts;
  shutdown: Shutdown;
}): Promise<void> {
  const { config, store, logger, accounts, shutdown } = deps;
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
  checkMasterKeyFile(config);
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

    if (store.kind === 'pglite') await startAdminEndpoint({ config, store, logger, accounts, shutdown });
    logger.info({ url, database: store.kind, roles: [...config.roles] }, 'ledgerhook is serving');
    return { http, url, store, dispatcher: parts.dispatcher, anchorer: parts.anchorer, close };
  } catch (err) {
    await close();
    throw err;
  }
}
