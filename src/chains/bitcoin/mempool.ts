/**
 * A Bitcoin node's pool, read by polling and fetching only what was not seen before (docs/watching-chains.md,
 * pending lifecycle). Each poll lists the pool's txids, forgets the seen ones no longer listed once
 * they are a tenth of the pool (so memory follows its size), and reads the new ones whole: inputs with the outputs they
 * spend, and their outpoints (`spends`), which is what a replacement or double spend is told by.
 *
 * Esplora (electrs, Blockstream, mempool.space): `GET /mempool/txids`, then `GET /tx/:txid` for each
 * new txid, a few at a time; the answer carries each input's prevout.
 *
 * Bitcoin Core (JSON-RPC):
 * - `getrawmempool false true` gives the txids and `mempool_sequence` (Core 21+), which moves on
 *   every addition and removal: while it stands still, a poll is that one call. Before 21 the
 *   second argument is an error; the reader then lists with `getrawmempool false` from that poll
 *   on and diffs the full list every time.
 * - `getrawtransaction <txid> true` reads a pool transaction in every version without `txindex`
 *   (the pool is searched first). Its inputs carry no prevout (getblock verbosity 3 and
 *   getrawtransaction verbosity 2 give them only for mined transactions), so they come from the
 *   parents: a parent in the pool from a cache of the pool transactions' outputs or its own
 *   `getrawtransaction`; a confirmed parent with `gettxout <txid> <n> false`, which reads the UTXO
 *   set (no txindex, and pruned nodes too): the output is unspent on chain while the pool
 *   transaction spending it is pending. Only when both fail (the output was spent by a block, so
 *   the pool transaction is on its way out) is `getrawtransaction` of a confirmed parent tried,
 *   which needs `txindex=1`.
 * So any Core from 0.19 on works without txindex; 21+ makes an idle poll one call.
 *
 * A transaction that left the pool or was mined between the list and its read is skipped, as is
 * one whose prevouts cannot be read yet (it stays unseen and is read again next poll). A node
 * that cannot be reached or answers nonsense throws; the caller retries.
 */

import { nodeRequest } from '../node-http.js';
import type { BitcoinEndpoint, BitcoinTransaction } from './activity.js';
import {
  asArray,
  asBigint,
  createBitcoindRpc,
  isObject,
  type RpcAnswer,
  type RpcCall,
  unexpected,
} from './lookup.js';
import {
  type BitcoinSourceOptions,
  type CoreTransaction,
  coreEndpoint,
  coreOutputs,
  coreTransaction,
  esploraTransaction,
  HASH,
  mapBounded,
  outpoint,
  RPC_INVALID_ADDRESS_OR_KEY,
} from './source.js';

export interface BitcoinPoolChanges {
  /** Transactions that entered the pool since the last poll, fully read (inputs with their prevouts, spends), in the node's order. */
  entered: BitcoinTransaction[];
  /** Transactions in the node's pool now (the txid list's length). */
  size: number;
  /** Listed transactions left for the next polls by `maxNewPerPoll` (a big pool at start). */
  waiting: number;
}

export interface BitcoinMempoolReader {
  poll(): Promise<BitcoinPoolChanges>;
  /** Forgets what was seen: the next poll reads the whole pool anew. */
  reset(): void;
  /** How many txids are remembered as seen (for memory measurements). */
  tracked(): number;
}

export type BitcoinMempoolOptions = BitcoinSourceOptions & {
  /** 'bitcoind' (JSON-RPC) or Esplora (the default), as the block source. */
  api?: string;
  /** New transactions read per poll at most (default 5,000); the rest wait for later polls. */
  maxNewPerPoll?: number;
  /** Esplora `/tx` requests, or Core batches, in flight at once (default 8). */
  fetchConcurrency?: number;
  /** Core: spent outputs kept for the children of pool transactions (default 200,000; oldest out). */
  cachedOutputs?: number;
  /**
   * Seen txids gone from the pool that may wait before they are swept out (default 1,000, or a
   * tenth of the pool if more): a sweep costs a pass over the whole list.
   */
  sweepAfter?: number;
};

const MAX_NEW_PER_POLL = 5_000;
const FETCH_CONCURRENCY = 8;
const CACHED_OUTPUTS = 200_000;
/** Calls per JSON-RPC batch, as createBitcoindRpc sends them; batches go out `fetchConcurrency` at a time. */
const BATCH = 100;

const SWEEP_AFTER = 1_000;

/**
 * The txids seen (read, or mined before they could be), bounded by the pool. A poll costs one
 * lookup per listed txid: a txid is checked for its form only when new, and those that left the
 * pool are swept out once they are a tenth of it, not on every poll (bench/README.md, "Bitcoin
 * mempool": rebuilding and diffing sets of 100,000 txids each poll was most of the reader's CPU).
 */
