/**
 * A loopback Bitcoin node of our own: a real HTTP server on 127.0.0.1 that serves real recorded
 * blocks from their raw bytes, speaking both Esplora's REST API and Bitcoin Core's JSON-RPC (on
 * `POST /`) over the same chain and a mempool, with controls for tests: the chain and pool it
 * presents, faults, a log of the requests and a hook between them.
 *
 * Prevouts (the outputs inputs spend) are derived from the earlier blocks of the chain it
 * presents. An input spending an output of a block it does not hold is out of scope: by default
 * its prevout is left out (Esplora `prevout: null` and no `fee`; Core no `prevout`, and
 * getrawtransaction does not know the transaction), which no real node does, so a source reading
 * it must fail. With `unheldPrevouts: 'placeholder'` such an input spends a stand-in instead: an
 * empty script (no address) worth 0 sat, created at height 0 — invented, so that a block like
 * 702861, whose inputs mostly spend older blocks, can be followed as a whole.
 *
 * An address's confirmed history (`/address/:address/txs/chain[/:last_seen_txid]`) is the
 * transactions of the held blocks whose outputs or spent outputs pay it, newest block first and,
 * within a block, last transaction first (our choice: Esplora does not document the order within a
 * block), 25 a page.
 *
 * A mempool (`setMempool`, `addToMempool`, `removeFromMempool`: raw transactions, in the node's
 * order) is served as the real nodes serve theirs: Esplora `GET /mempool/txids` and `GET /tx/:txid`
 * (`status: {confirmed: false}`, prevouts and `fee`); Core `getrawmempool` (with `mempool_sequence`
 * as Core 21+ gives it when asked with a second argument `true`: a counter that moves by one per
 * transaction added or removed), `getrawtransaction` (a pool transaction needs no txindex, and
 * carries no blockhash, confirmations or fee) and `gettxout txid n (include_mempool=true)` (the
 * held chain's unspent outputs, less those pool transactions spend when include_mempool, plus the
 * pool's own outputs at 0 confirmations; null otherwise, and for OP_RETURN outputs). A pool
 * transaction's prevouts come from the held chain or from other pool transactions; others follow
 * the `unheldPrevouts` rule (with 'placeholder', gettxout include_mempool=false answers the
 * stand-in for an outpoint a pool transaction spends). Like a real node, the pool drops what the
 * held chain mines or conflicts with (and a conflict's descendants) whenever the chain or pool is
 * set; unlike one, it does not take back the transactions of blocks a new chain leaves out, and it
 * checks no signature, fee or replacement rule. `mempoolSequence: false` imitates Core before 21:
 * getrawmempool refuses a second argument with error -1 and its help text, as RPCHelpMan::Check
 * did (a std::runtime_error, turned into RPC_MISC_ERROR). getrawmempool verbose (the per-entry
 * objects) is not served.
 *
 * What it leaves out of the real answers: Core 23+'s `desc` in scriptPubKeys; Esplora's
 * `sigops` and the `inner_redeemscript_asm`/`inner_witnessscript_asm` of script-hash spends.
 * `chainwork` and `mediantime` are computed over the blocks it holds only.
 */
import http from 'node:http';
import { Block, type Network, networks, Transaction } from 'bitcoinjs-lib';
import { stringify } from 'lossless-json';
import {
  type CoreFlavour,
  coreTransaction,
  coreTxOut,
  type EsploraStatus,
  esploraTransaction,
  type Json,
  reversedHex,
  type SpentOutput,
} from './bitcoin-render.js';
import { listenOnLoopback, type RestartableNode } from './loopback-server.js';

export interface BitcoinNodeOptions {
  /** Address prefixes (default mainnet). */
  network?: Network;
  /** Default true. false: an old Core (before 22): getblock answers verbosity 3 as 2, `addresses` fields. */
  verbosity3?: boolean;
  /** Default true. false: getrawtransaction finds no confirmed transaction, as without txindex=1. */
  txindex?: boolean;
  /** What an input spending an output the node does not hold gets (see above). Default 'omit'. */
  unheldPrevouts?: 'omit' | 'placeholder';
  /** Default true (Core 21+). false: getrawmempool refuses its second argument, as Core before 21. */
  mempoolSequence?: boolean;
}

export interface BitcoinNodeRequest {
  method: string;
  path: string;
  /** JSON-RPC method names, for `POST /` (one per call of a batch). */
  rpc: string[];
  /** The Authorization header, if any. */
  authorization?: string;
}

