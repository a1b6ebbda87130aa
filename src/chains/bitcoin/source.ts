/**
 * The Bitcoin family's block source (chains/source.ts) from either back end the lookups use,
 * Esplora REST (the default) or Bitcoin Core JSON-RPC (docs/watching-chains.md, Bitcoin), giving
 * the same ChainBlock: every transaction in block order, each input with the output it spends and
 * each output with its value and address. A block is read whole or not at all: a short page, an
 * input without its spent output, an answer for another height or hash, a 5xx, a timeout or an
 * unreachable node throws, and the follower retries. Nothing is ever skipped.
 */
import type { Network } from 'bitcoinjs-lib';
import { nodeRequest } from '../node-http.js';
import type { BlockSource, ChainBlock, ChainTip } from '../source.js';
import {
  addressOfScript,
  type BitcoinActivity,
  type BitcoinEndpoint,
  type BitcoinTransaction,
} from './activity.js';
import {
  addressOf,
  asArray,
  asBigint,
  asString,
  type BitcoindRpc,
  btcToSatoshi,
  createBitcoindRpc,
  isObject,
  type Json,
  type RpcAnswer,
  unexpected,
} from './lookup.js';

export interface BitcoinSourceOptions {
  /** Esplora: the API base (https://blockstream.info/api). Core: the RPC URL, credentials allowed. */
  url: string;
  /** The bitcoinjs-lib network whose prefixes name addresses the node does not name. */
  network: Network;
  timeoutMs?: number;
}

export type BitcoinBlockSource = BlockSource<BitcoinActivity>;

export const HASH = /^[0-9a-f]{64}$/;
const SCRIPT_HEX = /^(?:[0-9a-f]{2})*$/;
/** The parent named by the genesis block's header. */
const NO_PARENT = '0'.repeat(64);

/**
 * Runs `task` over the items, at most `limit` at a time; the results keep the items' order. After
 * a failure no further item starts, and the first error is thrown once the running ones have
 * settled, so a failed block leaves no requests of its own behind.
 */
export async function mapBounded<T, R>(
  items: T[],
  limit: number,
  task: (item: T) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (next < items.length && !failure) {
      const index = next++;
      try {
        results[index] = await task(items[index]!);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure) throw failure.error;
  return results;
}

/** An endpoint from an output script (hex) and value: the node's address, else one decoded here. */
function endpoint(
  scriptHex: string | undefined,
  value: bigint | undefined,
  nodeAddress: string | null | undefined,
  network: Network,
): BitcoinEndpoint | undefined {
  if (scriptHex === undefined || !SCRIPT_HEX.test(scriptHex) || value === undefined || value < 0n)
    return undefined;
  return { address: nodeAddress || addressOfScript(Buffer.from(scriptHex, 'hex'), network), value };
}

/** An outpoint as `BitcoinTransaction.spends` writes it. */
export const outpoint = (txid: string, vout: bigint | number) => `${txid}:${vout}`;

function checkHeight(height: number): void {
  if (!Number.isSafeInteger(height) || height < 0) throw new RangeError(`Not a block height: ${height}`);
}

// ---------------------------------------------------------------------------------------------
// Esplora

/** Transactions per `/block/:hash/txs/:start` page: Esplora's fixed page size. */
const ESPLORA_PAGE = 25;
/** Pages of one block read at once, so a 2,500-transaction block is 25 rounds, not 100. */
const ESPLORA_PAGE_CONCURRENCY = 4;

/** Esplora's amounts and indexes are whole numbers, read with JSON.parse: exact below 2^53, refused above. */
function satoshi(value: unknown): bigint | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? BigInt(value) : undefined;
  return asBigint(value);
}

function esploraEndpoint(output: unknown, network: Network): BitcoinEndpoint | undefined {
  if (!isObject(output)) return undefined;
  return endpoint(
    asString(output.scriptpubkey),
    satoshi(output.value),
    asString(output.scriptpubkey_address),
    network,
  );
}

/** One Esplora transaction (the `/tx/:txid` schema), or a description of what does not fit. */
export function esploraTransaction(tx: unknown, network: Network): BitcoinTransaction | string {
  if (!isObject(tx)) return 'a transaction that is not an object';
  const txid = asString(tx.txid);
  if (!txid || !HASH.test(txid)) return 'a transaction without a txid';
  const vin = asArray(tx.vin);
  const coinbase = isObject(vin[0]) && vin[0].is_coinbase === true;
  const inputs: BitcoinEndpoint[] = [];
  const spends: string[] = [];
  if (!coinbase) {
    for (const input of vin) {
      if (!isObject(input)) return `an input of ${txid} that is not an object`;
      const parent = asString(input.txid);
      const vout = satoshi(input.vout);
      if (!parent || !HASH.test(parent) || vout === undefined)
        return `an input of ${txid} without its outpoint`;
      const spent = esploraEndpoint(input.prevout, network);
      if (!spent) return `an input of ${txid} without its prevout`;
      inputs.push(spent);
      spends.push(outpoint(parent, vout));
    }
  }
  const outputs: BitcoinEndpoint[] = [];
  for (const output of asArray(tx.vout)) {
    const paid = esploraEndpoint(output, network);
    if (!paid) return `an output of ${txid} without script or value`;
    outputs.push(paid);
  }
  if (vin.length === 0 || outputs.length === 0) return `${txid} without inputs or outputs`;
  return { txid, coinbase, inputs, outputs, spends };
}

