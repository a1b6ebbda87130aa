/**
 * What a pending EVM transaction would move, read from the transaction alone (the mempool watcher,
 * evm-mempool.ts): its native value, and the ERC-20 transfer its calldata asks of the token it calls.
 */
import { decodeFunctionData, getAddress, getContractAddress, type Hex, parseAbi } from 'viem';
import type { EvmTransfer } from '../../chains/evm/types.js';

/** The parts of a pending transaction that are read (a viem `Transaction` has them). */
export interface PendingTransaction {
  hash: Hex;
  from: Hex;
  to: Hex | null;
  value: bigint;
  input: Hex;
  /** The sender's nonce: with the sender, it fixes the address a contract creation will have. */
  nonce: number;
}

/** A transfer a pending transaction would make, and its place in the transaction. */
export interface PendingTransfer {
  /** 0: the native value; 1: the ERC-20 transfer its calldata asks for. Part of the dedupe key. */
  index: 0 | 1;
  transfer: EvmTransfer;
}

const ERC20_CALLS = parseAbi([
  'function transfer(address to, uint256 value) returns (bool)',
  'function transferFrom(address from, address to, uint256 value) returns (bool)',
]);
const TRANSFER_SELECTOR = '0xa9059cbb';
const TRANSFER_FROM_SELECTOR = '0x23b872dd';

/** The ERC-20 transfer `input` asks for, if it is `transfer` or `transferFrom` calldata. */
function tokenCall(sender: Hex, input: Hex): { from: Hex; to: Hex; value: bigint } | undefined {
  const selector = input.slice(0, 10).toLowerCase();
  if (selector !== TRANSFER_SELECTOR && selector !== TRANSFER_FROM_SELECTOR) return undefined;
  try {
    const call = decodeFunctionData({ abi: ERC20_CALLS, data: input });
    if (call.functionName === 'transfer') {
      const [to, value] = call.args;
      return { from: sender, to: getAddress(to), value };
    }
    const [from, to, value] = call.args;
    return { from: getAddress(from), to: getAddress(to), value };
  } catch {
    return undefined; // truncated or malformed calldata: the call would revert
  }
}

/**
 * What a pending transaction would move: its native value (if any) to its recipient, and the
 * ERC-20 transfer its calldata asks of the token it calls (`transfer`: from the sender;
 * `transferFrom`: from the first argument, whoever the spender). A contract creation's recipient
 * is the address the contract will have (CREATE: from the sender and its nonce), the one its
 * receipt names once mined; its input is init code, never a token call. Addresses are EIP-55
 * checksummed.
 */
export function pendingTransfers(tx: PendingTransaction): PendingTransfer[] {
  const sender = getAddress(tx.from);
  const recipient =
    tx.to === null ? getContractAddress({ from: sender, nonce: BigInt(tx.nonce) }) : getAddress(tx.to);
  const base = { txHash: tx.hash, txIndex: 0, logIndex: null, batchIndex: 0, tokenId: null };
  const transfers: PendingTransfer[] = [];
  if (tx.value > 0n) {
    transfers.push({
      index: 0,
      transfer: { ...base, kind: 'native', token: null, from: sender, to: recipient, value: tx.value },
    });
  }
  if (tx.to === null) return transfers;
  const call = tokenCall(sender, tx.input);
  if (call) transfers.push({ index: 1, transfer: { ...base, kind: 'erc20', token: recipient, ...call } });
  return transfers;
}