class Seen {
  private readonly txids = new Set<string>();

  constructor(private readonly sweepAfter: number) {}

  /** Listed txids not seen yet, as of the last update. */
  unread = 0;

  get size(): number {
    return this.txids.size;
  }

  /**
   * The listed txids not seen, in the list's order, at most `max`; undefined when one of those
   * is not a txid. Forgets the seen ones that left the list once there are enough of them.
   */
  update(listed: string[], max: number): string[] | undefined {
    const fresh: string[] = [];
    let known = 0;
    for (const txid of listed) {
      if (this.txids.has(txid)) known++;
      else if (fresh.length < max) {
        if (!HASH.test(txid)) return undefined;
        fresh.push(txid);
      }
    }
    this.unread = listed.length - known;
    const departed = this.txids.size - known;
    if (departed > Math.max(this.sweepAfter, listed.length / 10)) {
      const present = new Set(listed);
      for (const txid of this.txids) if (!present.has(txid)) this.txids.delete(txid);
    }
    return fresh;
  }

  add(txid: string): void {
    this.txids.add(txid);
  }

  clear(): void {
    this.txids.clear();
    this.unread = 0;
  }
}

/** A list of strings (each checked to be a txid when first read, by Seen.update). */
function txidList(value: unknown): string[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value.every((txid) => typeof txid === 'string') ? (value as string[]) : undefined;
}

function positive(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isSafeInteger(value) && value > 0 ? value : fallback;
}

// ---------------------------------------------------------------------------------------------
// Esplora

function createEsploraMempoolReader(options: BitcoinMempoolOptions): BitcoinMempoolReader {
  const base = options.url.replace(/\/+$/, '');
  const maxNew = positive(options.maxNewPerPoll, MAX_NEW_PER_POLL);
  const concurrency = positive(options.fetchConcurrency, FETCH_CONCURRENCY);
  const seen = new Seen(options.sweepAfter ?? SWEEP_AFTER);
  const get = (path: string) =>
    nodeRequest(`${base}${path}`, { timeoutMs: options.timeoutMs, plainJson: true });

  /** The transaction, 'mined', or undefined when it cannot be read now (gone, or prevouts missing). */
  async function read(txid: string): Promise<BitcoinTransaction | 'mined' | undefined> {
    const path = `/tx/${txid}`;
    const res = await get(path);
    // Left the pool since the list; a load-balanced Esplora may also lag: read again while listed.
    if (res.status === 404) return undefined;
    const raw = res.json;
    if (res.status !== 200 || !isObject(raw)) throw unexpected(base, `${res.status} to GET ${path}`);
    if (isObject(raw.status) && raw.status.confirmed === true) return 'mined';
    // Esplora names every prevout; one it has not indexed yet is read again next poll.
    if (asArray(raw.vin).some((input) => isObject(input) && input.prevout === null && !input.is_coinbase))
      return undefined;
    const tx = esploraTransaction(raw, options.network);
    if (typeof tx === 'string') throw unexpected(base, `${tx} to GET ${path}`);
    if (tx.txid !== txid) throw unexpected(base, `transaction ${tx.txid} to GET ${path}`);
    return tx;
  }

  async function poll(): Promise<BitcoinPoolChanges> {
    const res = await get('/mempool/txids');
    const listed = txidList(res.json);
    const fresh = listed && seen.update(listed, maxNew);
    if (res.status !== 200 || !listed || !fresh)
      throw unexpected(base, `${res.status} to GET /mempool/txids`);
    const answers = await mapBounded(fresh, concurrency, read);
    const entered: BitcoinTransaction[] = [];
    answers.forEach((tx, i) => {
      if (tx === undefined) return;
      seen.add(fresh[i]!);
      // A transaction mined since the list is the block follower's.
      if (tx !== 'mined') entered.push(tx);
    });
    return { entered, size: listed.length, waiting: seen.unread - fresh.length };
  }

  return { poll, reset: () => seen.clear(), tracked: () => seen.size };
}

// ---------------------------------------------------------------------------------------------
// Bitcoin Core

/** Outputs by outpoint, the oldest dropped past `limit`. An outpoint's output never changes (the txid commits to it). */
class OutputCache {
  private readonly outputs = new Map<string, BitcoinEndpoint>();

  constructor(private readonly limit: number) {}

  get(key: string): BitcoinEndpoint | undefined {
    return this.outputs.get(key);
  }

  set(key: string, output: BitcoinEndpoint): void {
    this.outputs.set(key, output);
    if (this.outputs.size > this.limit) {
      const oldest = this.outputs.keys().next();
      if (!oldest.done) this.outputs.delete(oldest.value);
    }
  }

  addAll(txid: string, outputs: BitcoinEndpoint[]): void {
    outputs.forEach((output, n) => {
      this.set(outpoint(txid, n), output);
    });
  }
}

