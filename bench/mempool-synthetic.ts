// Synthetic Bitcoin pool transactions for bench:mempool (bench/mempool.ts) and its loopback Esplora
// node (bench/mempool-esplora.ts). Nothing here was ever on a chain: every transaction is built with
// bitcoinjs-lib from random bytes (random parents, random 20-byte key hashes, a random DER-shaped
// signature and compressed public key in each witness), so its txid, size and weight are those of its
// real serialisation, but no signature would verify. Each spends 1 or 2 P2WPKH outputs and pays 2
// P2WPKH outputs; its fee is 1-50 sat/vB of its virtual size.
//
// It is written as Esplora's `GET /tx/:txid` writes a pool transaction, field for field in the
// recorded answer's order (test/fixtures/chains/bitcoin/esplora-address-txs-*.json, the shape
// test/helpers/bitcoin-render.ts renders): txid, version, locktime, vin [txid, vout, prevout
// {scriptpubkey, scriptpubkey_asm, scriptpubkey_type, scriptpubkey_address, value}, scriptsig,
// scriptsig_asm, witness, is_coinbase, sequence], vout [the same five fields], size, weight, fee,
// status {confirmed: false}. Like that recording it has no `sigops` (newer Esplora adds one).
//
// The watched addresses are P2WPKH addresses of key hashes derived from their number, so the node
// and the bench derive the same ones without sharing a list: `watchedAddress(i)`.
import crypto from 'node:crypto';
import { address as btcAddress, Transaction } from 'bitcoinjs-lib';

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');

/** The key hash of watched address `i`: the first 20 bytes of SHA-256 of a fixed label and `i`. */
function watchedHash(i: number): Buffer {
  return crypto.createHash('sha256').update(`ledgerhook-bench-mempool:${i}`).digest().subarray(0, 20);
}

/** The P2WPKH (bech32, mainnet) address of watched key hash `i`. */
export function watchedAddress(i: number): string {
  return btcAddress.toBech32(watchedHash(i), 0, 'bc');
}

/** Watched addresses `0..count-1`, in order. */
export function watchedAddresses(count: number): string[] {
  const out = new Array<string>(count);
  for (let i = 0; i < count; i++) out[i] = watchedAddress(i);
  return out;
}

/** Random bytes served from a large buffer refilled when used up: one syscall per 64 KB, not per call. */
class RandomBytes {
  private pool = crypto.randomBytes(65_536);
  private at = 0;

  take(n: number): Buffer {
    if (this.at + n > this.pool.length) {
      this.pool = crypto.randomBytes(65_536);
      this.at = 0;
    }
    const out = this.pool.subarray(this.at, this.at + n);
    this.at += n;
    return Buffer.from(out); // a copy: the pool is reused
  }

  /** A uniform integer in [min, max]. */
  int(min: number, max: number): number {
    return min + (this.take(4).readUInt32LE(0) % (max - min + 1));
  }
}

const random = new RandomBytes();

function p2wpkhScript(hash: Uint8Array): Buffer {
  return Buffer.concat([Buffer.from([0x00, 0x14]), hash]);
}

/** A DER signature's shape (r and s of 32 bytes, high bits clear) with SIGHASH_ALL: 71 bytes. */
function fakeSignature(): Buffer {
  const r = random.take(32);
  const s = random.take(32);
  r[0]! &= 0x7f;
  s[0]! &= 0x7f;
  r[0]! |= 0x01;
  s[0]! |= 0x01;
  return Buffer.concat([
    Buffer.from([0x30, 0x44, 0x02, 0x20]),
    r,
    Buffer.from([0x02, 0x20]),
    s,
    Buffer.from([0x01]),
  ]);
}

function fakePublicKey(): Buffer {
  const key = random.take(33);
  key[0] = 0x02 | (key[0]! & 1);
  return key;
}

/** Esplora's JSON for a P2WPKH output (in a vout, or as an input's prevout). */
function esploraOutput(script: Buffer, value: bigint): Record<string, unknown> {
  const hash = hex(script.subarray(2));
  return {
    scriptpubkey: hex(script),
    scriptpubkey_asm: `OP_0 OP_PUSHBYTES_20 ${hash}`,
    scriptpubkey_type: 'v0_p2wpkh',
    scriptpubkey_address: btcAddress.toBech32(script.subarray(2), 0, 'bc'),
    value: Number(value),
  };
}

