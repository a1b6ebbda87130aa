import type { Logger } from 'pino';
import { createBackfillRunner } from '../backfill/runner.js';
import type { Config } from '../config.js';
import type { Metrics } from '../http/metrics.js';
import type { Store } from '../store/db.js';
import { createAddressIndex } from '../watch/matching/address-index.js';
import { createRiskEnricher } from '../watch/risk/enricher.js';
import { createWatcher } from '../watch/watcher.js';
import type { FamilyOf } from './services.js';
import type { LateParts, Shutdown } from './shutdown.js';

/**
 * The watcher side (watcher role): the risk providers, the chain watchers and the backfill runner.
 * Resolves to the loading of the watched addresses, which the HTTP server awaits before it listens.
 */
export function startWatching(deps: {
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
