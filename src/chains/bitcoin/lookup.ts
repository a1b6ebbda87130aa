/**
 * Bitcoin transaction lookup (docs/transaction-lookup.md has the mapping), from Esplora REST (the
 * default: Blockstream, mempool.space, a self-hosted electrs) or bitcoind JSON-RPC, alike. Beyond
 * the table: a coinbase's fee is 0, as Esplora reports it; a fee whose spent outputs cannot be read
 * is null; no P2PKH address is derived from a bare pubkey (it never held the coins; Esplora and
 * bitcoind ≥ 22 name none); the note is the first OP_RETURN output's pushes, concatenated. `final`:
 * 6 confirmations and every field resolved (a block gone between two reads, a reorganisation in
 * progress, leaves the view incomplete and not final).
 */
import { script as btcScript, opcodes } from 'bitcoinjs-lib';
import { UpstreamUnavailableError, ValidationError } from '../../errors.js';
import { type NodeResponse, nodeRequest } from '../node-http.js';
import { emptyView, type TransactionLookup, type TransactionView } from '../transaction-view.js';

/** Confirmations after which a transaction is final, so its view may be cached for good. */
export const FINAL_CONFIRMATIONS = 6n;

const TXID = /^[0-9a-fA-F]{64}$/;

/** A Bitcoin transaction id: 64 hex characters (either case; looked up in lower case). */
export function isBitcoinTxId(id: string): boolean {
  return TXID.test(id);
}

/** The CAIP-2 chain id of a Bitcoin chain: `bip122:` and the first 32 hex of its genesis hash. */
export function bip122ChainId(genesisHash: string): string {
  return `bip122:${genesisHash.slice(0, 32)}`;
}

const SATOSHI_PER_BTC = 100_000_000n;
const BTC_DECIMAL = /^(\d+)(?:\.(\d{1,8}))?$/;

/**
 * A bitcoind amount in satoshi, exactly. The node writes BTC with 8 decimals (50.00000000), which
 * parseExactJson keeps as its decimal text; a re-serialised whole amount (10) arrives as a bigint.
 * The conversion is string arithmetic, never a float. undefined for anything else (negative,
 * exponent, more than 8 decimals).
 */
export function btcToSatoshi(value: unknown): bigint | undefined {
  if (typeof value === 'bigint') return value >= 0n ? value * SATOSHI_PER_BTC : undefined;
  if (typeof value !== 'string') return undefined;
  const match = BTC_DECIMAL.exec(value);
  if (!match) return undefined;
  const [, whole = '0', fraction = ''] = match;
  return BigInt(whole) * SATOSHI_PER_BTC + BigInt(fraction.padEnd(8, '0'));
}

/**
 * The OP_RETURN payload of an output script, base64: every push after the OP_RETURN, concatenated
 * (small-number opcodes stand for the byte they push: OP_0 → nothing, OP_1…OP_16 → 1…16,
 * OP_1NEGATE → 0x81; other opcodes carry no data and are skipped). undefined when the script is
 * not an OP_RETURN script, cannot be parsed, or pushes nothing.
 */
export function opReturnPayload(scriptHex: string): string | undefined {
  if (!/^6a(?:[0-9a-fA-F]{2})*$/.test(scriptHex)) return undefined;
  const chunks = btcScript.decompile(Buffer.from(scriptHex, 'hex'));
  if (!chunks || chunks[0] !== opcodes.OP_RETURN) return undefined;
  const parts: Uint8Array[] = [];
  for (const chunk of chunks.slice(1)) {
    if (typeof chunk !== 'number') parts.push(chunk);
    else if (chunk >= opcodes.OP_1 && chunk <= opcodes.OP_16)
      parts.push(Uint8Array.of(chunk - opcodes.OP_1 + 1));
    else if (chunk === opcodes.OP_1NEGATE) parts.push(Uint8Array.of(0x81));
  }
  const payload = Buffer.concat(parts);
  return payload.length > 0 ? payload.toString('base64') : undefined;
}

