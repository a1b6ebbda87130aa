import { formatUnits, getAddress } from 'viem';
import { checksummedTransfer } from '../../chains/evm/activity.js';
import { transactionFee } from '../../chains/evm/fees.js';
import type { EvmBlockActivity, EvmPayment, EvmTransfer, TokenInfo } from '../../chains/evm/types.js';
import type { Network } from '../../chains/networks.js';
import type { WatchedSubscription } from '../../subscriptions/events.js';
import type { BlockMatch, BlockMatcher } from '../follower/follower.js';
import type { AddressIndex } from '../matching/address-index.js';
import { matchContractLogs } from './contract-events.js';

export interface EvmNotificationInput {
  id: string;
  network: Network;
  transfer: EvmTransfer;
  subscription: WatchedSubscription;
  /** Absent while in the mempool. */
  blockNumber?: number;
  /** Token decimals (ignored for native transfers and NFTs); null when the token's are unknown. */
  decimals: number | null;
  /** Depth of the block when notified (0 in the mempool). */
  confirmations: number;
  mempool: boolean;
}

/**
 * An amount in display units, negative because on EVM chains `address` is the sender. A token of
 * unknown decimals keeps its raw units.
 */
function signedAmount(transfer: EvmTransfer, network: Network, decimals: number | null): string {
  const units =
    transfer.kind === 'native'
      ? formatUnits(transfer.value, network.decimals)
      : transfer.kind === 'erc20'
        ? formatUnits(transfer.value, decimals ?? 0)
        : transfer.value.toString(); // NFTs: a count
  return units === '0' ? '0' : `-${units}`;
}

/**
 * The notification (docs/watching-chains.md) for one EVM transfer and one watching subscription: `address` is
 * the sender, `counterAddress` the recipient, whichever of them is watched.
 */
export function buildEvmNotification(input: EvmNotificationInput): Record<string, unknown> {
  const { transfer, network, subscription } = input;
  return {
    address: transfer.from,
    txId: transfer.txHash,
    type: transfer.kind === 'native' ? 'native' : 'token',
    ...(input.blockNumber === undefined ? {} : { blockNumber: input.blockNumber }),
    asset: transfer.token ?? network.symbol,
    amount: signedAmount(transfer, network, input.decimals),
    // Only where it applies, so that every other body keeps its shape: the receiver can tell that
    // `amount` is in the token's raw units because its decimals could not be read.
    ...(transfer.kind === 'erc20' && input.decimals === null ? { decimalsUnknown: true } : {}),
    ...(transfer.tokenId === null ? {} : { tokenId: transfer.tokenId.toString() }),
    mempool: input.mempool,
    counterAddress: transfer.to,
    // Native value a contract call moved, found in the block's traces, and where in the call tree.
    ...(transfer.traceAddress === undefined ? {} : { internal: true, traceAddress: transfer.traceAddress }),
    id: input.id,
    subscriptionId: subscription.id,
    chain: network.name,
    watchedAddress: getAddress(subscription.address),
    confirmations: input.confirmations,
  };
}

/**
 * A transfer's identity on its chain, whichever block holds it: the same transaction's log on two
 * branches has the same key, so a reorganisation can tell what stayed from what left.
 */
export function transferKey(transfer: EvmTransfer): string {
  if (transfer.traceAddress !== undefined) return `${transfer.txHash}:trace:${transfer.traceAddress}`;
  return `${transfer.txHash}:${transfer.logIndex ?? 'native'}:${transfer.batchIndex}`;
}

/** The fee of a transaction: one per transaction, whichever block holds it. */
export function feeKey(payment: Pick<EvmPayment, 'txHash'>): string {
  return `${payment.txHash}:fee`;
}

export interface EvmFeeNotificationInput {
  id: string;
  network: Network;
  payment: EvmPayment;
  subscription: WatchedSubscription;
  blockNumber: number;
  confirmations: number;
}

/**
 * The fee a watched sender paid for a mined transaction (`attr.fees`): `amount` minus the fee in
 * the native asset, `failed: true` when the transaction reverted (it moved nothing else).
 */
