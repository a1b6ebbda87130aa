/**
 * What a Bitcoin block does, as the follower's activity: each transaction's inputs (the outputs
 * they spend) and outputs, with their addresses and values, and the arithmetic a notification
 * needs (docs/watching-chains.md: the watched address's net signed change, the single counterparty).
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
  /**
   * The outpoints the inputs spend, `<txid>:<vout>`, in input order; empty for a coinbase. Two
   * transactions spending one outpoint conflict: a replacement (RBF) or a double spend.
   */
  spends: string[];
}

/** A block's transactions, in block order. */
export type BitcoinActivity = BitcoinTransaction[];

const OP_0 = 0x00;
const OP_1 = 0x51;
const OP_16 = 0x60;
const OP_DUP = 0x76;
const OP_HASH160 = 0xa9;
const OP_EQUAL = 0x87;
const OP_EQUALVERIFY = 0x88;
const OP_CHECKSIG = 0xac;

/** The version of a segwit program (OP_0…OP_16, then one push of 2–40 bytes), else undefined. */
function witnessVersion(script: Uint8Array): number | undefined {
  const [op, length] = script;
  if (op === undefined || length === undefined) return undefined;
  if (op !== OP_0 && (op < OP_1 || op > OP_16)) return undefined;
  if (length < 2 || length > 40 || script.length !== length + 2) return undefined;
  return op === OP_0 ? 0 : op - OP_1 + 1;
}

/**
 * The address an output script pays, on `network`, or null when it pays none (P2PK, bare
 * multisig, OP_RETURN, non-standard). The standard templates are recognised by their bytes and
 * encoded directly: bitcoinjs-lib's fromOutputScript tries each payment type in turn and throws
 * for every one that does not fit, which made decoding a large block's scripts cost a second
 * (bench/README.md, Bitcoin pass). Segwit v1+ programs (P2TR) are encoded as bech32m without
 * checking the key, as neither Bitcoin Core nor Esplora does before naming the address.
 */
export function addressOfScript(script: Uint8Array, network: Network): string | null {
  const version = witnessVersion(script);
  if (version === 0) {
    // v0 programs are 20 bytes (P2WPKH) or 32 (P2WSH); any other length pays no address.
    const length = script.length - 2;
    return length === 20 || length === 32 ? btcAddress.toBech32(script.subarray(2), 0, network.bech32) : null;
  }
  if (version !== undefined) return btcAddress.toBech32(script.subarray(2), version, network.bech32);
  if (
    script.length === 25 &&
    script[0] === OP_DUP &&
    script[1] === OP_HASH160 &&
    script[2] === 20 &&
    script[23] === OP_EQUALVERIFY &&
    script[24] === OP_CHECKSIG
  ) {
    return btcAddress.toBase58Check(script.subarray(3, 23), network.pubKeyHash);
  }
  if (script.length === 23 && script[0] === OP_HASH160 && script[1] === 20 && script[22] === OP_EQUAL) {
    return btcAddress.toBase58Check(script.subarray(2, 22), network.scriptHash);
  }
  return null;
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

/** The distinct addresses among the endpoints other than `address`, in first-seen order. */
function othersOf(endpoints: BitcoinEndpoint[], address: string): string[] {
  const others = new Set<string>();
  for (const endpoint of endpoints) {
    if (endpoint.address && endpoint.address !== address) others.add(endpoint.address);
  }
  return [...others];
}

/**
 * The addresses on the other side of the address's movement: for a debit the outputs'
 * addresses other than its own, for a credit the spent outputs'; none for a coinbase or a net of
 * zero. Endpoints without an address are not a party.
 */
export function counterparties(tx: BitcoinTransaction, address: string): string[] {
  const amount = total(tx.outputs, address) - total(tx.inputs, address);
  if (tx.coinbase || amount === 0n) return [];
  return othersOf(amount < 0n ? tx.outputs : tx.inputs, address);
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
  const others = counterparties(tx, address);
  return others.length === 1 ? { amount, counterAddress: others[0]! } : { amount };
}

/** Satoshi as signed BTC with up to 8 decimals ("-0.5", "50", "0.00000001"), as EVM amounts are written. */
export function formatBtc(satoshi: bigint): string {
  return formatUnits(satoshi, 8);
}