/**
 * Esplora's REST API (Blockstream, mempool.space, a self-hosted electrs):
 * - tip: `GET /blocks/tip/height`, then `GET /block-height/:h` for its hash (a consistent pair
 *   even when a block arrives in between);
 * - hashAt: `GET /block-height/:h` (404: not that tall);
 * - block: its hash, `GET /block/:hash` (height, previousblockhash, tx_count), then every
 *   `GET /block/:hash/txs/:start` page, a few at a time; inputs carry their `prevout`.
 */
export function createEsploraSource(options: BitcoinSourceOptions): BitcoinBlockSource {
  const base = options.url.replace(/\/+$/, '');
  const get = (path: string) => nodeRequest(`${base}${path}`, { timeoutMs: options.timeoutMs });

  async function hashAt(height: number): Promise<string | undefined> {
    checkHeight(height);
    const res = await get(`/block-height/${height}`);
    if (res.status === 404) return undefined;
    const hash = res.text.trim();
    if (res.status !== 200 || !HASH.test(hash))
      throw unexpected(base, `${res.status} to GET /block-height/${height}`);
    return hash;
  }

  async function tip(): Promise<ChainTip> {
    const res = await get('/blocks/tip/height');
    const text = res.text.trim();
    if (res.status !== 200 || !/^\d+$/.test(text))
      throw unexpected(base, `${res.status} to GET /blocks/tip/height`);
    const height = Number(text);
    const hash = await hashAt(height);
    if (!hash) throw unexpected(base, `no block at its own tip height ${height}`);
    return { height, hash };
  }

  /** The block's parent and transaction count, checked against the hash and height asked for. */
  async function header(hash: string, height: number): Promise<{ parentHash: string; txCount: number }> {
    const res = await get(`/block/${hash}`);
    const block = res.json;
    if (res.status !== 200 || !isObject(block)) throw unexpected(base, `${res.status} to GET /block/${hash}`);
    const parent = block.previousblockhash;
    const parentHash = parent === null && height === 0 ? NO_PARENT : asString(parent);
    const txCount = asBigint(block.tx_count);
    if (asString(block.id) !== hash || asBigint(block.height) !== BigInt(height) || !parentHash || !txCount)
      throw unexpected(base, `a block ${hash} that is not the block at height ${height}`);
    return { parentHash, txCount: Number(txCount) };
  }

  async function page(hash: string, start: number, expected: number): Promise<BitcoinTransaction[]> {
    const path = `/block/${hash}/txs/${start}`;
    const res = await nodeRequest(`${base}${path}`, { timeoutMs: options.timeoutMs, plainJson: true });
    if (res.status !== 200 || !Array.isArray(res.json))
      throw unexpected(base, `${res.status} to GET ${path}`);
    if (res.json.length !== expected)
      throw unexpected(base, `${res.json.length} transactions to GET ${path}, not ${expected}`);
    return res.json.map((tx) => {
      const parsed = esploraTransaction(tx, options.network);
      if (typeof parsed === 'string') throw unexpected(base, `${parsed} to GET ${path}`);
      return parsed;
    });
  }

  async function block(height: number): Promise<ChainBlock<BitcoinActivity> | undefined> {
    const hash = await hashAt(height);
    if (!hash) return undefined;
    const { parentHash, txCount } = await header(hash, height);
    const starts: number[] = [];
    for (let start = 0; start < txCount; start += ESPLORA_PAGE) starts.push(start);
    const pages = await mapBounded(starts, ESPLORA_PAGE_CONCURRENCY, (start) =>
      page(hash, start, Math.min(ESPLORA_PAGE, txCount - start)),
    );
    return { height, hash, parentHash, activity: pages.flat() };
  }

  return { tip, block, hashAt };
}

// ---------------------------------------------------------------------------------------------
// Bitcoin Core

/** getblockhash: "Block height out of range". */
const RPC_INVALID_PARAMETER = -8n;
/** getrawtransaction: "No such mempool or blockchain transaction" (without txindex: "… Use -txindex …"). */
export const RPC_INVALID_ADDRESS_OR_KEY = -5n;

