import {
  addressesOf,
  type BitcoinActivity,
  counterparties,
  formatBtc,
  netChange,
} from '../chains/bitcoin/activity.js';
import type { Network } from '../chains/networks.js';
import type { AddressIndex } from './address-index.js';
import type { BlockMatch, BlockMatcher } from './follower.js';

export interface BitcoinMatcherDeps {
  network: Network;
  /** Who watches an address: the follower's index, or a backfill's one subscription. */
  index: Pick<AddressIndex, 'lookup'>;
}

/**
 * Turns a Bitcoin block's transactions into notifications (DESIGN §6): one per transaction and
 * watched address it touches, `address` the watched address and `amount` its net change (outputs
 * paying it less the outputs it spent), so a payment with change back is one notification.
 */
export function bitcoinMatcher({ network, index }: BitcoinMatcherDeps): BlockMatcher<BitcoinActivity> {
  return async (block) => {
    const matches: BlockMatch[] = [];
    for (const tx of block.activity) {
      for (const address of addressesOf(tx)) {
        const watchers = index.lookup(network.name, address);
        if (watchers.length === 0) continue;
        const { amount, counterAddress } = netChange(tx, address);
        for (const subscription of watchers) {
          matches.push({
            subscription,
            // A transaction appears once per chain (BIP30's two duplicated coinbases are in other
            // blocks, so their dedupe keys differ by block hash).
            key: `${tx.txid}:${address}`,
            counterparties: counterparties(tx, address),
            body: (id) => ({
              address,
              txId: tx.txid,
              type: 'native',
              blockNumber: block.height,
              asset: network.symbol,
              amount: formatBtc(amount),
              ...(counterAddress === undefined ? {} : { counterAddress }),
              id,
              subscriptionId: subscription.id,
              chain: network.name,
              watchedAddress: address,
              confirmations: Math.max(1, subscription.confirmations),
            }),
          });
        }
      }
    }
    return matches;
  };
}
