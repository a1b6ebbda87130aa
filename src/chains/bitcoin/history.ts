/**
 * History of watched addresses on a Bitcoin network, for a backfill. Through Esplora, each
 * address's own confirmed history (`/address/:a/txs/chain[/:last_seen_txid]`, newest first, 25 a
 * page), which costs requests per address rather than per block; through Bitcoin Core, which
 * indexes no addresses, or for more addresses than that pays for, the range's blocks read whole
 * with the live follower's own source. Either way a transaction arrives whole (every input's spent
 * output), so the follower's matcher makes the same notification of it.
 */
import type { Network } from 'bitcoinjs-lib';
import type { Throttle } from '../../shared/throttle.js';
import { scanBlocks } from '../history-scan.js';
import { nodeRequest } from '../node-http.js';
import type { ChainBlock, HistoryScan, HistorySource, WatchedAddresses } from '../source.js';
import { addressesOf, type BitcoinActivity, type BitcoinTransaction } from './activity.js';
import { asBigint, asString, createBitcoindRpc, isObject, unexpected } from './lookup.js';
import { type BitcoinBlockSource, createBitcoinSource, esploraTransaction, mapBounded } from './source.js';

/** Esplora's fixed page of an address's confirmed transactions. */
const CHAIN_PAGE = 25;
/** Above this many watched addresses, reading the range's blocks costs less than their histories. */
const ADDRESS_HISTORY_MAX = 1_000;
/** Addresses read at once. */
const IN_FLIGHT = 4;
/** Watched addresses read from the database at a time. */
const ADDRESS_PAGE = 200;

export interface BitcoinHistoryOptions {
  url: string;
  /** 'bitcoind' (JSON-RPC) or Esplora (the default), as the live source. */
  api?: string;
  network: Network;
  throttle: Throttle;
  chunk: number;
  timeoutMs?: number;
}

interface Found {
  height: number;
  hash: string;
  tx: BitcoinTransaction;
}

