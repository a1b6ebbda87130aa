import type { Hex } from 'viem';
import type { RpcReceiptFees } from './fees.js';

/** One movement of value in a block, as the matcher and the notifications see it. */
export interface EvmTransfer {
  txHash: Hex;
  txIndex: number;
  /** Log index for token transfers; null for native transfers (top-level and internal). */
  logIndex: number | null;
  /**
   * An internal transfer (native value moved by a contract call, found in the block's traces):
   * the call frame's position below the top-level call, child indexes joined by dots ("0.2.1").
   * Absent for the top-level native transfer and for token transfers.
   */
  traceAddress?: string;
  /** Position in an ERC-1155 TransferBatch (0 otherwise): one notification per token id. */
  batchIndex: number;
  kind: 'native' | 'erc20' | 'erc721' | 'erc1155';
  /**
   * Token contract, null for native. Addresses are in lower case as the follower's source reads
   * them (readBlockActivity), EIP-55 checksummed where shown (checksummedTransfer,
   * fetchBlockActivity): compare them case-insensitively.
   */
  token: Hex | null;
  from: Hex;
  /** The created contract for a contract creation carrying value. */
  to: Hex;
  /** Raw units: wei, token base units, 1 for ERC-721, the count for ERC-1155. */
  value: bigint;
  tokenId: bigint | null;
}

/**
 * A mined transaction's sender and what its fee is made of, for subscriptions with `attr.fees`:
 * the fee itself is computed (transactionFee) only for a sender someone watches.
 */
export interface EvmPayment {
  txHash: Hex;
  txIndex: number;
  /** Lower case, as the transfers' addresses. */
  from: Hex;
  /** The receipt as the node answered it: gas used and prices (and an OP-stack L1 fee) in hex. */
  receipt: RpcReceiptFees;
  /** The transaction's gasPrice, for a legacy receipt without effectiveGasPrice. */
  gasPrice: Hex | null;
  /** The sender's nonce: with `from`, what a replaced pending transaction lost (null if not given). */
  nonce: number | null;
  /** The transaction reverted: it moved nothing, but its fee was paid. */
  failed: boolean;
}

/**
 * A log of a successful transaction, as the node returned it (address, topics and data in lower
 * case), for contract event subscriptions: matched by contract and topics, decoded only when one
 * follows it.
 */
export interface EvmLog {
  txHash: Hex;
  txIndex: number;
  logIndex: number;
  address: Hex;
  topics: readonly Hex[];
  data: Hex;
}

export interface EvmBlockActivity {
  number: bigint;
  hash: Hex;
  parentHash: Hex;
  timestamp: bigint;
  /**
   * Transfers of successful transactions only: a reverted transaction moves no value. Internal
   * transfers (with `traceAddress`) follow their transaction's top-level native transfer.
   */
  transfers: EvmTransfer[];
  /** Every transaction of the block, successful or not, as its sender paid for it. */
  payments: EvmPayment[];
  /** The logs of its successful transactions, in block order (a reverted transaction has none). */
  logs: EvmLog[];
  /**
   * Set when the node could not give the block's traces (its state pruned, or failing past the
   * trace wait): why. Its internal transfers are then missing from `transfers`: a trace gap.
   */
  traceGap?: string;
}

export interface TokenInfo {
  symbol: string | null;
  /**
   * Null when not known: `decimals()` reverted (NFTs, tokens without it), answered nothing, or
   * answered something other than one ABI-encoded uint8. Amounts of such a token stay in raw units.
   */
  decimals: number | null;
}
