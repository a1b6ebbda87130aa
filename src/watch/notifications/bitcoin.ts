import {
  addressesOf,
  type BitcoinActivity,
  type BitcoinTransaction,
  counterparties,
  formatBtc,
  netChange,
} from '../../chains/bitcoin/activity.js';
import type { Network } from '../../chains/networks.js';
import type { WatchedSubscription } from '../../subscriptions/events.js';
import type { BlockMatch, BlockMatcher } from '../follower/follower.js';
import type { AddressIndex } from '../matching/address-index.js';
import type { Claimed } from '../mempool/pending-lifecycle.js';

export interface BitcoinMatcherDeps {
  network: Network;
  /** Who watches an address: the follower's index, or a backfill's one subscription. */
  index: Pick<AddressIndex, 'lookup'>;
}

/** The body (docs/watching-chains.md) for a transaction and a watched address it touches (pending: no block). */
export function bitcoinBody(
  network: Network,
  tx: BitcoinTransaction,
  address: string,
  subscription: WatchedSubscription,
  id: string,
  blockNumber: number | undefined,
): Record<string, unknown> {
  const { amount, counterAddress } = netChange(tx, address);
  return {
    address,
    txId: tx.txid,
    type: 'native',
    ...(blockNumber === undefined ? {} : { blockNumber }),
    asset: network.symbol,
    amount: formatBtc(amount),
    ...(blockNumber === undefined ? { mempool: true } : {}),
    ...(counterAddress === undefined ? {} : { counterAddress }),
    id,
    subscriptionId: subscription.id,
    chain: network.name,
    watchedAddress: address,
    confirmations: blockNumber === undefined ? 0 : Math.max(1, subscription.confirmations),
  };
}

/**
 * Turns a Bitcoin block's transactions into notifications (docs/watching-chains.md): one per transaction and
 * watched address it touches, `address` the watched address and `amount` its net change (outputs
 * paying it less the outputs it spent), so a payment with change back is one notification.
 */
export function bitcoinMatcher({ network, index }: BitcoinMatcherDeps): BlockMatcher<BitcoinActivity> {
  return async (block) => {
    const matches: BlockMatch[] = [];
    for (const tx of block.activity) {
      for (const address of addressesOf(tx)) {
        const watchers = index.lookup(network.name, address);
        for (const subscription of watchers) {
          matches.push({
            subscription,
            // A transaction appears once per chain (BIP30's two duplicated coinbases are in other
            // blocks, so their dedupe keys differ by block hash).
            key: `${tx.txid}:${address}`,
            counterparties: counterparties(tx, address),
            body: (id) => bitcoinBody(network, tx, address, subscription, id, block.height),
          });
        }
      }
    }
    return matches;
  };
}

/** What a Bitcoin transaction takes: the outputs its inputs spend. */
export function bitcoinClaims(activity: BitcoinActivity): Claimed[] {
  return activity.filter((tx) => !tx.coinbase).map((tx) => ({ txId: tx.txid, claims: tx.spends }));
}
