/**
 * The Algorand family's block source (chains/source.ts): height = round, hash and parentHash in
 * algod's unpadded base32, computed alike from either API (blocks.ts), so they compare equal. The
 * endpoints of algod (the default) and the indexer are in docs/watching-chains.md (Algorand); the
 * indexer's tip is `/health`, a hash alone `?header-only=true`. A round is read whole or throws
 * (a 5xx, a timeout, a body that does not decode or is another round), and the follower retries.
 * The genesis is checked first and on every block: a node on another network throws naming both.
 */
import { LedgerhookError, UpstreamUnavailableError } from '../../errors.js';
import { type NodeResponse, nodeRequest } from '../node-http.js';
import type { BlockSource, ChainBlock, ChainTip } from '../source.js';
import type { AlgorandActivity } from './activity.js';
import {
  type AlgorandBlock,
  type AlgorandHeader,
  blockFromAlgod,
  blockFromIndexer,
  MalformedBlock,
} from './blocks.js';

export interface AlgorandGenesis {
  genesisId?: string;
  /** Base64, as `/v2/transactions/params` writes it. */
  genesisHash?: string;
}

export interface AlgorandSourceOptions extends AlgorandGenesis {
  /** algod or indexer base URL; an API token may be given as the URL's user or password part. */
  url: string;
  /** Default 'algod'. */
  api?: 'algod' | 'indexer';
  /** `X-Algo-API-Token` (algod) / `X-Indexer-API-Token` (indexer); overrides one in the URL. */
  token?: string;
  /** Per request, default 10 s. The long poll waits longer: algod answers it within a minute. */
  timeoutMs?: number;
}

export interface AlgorandBlockSource extends BlockSource<AlgorandActivity> {
  /**
   * algod only: resolves with the node's last round once a round after `round` exists, or when
   * the node's own wait (about a minute) runs out. Rejects when `signal` aborts or the node fails.
   */
  waitForBlockAfter?(round: number, signal?: AbortSignal): Promise<number>;
}

/** The node is on another network than the one configured. */
export class AlgorandGenesisMismatchError extends LedgerhookError {
  constructor(host: string, expected: AlgorandGenesis, actual: Required<AlgorandGenesis>) {
    super(
      `The Algorand node at ${host} is on genesis ${actual.genesisId} (${actual.genesisHash}), ` +
        `not the configured ${expected.genesisId ?? actual.genesisId} (${expected.genesisHash ?? actual.genesisHash})`,
    );
  }
}

/** algod's long poll ends within a minute; the request may take that long and some. */
const LONG_POLL_TIMEOUT_MS = 75_000;

interface Endpoint {
  base: string;
  host: string;
  headers: Record<string, string>;
}

/** The base URL without credentials, and the API token it or the options carry. */
export function endpoint(options: AlgorandSourceOptions, header: string): Endpoint {
  const url = new URL(options.url);
  const fromUrl = decodeURIComponent(url.password || url.username);
  url.username = '';
  url.password = '';
  const token = options.token ?? fromUrl;
  return {
    base: url.toString().replace(/\/+$/, ''),
    host: url.host,
    headers: token ? { [header]: token } : {},
  };
}

