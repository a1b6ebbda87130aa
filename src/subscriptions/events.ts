import type { ContractEventSpec } from '../notify/schema.js';

export type { ContractEventSpec };

/** What a subscription's notifications need to know of it, whichever addresses it watches. */
export interface WatchedEndpoint {
  id: string;
  accountId: string;
  network: string;
  confirmations: number;
  mempool: boolean;
  /** EVM: also a `type: "fee"` notification for each mined transaction the address sent. */
  fees?: boolean;
  /**
   * A CONTRACT_LOG_EVENT subscription: the event it follows. Its addresses are then the contracts
   * it follows the event on (none and `anyContract`: any contract).
   */
  contractEvent?: ContractEventSpec;
}

/** A subscription as a lookup finds it: `address` is the one of its addresses that matched. */
export interface WatchedSubscription extends WatchedEndpoint {
  /** As stored (normalised per family). */
  address: string;
}

/**
 * A change the subscription API reports, so the watchers follow it before the next block.
 *
 * `upsert` sets a subscription's fields; with `addresses` it then watches exactly those, with
 * `subscription.address` exactly that one (a subscription of one address), and with neither it
 * keeps what it watched. `addresses` adds and removes some of a subscription's addresses (adding
 * one it watches, or removing one it does not, changes nothing).
 */
export type SubscriptionChange =
  | {
      type: 'upsert';
      subscription: WatchedEndpoint & { address?: string };
      addresses?: readonly string[];
    }
  | { type: 'addresses'; id: string; add: readonly string[]; remove: readonly string[] }
  | { type: 'remove'; id: string };

/**
 * What travels on the NOTIFY channel: a change itself when it fits in a payload (PostgreSQL caps
 * payloads at 8000 bytes), otherwise the sequence number of its row in `subscription_changes`.
 */
export type SubscriptionNotice = (SubscriptionChange | { type: 'stored'; seq: string }) & {
  /**
   * The app instance that made the change: its own watchers applied it already, in order with the
   * changes before it, and skip the notice.
   */
  origin?: string;
};

/** Bytes of a NOTIFY payload: PostgreSQL refuses 8000 and more. */
export const MAX_NOTICE_BYTES = 7_900;

/** NOTIFY channel on which subscription changes reach watchers in other processes. */
export const SUBSCRIPTIONS_CHANNEL = 'ledgerhook_subscriptions';
