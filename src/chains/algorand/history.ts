/**
 * History of watched addresses on an Algorand network, for a backfill. With an indexer, each
 * address's transactions in the range (`/v2/accounts/{address}/transactions?min-round&max-round`,
 * paged with `next`): the indexer answers a match in an inner transaction with its top-level one,
 * inner transactions included, which is what a round's block holds, so the follower's matcher
 * makes the same notifications of it. The round's hash (for the dedupe key) is one header read per
 * round with matches. Without an indexer (algod alone indexes no addresses), or for very many
 * addresses, every round of the range is read as the follower reads it.
 */

import { UpstreamUnavailableError } from '../../errors.js';
import type { Throttle } from '../../shared/throttle.js';
import { scanBlocks } from '../history-scan.js';
import { nodeRequest } from '../node-http.js';
import type { ChainBlock, HistoryScan, HistorySource, WatchedAddresses } from '../source.js';
import { type AlgorandActivity, type AlgorandTopTransaction, movedChanges } from './activity.js';
import { blockFromAlgod, blockFromIndexer, MalformedBlock, topTransactionFromIndexer } from './blocks.js';
import { type AlgorandGenesis, createAlgodSource, createIndexerSource, endpoint } from './source.js';

/** The indexer's largest page. */
const PAGE_LIMIT = 1_000;
/** Above this many watched addresses, reading the range's rounds costs less than their histories. */
const ACCOUNT_HISTORY_MAX = 1_000;
/** Addresses asked about at once. */
const IN_FLIGHT = 4;
/** Watched addresses read from the database at a time. */
const ADDRESS_PAGE = 200;

export interface AlgorandHistoryOptions extends AlgorandGenesis {
  /** The indexer's base URL; undefined: only algod, read round by round. */
  indexerUrl?: string;
  /** algod's base URL, for the round-by-round scan without an indexer. */
  algodUrl: string;
  throttle: Throttle;
  chunk: number;
  timeoutMs?: number;
}

const addressesOf = (tx: AlgorandTopTransaction) => movedChanges(tx).map((c) => c.address);

