/** The delivery side: the egress every webhook URL goes through, and the dispatcher (dispatcher role). */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Metrics } from '../http/metrics.js';
import { createDispatcher } from '../notify/dispatcher.js';
import { createDnsResolve, createEgress, type Egress } from '../notify/egress.js';
import { createRetryPolicy } from '../notify/retry-policy.js';
import type { Envelope } from '../secrets/envelope.js';
import type { Store } from '../store/db.js';
import { packageVersion } from '../version.js';
import type { LateParts, Shutdown } from './shutdown.js';

/**
 * The delivery side's egress (every webhook URL is checked and sent through it), and the
 * dispatcher's stop step, registered before the dispatcher (dispatcher role) is made.
 */
export function createDeliveryEgress(config: Config, shutdown: Shutdown, parts: LateParts): Egress {
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

/** The delivery side's dispatcher (dispatcher role), started; stopped by the step of createDeliveryEgress. */
export async function startDispatcher(deps: {
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