/** An output in Core's shape (`value` in BTC, `scriptPubKey` with `hex` and maybe an address): vout, gettxout. */
export function coreEndpoint(output: unknown, network: Network): BitcoinEndpoint | undefined {
  if (!isObject(output) || !isObject(output.scriptPubKey)) return undefined;
  return endpoint(
    asString(output.scriptPubKey.hex),
    btcToSatoshi(output.value),
    addressOf(output.scriptPubKey),
    network,
  );
}

/** An outpoint an input spends, with the spent output when the node gave it (verbosity 3). */
interface Spend {
  txid: string;
  vout: bigint;
  prevout?: BitcoinEndpoint;
}

export interface CoreTransaction {
  txid: string;
  coinbase: boolean;
  spends: Spend[];
  outputs: BitcoinEndpoint[];
}

function coreSpend(input: unknown, network: Network): Spend | undefined {
  if (!isObject(input)) return undefined;
  const txid = asString(input.txid);
  const vout = asBigint(input.vout);
  if (!txid || !HASH.test(txid) || vout === undefined) return undefined;
  if (input.prevout === undefined) return { txid, vout };
  const prevout = coreEndpoint(input.prevout, network);
  return prevout ? { txid, vout, prevout } : undefined;
}

export function coreOutputs(tx: Json, network: Network): BitcoinEndpoint[] | undefined {
  const outputs: BitcoinEndpoint[] = [];
  for (const output of asArray(tx.vout)) {
    const paid = coreEndpoint(output, network);
    if (!paid) return undefined;
    outputs.push(paid);
  }
  return outputs.length > 0 ? outputs : undefined;
}

/** A transaction in Core's shape (getblock ≥ 2, getrawtransaction verbose), or undefined when it does not fit. */
export function coreTransaction(tx: unknown, network: Network): CoreTransaction | undefined {
  if (!isObject(tx)) return undefined;
  const txid = asString(tx.txid);
  const vin = asArray(tx.vin);
  const outputs = coreOutputs(tx, network);
  if (!txid || !HASH.test(txid) || vin.length === 0 || !outputs) return undefined;
  const coinbase = isObject(vin[0]) && vin[0].coinbase !== undefined;
  const spends: Spend[] = [];
  if (!coinbase) {
    for (const input of vin) {
      const spend = coreSpend(input, network);
      if (!spend) return undefined;
      spends.push(spend);
    }
  }
  return { txid, coinbase, spends, outputs };
}

/** Adds a transaction's outputs to a map by outpoint. */
function indexOutputs(into: Map<string, BitcoinEndpoint>, txid: string, outputs: BitcoinEndpoint[]): void {
  for (const [n, output] of outputs.entries()) into.set(outpoint(txid, BigInt(n)), output);
}

/**
 * Bitcoin Core's JSON-RPC:
 * - tip: `getblockcount`, then `getblockhash` of it (a consistent pair);
 * - hashAt: `getblockhash h` (error -8, out of range: not that tall);
 * - block: `getblock <hash> 3`, whose inputs carry their `prevout` (Core ≥ 23). An older node
 *   answers as for verbosity 2, without prevouts: those are then read from the block itself when
 *   it spends its own outputs, else with batched `getrawtransaction <txid> true`, which for a
 *   confirmed transaction needs the node to run with `txindex=1`.
 */
