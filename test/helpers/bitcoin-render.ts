/**
 * Bitcoin Core's and Esplora's JSON for transactions and scripts, rendered from raw bytes with
 * bitcoinjs-lib, for the loopback Bitcoin node (bitcoin-node.ts). Field names, field order, types
 * and lexemes follow the recorded answers in test/fixtures/chains/bitcoin (bitcoin-node.test.ts
 * compares them): amounts in BTC carry 8 decimals, asm is written the way each node writes it.
 */
import { address as btcAddress, crypto, type Network, opcodes, type Transaction } from 'bitcoinjs-lib';
import { LosslessNumber } from 'lossless-json';

export type Json = Record<string, unknown>;

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex');

/** A txid or block hash as nodes write it: the bytes reversed. */
export const reversedHex = (bytes: Uint8Array): string => Buffer.from(bytes).reverse().toString('hex');

/** Satoshi as BTC with exactly 8 decimals, a JSON number lexeme (50.00000000), as bitcoind writes amounts. */
export function btcAmount(satoshi: bigint): LosslessNumber {
  const sign = satoshi < 0n ? '-' : '';
  const abs = satoshi < 0n ? -satoshi : satoshi;
  return new LosslessNumber(
    `${sign}${abs / 100_000_000n}.${(abs % 100_000_000n).toString().padStart(8, '0')}`,
  );
}

// ---------------------------------------------------------------------------------------------
// Scripts

interface Op {
  code: number;
  /** The pushed bytes, for OP_0 and the push opcodes (1–0x4e). */
  data?: Uint8Array;
}

const OP_PUSHDATA1 = 0x4c;
const OP_PUSHDATA2 = 0x4d;
const OP_PUSHDATA4 = 0x4e;

/** The script's operations, or undefined when a push runs past its end. */
export function parseScript(script: Uint8Array): Op[] | undefined {
  const ops: Op[] = [];
  const view = Buffer.from(script);
  let at = 0;
  while (at < view.length) {
    const code = view[at++]!;
    if (code > OP_PUSHDATA4) {
      ops.push({ code });
      continue;
    }
    const width = code === OP_PUSHDATA1 ? 1 : code === OP_PUSHDATA2 ? 2 : code === OP_PUSHDATA4 ? 4 : 0;
    if (at + width > view.length) return undefined;
    const length = width === 0 ? code : view.readUIntLE(at, width);
    at += width;
    if (at + length > view.length) return undefined;
    ops.push({ code, data: view.subarray(at, at + length) });
    at += length;
  }
  return ops;
}

const OP_NAMES = new Map<number, string>();
for (const [name, code] of Object.entries(opcodes)) {
  if (typeof code !== 'number') continue;
  if (!OP_NAMES.has(code) || name === 'OP_0' || name === 'OP_1') OP_NAMES.set(code, name);
}

/** A minimally encoded script number of at most 4 bytes, as Core's CScriptNum reads it. */
function scriptNumber(data: Uint8Array): bigint {
  if (data.length === 0) return 0n;
  let value = 0n;
  data.forEach((byte, i) => {
    value |= BigInt(byte) << BigInt(8 * i);
  });
  const last = data[data.length - 1]!;
  if (last & 0x80) return -(value & ~(0x80n << BigInt(8 * (data.length - 1))));
  return value;
}

/** BIP66 strict DER with a trailing hash-type byte (Core's IsValidSignatureEncoding). */
function isStrictDerSignature(sig: Uint8Array): boolean {
  if (sig.length < 9 || sig.length > 73) return false;
  if (sig[0] !== 0x30 || sig[1] !== sig.length - 3) return false;
  const rLength = sig[3]!;
  if (5 + rLength >= sig.length) return false;
  const sLength = sig[5 + rLength]!;
  if (rLength + sLength + 7 !== sig.length) return false;
  const integerOk = (at: number, length: number) =>
    sig[at - 2] === 0x02 &&
    length > 0 &&
    (sig[at]! & 0x80) === 0 &&
    !(length > 1 && sig[at] === 0 && (sig[at + 1]! & 0x80) === 0);
  return integerOk(4, rLength) && integerOk(6 + rLength, sLength);
}

const SIGHASH_NAMES: Record<number, string> = {
  1: 'ALL',
  2: 'NONE',
  3: 'SINGLE',
  129: 'ALL|ANYONECANPAY',
  130: 'NONE|ANYONECANPAY',
  131: 'SINGLE|ANYONECANPAY',
};

