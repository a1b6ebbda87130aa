import type { Network } from '../../chains/networks.js';
import type { ChainBlock } from '../../chains/source.js';
import {
  formatTronAmount,
  signedFor,
  TRX,
  TRX_DECIMALS,
  type TronActivity,
  type TronTransaction,
  type TronTransfer,
} from '../../chains/tron/activity.js';
import type { TronTokenDecimals } from '../../chains/tron/token-info.js';
import type { WatchedSubscription } from '../../subscriptions/events.js';
import type { BlockMatch, BlockMatcher } from '../follower/follower.js';
import type { AddressIndex } from '../matching/address-index.js';

export interface TronMatcherDeps {
  network: Network;
  /** Who watches an address: the follower's index, or a backfill's one subscription. */
  index: Pick<AddressIndex, 'lookup'> & Partial<Pick<AddressIndex, 'watchesFees'>>;
  /** Token decimals, read once per token. */
  tokens: TronTokenDecimals;
}

/**
 * Turns a Tron block into notifications (docs/watching-chains.md#tron): one per transfer and
 * watched address on either side of it, `amount` signed from that address's side; with
 * `attr.fees`, one `type: "fee"` per transaction a watched address sent that cost it TRX or failed.
 */
export function tronMatcher({ network, index, tokens }: TronMatcherDeps): BlockMatcher<TronActivity> {
  return async (block) => {
    const matches: BlockMatch[] = [];
    const fees = index.watchesFees?.(network.name) !== false;
    for (const tx of block.activity) {
      for (const transfer of tx.transfers) {
        const parties = transfer.from === transfer.to ? [transfer.from] : [transfer.from, transfer.to];
        for (const address of parties) {
          const watchers = index.lookup(network.name, address);
          if (watchers.length === 0) continue;
          const decimals = await tokens.decimals(transfer.kind, transfer.asset);
          for (const subscription of watchers)
            matches.push(transferMatch({ network, block, tx, transfer, address, subscription, decimals }));
        }
      }
      if (fees && (tx.fee > 0n || tx.failed)) {
        for (const subscription of index.lookup(network.name, tx.sender)) {
          if (subscription.fees) matches.push(feeMatch(network, block, tx, subscription));
        }
      }
    }
    return matches;
  };
}

interface TransferMatchInput {
  network: Network;
  block: ChainBlock<TronActivity>;
  tx: TronTransaction;
  transfer: TronTransfer;
  /** The watched side of the transfer. */
  address: string;
  subscription: WatchedSubscription;
  /** null: unknown, `amount` in base units. */
  decimals: number | null;
}

function transferMatch(input: TransferMatchInput): BlockMatch {
  const { network, block, tx, transfer, address, subscription, decimals } = input;
  const other = transfer.from === address ? transfer.to : transfer.from;
  const counterAddress = other === address ? undefined : other;
  return {
    subscription,
    key: `${tx.txId}:${transfer.ref}:${address}`,
    counterparties: counterAddress === undefined ? [] : [counterAddress],
    body: (id) => ({
      address,
      txId: tx.txId,
      type: transfer.kind === 'trx' ? 'native' : 'token',
      blockNumber: block.height,
      asset: transfer.asset,
      amount: formatTronAmount(signedFor(transfer, address), decimals ?? 0),
      // As on EVM: the token's decimals could not be read, so `amount` is in its base units.
      ...(decimals === null ? { decimalsUnknown: true } : {}),
      ...(counterAddress === undefined ? {} : { counterAddress }),
      ...(transfer.traceAddress === undefined ? {} : { internal: true, traceAddress: transfer.traceAddress }),
      id,
      subscriptionId: subscription.id,
      chain: network.name,
      watchedAddress: address,
      confirmations: Math.max(1, subscription.confirmations),
    }),
  };
}

/** What the watched sender paid for a transaction, in TRX, negative; `failed` when it failed. */
function feeMatch(
  network: Network,
  block: ChainBlock<TronActivity>,
  tx: TronTransaction,
  subscription: WatchedSubscription,
): BlockMatch {
  return {
    subscription,
    key: `${tx.txId}:fee`,
    counterparties: [],
    body: (id) => ({
      address: tx.sender,
      txId: tx.txId,
      type: 'fee',
      blockNumber: block.height,
      asset: TRX,
      amount: formatTronAmount(-tx.fee, TRX_DECIMALS),
      ...(tx.failed ? { failed: true } : {}),
      id,
      subscriptionId: subscription.id,
      chain: network.name,
      watchedAddress: tx.sender,
      confirmations: Math.max(1, subscription.confirmations),
    }),
  };
}