type RpcFailure = Extract<RpcAnswer, { error: unknown }>;

interface CoreList {
  txids: string[];
  /** Core 21+'s mempool_sequence. */
  sequence?: bigint;
}

/** "Loading block index…", "Verifying blocks…": a node starting up, not one refusing an argument. */
const RPC_IN_WARMUP = -28n;

/** The reads of Core's pool reader: pool transactions, and the outputs their inputs spend. */
function createCoreReads(options: BitcoinMempoolOptions, cache: OutputCache) {
  const rpc = createBitcoindRpc(options);
  const { network } = options;
  const concurrency = positive(options.fetchConcurrency, FETCH_CONCURRENCY);

  const fail = (answer: RpcFailure, what: string) =>
    unexpected(rpc.endpoint, `error ${answer.error.code} to ${what}: ${answer.error.message}`);

  /** The calls' answers in order, BATCH a request, `concurrency` requests at once. */
  async function batched(calls: RpcCall[]): Promise<RpcAnswer[]> {
    const chunks: RpcCall[][] = [];
    for (let start = 0; start < calls.length; start += BATCH) chunks.push(calls.slice(start, start + BATCH));
    return (await mapBounded(chunks, concurrency, (chunk) => rpc.batch(chunk))).flat();
  }

  async function call(method: string, params: unknown[]): Promise<RpcAnswer> {
    const [answer] = await rpc.batch([{ method, params }]);
    return answer!;
  }

  /** The new transactions, as Core writes them; 'gone' for one that left the pool, 'mined' for one mined since. */
  async function fetch(txids: string[]): Promise<(CoreTransaction | 'gone' | 'mined')[]> {
    const answers = await batched(
      txids.map((txid) => ({ method: 'getrawtransaction', params: [txid, true] })),
    );
    return txids.map((txid, i) => {
      const answer = answers[i]!;
      if ('error' in answer) {
        if (answer.error.code === RPC_INVALID_ADDRESS_OR_KEY) return 'gone';
        throw fail(answer, `getrawtransaction ${txid}`);
      }
      const raw = answer.result;
      // With txindex a transaction mined since the list is found in its block.
      if (isObject(raw) && raw.blockhash !== undefined) return 'mined';
      const tx = coreTransaction(raw, network);
      if (!tx || tx.txid !== txid)
        throw unexpected(rpc.endpoint, `a transaction that is not ${txid} to getrawtransaction`);
      return tx;
    });
  }

  /**
   * Reads the outputs these outpoints name into the cache: round 0 a parent listed in the pool
   * with getrawtransaction (no txindex needed), a confirmed one with gettxout … false (the UTXO
   * set); round 1 the other way for what is still missing. What neither finds stays missing.
   */
  async function readOutputs(
    missing: Map<string, { txid: string; vout: bigint }>,
    listed: Set<string>,
  ): Promise<void> {
    for (const round of [0, 1]) {
      const wanted = [...missing].filter(([key]) => !cache.get(key));
      if (wanted.length === 0) return;
      const parents = new Set<string>();
      const single: { key: string; txid: string; vout: bigint }[] = [];
      for (const [key, spend] of wanted) {
        const wholeTx = listed.has(spend.txid) === (round === 0);
        if (wholeTx) parents.add(spend.txid);
        else single.push({ key, ...spend });
      }
      const calls: RpcCall[] = [
        ...single.map(({ txid, vout }) => ({ method: 'gettxout', params: [txid, Number(vout), false] })),
        ...[...parents].map((txid) => ({ method: 'getrawtransaction', params: [txid, true] })),
      ];
      const answers = await batched(calls);
      single.forEach(({ key, txid, vout }, i) => {
        const answer = answers[i]!;
        if ('error' in answer) throw fail(answer, `gettxout ${txid} ${vout} false`);
        if (answer.result === null) return; // spent on chain, or not there
        const output = coreEndpoint(answer.result, network);
        if (!output)
          throw unexpected(rpc.endpoint, `an output without script or value to gettxout ${txid} ${vout}`);
        cache.set(key, output);
      });
      [...parents].forEach((txid, i) => {
        const answer = answers[single.length + i]!;
        if ('error' in answer && answer.error.code === RPC_INVALID_ADDRESS_OR_KEY) return;
        if ('error' in answer) throw fail(answer, `getrawtransaction ${txid}`);
        const raw = answer.result;
        const outputs = isObject(raw) && raw.txid === txid ? coreOutputs(raw, network) : undefined;
        if (!outputs)
          throw unexpected(rpc.endpoint, `a transaction that is not ${txid} to getrawtransaction`);
        cache.addAll(txid, outputs);
      });
    }
  }

  return { rpc, fail, call, fetch, readOutputs };
}