function corePushAsm(data: Uint8Array, decodeSighash: boolean): string {
  if (data.length <= 4) return scriptNumber(data).toString();
  const hashType = SIGHASH_NAMES[data[data.length - 1]!];
  if (decodeSighash && hashType && isStrictDerSignature(data))
    return `${hex(data.subarray(0, -1))}[${hashType}]`;
  return hex(data);
}

function coreOpName(code: number): string {
  if (code >= opcodes.OP_1 && code <= opcodes.OP_16) return String(code - opcodes.OP_1 + 1);
  if (code === opcodes.OP_1NEGATE) return '-1';
  return OP_NAMES.get(code) ?? 'OP_UNKNOWN';
}

/**
 * Core's asm (ScriptToAsmStr): pushes of up to 4 bytes as numbers, longer ones as hex, small
 * numbers as digits; in a scriptSig, a signature gets its hash type named ("…[ALL]").
 */
export function coreAsm(script: Uint8Array, decodeSighash = false): string {
  const ops = parseScript(script);
  if (!ops) return '[error]';
  const unspendable = script[0] === opcodes.OP_RETURN;
  return ops
    .map((op) => (op.data ? corePushAsm(op.data, decodeSighash && !unspendable) : coreOpName(op.code)))
    .join(' ');
}

function esploraOpName(code: number): string {
  if (code >= opcodes.OP_1 && code <= opcodes.OP_16) return `OP_PUSHNUM_${code - opcodes.OP_1 + 1}`;
  if (code === opcodes.OP_1NEGATE) return 'OP_PUSHNUM_NEG1';
  if (code === opcodes.OP_CHECKLOCKTIMEVERIFY) return 'OP_CLTV';
  if (code === opcodes.OP_CHECKSEQUENCEVERIFY) return 'OP_CSV';
  return OP_NAMES.get(code) ?? `OP_RETURN_${code}`;
}

/** Esplora's asm (rust-bitcoin's): every push named by its opcode, then its bytes. */
export function esploraAsm(script: Uint8Array): string {
  const ops = parseScript(script);
  if (!ops) return '<push past end>';
  return ops
    .map((op) => {
      if (!op.data) return esploraOpName(op.code);
      if (op.code === 0) return 'OP_0';
      const name = op.code < OP_PUSHDATA1 ? `OP_PUSHBYTES_${op.code}` : (OP_NAMES.get(op.code) ?? '');
      return `${name} ${hex(op.data)}`;
    })
    .join(' ');
}

/** Core's script types (the ones Esplora names differently are mapped in ESPLORA_TYPES). */
export type CoreScriptType =
  | 'pubkey'
  | 'pubkeyhash'
  | 'scripthash'
  | 'multisig'
  | 'nulldata'
  | 'witness_v0_keyhash'
  | 'witness_v0_scripthash'
  | 'witness_v1_taproot'
  | 'witness_unknown'
  | 'nonstandard';

const ESPLORA_TYPES: Record<CoreScriptType, string> = {
  pubkey: 'p2pk',
  pubkeyhash: 'p2pkh',
  scripthash: 'p2sh',
  multisig: 'multisig',
  nulldata: 'op_return',
  witness_v0_keyhash: 'v0_p2wpkh',
  witness_v0_scripthash: 'v0_p2wsh',
  witness_v1_taproot: 'v1_p2tr',
  witness_unknown: 'unknown',
  nonstandard: 'unknown',
};

const isPubkey = (data: Uint8Array | undefined) =>
  data !== undefined &&
  ((data.length === 33 && (data[0] === 2 || data[0] === 3)) || (data.length === 65 && data[0] === 4));

function isMultisig(ops: Op[]): boolean {
  const [first, ...rest] = ops;
  const last = rest.pop();
  const count = rest.pop();
  if (!first || !last || !count || last.code !== opcodes.OP_CHECKMULTISIG) return false;
  const small = (op: Op) => op.code >= opcodes.OP_1 && op.code <= opcodes.OP_16;
  return (
    small(first) &&
    small(count) &&
    rest.length === count.code - opcodes.OP_1 + 1 &&
    rest.every((op) => isPubkey(op.data))
  );
}

