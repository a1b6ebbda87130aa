import type { Network } from '../../chains/networks.js';
import {
  counterpartyOf,
  formatSolanaAmount,
  SOL,
  type SolanaActivity,
  type SolanaChange,
  solanaChanges,
} from '../../chains/solana/activity.js';
import type { ChainBlock } from '../../chains/source.js';
import type { BlockMatch } from '../follower/follower.js';
import type { AddressIndex } from '../matching/address-index.js';

export interface SolanaMatcherDeps {
  network: Network;
  /** Who watches an address: the follower's index, or a backfill's one subscription. */
  index: Pick<AddressIndex, 'lookup'>;
}

/** A Solana match (kept as a name: its counterparties are those of the asset's movement). */
export type SolanaBlockMatch = BlockMatch;

/**
 * Turns a Solana slot's transactions into notifications (docs/watching-chains.md): one per successful
 * transaction, watched address and asset whose balance it changed (SOL net of the fee for the
 * payer, fee-only changes left out; tokens per owner or per token account), `amount` the net
 * change in the asset's display units.
 */
export function solanaMatcher({
  network,
  index,
}: SolanaMatcherDeps): (block: ChainBlock<SolanaActivity>) => Promise<SolanaBlockMatch[]> {
  return async (block) => {
    const matches: SolanaBlockMatch[] = [];
    for (const tx of block.activity) {
      for (const change of solanaChanges(tx)) {
        const watchers = index.lookup(network.name, change.address);
        for (const subscription of watchers) {
          const confirmations = Math.max(1, subscription.confirmations);
          matches.push({
            subscription,
            key: `${tx.signature}:${change.address}:${change.asset}`,
            counterparties: change.counterparties,
            body: (id) => ({
              ...notificationBody(change, tx.signature, block.height),
              id,
              subscriptionId: subscription.id,
              chain: network.name,
              watchedAddress: change.address,
              confirmations,
            }),
          });
        }
      }
    }
    return matches;
  };
}

/** The fields of the spec (docs/watching-chains.md) for one change. */
function notificationBody(change: SolanaChange, txId: string, slot: number): Record<string, unknown> {
  const counterAddress = counterpartyOf(change);
  return {
    address: change.address,
    txId,
    type: change.asset === SOL ? 'native' : 'token',
    blockNumber: slot,
    asset: change.asset,
    amount: formatSolanaAmount(change.amount, change.decimals),
    ...(counterAddress === undefined ? {} : { counterAddress }),
  };
}