export interface BitcoinNode extends RestartableNode {
  /** `http://127.0.0.1:<port>`: Esplora's API base, and Core's RPC URL. */
  readonly url: string;
  readonly requests: BitcoinNodeRequest[];
  /** Present these blocks (raw bytes or hex), the first at `firstHeight` (default 0), each the next's parent. */
  setChain(blocks: (Uint8Array | string)[], firstHeight?: number): void;
  /** Changes the switches of BitcoinNodeOptions. */
  configure(options: Omit<BitcoinNodeOptions, 'network'>): void;
  /** The next `count` requests answer `status` (default 500) with no body of use. */
  failNext(count: number, status?: number): void;
  /** The next `/block/:hash/txs/:start` page answers one transaction short. */
  truncateNextPage(): void;
  /**
   * Replaces the pool with these transactions (raw bytes or hex), in this order; those the held
   * chain mines or conflicts with are left out. mempool_sequence moves by one per transaction
   * added or removed.
   */
  setMempool(txs: (Uint8Array | string)[]): void;
  /** Adds transactions at the pool's end (as setMempool, without re-reading the rest). */
  addToMempool(txs: (Uint8Array | string)[]): void;
  /** Removes the transactions with these txids from the pool. */
  removeFromMempool(txids: string[]): void;
  /** The pool's txids, in order, and its mempool_sequence. */
  mempool(): { txids: string[]; sequence: number };
  /**
   * Calls `listener` after each request is answered (and before the next is), so a test can
   * change the node between two requests of one client, e.g. mine a block between a pool's list
   * and its reads. undefined removes it.
   */
  afterRequest(listener: ((request: BitcoinNodeRequest) => void) | undefined): void;
}

interface HeldBlock {
  height: number;
  hash: string;
  block: Block;
  txs: Transaction[];
  txids: string[];
  raw: Buffer;
}

interface Located {
  tx: Transaction;
  held: HeldBlock;
}

interface Pooled {
  tx: Transaction;
  txid: string;
  /** The outpoints its inputs spend. */
  spends: string[];
}

const PAGE = 25;
/** Core before 21's answer to getrawmempool with two arguments: the start of its help text. */
const OLD_GETRAWMEMPOOL_HELP =
  'getrawmempool ( verbose )\n\nReturns all transaction ids in memory pool as a json array of string transaction ids.\n\n' +
  'Hint: use getmempoolentry to fetch a specific transaction from the mempool.\n';
const OP_RETURN = 0x6a;
const PLACEHOLDER: SpentOutput = { script: new Uint8Array(0), value: 0n, height: 0, generated: false };

type Reply = { status: number; body: string; type: 'json' | 'text' };
const json = (value: unknown, status = 200): Reply => ({
  status,
  body: stringify(value) ?? 'null',
  type: 'json',
});
const text = (body: string, status = 200): Reply => ({ status, body, type: 'text' });

const outpointOf = (input: { hash: Uint8Array; index: number }) =>
  `${reversedHex(input.hash)}:${input.index}`;

function parsePooled(bytes: Uint8Array | string): Pooled {
  const tx = Transaction.fromBuffer(
    typeof bytes === 'string' ? Buffer.from(bytes, 'hex') : Buffer.from(bytes),
  );
  return { tx, txid: tx.getId(), spends: tx.isCoinbase() ? [] : tx.ins.map(outpointOf) };
}

function parseBlock(bytes: Uint8Array | string): { block: Block; raw: Buffer } {
  const raw = typeof bytes === 'string' ? Buffer.from(bytes, 'hex') : Buffer.from(bytes);
  return { block: Block.fromBuffer(raw), raw };
}

/** Core's difficulty: the difficulty-1 target over this block's, written to 16 significant digits. */
function difficulty(bits: number): number {
  let shift = (bits >>> 24) & 0xff;
  let value = 0x0000ffff / (bits & 0x00ffffff);
  for (; shift < 29; shift++) value *= 256;
  for (; shift > 29; shift--) value /= 256;
  return Number(value.toPrecision(16));
}

/** The expected number of hashes for a block at this target (2^256 / (target + 1)). */
function work(bits: number): bigint {
  const exponent = BigInt((bits >>> 24) & 0xff);
  const mantissa = BigInt(bits & 0x007fffff);
  const target = exponent <= 3n ? mantissa >> (8n * (3n - exponent)) : mantissa << (8n * (exponent - 3n));
  return (1n << 256n) / (target + 1n);
}