/** The script's type as Core's Solver names it. */
export function scriptType(script: Uint8Array): CoreScriptType {
  const s = Buffer.from(script);
  if (s.length === 25 && s[0] === 0x76 && s[1] === 0xa9 && s[2] === 20 && s[23] === 0x88 && s[24] === 0xac)
    return 'pubkeyhash';
  if (s.length === 23 && s[0] === 0xa9 && s[1] === 20 && s[22] === 0x87) return 'scripthash';
  if (
    s.length >= 4 &&
    s.length <= 42 &&
    s[1] === s.length - 2 &&
    (s[0] === 0 || (s[0]! >= 0x51 && s[0]! <= 0x60))
  ) {
    if (s[0] === 0 && s.length === 22) return 'witness_v0_keyhash';
    if (s[0] === 0 && s.length === 34) return 'witness_v0_scripthash';
    if (s[0] === 0x51 && s.length === 34) return 'witness_v1_taproot';
    if (s[0] !== 0) return 'witness_unknown';
  }
  const ops = parseScript(s);
  if (s[0] === opcodes.OP_RETURN && ops?.slice(1).every((op) => op.data || op.code <= opcodes.OP_16))
    return 'nulldata';
  if (ops?.length === 2 && isPubkey(ops[0]!.data) && ops[1]!.code === opcodes.OP_CHECKSIG) return 'pubkey';
  if (ops && isMultisig(ops)) return 'multisig';
  return 'nonstandard';
}

/** The address nodes name for an output script: none for P2PK, multisig, OP_RETURN, non-standard. */
export function scriptAddress(script: Uint8Array, network: Network): string | undefined {
  const type = scriptType(script);
  if (type === 'pubkey' || type === 'multisig' || type === 'nulldata' || type === 'nonstandard')
    return undefined;
  if (
    type === 'witness_v0_keyhash' ||
    type === 'witness_v0_scripthash' ||
    type === 'pubkeyhash' ||
    type === 'scripthash'
  )
    return btcAddress.fromOutputScript(script, network);
  return btcAddress.toBech32(script.subarray(2), script[0]! - 0x50, network.bech32);
}

// ---------------------------------------------------------------------------------------------
// Bitcoin Core

/**
 * Which Core releases to imitate: `legacy` (before 22: `reqSigs` and `addresses`, getblock stops
 * at verbosity 2), `modern` (22 and later: one `address`; getblock verbosity 3 with prevouts).
 * Core 23+ also writes a `desc` (output descriptor) in every scriptPubKey; this node leaves it out.
 */
export type CoreFlavour = 'legacy' | 'modern';

export function coreScriptPubKey(script: Uint8Array, network: Network, flavour: CoreFlavour): Json {
  const type = scriptType(script);
  const address = scriptAddress(script, network);
  const out: Json = { asm: coreAsm(script), hex: hex(script) };
  if (flavour === 'modern') {
    if (address) out.address = address;
    out.type = type;
  } else {
    if (address) out.reqSigs = 1;
    out.type = type;
    if (address) out.addresses = [address];
  }
  return out;
}

/** The output an input spends, as the node knows it. */
export interface SpentOutput {
  script: Uint8Array;
  value: bigint;
  /** Height of the block that created it (for an output of a pool transaction: the tip's + 1). */
  height: number;
  /** Created by a coinbase. */
  generated: boolean;
}

/**
 * An unspent output as Core's gettxout writes it: the tip's hash, its depth (0 for an output of a
 * pool transaction), the value in BTC, the script as in a transaction's vout, and `coinbase`.
 */
export function coreTxOut(
  output: { script: Uint8Array; value: bigint; generated: boolean },
  tip: { hash: string; confirmations: number },
  network: Network,
  flavour: CoreFlavour,
): Json {
  return {
    bestblock: tip.hash,
    confirmations: tip.confirmations,
    value: btcAmount(output.value),
    scriptPubKey: coreScriptPubKey(output.script, network, flavour),
    coinbase: output.generated,
  };
}

export interface CoreTxOptions {
  network: Network;
  flavour: CoreFlavour;
  /** The spent output of each input (undefined where unknown); given, the transaction gets a `fee`. */
  prevouts?: (SpentOutput | undefined)[];
  /** Write each input's `prevout` too (getblock verbosity 3). */
  showPrevouts?: boolean;
}

