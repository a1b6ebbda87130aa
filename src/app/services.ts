/** The domain services every role builds over the store, and the service's metrics. */
import crypto from 'node:crypto';
import { TOKEN_REVOKED_CHANNEL } from '../accounts/principal-cache.js';
import { type Accounts, createAccounts } from '../accounts/service.js';
import { anchorStats } from '../anchor/batches.js';
import { REGISTRY_CHANGED_CHANNEL } from '../anchor/leaves.js';
import { type BackfillFamily, backfillFamily } from '../backfill/families.js';
import { type Backfills, createBackfills } from '../backfill/jobs.js';
import type { Network } from '../chains/networks.js';
import type { Config } from '../config.js';
import { createMetrics, type Metrics } from '../http/metrics.js';
import { createIdempotency } from '../idempotency/service.js';
import type { Egress } from '../notify/egress.js';
import { outboxStats } from '../notify/outbox.js';
import { createRegistries, type Registries } from '../registry/service.js';
import type { Envelope } from '../secrets/envelope.js';
import { createThrottle } from '../shared/throttle.js';
import type { Store } from '../store/db.js';
import { createSubscriptions, type Subscriptions } from '../subscriptions/service.js';
import { createDeliveryEgress } from './delivery.js';
import type { LateParts, Shutdown } from './shutdown.js';

/** The backfill family of each configured network, made once on first use. */
export type FamilyOf = (name: string) => BackfillFamily | undefined;

/** The domain services every role builds, over the store. */
export interface Services {
  accounts: Accounts;
  egress: Egress;
  /** Marks this instance's subscription NOTIFYs. */
  origin: string;
  subscriptions: Subscriptions;
  registries: Registries;
  familyOf: FamilyOf;
  backfills: Backfills;
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
export async function createServices(deps: {
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
export function createServiceMetrics(
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