function createBitcoindMempoolReader(options: BitcoinMempoolOptions): BitcoinMempoolReader {
  const maxNew = positive(options.maxNewPerPoll, MAX_NEW_PER_POLL);
  const seen = new Seen(options.sweepAfter ?? SWEEP_AFTER);
  const cache = new OutputCache(positive(options.cachedOutputs, CACHED_OUTPUTS));
  const { rpc, fail, call, fetch, readOutputs } = createCoreReads(options, cache);
  /** The node refused getrawmempool's second argument (Core before 21). */
  let legacy = false;
  /** The last poll's sequence and size, and whether it read everything listed. */
  let last: { sequence: bigint; size: number; complete: boolean } | undefined;

  async function list(): Promise<CoreList> {
    if (!legacy) {
      const answer = await call('getrawmempool', [false, true]);
      if ('result' in answer) {
        const { result } = answer;
        const txids = isObject(result) ? txidList(result.txids) : txidList(result);
        const sequence = isObject(result) ? asBigint(result.mempool_sequence) : undefined;
        if (!txids) throw unexpected(rpc.endpoint, 'no txids to getrawmempool false true');
        return sequence === undefined ? { txids } : { txids, sequence };
      }
      // Core before 21 refuses the second argument (error -1 with its help text).
      if (answer.error.code === RPC_IN_WARMUP) throw fail(answer, 'getrawmempool false true');
      const old = await call('getrawmempool', [false]);
      if ('error' in old) throw fail(answer, 'getrawmempool false true');
      legacy = true;
      return listOf(old);
    }
    return listOf(await call('getrawmempool', [false]));
  }

  function listOf(answer: RpcAnswer): CoreList {
    if ('error' in answer) throw fail(answer, 'getrawmempool false');
    const txids = txidList(answer.result);
    if (!txids) throw unexpected(rpc.endpoint, 'no txid list to getrawmempool false');
    return { txids };
  }

  /** The transactions whose every prevout is known now, in order; the others wait for a later poll. */
  async function complete(txs: CoreTransaction[], listed: () => Set<string>): Promise<BitcoinTransaction[]> {
    // Their own outputs first: children read in the same poll spend them.
    for (const tx of txs) cache.addAll(tx.txid, tx.outputs);
    const missing = new Map<string, { txid: string; vout: bigint }>();
    for (const tx of txs) {
      for (const spend of tx.spends) {
        const key = outpoint(spend.txid, spend.vout);
        if (!spend.prevout && !cache.get(key)) missing.set(key, spend);
      }
    }
    if (missing.size > 0) await readOutputs(missing, listed());
    const done: BitcoinTransaction[] = [];
    for (const tx of txs) {
      const inputs = tx.spends.map((spend) => spend.prevout ?? cache.get(outpoint(spend.txid, spend.vout)));
      if (inputs.some((input) => !input)) continue;
      done.push({
        txid: tx.txid,
        coinbase: tx.coinbase,
        inputs: inputs as BitcoinEndpoint[],
        outputs: tx.outputs,
        spends: tx.spends.map((spend) => outpoint(spend.txid, spend.vout)),
      });
    }
    return done;
  }

  async function poll(): Promise<BitcoinPoolChanges> {
    const { txids, sequence } = await list();
    const size = txids.length;
    // Nothing added or removed since a poll that read all it listed: no diff, no reads.
    if (sequence !== undefined && last?.complete && last.sequence === sequence && last.size === size)
      return { entered: [], size, waiting: 0 };
    const fresh = seen.update(txids, maxNew);
    if (!fresh) throw unexpected(rpc.endpoint, 'a txid that is not one to getrawmempool');
    const fetched = await fetch(fresh);
    const txs: CoreTransaction[] = [];
    let handled = 0;
    fetched.forEach((tx, i) => {
      if (tx === 'mined') {
        seen.add(fresh[i]!);
        handled++;
      } else if (tx !== 'gone') txs.push(tx);
    });
    // Which parents are in the pool, asked only when prevouts are missing.
    const entered = txs.length > 0 ? await complete(txs, () => new Set(txids)) : [];
    for (const tx of entered) seen.add(tx.txid);
    handled += entered.length;
    const readAll = handled === seen.unread;
    last = sequence === undefined ? undefined : { sequence, size, complete: readAll };
    return { entered, size, waiting: seen.unread - fresh.length };
  }

  return {
    poll,
    reset() {
      seen.clear();
      last = undefined;
    },
    tracked: () => seen.size,
  };
}

/** The pool reader for a Bitcoin network's configured API: `bitcoind` (JSON-RPC) or Esplora (the default). */
export function createBitcoinMempoolReader(options: BitcoinMempoolOptions): BitcoinMempoolReader {
  return options.api === 'bitcoind'
    ? createBitcoindMempoolReader(options)
    : createEsploraMempoolReader(options);
}
