/** What the watchers need to know of an address subscription. */
export interface WatchedSubscription {
  id: string;
  accountId: string;
  network: string;
  /** As stored (normalised per family). */
  address: string;
  confirmations: number;
  mempool: boolean;
}

/** A change the subscription API reports, so the watchers follow it before the next block. */
export type SubscriptionChange =
  | { type: 'upsert'; subscription: WatchedSubscription }
  | { type: 'remove'; id: string };

/** NOTIFY channel on which subscription changes reach watchers in other processes. */
export const SUBSCRIPTIONS_CHANNEL = 'ledgerhook_subscriptions';
