import { and, eq, isNotNull, isNull } from 'drizzle-orm';
import type { Family } from '../chains/networks.js';
import type { Db } from '../store/db.js';
import type { SubscriptionChange, WatchedSubscription } from '../subscriptions/events.js';
import { subscriptions } from '../subscriptions/schema.js';

/**
 * The watched addresses of every network, in memory: a hash map per network from address to the
 * subscriptions watching it, so a block's transfers are matched with one lookup per address.
 * EVM addresses are keyed in lower case, the form nodes return, so matching needs no checksum.
 */
export type { SubscriptionChange, WatchedSubscription };

export function createAddressIndex(familyOf: (network: string) => Family | undefined) {
  const byNetwork = new Map<string, Map<string, WatchedSubscription[]>>();
  const byId = new Map<string, WatchedSubscription>();
  /** Per network, how many subscriptions want mempool notifications. */
  const mempoolCount = new Map<string, number>();

  const keyOf = (network: string, address: string) =>
    familyOf(network) === 'evm' ? address.toLowerCase() : address;

  function remove(id: string): void {
    const existing = byId.get(id);
    if (!existing) return;
    byId.delete(id);
    if (existing.mempool) mempoolCount.set(existing.network, (mempoolCount.get(existing.network) ?? 1) - 1);
    const addresses = byNetwork.get(existing.network);
    const key = keyOf(existing.network, existing.address);
    const list = addresses?.get(key)?.filter((s) => s.id !== id) ?? [];
    if (list.length > 0) addresses?.set(key, list);
    else addresses?.delete(key);
  }

  function upsert(subscription: WatchedSubscription): void {
    remove(subscription.id);
    byId.set(subscription.id, subscription);
    if (subscription.mempool) {
      mempoolCount.set(subscription.network, (mempoolCount.get(subscription.network) ?? 0) + 1);
    }
    let addresses = byNetwork.get(subscription.network);
    if (!addresses) {
      addresses = new Map();
      byNetwork.set(subscription.network, addresses);
    }
    const key = keyOf(subscription.network, subscription.address);
    // Most addresses have one subscription: a one-element array, not a copy of an empty one.
    const existing = addresses.get(key);
    addresses.set(key, existing ? [...existing, subscription] : [subscription]);
  }

  return {
    /** Loads every live address subscription; called once at start. */
    async load(db: Db): Promise<number> {
      const rows = await db
        .select({
          id: subscriptions.id,
          accountId: subscriptions.accountId,
          network: subscriptions.network,
          address: subscriptions.address,
          confirmations: subscriptions.confirmations,
          mempool: subscriptions.mempool,
        })
        .from(subscriptions)
        .where(
          and(
            eq(subscriptions.type, 'ADDRESS_TRANSACTION'),
            isNull(subscriptions.deletedAt),
            isNotNull(subscriptions.network),
          ),
        );
      // A reload (after missed notifications) also drops what was deleted meanwhile.
      const live = new Set(rows.map((r) => r.id));
      for (const id of [...byId.keys()]) if (!live.has(id)) remove(id);
      for (const r of rows) upsert({ ...r, network: r.network!, address: r.address! });
      return rows.length;
    },
    apply(change: SubscriptionChange): void {
      if (change.type === 'upsert') upsert(change.subscription);
      else remove(change.id);
    },
    /** The subscriptions watching `address` on `network` (empty if none). */
    lookup(network: string, address: string): readonly WatchedSubscription[] {
      return byNetwork.get(network)?.get(keyOf(network, address)) ?? [];
    },
    /** Networks with at least one watched address. */
    networks(): string[] {
      return [...byNetwork].filter(([, m]) => m.size > 0).map(([n]) => n);
    },
    /** Whether at least one subscription on `network` wants mempool notifications. */
    watchesMempool: (network: string): boolean => (mempoolCount.get(network) ?? 0) > 0,
    size: () => byId.size,
    /** Distinct watched addresses per network. */
    addressCounts(): Record<string, number> {
      return Object.fromEntries([...byNetwork].map(([network, addresses]) => [network, addresses.size]));
    },
  };
}

export type AddressIndex = ReturnType<typeof createAddressIndex>;