function checkRound(round: number): void {
  if (!Number.isSafeInteger(round) || round < 0) throw new RangeError(`Not an Algorand round: ${round}`);
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function unexpected(what: string, host: string, detail: string): UpstreamUnavailableError {
  return new UpstreamUnavailableError(`The Algorand ${what} at ${host} ${detail}`);
}

/** A bigint field of a JSON answer as a round number, or undefined. */
function roundOf(body: unknown, key: string): number | undefined {
  const value = isObject(body) ? body[key] : undefined;
  return typeof value === 'bigint' && value >= 0n && value <= BigInt(Number.MAX_SAFE_INTEGER)
    ? Number(value)
    : undefined;
}

/**
 * The genesis check shared by both APIs: the node's genesis is read once (retried after a node
 * failure), and a mismatch is remembered so that every later call throws it too.
 */
function genesisGuard(
  host: string,
  expected: AlgorandGenesis,
  read: () => Promise<Required<AlgorandGenesis>>,
) {
  let checked: Promise<void> | undefined;
  const wanted = expected.genesisId !== undefined || expected.genesisHash !== undefined;

  function compare(actual: Required<AlgorandGenesis>): void {
    const idOk = expected.genesisId === undefined || expected.genesisId === actual.genesisId;
    const hashOk = expected.genesisHash === undefined || expected.genesisHash === actual.genesisHash;
    if (!idOk || !hashOk) throw new AlgorandGenesisMismatchError(host, expected, actual);
  }

  return {
    /** Before the first answer: the node's own genesis. */
    async ensure(): Promise<void> {
      if (!wanted) return;
      checked ??= read().then(compare, (err) => {
        checked = undefined;
        throw err;
      });
      return checked;
    },
    /** Every header read: a node switched to another network mid-way is caught too. */
    check(header: AlgorandHeader): void {
      if (wanted) compare(header);
    },
  };
}

function toChainBlock(block: AlgorandBlock): ChainBlock<AlgorandActivity> {
  return { height: block.round, hash: block.hash, parentHash: block.parentHash, activity: block.activity };
}

// ---------------------------------------------------------------------------------------------
// algod

export function createAlgodSource(options: AlgorandSourceOptions): AlgorandBlockSource {
  const { base, host, headers } = endpoint(options, 'X-Algo-API-Token');
  const get = (path: string, extra: { binary?: boolean; signal?: AbortSignal; timeoutMs?: number } = {}) =>
    nodeRequest(`${base}${path}`, { headers, timeoutMs: options.timeoutMs, ...extra });
  const fail = (res: NodeResponse, path: string) =>
    unexpected('node', host, `answered ${res.status} to GET ${path}`);

  async function readGenesis(): Promise<Required<AlgorandGenesis>> {
    const path = '/v2/transactions/params';
    const res = await get(path);
    const body = res.json;
    if (res.status !== 200 || !isObject(body)) throw fail(res, path);
    const { 'genesis-id': genesisId, 'genesis-hash': genesisHash } = body;
    if (typeof genesisId !== 'string' || typeof genesisHash !== 'string')
      throw unexpected('node', host, `answered GET ${path} without its genesis`);
    return { genesisId, genesisHash };
  }
  const genesis = genesisGuard(host, options, readGenesis);

  async function lastRound(): Promise<number> {
    const res = await get('/v2/status');
    const round = roundOf(res.json, 'last-round');
    if (res.status !== 200 || round === undefined) throw fail(res, '/v2/status');
    return round;
  }

  async function hashAt(round: number): Promise<string | undefined> {
    checkRound(round);
    await genesis.ensure();
    const path = `/v2/blocks/${round}/hash`;
    const res = await get(path);
    if (res.status === 404) return undefined;
    const hash = isObject(res.json) ? res.json.blockHash : undefined;
    if (res.status !== 200 || typeof hash !== 'string' || !/^[A-Z2-7]{52}$/.test(hash)) throw fail(res, path);
    return hash;
  }

  async function tip(): Promise<ChainTip> {
    await genesis.ensure();
    const height = await lastRound();
    const hash = await hashAt(height);
    if (!hash) throw unexpected('node', host, `has no block at its own last round ${height}`);
    return { height, hash };
  }

  async function block(round: number): Promise<ChainBlock<AlgorandActivity> | undefined> {
    checkRound(round);
    await genesis.ensure();
    const path = `/v2/blocks/${round}?format=msgpack`;
    const res = await get(path, { binary: true });
    if (res.status === 404) return undefined;
    if (res.status !== 200 || !res.bytes) throw fail(res, path);
    let decoded: AlgorandBlock;
    try {
      decoded = blockFromAlgod(res.bytes);
    } catch (err) {
      if (!(err instanceof MalformedBlock)) throw err;
      throw unexpected('node', host, `answered GET ${path} with ${err.message}`);
    }
    if (decoded.round !== round)
      throw unexpected('node', host, `answered round ${decoded.round} to GET ${path}`);
    genesis.check(decoded);
    return toChainBlock(decoded);
  }

  async function waitForBlockAfter(round: number, signal?: AbortSignal): Promise<number> {
    checkRound(round);
    await genesis.ensure();
    const path = `/v2/status/wait-for-block-after/${round}`;
    const res = await get(path, {
      signal,
      timeoutMs: Math.max(LONG_POLL_TIMEOUT_MS, options.timeoutMs ?? 0),
    });
    const last = roundOf(res.json, 'last-round');
    if (res.status !== 200 || last === undefined) throw fail(res, path);
    return last;
  }

  return {
    final: true,
    tip,
    block,
    hashAt,
    waitForBlockAfter,
    watchHeads: (onHead) => watchRounds(lastRound, waitForBlockAfter, onHead),
  };
}

/** Between failed long polls, doubling up to the longest: the follower's polling is the floor. */
const LONG_POLL_RETRY_MS = 1_000;
const LONG_POLL_RETRY_MAX_MS = 30_000;

/**
 * algod's long poll as announcements: asks for the block after the last round seen and calls
 * `onHead` as soon as the node answers with a later one, so a new round is processed within
 * milliseconds rather than at the next poll. A failed wait calls `onHead` too, so that the
 * follower looks now and shows the failure in /readyz, then waits longer each time before asking
 * again. Returns a function that aborts the wait at once.
 */
function watchRounds(
  lastRound: () => Promise<number>,
  waitForBlockAfter: (round: number, signal?: AbortSignal) => Promise<number>,
  onHead: () => void,
): () => void {
  const stop = new AbortController();
  void (async () => {
    let seen: number | undefined;
    let retryMs = LONG_POLL_RETRY_MS;
    while (!stop.signal.aborted) {
      try {
        if (seen === undefined) {
          // Rounds made while the wait was down were announced by nobody: look once now.
          seen = await lastRound();
          onHead();
        }
        const last = await waitForBlockAfter(seen, stop.signal);
        retryMs = LONG_POLL_RETRY_MS;
        if (last > seen) {
          seen = last;
          onHead();
        }
      } catch {
        if (stop.signal.aborted) return;
        seen = undefined;
        onHead();
        await new Promise((resolve) => setTimeout(resolve, retryMs).unref());
        retryMs = Math.min(LONG_POLL_RETRY_MAX_MS, retryMs * 2);
      }
    }
  })();
  return () => stop.abort();
}

// ---------------------------------------------------------------------------------------------
// indexer

export function createIndexerSource(options: AlgorandSourceOptions): AlgorandBlockSource {
  const { base, host, headers } = endpoint(options, 'X-Indexer-API-Token');
  const get = (path: string) => nodeRequest(`${base}${path}`, { headers, timeoutMs: options.timeoutMs });

  /** A round's block (only its header with `headerOnly`), or undefined beyond the indexer's tip. */
  async function read(round: number, headerOnly: boolean): Promise<AlgorandBlock | undefined> {
    checkRound(round);
    const path = `/v2/blocks/${round}${headerOnly ? '?header-only=true' : ''}`;
    const res = await get(path);
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw unexpected('indexer', host, `answered ${res.status} to GET ${path}`);
    let decoded: AlgorandBlock;
    try {
      decoded = blockFromIndexer(res.json);
    } catch (err) {
      if (!(err instanceof MalformedBlock)) throw err;
      throw unexpected(
        'indexer',
        host,
        `answered GET ${path} with a block that does not parse: ${err.message}`,
      );
    }
    if (decoded.round !== round)
      throw unexpected('indexer', host, `answered round ${decoded.round} to GET ${path}`);
    genesis.check(decoded);
    return decoded;
  }

  async function lastRound(): Promise<number> {
    const res = await get('/health');
    const round = roundOf(res.json, 'round');
    if (res.status !== 200 || round === undefined)
      throw unexpected('indexer', host, `answered ${res.status} to GET /health`);
    return round;
  }

  async function readGenesis(): Promise<Required<AlgorandGenesis>> {
    const round = await lastRound();
    // Reading the header compares its genesis already; the comparison below says the same.
    const header = await read(round, true);
    if (!header) throw unexpected('indexer', host, `has no block at its own round ${round}`);
    return header;
  }
  const genesis = genesisGuard(host, options, readGenesis);

  async function hashAt(round: number): Promise<string | undefined> {
    await genesis.ensure();
    return (await read(round, true))?.hash;
  }

  async function tip(): Promise<ChainTip> {
    await genesis.ensure();
    const height = await lastRound();
    const hash = await hashAt(height);
    if (!hash) throw unexpected('indexer', host, `has no block at its own round ${height}`);
    return { height, hash };
  }

  async function block(round: number): Promise<ChainBlock<AlgorandActivity> | undefined> {
    await genesis.ensure();
    const decoded = await read(round, false);
    return decoded && toChainBlock(decoded);
  }

  return { final: true, tip, block, hashAt };
}

/** The block source for an Algorand network's configured API: the indexer, or algod (the default). */
export function createAlgorandSource(options: AlgorandSourceOptions): AlgorandBlockSource {
  return options.api === 'indexer' ? createIndexerSource(options) : createAlgodSource(options);
}

// ---------------------------------------------------------------------------------------------
// ASA decimals

export interface AssetInfoCache {
  /**
   * The ASA's `decimals`, read once per asset (a failed read is retried next time); null when
   * the node does not know the asset (algod forgets a destroyed one), as EVM tokens whose
   * decimals cannot be read: the amount then stays in base units.
   */
  decimals(assetId: string): Promise<number | null>;
}

/**
 * ASA parameters from `/v2/assets/{id}`: algod answers `{index, params}`, the indexer
 * `{asset: {index, params}}` (asked with `include-all`, so a since destroyed asset is found).
 */
export function createAssetInfoCache(
  options: Omit<AlgorandSourceOptions, keyof AlgorandGenesis>,
): AssetInfoCache {
  const indexer = options.api === 'indexer';
  const { base, host, headers } = endpoint(options, indexer ? 'X-Indexer-API-Token' : 'X-Algo-API-Token');
  const cache = new Map<string, Promise<number | null>>();

  async function read(assetId: string): Promise<number | null> {
    const path = `/v2/assets/${assetId}${indexer ? '?include-all=true' : ''}`;
    const res = await nodeRequest(`${base}${path}`, { headers, timeoutMs: options.timeoutMs });
    if (res.status === 404) return null;
    if (res.status !== 200)
      throw unexpected(indexer ? 'indexer' : 'node', host, `answered ${res.status} to GET ${path}`);
    const asset = isObject(res.json) && indexer ? res.json.asset : res.json;
    const params = isObject(asset) ? asset.params : undefined;
    const decimals = isObject(params) ? (params.decimals ?? 0n) : undefined;
    if (typeof decimals !== 'bigint' || decimals < 0n || decimals > 19n)
      throw unexpected(
        indexer ? 'indexer' : 'node',
        host,
        `answered GET ${path} without the asset's decimals`,
      );
    return Number(decimals);
  }

  return {
    decimals(assetId) {
      if (!/^\d+$/.test(assetId)) return Promise.reject(new RangeError(`Not an asset id: ${assetId}`));
      let pending = cache.get(assetId);
      if (!pending) {
        pending = read(assetId);
        cache.set(assetId, pending);
        pending.catch(() => cache.delete(assetId));
      }
      return pending;
    },
  };
}
