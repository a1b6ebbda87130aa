/** The HTTP server: where it may listen, the routes each role serves, and starting it. */
import net from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { verifyAgainst } from '../anchor/service.js';
import { registerBackfillRoutes } from '../backfill/routes.js';
import { type Config, ConfigError } from '../config.js';
import { registerConsoleRoutes } from '../console/routes.js';
import type { Metrics } from '../http/metrics.js';
import { createHttpServer, type ServedRoutes } from '../http/server.js';
import type { EventFeed } from '../notify/feed-reader.js';
import { registerFeedRoutes } from '../notify/feed-routes.js';
import { registerPassRoutes } from '../registry/pass-routes.js';
import { registerRegistryRoutes } from '../registry/routes.js';
import { closeServer } from '../shared/shutdown.js';
import type { Store } from '../store/db.js';
import { registerSubscriptionRoutes } from '../subscriptions/routes.js';
import { registerTransactionRoutes } from '../transactions/routes.js';
import { createTransactions, type Transactions } from '../transactions/service.js';
import { packageVersion } from '../version.js';
import { registerTraceGapRoutes } from '../watch/trace-gaps/routes.js';
import type { Services } from './services.js';
import type { LateParts, Shutdown } from './shutdown.js';
import { StartupError } from './startup-error.js';

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
export async function checkListenable(host: string, port: number): Promise<void> {
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
export async function startHttpServer(deps: {
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