const hex8 = (n: number) => (n >>> 0).toString(16).padStart(8, '0');

export async function startBitcoinNode(options: BitcoinNodeOptions = {}): Promise<BitcoinNode> {
  const network = options.network ?? networks.bitcoin;
  const settings = {
    verbosity3: true,
    txindex: true,
    unheldPrevouts: 'omit' as 'omit' | 'placeholder',
    mempoolSequence: true,
  };
  const requests: BitcoinNodeRequest[] = [];
  let chain: HeldBlock[] = [];
  let firstHeight = 0;
  let byTxid = new Map<string, Located>();
  let byHash = new Map<string, HeldBlock>();
  let failures: { count: number; status: number } = { count: 0, status: 500 };
  let truncatePage = false;
  let afterRequest: ((request: BitcoinNodeRequest) => void) | undefined;
  /** The outpoints the held blocks spend: not in the UTXO set, and what pool transactions conflict with. */
  let spentInChain = new Set<string>();
  let pool: Pooled[] = [];
  let poolByTxid = new Map<string, Pooled>();
  /** The outpoints pool transactions spend. */
  let spentInPool = new Set<string>();
  let mempoolSequence = 0;
  /** Rendered transactions by block and answer kind: rendering a 2,500-transaction block takes half a second. */
  let rendered = new Map<string, Json[]>();
  /** Rendered transactions of every held block, newest first, by the addresses they touch. */
  let histories: Map<string, Json[]> | undefined;
  const renderOnce = (key: string, render: () => Json[]): Json[] => {
    let txs = rendered.get(key);
    if (!txs) {
      txs = render();
      rendered.set(key, txs);
    }
    return txs;
  };

  function configure(next: Omit<BitcoinNodeOptions, 'network'>): void {
    if (next.verbosity3 !== undefined) settings.verbosity3 = next.verbosity3;
    if (next.txindex !== undefined) settings.txindex = next.txindex;
    if (next.unheldPrevouts !== undefined) settings.unheldPrevouts = next.unheldPrevouts;
    if (next.mempoolSequence !== undefined) settings.mempoolSequence = next.mempoolSequence;
    rendered = new Map();
    histories = undefined;
  }
  configure(options);

  function setChain(blocks: (Uint8Array | string)[], first = 0): void {
    const held = blocks.map((bytes, i) => {
      const { block, raw } = parseBlock(bytes);
      const txs = block.transactions ?? [];
      return { height: first + i, hash: block.getId(), block, txs, txids: txs.map((tx) => tx.getId()), raw };
    });
    held.forEach((b, i) => {
      const parent = held[i - 1];
      if (parent && reversedHex(b.block.prevHash!) !== parent.hash)
        throw new Error(`block ${b.hash} does not follow ${parent.hash}`);
    });
    chain = held;
    firstHeight = first;
    rendered = new Map();
    histories = undefined;
    byHash = new Map(held.map((b) => [b.hash, b]));
    byTxid = new Map();
    spentInChain = new Set();
    for (const b of held) {
      b.txs.forEach((tx, i) => {
        byTxid.set(b.txids[i]!, { tx, held: b });
        if (!tx.isCoinbase()) for (const input of tx.ins) spentInChain.add(outpointOf(input));
      });
    }
    replacePool(pool);
  }

  const tip = (): HeldBlock | undefined => chain[chain.length - 1];
  const atHeight = (height: number): HeldBlock | undefined => chain[height - firstHeight];

  /** The outputs the transaction's inputs spend, from earlier transactions of the chain. */
  function prevoutsOf(tx: Transaction, held: HeldBlock): (SpentOutput | undefined)[] {
    if (tx.isCoinbase()) return [];
    return tx.ins.map((input) => {
      const found = byTxid.get(reversedHex(input.hash));
      const output = found && found.held.height <= held.height ? found.tx.outs[input.index] : undefined;
      if (!found || !output) return settings.unheldPrevouts === 'placeholder' ? PLACEHOLDER : undefined;
      return {
        script: output.script,
        value: output.value,
        height: found.held.height,
        generated: found.tx.isCoinbase(),
      };
    });
  }

  /** A pool transaction's spent outputs: from the held chain, else from other pool transactions. */
  function poolPrevoutsOf(tx: Transaction): (SpentOutput | undefined)[] {
    const top = tip();
    return tx.ins.map((input) => {
      const parentTxid = reversedHex(input.hash);
      const mined = byTxid.get(parentTxid);
      if (mined) {
        const output = mined.tx.outs[input.index];
        return output
          ? {
              script: output.script,
              value: output.value,
              height: mined.held.height,
              generated: mined.tx.isCoinbase(),
            }
          : undefined;
      }
      const pooled = poolByTxid.get(parentTxid);
      const output = pooled?.tx.outs[input.index];
      if (output)
        return {
          script: output.script,
          value: output.value,
          height: (top?.height ?? -1) + 1,
          generated: false,
        };
      return settings.unheldPrevouts === 'placeholder' && !pooled ? PLACEHOLDER : undefined;
    });
  }

  // -------------------------------------------------------------------------------------------
  // The pool

  /**
   * Makes `next` the pool, less what the held chain mines or conflicts with and the descendants of
   * those conflicts (as a node does on a block), and moves mempool_sequence by one per
   * transaction added or removed.
   */
  function replacePool(next: Pooled[]): void {
    const unique = new Map<string, Pooled>();
    for (const p of next) if (!unique.has(p.txid)) unique.set(p.txid, p);
    const invalid = new Set<string>();
    for (const p of unique.values()) {
      if (byTxid.has(p.txid)) continue; // mined: leaves the pool, its children stay valid
      if (p.spends.some((o) => spentInChain.has(o))) invalid.add(p.txid);
    }
    // Descendants of a conflict spend outputs that will never exist.
    for (let grew = invalid.size > 0; grew; ) {
      grew = false;
      for (const p of unique.values()) {
        if (invalid.has(p.txid)) continue;
        if (p.spends.some((o) => invalid.has(o.slice(0, 64)))) {
          invalid.add(p.txid);
          grew = true;
        }
      }
    }
    const kept = [...unique.values()].filter((p) => !invalid.has(p.txid) && !byTxid.has(p.txid));
    const keptIds = new Set(kept.map((p) => p.txid));
    for (const p of pool) if (!keptIds.has(p.txid)) mempoolSequence++;
    for (const p of kept) if (!poolByTxid.has(p.txid)) mempoolSequence++;
    pool = kept;
    poolByTxid = new Map(kept.map((p) => [p.txid, p]));
    spentInPool = new Set(kept.flatMap((p) => p.spends));
  }

  // -------------------------------------------------------------------------------------------
  // Esplora

  const statusOf = (held: HeldBlock): EsploraStatus => ({
    block_height: held.height,
    block_hash: held.hash,
    block_time: held.block.timestamp,
  });

  function medianTime(held: HeldBlock): number {
    const index = held.height - firstHeight;
    const times = chain.slice(Math.max(0, index - 10), index + 1).map((b) => b.block.timestamp);
    return times.sort((a, b) => a - b)[Math.floor(times.length / 2)]!;
  }

  function esploraBlock(held: HeldBlock): Json {
    const { block } = held;
    return {
      id: held.hash,
      height: held.height,
      version: block.version,
      timestamp: block.timestamp,
      tx_count: held.txs.length,
      size: block.byteLength(false, true),
      weight: block.weight(),
      merkle_root: reversedHex(block.merkleRoot!),
      previousblockhash: held.height === 0 ? null : reversedHex(block.prevHash!),
      mediantime: medianTime(held),
      nonce: block.nonce,
      bits: block.bits,
      difficulty: difficulty(block.bits),
    };
  }

  function esploraTxs(held: HeldBlock, startText: string): Reply {
    const start = Number(startText);
    if (!/^\d+$/.test(startText) || start % PAGE !== 0)
      return text('start index must be a multipication of 25', 400);
    if (start >= held.txs.length) return text('start index out of range', 404);
    const all = renderOnce(`esplora:${held.hash}`, () =>
      held.txs.map((tx) => esploraTransaction(tx, prevoutsOf(tx, held), statusOf(held), network)),
    );
    const page = all.slice(start, start + PAGE);
    if (truncatePage) {
      truncatePage = false;
      page.pop();
    }
    return json(page);
  }

  function addressHistory(address: string, lastSeen: string | undefined): Reply {
    if (!histories) {
      histories = new Map();
      for (const held of [...chain].reverse()) {
        const txs = renderOnce(`esplora:${held.hash}`, () =>
          held.txs.map((tx) => esploraTransaction(tx, prevoutsOf(tx, held), statusOf(held), network)),
        );
        for (const tx of [...txs].reverse()) {
          const spent = (tx.vin as Json[]).map((input) => input.prevout as Json | null);
          const paid = tx.vout as Json[];
          const touched = new Set<string>();
          for (const output of [...spent, ...paid]) {
            const a = output?.scriptpubkey_address;
            if (typeof a === 'string') touched.add(a);
          }
          for (const a of touched) histories.set(a, [...(histories.get(a) ?? []), tx]);
        }
      }
    }
    const all = histories.get(address) ?? [];
    let start = 0;
    if (lastSeen !== undefined) {
      start = all.findIndex((tx) => tx.txid === lastSeen) + 1;
      // Esplora answers a txid it does not know in this history with an empty page.
      if (start === 0) return json([]);
    }
    return json(all.slice(start, start + PAGE));
  }

  function esplora(path: string): Reply {
    const top = tip();
    if (path === '/blocks/tip/height') return top ? text(String(top.height)) : text('Block not found', 404);
    if (path === '/blocks/tip/hash') return top ? text(top.hash) : text('Block not found', 404);
    let m = /^\/block-height\/(\d+)$/.exec(path);
    if (m) {
      const held = atHeight(Number(m[1]));
      return held ? text(held.hash) : text('Block not found', 404);
    }
    m = /^\/block\/([0-9a-f]{64})(\/txids|\/txs\/(\d+)|\/raw)?$/.exec(path);
    if (m) {
      const held = byHash.get(m[1]!);
      if (!held) return text('Block not found', 404);
      if (m[2] === '/txids') return json(held.txids);
      if (m[2] === '/raw') return text(held.raw.toString('hex'));
      if (m[3] !== undefined) return esploraTxs(held, m[3]);
      return json(esploraBlock(held));
    }
    m = /^\/address\/([^/]+)\/txs\/chain(?:\/([0-9a-f]{64}))?$/.exec(path);
    if (m) return addressHistory(m[1]!, m[2]);
    // Plain JSON.stringify: the same text for strings, and quick for a pool of 100,000.
    if (path === '/mempool/txids')
      return { status: 200, body: JSON.stringify(pool.map((p) => p.txid)), type: 'json' };
    m = /^\/tx\/([0-9a-f]{64})$/.exec(path);
    const found = m ? byTxid.get(m[1]!) : undefined;
    if (found)
      return json(
        esploraTransaction(found.tx, prevoutsOf(found.tx, found.held), statusOf(found.held), network),
      );
    const pooled = m ? poolByTxid.get(m[1]!) : undefined;
    if (pooled) return json(esploraTransaction(pooled.tx, poolPrevoutsOf(pooled.tx), undefined, network));
    return text(m ? 'Transaction not found' : 'Not Found', 404);
  }

  // -------------------------------------------------------------------------------------------
  // Bitcoin Core

  const flavour = (): CoreFlavour => (settings.verbosity3 ? 'modern' : 'legacy');
  class RpcError extends Error {
    constructor(
      readonly code: number,
      message: string,
    ) {
      super(message);
    }
  }

  function chainwork(held: HeldBlock): string {
    let sum = 0n;
    for (const b of chain.slice(0, held.height - firstHeight + 1)) sum += work(b.block.bits);
    return sum.toString(16).padStart(64, '0');
  }

  function coreBlock(held: HeldBlock, verbosity: number): unknown {
    if (verbosity <= 0) return held.raw.toString('hex');
    const { block } = held;
    // Core 22+ knows each spent output from its undo data: a `fee` from verbosity 2, `prevout` at 3.
    const modern = settings.verbosity3;
    const showPrevouts = modern && verbosity >= 3;
    const tx =
      verbosity === 1
        ? held.txids
        : renderOnce(`core:${showPrevouts}:${held.hash}`, () =>
            held.txs.map((t) =>
              coreTransaction(t, {
                network,
                flavour: flavour(),
                prevouts: modern ? prevoutsOf(t, held) : undefined,
                showPrevouts,
              }),
            ),
          );
    const out: Json = {
      hash: held.hash,
      confirmations: tip()!.height - held.height + 1,
      strippedsize: block.byteLength(false, false),
      size: block.byteLength(false, true),
      weight: block.weight(),
      height: held.height,
      version: block.version,
      versionHex: hex8(block.version),
      merkleroot: reversedHex(block.merkleRoot!),
      tx,
      time: block.timestamp,
      mediantime: medianTime(held),
      nonce: block.nonce,
      bits: hex8(block.bits),
      difficulty: difficulty(block.bits),
      chainwork: chainwork(held),
      nTx: held.txs.length,
    };
    if (held.height > 0) out.previousblockhash = reversedHex(block.prevHash!);
    const next = atHeight(held.height + 1);
    if (next) out.nextblockhash = next.hash;
    return out;
  }

  function getrawtransaction(txid: unknown, verbose: unknown): unknown {
    // Core looks in its pool first, which needs no txindex; a pool transaction has no block fields.
    const pooled = typeof txid === 'string' ? poolByTxid.get(txid) : undefined;
    if (pooled)
      return verbose ? coreTransaction(pooled.tx, { network, flavour: flavour() }) : pooled.tx.toHex();
    const found = typeof txid === 'string' ? byTxid.get(txid) : undefined;
    if (!found || !settings.txindex) {
      throw new RpcError(
        -5,
        settings.txindex
          ? 'No such mempool or blockchain transaction. Use gettransaction for wallet transactions.'
          : 'No such mempool transaction. Use -txindex or provide a block hash to enable blockchain transaction queries. Use gettransaction for wallet transactions.',
      );
    }
    if (!verbose) return found.tx.toHex();
    return {
      ...coreTransaction(found.tx, { network, flavour: flavour() }),
      blockhash: found.held.hash,
      confirmations: tip()!.height - found.held.height + 1,
      time: found.held.block.timestamp,
      blocktime: found.held.block.timestamp,
    };
  }

  function getrawmempool(params: unknown[]): unknown {
    if (!settings.mempoolSequence && params.length > 1) throw new RpcError(-1, OLD_GETRAWMEMPOOL_HELP);
    const verbose = params[0] === true;
    const withSequence = params[1] === true;
    if (verbose && withSequence)
      throw new RpcError(-8, 'Verbose results cannot contain mempool sequence values.');
    if (verbose) throw new RpcError(-1, 'getrawmempool verbose is not supported by this stand-in');
    const txids = pool.map((p) => p.txid);
    return withSequence ? { txids, mempool_sequence: mempoolSequence } : txids;
  }

  /** Core's gettxout over the held chain's UTXO set and, with include_mempool, the pool. */
  function gettxout(txid: unknown, n: unknown, includeMempool: unknown = true): unknown {
    if (typeof txid !== 'string' || !/^[0-9a-f]{64}$/.test(txid))
      throw new RpcError(-8, `txid must be of length 64 (not ${String(txid).length}, for '${String(txid)}')`);
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0)
      throw new RpcError(-8, 'Invalid parameter, vout cannot be negative');
    const top = tip()!;
    const key = `${txid}:${n}`;
    const withPool = includeMempool !== false;
    if (withPool && spentInPool.has(key)) return null;
    const mined = byTxid.get(txid);
    const minedOutput = mined?.tx.outs[n];
    if (mined) {
      if (!minedOutput || spentInChain.has(key) || minedOutput.script[0] === OP_RETURN) return null;
      const confirmations = top.height - mined.held.height + 1;
      const coin = { ...minedOutput, generated: mined.tx.isCoinbase() };
      return coreTxOut(coin, { hash: top.hash, confirmations }, network, flavour());
    }
    const pooled = poolByTxid.get(txid);
    const pooledOutput = pooled?.tx.outs[n];
    if (pooled) {
      if (!withPool || !pooledOutput || pooledOutput.script[0] === OP_RETURN) return null;
      return coreTxOut(
        { ...pooledOutput, generated: false },
        { hash: top.hash, confirmations: 0 },
        network,
        flavour(),
      );
    }
    // The stand-in exists only where a pool transaction spends it, as the chain's coin it pretends to be.
    if (settings.unheldPrevouts === 'placeholder' && spentInPool.has(key))
      return coreTxOut(PLACEHOLDER, { hash: top.hash, confirmations: top.height + 1 }, network, flavour());
    return null;
  }

  function rpcMethod(method: string, params: unknown[]): unknown {
    const top = tip();
    if (!top) throw new RpcError(-28, 'Loading block index...');
    switch (method) {
      case 'getblockcount':
        return top.height;
      case 'getbestblockhash':
        return top.hash;
      case 'getblockhash': {
        const held = typeof params[0] === 'number' ? atHeight(params[0]) : undefined;
        if (!held) throw new RpcError(-8, 'Block height out of range');
        return held.hash;
      }
      case 'getblock': {
        const held = typeof params[0] === 'string' ? byHash.get(params[0]) : undefined;
        if (!held) throw new RpcError(-5, 'Block not found');
        const verbosity =
          params[1] === undefined ? 1 : params[1] === true ? 1 : params[1] === false ? 0 : Number(params[1]);
        return coreBlock(held, verbosity);
      }
      case 'getblockheader': {
        const held = typeof params[0] === 'string' ? byHash.get(params[0]) : undefined;
        if (!held) throw new RpcError(-5, 'Block not found');
        if (params[1] === false) return held.raw.subarray(0, 80).toString('hex');
        const { tx: _tx, size: _s, strippedsize: _ss, weight: _w, ...header } = coreBlock(held, 1) as Json;
        return header;
      }
      case 'getrawtransaction':
        return getrawtransaction(params[0], params[1]);
      case 'getrawmempool':
        return getrawmempool(params);
      case 'gettxout':
        return gettxout(params[0], params[1], params[2]);
      default:
        throw new RpcError(-32601, 'Method not found');
    }
  }

  function rpcCall(call: unknown): Json {
    const {
      id = null,
      method,
      params = [],
    } = (call ?? {}) as { id?: unknown; method?: unknown; params?: unknown };
    try {
      return { result: rpcMethod(String(method), Array.isArray(params) ? params : []), error: null, id };
    } catch (err) {
      if (!(err instanceof RpcError)) throw err;
      return { result: null, error: { code: err.code, message: err.message }, id };
    }
  }

  function rpc(body: unknown): Reply {
    if (Array.isArray(body)) return json(body.map(rpcCall));
    const answer = rpcCall(body);
    // Core before 28 answers a failed single JSON-RPC 1.0 call with HTTP 500 (404 for unknown methods).
    return json(answer, answer.error === null ? 200 : 500);
  }

  // -------------------------------------------------------------------------------------------
  // The server

  function answer(method: string, path: string, body: string): Reply {
    if (failures.count > 0) {
      failures = { ...failures, count: failures.count - 1 };
      return text('injected failure', failures.status);
    }
    if (method === 'GET') return esplora(path);
    if (method === 'POST' && path === '/') {
      try {
        return rpc(JSON.parse(body));
      } catch {
        return json({ result: null, error: { code: -32700, message: 'Parse error' }, id: null }, 500);
      }
    }
    return text('Not Found', 404);
  }

  function rpcNames(body: string): string[] {
    try {
      const parsed: unknown = JSON.parse(body);
      return (Array.isArray(parsed) ? parsed : [parsed]).map((c) =>
        String((c as { method?: unknown })?.method),
      );
    } catch {
      return [];
    }
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const method = req.method ?? 'GET';
      const path = new URL(req.url ?? '/', 'http://node.invalid').pathname;
      const body = Buffer.concat(chunks).toString('utf8');
      const logged: BitcoinNodeRequest = {
        method,
        path,
        rpc: method === 'POST' ? rpcNames(body) : [],
        authorization: req.headers.authorization,
      };
      requests.push(logged);
      const reply = answer(method, path, body);
      afterRequest?.(logged);
      res.writeHead(reply.status, {
        'content-type': reply.type === 'json' ? 'application/json' : 'text/plain',
      });
      res.end(reply.body);
    });
  });
  server.keepAliveTimeout = 1000;

  const { port, start, stop } = await listenOnLoopback(server);

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    setChain,
    configure,
    failNext(count, status = 500) {
      failures = { count, status };
    },
    truncateNextPage() {
      truncatePage = true;
    },
    setMempool(txs) {
      replacePool(txs.map(parsePooled));
    },
    addToMempool(txs) {
      replacePool([...pool, ...txs.map(parsePooled)]);
    },
    removeFromMempool(txids) {
      const gone = new Set(txids);
      replacePool(pool.filter((p) => !gone.has(p.txid)));
    },
    mempool() {
      return { txids: pool.map((p) => p.txid), sequence: mempoolSequence };
    },
    afterRequest(listener) {
      afterRequest = listener;
    },
    stop,
    start,
    close: stop,
  };
}