function coreInput(tx: Transaction, i: number, options: CoreTxOptions): Json {
  const input = tx.ins[i]!;
  const out: Json = {};
  if (tx.isCoinbase()) out.coinbase = hex(input.script);
  else {
    out.txid = reversedHex(input.hash);
    out.vout = input.index;
    out.scriptSig = { asm: coreAsm(input.script, true), hex: hex(input.script) };
  }
  if (input.witness.length > 0) out.txinwitness = input.witness.map(hex);
  const spent = options.showPrevouts ? options.prevouts?.[i] : undefined;
  if (spent) {
    out.prevout = {
      generated: spent.generated,
      height: spent.height,
      value: btcAmount(spent.value),
      scriptPubKey: coreScriptPubKey(spent.script, options.network, options.flavour),
    };
  }
  out.sequence = input.sequence;
  return out;
}

/** The fee when every spent output is known, else undefined. */
export function feeOf(
  tx: Transaction,
  prevouts: (SpentOutput | undefined)[] | undefined,
): bigint | undefined {
  if (tx.isCoinbase() || !prevouts || prevouts.length !== tx.ins.length || prevouts.some((p) => !p))
    return undefined;
  const paid = tx.outs.reduce((sum, out) => sum + out.value, 0n);
  return prevouts.reduce((sum, p) => sum + p!.value, 0n) - paid;
}

/** A transaction as Core's getblock (verbosity ≥ 2) and getrawtransaction (verbose) write it. */
export function coreTransaction(tx: Transaction, options: CoreTxOptions): Json {
  const out: Json = {
    txid: tx.getId(),
    // The wtxid; bitcoinjs-lib gives a coinbase's as zeros (its use in the witness commitment).
    hash: reversedHex(crypto.hash256(tx.toBuffer())),
    version: tx.version,
    size: tx.byteLength(),
    vsize: tx.virtualSize(),
    weight: tx.weight(),
    locktime: tx.locktime,
    vin: tx.ins.map((_, i) => coreInput(tx, i, options)),
    vout: tx.outs.map((o, n) => ({
      value: btcAmount(o.value),
      n,
      scriptPubKey: coreScriptPubKey(o.script, options.network, options.flavour),
    })),
  };
  const fee = feeOf(tx, options.prevouts);
  if (fee !== undefined) out.fee = btcAmount(fee);
  out.hex = tx.toHex();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Esplora

export interface EsploraStatus {
  block_height: number;
  block_hash: string;
  block_time: number;
}

export function esploraOutput(script: Uint8Array, value: bigint, network: Network): Json {
  const out: Json = {
    scriptpubkey: hex(script),
    scriptpubkey_asm: esploraAsm(script),
    scriptpubkey_type: script.length === 0 ? 'empty' : ESPLORA_TYPES[scriptType(script)],
  };
  const address = scriptAddress(script, network);
  if (address) out.scriptpubkey_address = address;
  out.value = Number(value);
  return out;
}

const NULL_TXID = '0'.repeat(64);

function esploraInput(tx: Transaction, i: number, spent: SpentOutput | undefined, network: Network): Json {
  const input = tx.ins[i]!;
  const coinbase = tx.isCoinbase();
  const out: Json = {
    txid: coinbase ? NULL_TXID : reversedHex(input.hash),
    vout: input.index,
    prevout: spent ? esploraOutput(spent.script, spent.value, network) : null,
    scriptsig: hex(input.script),
    scriptsig_asm: esploraAsm(input.script),
  };
  if (input.witness.length > 0) out.witness = input.witness.map(hex);
  out.is_coinbase = coinbase;
  out.sequence = input.sequence;
  return out;
}

/**
 * A transaction as Esplora's `/tx/:txid` and `/block/:hash/txs/:start` write it; without a block
 * `status` it is a pool transaction (`status: {confirmed: false}`). An input whose spent output is
 * unknown gets `prevout: null` and the transaction no `fee` (real Esplora always knows both; the
 * node says when it cannot, see bitcoin-node.ts).
 */
export function esploraTransaction(
  tx: Transaction,
  prevouts: (SpentOutput | undefined)[],
  status: EsploraStatus | undefined,
  network: Network,
): Json {
  const out: Json = {
    txid: tx.getId(),
    version: tx.version,
    locktime: tx.locktime,
    vin: tx.ins.map((_, i) => esploraInput(tx, i, prevouts[i], network)),
    vout: tx.outs.map((o) => esploraOutput(o.script, o.value, network)),
    size: tx.byteLength(),
    weight: tx.weight(),
  };
  const fee = tx.isCoinbase() ? 0n : feeOf(tx, prevouts);
  if (fee !== undefined) out.fee = Number(fee);
  out.status = status ? { confirmed: true, ...status } : { confirmed: false };
  return out;
}