export function buildEvmFeeNotification(input: EvmFeeNotificationInput): Record<string, unknown> {
  const { payment, network, subscription } = input;
  const fee = transactionFee(payment.receipt, payment.gasPrice);
  const units = formatUnits(fee, network.decimals);
  return {
    address: getAddress(payment.from),
    txId: payment.txHash,
    type: 'fee',
    blockNumber: input.blockNumber,
    asset: network.symbol,
    amount: units === '0' ? '0' : `-${units}`,
    mempool: false,
    ...(payment.failed ? { failed: true } : {}),
    id: input.id,
    subscriptionId: subscription.id,
    chain: network.name,
    watchedAddress: getAddress(subscription.address),
    confirmations: input.confirmations,
  };
}

export interface EvmMatcherDeps {
  network: Network;
  /** Who watches an address: the follower's index, or a backfill's one subscription. */
  index: Pick<AddressIndex, 'lookup'> &
    Partial<Pick<AddressIndex, 'watchesFees' | 'followsEvents' | 'matchLog'>>;
  tokens: { get(token: `0x${string}`): Promise<TokenInfo> };
  /** A log whose topic0 matched a followed event but whose topics or data do not fit its ABI. */
  onMismatch?: (network: string) => void;
}

/**
 * Turns an EVM block's transfers into notifications: one per transfer and subscription watching
 * its sender or its recipient (a transfer to oneself is one), token decimals read once per token.
 * The index matches addresses in any case; only a matched transfer is checksummed for its body,
 * most transfers of a block matching nothing. The block's logs are then matched against the
 * contract events followed on the network (contract-events.ts).
 */
export function evmMatcher(deps: EvmMatcherDeps): BlockMatcher<EvmBlockActivity> {
  const { network, index, tokens } = deps;
  const events =
    index.followsEvents && index.matchLog
      ? {
          network,
          index: { followsEvents: index.followsEvents, matchLog: index.matchLog },
          onMismatch: deps.onMismatch,
        }
      : undefined;
  return async (block) => {
    const matches: BlockMatch[] = [];
    for (const found of block.activity.transfers) {
      const bySender = index.lookup(network.name, found.from);
      const byRecipient = index.lookup(network.name, found.to);
      if (bySender.length === 0 && byRecipient.length === 0) continue;
      const transfer = checksummedTransfer(found);
      const decimals =
        transfer.kind === 'erc20' && transfer.token ? (await tokens.get(transfer.token)).decimals : 0;
      const seen = new Set<string>();
      for (const subscription of [...bySender, ...byRecipient]) {
        if (seen.has(subscription.id)) continue;
        seen.add(subscription.id);
        // The other side of the transfer from the watched one (none for a transfer to oneself).
        const watchedIsSender = subscription.address.toLowerCase() === transfer.from.toLowerCase();
        const other = watchedIsSender ? transfer.to : transfer.from;
        matches.push({
          subscription,
          key: transferKey(transfer),
          counterparties: other.toLowerCase() === subscription.address.toLowerCase() ? [] : [other],
          body: (id) =>
            buildEvmNotification({
              id,
              network,
              transfer,
              subscription,
              blockNumber: block.height,
              decimals,
              confirmations: Math.max(1, subscription.confirmations),
              mempool: false,
            }),
        });
      }
    }
    // Most networks have no subscription that wants fees: their payments are not looked at.
    const payments = index.watchesFees?.(network.name) === false ? [] : block.activity.payments;
    for (const payment of payments) {
      for (const subscription of index.lookup(network.name, payment.from)) {
        if (!subscription.fees) continue;
        matches.push({
          subscription,
          key: feeKey(payment),
          counterparties: [],
          body: (id) =>
            buildEvmFeeNotification({
              id,
              network,
              payment,
              subscription,
              blockNumber: block.height,
              confirmations: Math.max(1, subscription.confirmations),
            }),
        });
      }
    }
    // Contract events, in the same pass over the block (none where nobody follows one).
    if (events) matchContractLogs(events, block, block.activity.logs, matches);
    return matches;
  };
}