/** The note: the payload of the first OP_RETURN output, or null. */
function noteOf(scriptHexes: (string | undefined)[]): string | null {
  for (const hex of scriptHexes) {
    if (hex?.toLowerCase().startsWith('6a')) return opReturnPayload(hex) ?? null;
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Reading the node's JSON (integers arrive as bigint, other numbers as their decimal text).

export type Json = Record<string, unknown>;
export const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
export const asArray = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
export const asString = (value: unknown): string | undefined =>
  typeof value === 'string' ? value : undefined;
export const asBigint = (value: unknown): bigint | undefined =>
  typeof value === 'bigint' ? value : undefined;

/** The node's answer did not fit: an UpstreamUnavailableError naming the node's host. */
export function unexpected(url: string, what: string): UpstreamUnavailableError {
  return new UpstreamUnavailableError(`The node at ${new URL(url).host} answered ${what}`);
}

function sum(values: (bigint | undefined)[]): bigint | undefined {
  let total = 0n;
  for (const v of values) {
    if (v === undefined) return undefined;
    total += v;
  }
  return total;
}

/** A value read once and kept; a failed read is forgotten so the next lookup tries again. */
function once<T>(read: () => Promise<T>): () => Promise<T> {
  let cached: Promise<T> | undefined;
  return () => {
    cached ??= read().catch((err: unknown) => {
      cached = undefined;
      throw err;
    });
    return cached;
  };
}

function checkId(txId: string): string {
  if (!isBitcoinTxId(txId)) {
    throw new ValidationError('Not a Bitcoin transaction id', [
      { parameter: 'txId', detail: 'must be 64 hex characters' },
    ]);
  }
  return txId.toLowerCase();
}

function finish(
  view: TransactionView,
  confirmations: bigint | undefined,
): { view: TransactionView; final: boolean } {
  const complete =
    view.confirmedRound !== null &&
    view.roundTime !== null &&
    view.intraRoundOffset !== null &&
    view.fee !== null &&
    view.genesisHash !== null;
  return { view, final: complete && confirmations !== undefined && confirmations >= FINAL_CONFIRMATIONS };
}

// ---------------------------------------------------------------------------------------------
// Esplora

export interface EsploraLookupOptions {
  /** The API base, e.g. https://blockstream.info/api or https://mempool.space/api. */
  url: string;
  timeoutMs?: number;
}

/**
 * Lookup through Esplora's REST API: `GET /tx/{txid}` (each input's `prevout`, and `status`; 404
 * → unknown), `GET /block/{hash}/txids` (the offset: a block gone, or no longer listing it, leaves
 * it null and the view not final), `GET /blocks/tip/height` (confirmations: tip − height + 1) and
 * `GET /block-height/0` (the genesis hash). Txids and tip are read only for a confirmed
 * transaction, in parallel with each other and with the genesis hash (first lookup only).
 */
export function createEsploraLookup(options: EsploraLookupOptions): TransactionLookup {
  const base = options.url.replace(/\/+$/, '');
  const get = (path: string): Promise<NodeResponse> =>
    nodeRequest(`${base}${path}`, { timeoutMs: options.timeoutMs });

  /** A plain-text answer (Esplora writes heights and hashes as text, not JSON). */
  const text = async (path: string, pattern: RegExp): Promise<string> => {
    const res = await get(path);
    const body = res.text.trim();
    if (res.status !== 200 || !pattern.test(body)) throw unexpected(base, `${res.status} to GET ${path}`);
    return body;
  };

  const genesisHash = once(async () => (await text('/block-height/0', /^[0-9a-f]{64}$/)).toLowerCase());

  async function blockPosition(
    txid: string,
    blockHash: string,
  ): Promise<{ offset: bigint | null; tip: bigint }> {
    const [txids, tip] = await Promise.all([
      get(`/block/${blockHash}/txids`),
      text('/blocks/tip/height', /^\d+$/).then(BigInt),
    ]);
    if (txids.status === 404) return { offset: null, tip };
    if (txids.status !== 200 || !Array.isArray(txids.json))
      throw unexpected(base, `${txids.status} to GET /block/${blockHash}/txids`);
    const index = txids.json.indexOf(txid);
    return { offset: index >= 0 ? BigInt(index) : null, tip };
  }

  return async (txId) => {
    const id = checkId(txId);
    const res = await get(`/tx/${id}`);
    if (res.status === 404) return undefined;
    const tx = res.json;
    if (res.status !== 200 || !isObject(tx) || asString(tx.txid) !== id)
      throw unexpected(base, `${res.status} to GET /tx/${id}`);

    const view = emptyView(id);
    const vin = asArray(tx.vin).filter(isObject);
    const vout = asArray(tx.vout).filter(isObject);
    const coinbase = vin[0]?.is_coinbase === true;
    view.txType = coinbase ? 'coinbase' : 'transfer';
    if (!coinbase) {
      const first = vin[0]?.prevout;
      view.sender = (isObject(first) && asString(first.scriptpubkey_address)) || null;
      const inputs = sum(vin.map((i) => (isObject(i.prevout) ? asBigint(i.prevout.value) : undefined)));
      const outputs = sum(vout.map((o) => asBigint(o.value)));
      view.fee = inputs !== undefined && outputs !== undefined ? inputs - outputs : null;
    } else {
      view.fee = 0n;
    }
    view.note = noteOf(vout.map((o) => asString(o.scriptpubkey)));

    const status = isObject(tx.status) ? tx.status : {};
    const height = asBigint(status.block_height);
    const blockHash = asString(status.block_hash);
    const confirmed = status.confirmed === true && height !== undefined && blockHash !== undefined;
    const [genesis, position] = await Promise.all([
      genesisHash(),
      confirmed ? blockPosition(id, blockHash) : undefined,
    ]);
    view.genesisHash = genesis;
    view.genesisId = bip122ChainId(genesis);
    if (!confirmed || !position) return finish(view, undefined);
    view.confirmedRound = height;
    view.roundTime = asBigint(status.block_time) ?? null;
    view.intraRoundOffset = position.offset;
    return finish(view, position.tip - height + 1n);
  };
}

// ---------------------------------------------------------------------------------------------
// bitcoind

export interface BitcoindLookupOptions {
  /** The node's RPC URL, e.g. http://127.0.0.1:8332; user:password in the URL is used as auth. */
  url: string;
  timeoutMs?: number;
  /** HTTP Basic credentials (rpcuser/rpcpassword or the cookie's __cookie__:…); overrides the URL's. */
  auth?: { username: string; password: string };
}

export interface RpcCall {
  method: string;
  params: unknown[];
}
export type RpcAnswer = { result: unknown } | { error: { code: bigint | undefined; message: string } };

/** "No such mempool or blockchain transaction" / "Block not found". */
const RPC_INVALID_ADDRESS_OR_KEY = -5n;
/** Calls per JSON-RPC batch, so that a transaction with many inputs does not make one huge request. */
const BATCH_SIZE = 100;

export interface BitcoindRpc {
  /** The node's URL without credentials, for messages. */
  endpoint: string;
  /** The calls' answers in call order, sent as JSON-RPC batches of at most BATCH_SIZE calls. */
  batch(calls: RpcCall[]): Promise<RpcAnswer[]>;
}

/**
 * A JSON-RPC client for bitcoind. Every request is a batch, even of one call: bitcoind answers a
 * batch with HTTP 200 and per-call errors in every version, whereas a single failing call gets
 * HTTP 500 (before Core 28, or with JSON-RPC 1.0), which cannot be told from a node failure.
 * Credentials in the URL (`http://user:pass@host:8332`) become Basic auth unless `auth` is given.
 */
export function createBitcoindRpc(options: BitcoindLookupOptions): BitcoindRpc {
  const url = new URL(options.url);
  let auth = options.auth;
  if (!auth && (url.username || url.password)) {
    auth = { username: decodeURIComponent(url.username), password: decodeURIComponent(url.password) };
  }
  url.username = '';
  url.password = '';
  const endpoint = url.toString();
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (auth) {
    headers.authorization = `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}`;
  }

  async function batch(calls: RpcCall[]): Promise<RpcAnswer[]> {
    const answers: RpcAnswer[] = [];
    for (let start = 0; start < calls.length; start += BATCH_SIZE) {
      const chunk = calls.slice(start, start + BATCH_SIZE);
      const body = JSON.stringify(chunk.map((c, i) => ({ jsonrpc: '1.0', id: i, ...c })));
      const res = await nodeRequest(endpoint, {
        method: 'POST',
        headers,
        body,
        timeoutMs: options.timeoutMs,
      });
      if (res.status === 401 || res.status === 403)
        throw unexpected(endpoint, `${res.status}: check the RPC credentials`);
      if (res.status !== 200 || !Array.isArray(res.json))
        throw unexpected(endpoint, `${res.status} without a JSON-RPC batch reply`);
      const byId = new Map<bigint | undefined, Json>();
      for (const item of res.json) if (isObject(item)) byId.set(asBigint(item.id), item);
      chunk.forEach((call, i) => {
        const item = byId.get(BigInt(i));
        if (!item) throw unexpected(endpoint, `no reply to ${call.method}`);
        if (item.error !== null && item.error !== undefined) {
          const error = isObject(item.error) ? item.error : {};
          answers.push({
            error: { code: asBigint(error.code), message: asString(error.message) ?? String(item.error) },
          });
        } else answers.push({ result: item.result });
      });
    }
    return answers;
  }

  return { endpoint, batch };
}

/**
 * Lookup through bitcoind's JSON-RPC (confirmed transactions need `txindex=1`), each request a
 * batch (createBitcoindRpc): `getrawtransaction txid true` (-5 → unknown; its `confirmations`),
 * `getblock blockhash 1` (height, time and txids in one call; -5, a reorganisation in progress,
 * leaves height and offset null, the view not final), `getrawtransaction` of each distinct
 * transaction the inputs spend (fee and sender; one not found leaves them null) and
 * `getblockhash 0` (the genesis hash, read once).
 */
export function createBitcoindLookup(options: BitcoindLookupOptions): TransactionLookup {
  const { endpoint, batch } = createBitcoindRpc(options);

  /** The result, or undefined for error -5 (not found); any other error is the node's failure. */
  function resultOf(answer: RpcAnswer | undefined, call: string): unknown {
    if (answer && 'result' in answer) return answer.result;
    if (answer?.error.code === RPC_INVALID_ADDRESS_OR_KEY) return undefined;
    throw unexpected(endpoint, `an error to ${call}: ${answer?.error.message ?? 'no answer'}`);
  }

  const genesisHash = once(async () => {
    const [answer] = await batch([{ method: 'getblockhash', params: [0] }]);
    const hash = asString(resultOf(answer, 'getblockhash'));
    if (!hash || !/^[0-9a-f]{64}$/.test(hash))
      throw unexpected(endpoint, 'no genesis hash to getblockhash 0');
    return hash;
  });

  return async (txId) => {
    const id = checkId(txId);
    const [first] = await batch([{ method: 'getrawtransaction', params: [id, true] }]);
    const tx = resultOf(first, 'getrawtransaction');
    if (tx === undefined) return undefined;
    if (!isObject(tx) || asString(tx.txid) !== id)
      throw unexpected(endpoint, 'getrawtransaction unexpectedly');

    const view = emptyView(id);
    const vin = asArray(tx.vin).filter(isObject);
    const vout = asArray(tx.vout).filter(isObject);
    const coinbase = vin[0]?.coinbase !== undefined;
    view.txType = coinbase ? 'coinbase' : 'transfer';
    view.note = noteOf(
      vout.map((o) => (isObject(o.scriptPubKey) ? asString(o.scriptPubKey.hex) : undefined)),
    );

    const blockHash = asString(tx.blockhash);
    const prevIds = coinbase ? [] : [...new Set(vin.map((i) => asString(i.txid) ?? ''))];
    const calls: RpcCall[] = prevIds.map((prev) => ({ method: 'getrawtransaction', params: [prev, true] }));
    if (blockHash) calls.push({ method: 'getblock', params: [blockHash, 1] });
    const [genesis, answers] = await Promise.all([genesisHash(), calls.length ? batch(calls) : []]);
    view.genesisHash = genesis;
    view.genesisId = bip122ChainId(genesis);

    if (coinbase) view.fee = 0n;
    else {
      const prevs = new Map<string, Json>();
      prevIds.forEach((prev, i) => {
        const found = resultOf(answers[i], 'getrawtransaction');
        if (isObject(found)) prevs.set(prev, found);
      });
      const spent = vin.map((input) => {
        const prev = prevs.get(asString(input.txid) ?? '');
        const n = asBigint(input.vout);
        return prev && n !== undefined
          ? asArray(prev.vout)
              .filter(isObject)
              .find((o) => asBigint(o.n) === n)
          : undefined;
      });
      const inputs = sum(spent.map((o) => (o ? btcToSatoshi(o.value) : undefined)));
      const outputs = sum(vout.map((o) => btcToSatoshi(o.value)));
      if (outputs === undefined)
        throw unexpected(endpoint, 'an output amount that is not BTC with 8 decimals');
      view.fee = inputs !== undefined ? inputs - outputs : null;
      view.sender = spent[0] ? addressOf(spent[0].scriptPubKey) : null;
    }

    if (!blockHash) return finish(view, undefined);
    view.roundTime = asBigint(tx.blocktime) ?? null;
    const block = resultOf(answers[prevIds.length], 'getblock');
    if (isObject(block)) {
      view.confirmedRound = asBigint(block.height) ?? null;
      view.roundTime ??= asBigint(block.time) ?? null;
      const index = asArray(block.tx).indexOf(id);
      view.intraRoundOffset = index >= 0 ? BigInt(index) : null;
    }
    return finish(view, asBigint(tx.confirmations));
  };
}

/**
 * The address bitcoind gives an output script: `address` (Core ≥ 22), or the single entry of
 * `addresses` (older releases). Older releases also list a P2PKH address for a bare pubkey and
 * one per key of a bare multisig: those are not addresses the output pays to, so they are skipped.
 */
export function addressOf(scriptPubKey: unknown): string | null {
  if (!isObject(scriptPubKey)) return null;
  const address = asString(scriptPubKey.address);
  if (address) return address;
  const type = asString(scriptPubKey.type);
  const addresses = asArray(scriptPubKey.addresses);
  if (type === 'pubkey' || type === 'multisig' || addresses.length !== 1) return null;
  return asString(addresses[0]) ?? null;
}

/** The lookup for a Bitcoin network's configured API: `bitcoind` (JSON-RPC) or Esplora (the default). */
export function createBitcoinLookup(options: {
  api?: string;
  url: string;
  timeoutMs?: number;
}): TransactionLookup {
  const { api, ...rest } = options;
  return api === 'bitcoind' ? createBitcoindLookup(rest) : createEsploraLookup(rest);
}