export function createBitcoindSource(options: BitcoinSourceOptions): BitcoinBlockSource {
  const rpc: BitcoindRpc = createBitcoindRpc(options);
  const { network } = options;

  async function call(method: string, params: unknown[]): Promise<RpcAnswer> {
    const [answer] = await rpc.batch([{ method, params }]);
    return answer!;
  }

  function resultOf(answer: RpcAnswer, what: string): unknown {
    if ('result' in answer) return answer.result;
    throw unexpected(rpc.endpoint, `error ${answer.error.code} to ${what}: ${answer.error.message}`);
  }

  async function hashAt(height: number): Promise<string | undefined> {
    checkHeight(height);
    const answer = await call('getblockhash', [height]);
    if ('error' in answer && answer.error.code === RPC_INVALID_PARAMETER) return undefined;
    const hash = asString(resultOf(answer, `getblockhash ${height}`));
    if (!hash || !HASH.test(hash)) throw unexpected(rpc.endpoint, `no block hash to getblockhash ${height}`);
    return hash;
  }

  async function tip(): Promise<ChainTip> {
    const count = asBigint(resultOf(await call('getblockcount', []), 'getblockcount'));
    if (count === undefined || count < 0n) throw unexpected(rpc.endpoint, 'no height to getblockcount');
    const height = Number(count);
    const hash = await hashAt(height);
    if (!hash) throw unexpected(rpc.endpoint, `no block at its own tip height ${height}`);
    return { height, hash };
  }

  /** The outputs of the transactions named, by outpoint, read with getrawtransaction. */
  async function fetchOutputs(
    txids: string[],
    spentBy: Map<string, string>,
  ): Promise<Map<string, BitcoinEndpoint>> {
    const answers = await rpc.batch(
      txids.map((txid) => ({ method: 'getrawtransaction', params: [txid, true] })),
    );
    const found = new Map<string, BitcoinEndpoint>();
    txids.forEach((txid, i) => {
      const answer = answers[i]!;
      if ('error' in answer && answer.error.code === RPC_INVALID_ADDRESS_OR_KEY) {
        throw unexpected(
          rpc.endpoint,
          `no transaction ${txid}, which ${spentBy.get(txid)} spends, to getrawtransaction (${answer.error.message}). ` +
            'A node without getblock verbosity 3 (Bitcoin Core < 23) needs txindex=1 for the spent outputs',
        );
      }
      const tx = resultOf(answer, `getrawtransaction ${txid}`);
      const outputs = isObject(tx) && asString(tx.txid) === txid ? coreOutputs(tx, network) : undefined;
      if (!outputs) throw unexpected(rpc.endpoint, `a transaction that is not ${txid} to getrawtransaction`);
      indexOutputs(found, txid, outputs);
    });
    return found;
  }

  /**
   * The spent outputs an old node left out: from the block's own transactions where it spends
   * its own outputs, the others with one round of getrawtransaction (cached within the block).
   */
  async function missingPrevouts(txs: CoreTransaction[]): Promise<Map<string, BitcoinEndpoint>> {
    const known = new Map<string, BitcoinEndpoint>();
    for (const tx of txs) indexOutputs(known, tx.txid, tx.outputs);
    const spentBy = new Map<string, string>();
    for (const tx of txs) {
      for (const spend of tx.spends) {
        if (!spend.prevout && !known.has(outpoint(spend.txid, spend.vout))) spentBy.set(spend.txid, tx.txid);
      }
    }
    if (spentBy.size === 0) return known;
    for (const [key, output] of await fetchOutputs([...spentBy.keys()], spentBy)) known.set(key, output);
    return known;
  }

  async function resolve(txs: CoreTransaction[]): Promise<BitcoinActivity> {
    const complete = txs.every((tx) => tx.spends.every((spend) => spend.prevout));
    const outputs = complete ? new Map<string, BitcoinEndpoint>() : await missingPrevouts(txs);
    return txs.map(({ txid, coinbase, spends, outputs: paid }) => ({
      txid,
      coinbase,
      inputs: spends.map((spend) => {
        const spent = spend.prevout ?? outputs.get(outpoint(spend.txid, spend.vout));
        if (!spent)
          throw unexpected(
            rpc.endpoint,
            `no output ${outpoint(spend.txid, spend.vout)}, which ${txid} spends`,
          );
        return spent;
      }),
      outputs: paid,
      spends: spends.map((spend) => outpoint(spend.txid, spend.vout)),
    }));
  }

  async function block(height: number): Promise<ChainBlock<BitcoinActivity> | undefined> {
    const hash = await hashAt(height);
    if (!hash) return undefined;
    const raw = resultOf(await call('getblock', [hash, 3]), `getblock ${hash} 3`);
    if (!isObject(raw)) throw unexpected(rpc.endpoint, `no block to getblock ${hash} 3`);
    const parentHash = height === 0 ? NO_PARENT : asString(raw.previousblockhash);
    const list = asArray(raw.tx);
    const nTx = asBigint(raw.nTx);
    if (
      asString(raw.hash) !== hash ||
      asBigint(raw.height) !== BigInt(height) ||
      !parentHash ||
      list.length === 0
    )
      throw unexpected(rpc.endpoint, `a block ${hash} that is not the block at height ${height}`);
    if (nTx !== undefined && nTx !== BigInt(list.length))
      throw unexpected(rpc.endpoint, `${list.length} of the ${nTx} transactions of block ${hash}`);
    const txs = list.map((tx) => coreTransaction(tx, network));
    if (txs.some((tx) => tx === undefined))
      throw unexpected(rpc.endpoint, `a transaction that does not parse in block ${hash}`);
    return { height, hash, parentHash, activity: await resolve(txs as CoreTransaction[]) };
  }

  return { tip, block, hashAt };
}

/** The block source for a Bitcoin network's configured API: `bitcoind` (JSON-RPC) or Esplora (the default). */
export function createBitcoinSource(options: BitcoinSourceOptions & { api?: string }): BitcoinBlockSource {
  const { api, ...rest } = options;
  return api === 'bitcoind' ? createBitcoindSource(rest) : createEsploraSource(rest);
}
