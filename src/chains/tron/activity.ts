/**
 * What a Tron block does, as the follower's activity: each transaction with the value it moved
 * (TRX, TRC-10 and TRC-20, top-level and internal), who sent it, what it cost and whether it
 * failed. No I/O here: blocks.ts reads it from a block and its transaction infos.
 */
import { formatUnits } from 'viem';

export const TRX = 'TRX';
export const TRX_DECIMALS = 6;

export type TronTransferKind = 'trx' | 'trc10' | 'trc20';

/** Value one transaction moved from one address to another. */
export interface TronTransfer {
  kind: TronTransferKind;
  /** `TRX`, a TRC-10 token id, or a TRC-20 contract's base58 address. */
  asset: string;
  /** base58 `T…`. */
  from: string;
  to: string;
  /** Base units (sun, or the token's). */
  amount: bigint;
  /**
   * Where in the transaction it is, the same on every branch: `contract` (the transaction's own
   * contract), `log:<index>` (a TRC-20 Transfer log), `internal:<index>.<value>`.
   */
  ref: string;
  /** An internal transaction's position among the transaction's internal transactions. */
  traceAddress?: string;
}

export interface TronTransaction {
  txId: string;
  /** The contract's owner: who sent and signed it, and paid its fee. */
  sender: string;
  /** The contract type: TransferContract, TriggerSmartContract, … */
  contractType: string;
  /** The contract's result: SUCCESS, REVERT, OUT_OF_ENERGY, … */
  result: string;
  failed: boolean;
  /** What the sender paid, in sun: TRX burned for bandwidth and energy, and any fixed fee. */
  fee: bigint;
  /** Nothing when it failed. */
  transfers: TronTransfer[];
}

/** A block's transactions, in block order. */
export type TronActivity = TronTransaction[];

/** The addresses a transaction touches: its sender and both sides of what it moved. */
export function tronAddressesOf(tx: TronTransaction): string[] {
  const addresses = [tx.sender];
  for (const t of tx.transfers) addresses.push(t.from, t.to);
  return addresses;
}

/** An amount in base units as a decimal string in display units, signed from `address`'s side. */
export function formatTronAmount(amount: bigint, decimals: number): string {
  return formatUnits(amount, decimals);
}

/** The address's signed change for a transfer it is on one side of (+ received, − sent). */
export function signedFor(transfer: TronTransfer, address: string): bigint {
  if (transfer.from === transfer.to) return 0n;
  return transfer.to === address ? transfer.amount : -transfer.amount;
}
