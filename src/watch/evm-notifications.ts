import { formatUnits, getAddress } from 'viem';
import type { EvmTransfer } from '../chains/evm/types.js';
import type { Network } from '../chains/networks.js';
import type { WatchedSubscription } from '../subscriptions/events.js';

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
 * The notification of DESIGN §6 for one EVM transfer and one watching subscription: `address` is
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
    id: input.id,
    subscriptionId: subscription.id,
    chain: network.name,
    watchedAddress: getAddress(subscription.address),
    confirmations: input.confirmations,
  };
}

/** The same transfer seen again (a restart, a replayed block) maps to the same key: nothing is inserted twice. */
export function transferKey(blockHash: string, transfer: EvmTransfer): string {
  return `${blockHash}:${transfer.txHash}:${transfer.logIndex ?? 'native'}:${transfer.batchIndex}`;
}
