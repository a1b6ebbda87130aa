import {
  ALGO,
  ALGO_DECIMALS,
  type AlgorandActivity,
  type BalanceChange,
  counterparties,
  formatAlgorandAmount,
  movedChanges,
} from '../../chains/algorand/activity.js';
import type { AssetInfoCache } from '../../chains/algorand/source.js';
import type { Network } from '../../chains/networks.js';
import type { BlockMatch, BlockMatcher } from '../follower/follower.js';
import type { AddressIndex } from '../matching/address-index.js';

export interface AlgorandMatcherDeps {
  network: Network;
  /** Who watches an address: the follower's index, or a backfill's one subscription. */
  index: Pick<AddressIndex, 'lookup'>;
  /** ASA decimals, read once per asset. */
  assets: Pick<AssetInfoCache, 'decimals'>;
}

/**
 * Turns an Algorand round's transactions into notifications (docs/watching-chains.md): one per top-level
 * transaction, watched address and asset whose value moved for it (inner transactions folded in,
 * fee-only changes left out), `amount` its net change in the asset's display units.
 */
export function algorandMatcher({
  network,
  index,
  assets,
}: AlgorandMatcherDeps): BlockMatcher<AlgorandActivity> {
  const decimalsOf = (asset: string) =>
    asset === ALGO ? Promise.resolve(ALGO_DECIMALS) : assets.decimals(asset);

  return async (block) => {
    const matches: BlockMatch[] = [];
    for (const tx of block.activity) {
      const changes = movedChanges(tx);
      for (const change of changes) {
        const watchers = index.lookup(network.name, change.address);
        if (watchers.length === 0) continue;
        const decimals = await decimalsOf(change.asset);
        const amount = formatAlgorandAmount(change.amount, decimals ?? 0);
        const others = counterparties(changes, change);
        const counterAddress = others.length === 1 ? others[0] : undefined;
        for (const subscription of watchers) {
          matches.push({
            subscription,
            key: `${tx.id}:${change.address}:${change.asset}`,
            counterparties: others,
            body: (id) =>
              notificationBody(
                change,
                {
                  id,
                  txId: tx.id,
                  round: block.height,
                  amount,
                  counterAddress,
                  decimalsUnknown: decimals === null,
                },
                {
                  subscriptionId: subscription.id,
                  chain: network.name,
                  confirmations: Math.max(1, subscription.confirmations),
                },
              ),
          });
        }
      }
    }
    return matches;
  };
}

function notificationBody(
  change: BalanceChange,
  at: {
    id: string;
    txId: string;
    round: number;
    amount: string;
    counterAddress: string | undefined;
    decimalsUnknown: boolean;
  },
  extra: { subscriptionId: string; chain: string; confirmations: number },
): Record<string, unknown> {
  return {
    address: change.address,
    txId: at.txId,
    type: change.asset === ALGO ? 'native' : 'token',
    blockNumber: at.round,
    asset: change.asset,
    amount: at.amount,
    // Only where it applies, as on EVM chains: the asset is unknown to the node, so `amount` is
    // in its base units.
    ...(at.decimalsUnknown ? { decimalsUnknown: true } : {}),
    ...(at.counterAddress === undefined ? {} : { counterAddress: at.counterAddress }),
    id: at.id,
    subscriptionId: extra.subscriptionId,
    chain: extra.chain,
    watchedAddress: change.address,
    confirmations: extra.confirmations,
  };
}
