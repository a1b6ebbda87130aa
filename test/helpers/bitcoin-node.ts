/**
 * A loopback Bitcoin node of our own: a real HTTP server on 127.0.0.1 that serves real recorded
 * blocks from their raw bytes, speaking both Esplora's REST API and Bitcoin Core's JSON-RPC (on
 * `POST /`) over the same chain, with controls for tests: the chain it presents, faults, and a
 * log of the requests.
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
 * What it leaves out of the real answers: Core 23+'s `desc` in scriptPubKeys; Esplora's
 * `sigops` and the `inner_redeemscript_asm`/`inner_witnessscript_asm` of script-hash spends.
 * `chainwork` and `mediantime` are computed over the blocks it holds only.
 */
import http from 'node:http';
import { Block, type Network, networks, type Transaction } from 'bitcoinjs-lib';
import { stringify } from 'lossless-json';
import {
  type CoreFlavour,
  coreTransaction,
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

const PAGE = 25;
const PLACEHOLDER: SpentOutput = { script: new Uint8Array(0), value: 0n, height: 0, generated: false };

type Reply = { status: number; body: string; type: 'json' | 'text' };
const json = (value: unknown, status = 200): Reply => ({
  status,
  body: stringify(value) ?? 'null',
  type: 'json',
});
const text = (body: string, status = 200): Reply => ({ status, body, type: 'text' });

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
  const settings = { verbosity3: true, txindex: true, unheldPrevouts: 'omit' as 'omit' | 'placeholder' };
  const requests: BitcoinNodeRequest[] = [];
  let chain: HeldBlock[] = [];
  let firstHeight = 0;
  let byTxid = new Map<string, Located>();
  let byHash = new Map<string, HeldBlock>();
  let failures: { count: number; status: number } = { count: 0, status: 500 };
  let truncatePage = false;
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
    for (const b of held) {
      b.txs.forEach((tx, i) => {
        byTxid.set(b.txids[i]!, { tx, held: b });
      });
    }
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
    m = /^\/tx\/([0-9a-f]{64})$/.exec(path);
    const found = m ? byTxid.get(m[1]!) : undefined;
    if (found)
      return json(
        esploraTransaction(found.tx, prevoutsOf(found.tx, found.held), statusOf(found.held), network),
      );
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
      requests.push({
        method,
        path,
        rpc: method === 'POST' ? rpcNames(body) : [],
        authorization: req.headers.authorization,
      });
      const reply = answer(method, path, body);
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
    stop,
    start,
    close: stop,
  };
}
