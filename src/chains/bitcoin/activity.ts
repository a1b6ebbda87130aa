/**
 * What a Bitcoin block does, as the follower's activity: each transaction's inputs (the outputs
 * they spend) and outputs, with their addresses and values, and the arithmetic a notification
 * needs (DESIGN §6, §8: the watched address's net signed change, the single counterparty).
 * No I/O here: the sources in source.ts fill these from a node.
 */
import { address as btcAddress, type Network } from 'bitcoinjs-lib';
import { formatUnits } from 'viem';

/** One side of a transfer: an input's spent output, or an output. */
export interface BitcoinEndpoint {
  /** null for scripts that pay no address: P2PK, bare multisig, OP_RETURN, non-standard. */
  address: string | null;
  /** Satoshi. */
  value: bigint;
}

export interface BitcoinTransaction {
  txid: string;
  coinbase: boolean;
  /** The outputs the inputs spend, in input order; empty for a coinbase. */
  inputs: BitcoinEndpoint[];
  outputs: BitcoinEndpoint[];
}

/** A block's transactions, in block order. */
export type BitcoinActivity = BitcoinTransaction[];

const OP_1 = 0x51;
const OP_16 = 0x60;

/** The version of a segwit v1+ program (OP_1…OP_16, then one push of 2–40 bytes), else undefined. */
function witnessVersion(script: Uint8Array): number | undefined {
  const [op, length] = script;
  if (op === undefined || length === undefined || op < OP_1 || op > OP_16) return undefined;
  if (length < 2 || length > 40 || script.length !== length + 2) return undefined;
  return op - OP_1 + 1;
}

/**
 * The address an output script pays, on `network`, or null when it pays none (P2PK, bare
 * multisig, OP_RETURN, non-standard). Segwit v1+ programs (P2TR) are encoded directly as bech32m:
 * bitcoinjs-lib's P2TR decoding wants an elliptic-curve library to check the key, which neither
 * Bitcoin Core nor Esplora checks before naming the address.
 */
export function addressOfScript(script: Uint8Array, network: Network): string | null {
  const version = witnessVersion(script);
  if (version !== undefined) return btcAddress.toBech32(script.subarray(2), version, network.bech32);
  try {
    return btcAddress.fromOutputScript(script, network);
  } catch {
    return null;
  }
}

/** Distinct addresses the transaction touches (inputs' spent outputs and outputs), in first-seen order. */
export function addressesOf(tx: BitcoinTransaction): string[] {
  const seen = new Set<string>();
  for (const endpoint of [...tx.inputs, ...tx.outputs]) if (endpoint.address) seen.add(endpoint.address);
  return [...seen];
}

function total(endpoints: BitcoinEndpoint[], address: string): bigint {
  let sum = 0n;
  for (const endpoint of endpoints) if (endpoint.address === address) sum += endpoint.value;
  return sum;
}

/** The one distinct address among the endpoints other than `address`, if there is exactly one. */
function soleOther(endpoints: BitcoinEndpoint[], address: string): string | undefined {
  const others = new Set<string>();
  for (const endpoint of endpoints) {
    if (endpoint.address && endpoint.address !== address) others.add(endpoint.address);
  }
  return others.size === 1 ? [...others][0] : undefined;
}

/**
 * The address's net change in satoshi (outputs paying it − inputs spending its outputs), and the
 * single address on the other side when there is exactly one: for a debit the output addresses
 * other than itself, for a credit the input addresses other than itself. Endpoints without an
 * address are not counted as a party. A coinbase, and a net of zero, have no counterparty.
 */
export function netChange(
  tx: BitcoinTransaction,
  address: string,
): { amount: bigint; counterAddress?: string } {
  const amount = total(tx.outputs, address) - total(tx.inputs, address);
  if (tx.coinbase || amount === 0n) return { amount };
  const counterAddress = soleOther(amount < 0n ? tx.outputs : tx.inputs, address);
  return counterAddress === undefined ? { amount } : { amount, counterAddress };
}

/** Satoshi as signed BTC with up to 8 decimals ("-0.5", "50", "0.00000001"), as EVM amounts are written. */
export function formatBtc(satoshi: bigint): string {
  return formatUnits(satoshi, 8);
}
