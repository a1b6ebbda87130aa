import type { Logger } from 'pino';
import { startAnchorer } from '../anchor/service.js';
import type { Network } from '../chains/networks.js';
import type { Config } from '../config.js';
import type { Store } from '../store/db.js';
import type { LateParts, Shutdown } from './shutdown.js';

/** The anchoring side (watcher role, anchoring configured), once the receipt URLs' base (`url`) is known. */
export function startAnchoring(deps: {
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