export function bitcoinHistory(options: BitcoinHistoryOptions): HistorySource<BitcoinActivity> {
  const { throttle } = options;
  const core = options.api === 'bitcoind';
  const blocks: BitcoinBlockSource = createBitcoinSource(options);
  const base = options.url.replace(/\/+$/, '');
  const rpc = core ? createBitcoindRpc(options) : undefined;
  /** The node as messages name it (without the RPC URL's credentials). */
  const where = rpc?.endpoint ?? base;

  async function get(path: string) {
    await throttle.take();
    return nodeRequest(`${base}${path}`, { timeoutMs: options.timeoutMs, plainJson: true });
  }

  /** The address's confirmed transactions in [from, to], paging back from its newest. */
  async function addressHistory(address: string, from: number, to: number): Promise<Found[]> {
    const found: Found[] = [];
    let lastSeen: string | undefined;
    for (;;) {
      const path = `/address/${address}/txs/chain${lastSeen ? `/${lastSeen}` : ''}`;
      const res = await get(path);
      if (res.status !== 200 || !Array.isArray(res.json))
        throw unexpected(base, `${res.status} to GET ${path}`);
      let older = false;
      for (const raw of res.json) {
        const status = isObject(raw) && isObject(raw.status) ? raw.status : undefined;
        // Parsed with JSON.parse (plainJson): a height is a plain number.
        const height = status?.block_height;
        const hash = asString(status?.block_hash);
        if (
          status?.confirmed !== true ||
          typeof height !== 'number' ||
          !Number.isSafeInteger(height) ||
          !hash
        )
          throw unexpected(base, `an unconfirmed or blockless transaction to GET ${path}`);
        if (height < from) {
          older = true;
          break;
        }
        if (height > to) continue;
        const tx = esploraTransaction(raw, options.network);
        if (typeof tx === 'string') throw unexpected(base, `${tx} to GET ${path}`);
        found.push({ height, hash, tx });
      }
      if (older || res.json.length < CHAIN_PAGE) return found;
      const last = res.json[res.json.length - 1];
      lastSeen = isObject(last) ? asString(last.txid) : undefined;
      if (!lastSeen) throw unexpected(base, `a page without txids to GET ${path}`);
    }
  }

  /** The hash of the best chain's block at a height, to see a history answer is still on it. */
  async function hashAt(height: number): Promise<string | undefined> {
    await throttle.take();
    return blocks.hashAt(height);
  }

  async function byAddressHistory(
    from: number,
    to: number,
    watched: WatchedAddresses,
  ): Promise<HistoryScan<BitcoinActivity>> {
    const byHeight = new Map<number, { hash: string; txs: Map<string, BitcoinTransaction> }>();
    const touched: string[] = [];
    for await (const page of watched.pages(ADDRESS_PAGE)) {
      const histories = await mapBounded(page, IN_FLIGHT, (a) => addressHistory(a, from, to));
      histories.forEach((history, i) => {
        if (history.length > 0) touched.push(page[i]!);
        for (const { height, hash, tx } of history) {
          const block = byHeight.get(height) ?? { hash, txs: new Map() };
          if (block.hash !== hash)
            throw unexpected(
              base,
              `two blocks at ${height} (${block.hash}, ${hash}): the chain changed while reading`,
            );
          // A transaction between two watched addresses is in both histories: once is enough.
          block.txs.set(tx.txid, tx);
          byHeight.set(height, block);
        }
      });
    }
    const heights = [...byHeight.keys()].sort((a, b) => a - b);
    const result: ChainBlock<BitcoinActivity>[] = [];
    for (const height of heights) {
      const { hash, txs } = byHeight.get(height)!;
      // The dedupe key holds the block hash: a history read off a since-replaced block must not
      // be notified as if it were the follower's.
      if ((await hashAt(height)) !== hash)
        throw unexpected(base, `block ${hash} is no longer at ${height}: the chain changed while reading`);
      // Unlinked: a history names a transaction's block, not its parent, and nothing here needs it.
      result.push({ height, hash, parentHash: '', activity: [...txs.values()] });
    }
    return { blocks: result, watched: touched };
  }

  async function timeOf(height: number): Promise<number | undefined> {
    const hash = await hashAt(height);
    if (!hash) return undefined;
    if (rpc) {
      await throttle.take();
      const [answer] = await rpc.batch([{ method: 'getblockheader', params: [hash, true] }]);
      const header = answer && 'result' in answer ? answer.result : undefined;
      const time = isObject(header) ? asBigint(header.time) : undefined;
      if (time === undefined) throw unexpected(rpc.endpoint, `no time to getblockheader ${hash}`);
      return Number(time);
    }
    const res = await get(`/block/${hash}`);
    const time = isObject(res.json) ? res.json.timestamp : undefined;
    if (res.status !== 200 || typeof time !== 'number')
      throw unexpected(base, `${res.status} to GET /block/${hash}`);
    return time;
  }

  const rate = `at most ${throttle.perSecond || 'unlimited'} requests/s`;
  return {
    chunk: options.chunk,
    describe: core
      ? `every block of the range through Bitcoin Core's getblock (no address index), ${rate.replace('requests', 'blocks')}`
      : `each watched address's confirmed history through Esplora (/address/:address/txs/chain, 25 a page, ` +
        `from its newest transaction back to the range); above ${ADDRESS_HISTORY_MAX} addresses every block ` +
        `of the range instead; ${rate} (a block read counts once)`,
    async tip() {
      await throttle.take();
      return (await blocks.tip()).height;
    },
    timeOf,
    scan(from, to, watched) {
      return core || watched.count > ADDRESS_HISTORY_MAX
        ? scanBlocks({ source: blocks, throttle, addressesOf, where }, from, to, watched)
        : byAddressHistory(from, to, watched);
    },
  };
}