export function algorandHistory(options: AlgorandHistoryOptions): HistorySource<AlgorandActivity> {
  const { throttle, indexerUrl } = options;
  const genesis = { genesisId: options.genesisId, genesisHash: options.genesisHash };
  const url = indexerUrl ?? options.algodUrl;
  const api = indexerUrl ? 'indexer' : 'algod';
  const source = indexerUrl
    ? createIndexerSource({ url, api, ...genesis, timeoutMs: options.timeoutMs })
    : createAlgodSource({ url, api, ...genesis, timeoutMs: options.timeoutMs });
  const { base, host, headers } = endpoint({ url }, indexerUrl ? 'X-Indexer-API-Token' : 'X-Algo-API-Token');
  const fail = (what: string) => new UpstreamUnavailableError(`The Algorand ${api} at ${host} ${what}`);

  async function get(path: string, binary = false) {
    await throttle.take();
    return nodeRequest(`${base}${path}`, { headers, timeoutMs: options.timeoutMs, binary });
  }

  /** The address's top-level transactions confirmed in [from, to], with their rounds. */
  async function accountHistory(address: string, from: number, to: number) {
    const found: { round: number; tx: AlgorandTopTransaction }[] = [];
    let next: string | undefined;
    for (;;) {
      const query = new URLSearchParams({
        'min-round': String(from),
        'max-round': String(to),
        limit: String(PAGE_LIMIT),
      });
      if (next) query.set('next', next);
      const path = `/v2/accounts/${address}/transactions?${query}`;
      const res = await get(path);
      const body = res.json as { transactions?: unknown; 'next-token'?: unknown } | undefined;
      if (res.status !== 200 || !body || !Array.isArray(body.transactions))
        throw fail(`answered ${res.status} to GET ${path}`);
      for (const raw of body.transactions) {
        const round = Number((raw as Record<string, unknown>)?.['confirmed-round']);
        if (!Number.isSafeInteger(round) || round < from || round > to)
          throw fail(`answered GET ${path} with a transaction outside the rounds asked for`);
        try {
          found.push({ round, tx: topTransactionFromIndexer(raw) });
        } catch (err) {
          if (!(err instanceof MalformedBlock)) throw err;
          throw fail(`answered GET ${path} with a transaction that does not parse: ${err.message}`);
        }
      }
      const token = body['next-token'];
      // The indexer gives a next-token with every non-empty page: an empty one ends the history.
      if (body.transactions.length === 0 || typeof token !== 'string' || token === '') return found;
      next = token;
    }
  }

  async function byAccounts(
    from: number,
    to: number,
    watched: WatchedAddresses,
  ): Promise<HistoryScan<AlgorandActivity>> {
    const byRound = new Map<number, Map<string, AlgorandTopTransaction>>();
    const touched: string[] = [];
    for await (const page of watched.pages(ADDRESS_PAGE)) {
      let nextIndex = 0;
      const histories = new Array<{ round: number; tx: AlgorandTopTransaction }[]>(page.length);
      const worker = async () => {
        while (nextIndex < page.length) {
          const i = nextIndex++;
          histories[i] = await accountHistory(page[i]!, from, to);
        }
      };
      await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, page.length) }, worker));
      histories.forEach((history, i) => {
        if (history.length > 0) touched.push(page[i]!);
        for (const { round, tx } of history) {
          const txs = byRound.get(round) ?? new Map<string, AlgorandTopTransaction>();
          // A transaction between two watched addresses is in both histories: once is enough.
          txs.set(tx.id, tx);
          byRound.set(round, txs);
        }
      });
    }
    const blocks: ChainBlock<AlgorandActivity>[] = [];
    for (const round of [...byRound.keys()].sort((a, b) => a - b)) {
      await throttle.take();
      // Rounds are final on Algorand: the header read gives the hash the follower keyed it by
      // (and checks the indexer's genesis).
      const hash = await source.hashAt(round);
      if (!hash) throw fail(`has no round ${round}, which its own history names`);
      // Unlinked: a history names a transaction's round, not its parent, and nothing here needs it.
      blocks.push({ height: round, hash, parentHash: '', activity: [...byRound.get(round)!.values()] });
    }
    return { blocks, watched: touched };
  }

  const rate = `at most ${throttle.perSecond || 'unlimited'} requests/s`;
  return {
    chunk: options.chunk,
    describe: indexerUrl
      ? `each watched address's transactions through the indexer (/v2/accounts/{address}/transactions with ` +
        `min-round and max-round) and one block header per round with matches; above ${ACCOUNT_HISTORY_MAX} ` +
        `addresses every round of the range instead; ${rate}`
      : `every round of the range through algod (no indexer configured, and algod indexes no addresses), ${rate.replace('requests', 'rounds')}`,
    async tip() {
      await throttle.take();
      return (await source.tip()).height;
    },
    async timeOf(round) {
      const path = indexerUrl ? `/v2/blocks/${round}?header-only=true` : `/v2/blocks/${round}?format=msgpack`;
      const res = await get(path, !indexerUrl);
      if (res.status === 404) return undefined;
      if (res.status !== 200) throw fail(`answered ${res.status} to GET ${path}`);
      try {
        return (indexerUrl ? blockFromIndexer(res.json) : blockFromAlgod(res.bytes!)).timestamp;
      } catch (err) {
        if (!(err instanceof MalformedBlock)) throw err;
        throw fail(`answered GET ${path} with a block that does not parse: ${err.message}`);
      }
    },
    scan(from, to, watched) {
      return indexerUrl && watched.count <= ACCOUNT_HISTORY_MAX
        ? byAccounts(from, to, watched)
        : scanBlocks({ source, throttle, addressesOf, where: host }, from, to, watched);
    },
  };
}
