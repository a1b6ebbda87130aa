import type { Hex } from 'viem';

/** One movement of value in a block, as the matcher and the notifications see it. */
export interface EvmTransfer {
  txHash: Hex;
  txIndex: number;
  /** Log index for token transfers; null for the top-level native transfer. */
  logIndex: number | null;
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

export interface EvmBlockActivity {
  number: bigint;
  hash: Hex;
  parentHash: Hex;
  timestamp: bigint;
  /** Transfers of successful transactions only: a reverted transaction moves no value. */
  transfers: EvmTransfer[];
}

export interface TokenInfo {
  symbol: string | null;
  /**
   * Null when not known: `decimals()` reverted (NFTs, tokens without it), answered nothing, or
   * answered something other than one ABI-encoded uint8. Amounts of such a token stay in raw units.
   */
  decimals: number | null;
}