export interface SyntheticTransaction {
  txid: string;
  /** `GET /tx/:txid`'s body. */
  body: Buffer;
}

/**
 * A new pool transaction: 1 or 2 inputs spending random P2WPKH outputs, 2 P2WPKH outputs, the
 * first paying `pays` (a watched key hash) when given, else a random one.
 */
export function synthesize(pays?: number): SyntheticTransaction {
  const tx = new Transaction();
  tx.version = 2;
  tx.locktime = 0;
  const inputs = random.int(1, 2);
  const spent: { script: Buffer; value: bigint }[] = [];
  for (let i = 0; i < inputs; i++) {
    tx.addInput(random.take(32), random.int(0, 1), 0xfffffffd);
    tx.setWitness(i, [fakeSignature(), fakePublicKey()]);
    spent.push({ script: p2wpkhScript(random.take(20)), value: BigInt(random.int(20_000, 5_000_000)) });
  }
  const paid = [
    p2wpkhScript(pays === undefined ? random.take(20) : watchedHash(pays)),
    p2wpkhScript(random.take(20)),
  ];
  for (const script of paid) tx.addOutput(script, 0n);
  // The values once the size is known: the fee at 1-50 sat/vB, the rest split between the outputs.
  const fee = BigInt(tx.virtualSize() * random.int(1, 50));
  const available = spent.reduce((sum, s) => sum + s.value, 0n) - fee;
  const first = (available * BigInt(random.int(10, 90))) / 100n;
  tx.outs[0]!.value = first;
  tx.outs[1]!.value = available - first;
  const txid = tx.getId();
  const json = {
    txid,
    version: tx.version,
    locktime: tx.locktime,
    vin: tx.ins.map((input, i) => ({
      txid: Buffer.from(input.hash).reverse().toString('hex'),
      vout: input.index,
      prevout: esploraOutput(spent[i]!.script, spent[i]!.value),
      scriptsig: '',
      scriptsig_asm: '',
      witness: input.witness.map(hex),
      is_coinbase: false,
      sequence: input.sequence,
    })),
    vout: tx.outs.map((o) => esploraOutput(Buffer.from(o.script), o.value)),
    size: tx.byteLength(),
    weight: tx.weight(),
    fee: Number(fee),
    status: { confirmed: false },
  };
  return { txid, body: Buffer.from(JSON.stringify(json)) };
}

/** The node's one block (the tip the follower starts at): a synthetic coinbase paying a random key hash. */
export function synthesizeTip(height: number): { hash: string; header: Buffer; txs: Buffer } {
  const tx = new Transaction();
  tx.version = 2;
  const heightPush = Buffer.alloc(4);
  heightPush.writeUInt32LE(height);
  tx.addInput(
    Buffer.alloc(32),
    0xffffffff,
    0xffffffff,
    Buffer.concat([Buffer.from([3]), heightPush.subarray(0, 3)]),
  );
  const script = p2wpkhScript(random.take(20));
  tx.addOutput(script, 312_500_000n);
  const hash = hex(random.take(32));
  const coinbase = {
    txid: tx.getId(),
    version: tx.version,
    locktime: tx.locktime,
    vin: [
      {
        txid: '0'.repeat(64),
        vout: 0xffffffff,
        prevout: null,
        scriptsig: hex(tx.ins[0]!.script),
        scriptsig_asm: `OP_PUSHBYTES_3 ${hex(tx.ins[0]!.script.subarray(1))}`,
        is_coinbase: true,
        sequence: 0xffffffff,
      },
    ],
    vout: [esploraOutput(script, 312_500_000n)],
    size: tx.byteLength(),
    weight: tx.weight(),
    fee: 0,
    status: { confirmed: true, block_height: height, block_hash: hash, block_time: 1_760_000_000 },
  };
  const header = {
    id: hash,
    height,
    version: 0x20000000,
    timestamp: 1_760_000_000,
    tx_count: 1,
    size: 80 + 1 + tx.byteLength(),
    weight: 320 + 4 + tx.weight(),
    merkle_root: coinbase.txid,
    previousblockhash: hex(random.take(32)),
    mediantime: 1_759_999_000,
    nonce: random.int(0, 0xffffffff),
    bits: 386_000_000,
    difficulty: 1,
  };
  return { hash, header: Buffer.from(JSON.stringify(header)), txs: Buffer.from(JSON.stringify([coinbase])) };
}
