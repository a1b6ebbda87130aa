import { algorandHistory } from '../chains/algorand/history.js';
import { createAssetInfoCache } from '../chains/algorand/source.js';
import { bitcoinHistory } from '../chains/bitcoin/history.js';
import { bitcoinParams } from '../chains/bitcoin/params.js';
import { createTokenInfoCache } from '../chains/evm/activity.js';
import type { EventLogQuery } from '../chains/evm/event-history.js';
import { evmHistory } from '../chains/evm/history.js';
import { createTraceReader } from '../chains/evm/trace-reader.js';
import type { Network } from '../chains/networks.js';
import { solanaHistory } from '../chains/solana/history.js';
import type { HistoryScan, HistorySource } from '../chains/source.js';
import { tronHistory } from '../chains/tron/history.js';
import { createTronTokenDecimals } from '../chains/tron/token-info.js';
import type { Throttle } from '../shared/throttle.js';
import type { ContractEventSpec, WatchedEndpoint, WatchedSubscription } from '../subscriptions/events.js';
import type { BlockMatcher } from '../watch/follower/follower.js';
import {
  createEventIndex,
  type FollowedSubscription,
  type LogAddressAndTopics,
} from '../watch/matching/event-index.js';
import { algorandMatcher } from '../watch/notifications/algorand.js';
import { bitcoinMatcher } from '../watch/notifications/bitcoin.js';
import { evmMatcher } from '../watch/notifications/evm.js';
import { solanaMatcher } from '../watch/notifications/solana.js';
import { tronMatcher } from '../watch/notifications/tron.js';
import { evmClient } from '../watch/watcher.js';

/**
 * Who watches an address during a backfill: its one subscription, for the addresses it found; for
 * an event subscription, who follows a log's event (evmMatcher's contract events), and no address.
 */
export type Lookup = {
  lookup(network: string, address: string): readonly WatchedSubscription[];
  followsEvents?(network: string): boolean;
  matchLog?(network: string, log: LogAddressAndTopics): readonly FollowedSubscription[];
};

/** A network's history of contract events, for CONTRACT_LOG_EVENT backfills (EVM). */
export interface EventHistory {
  /** Said in the job's view, as HistorySource.describe. */
  describe: string;
  scan(from: number, to: number, query: EventLogQuery): Promise<HistoryScan<unknown>>;
}

/**
 * A network as a backfill sees it: the family's history source, and the follower's own matcher
 * for the family given who watches what, so a backfill notifies exactly what the follower would.
 */
export interface BackfillFamily {
  /** The network, whose node failures reach clients through nodeUnavailable. */
  network: Network;
  history: HistorySource<unknown>;
  /** Where the family has them (EVM): the logs of a followed event. */
  events?: EventHistory;
  matcher(index: Lookup): BlockMatcher<unknown>;
  /** Whether addresses are compared whatever their case (EVM). */
  caseless: boolean;
}

export interface FamilyOptions {
  throttle: Throttle;
  /** Blocks per scan. */
  chunk: number;
  /** How long one block's traces may fail before it is a trace gap (LEDGERHOOK_TRACE_WAIT; 0: for ever). */
  traceWaitMs?: number;
}

/** The network's backfill parts; undefined when it has no node configured. */
export function backfillFamily(network: Network, options: FamilyOptions): BackfillFamily | undefined {
  if (network.rpcUrls.length === 0) return undefined;
  if (network.family === 'evm') {
    const client = evmClient(network.rpcUrls);
    const tokens = createTokenInfoCache(client);
    const history = evmHistory({
      client,
      throttle: options.throttle,
      chunk: options.chunk,
      traces: createTraceReader(
        network.tracesRpcUrls ? evmClient(network.tracesRpcUrls) : client,
        network.traces ?? 'auto',
        { waitMs: options.traceWaitMs },
      ),
    });
    return {
      network,
      history: history as HistorySource<unknown>,
      events: history.events,
      matcher: (index) => evmMatcher({ network, index, tokens }) as BlockMatcher<unknown>,
      caseless: true,
    };
  }
  if (network.family === 'bitcoin') {
    // The same node API the live follower reads, so the transactions are the ones it sees.
    return {
      network,
      history: bitcoinHistory({
        url: network.rpcUrls[0]!,
        api: network.api,
        network: bitcoinParams(network.bitcoinChain),
        throttle: options.throttle,
        chunk: options.chunk,
      }) as HistorySource<unknown>,
      matcher: (index) => bitcoinMatcher({ network, index }) as BlockMatcher<unknown>,
      caseless: false,
    };
  }
  if (network.family === 'algorand') {
    // The indexer where there is one (its account index is what makes a backfill cheap), even
    // when the follower reads algod; else algod, round by round.
    const indexerUrl = network.indexerUrls[0] ?? (network.api === 'indexer' ? network.rpcUrls[0] : undefined);
    const genesis = { genesisId: network.genesisId, genesisHash: network.genesisHash };
    // ASA decimals from the API the follower reads them from, so amounts are written alike.
    const api = network.api === 'indexer' ? 'indexer' : 'algod';
    const assets = createAssetInfoCache({
      url: api === 'indexer' ? (network.indexerUrls[0] ?? network.rpcUrls[0]!) : network.rpcUrls[0]!,
      api,
    });
    return {
      network,
      history: algorandHistory({
        indexerUrl,
        algodUrl: network.rpcUrls[0]!,
        ...genesis,
        throttle: options.throttle,
        chunk: options.chunk,
      }) as HistorySource<unknown>,
      matcher: (index) => algorandMatcher({ network, index, assets }) as BlockMatcher<unknown>,
      caseless: false,
    };
  }
  if (network.family === 'solana') {
    return {
      network,
      history: solanaHistory({
        url: network.rpcUrls[0]!,
        commitment: network.commitment,
        throttle: options.throttle,
        chunk: options.chunk,
      }) as HistorySource<unknown>,
      matcher: (index) => solanaMatcher({ network, index }) as BlockMatcher<unknown>,
      caseless: false,
    };
  }
  if (network.family === 'tron') {
    const node = { url: network.rpcUrls[0]!, headers: network.headers };
    const tokens = createTronTokenDecimals(node);
    return {
      network,
      history: tronHistory({
        ...node,
        throttle: options.throttle,
        chunk: options.chunk,
      }) as HistorySource<unknown>,
      matcher: (index) => tronMatcher({ network, index, tokens }) as BlockMatcher<unknown>,
      caseless: false,
    };
  }
  return undefined;
}

/** A lookup that answers `subscription` (with the address as stored) for the given addresses. */
export function lookupOf(
  subscription: Omit<WatchedSubscription, 'address'>,
  addresses: readonly string[],
  caseless: boolean,
): Lookup {
  const key = (a: string) => (caseless ? a.toLowerCase() : a);
  const byAddress = new Map(addresses.map((a) => [key(a), [{ ...subscription, address: a }]]));
  return { lookup: (_network, address) => byAddress.get(key(address)) ?? [] };
}

/**
 * A lookup for the backfill of a CONTRACT_LOG_EVENT subscription: an event index holding only it,
 * on the contracts the scan found (or on any contract), so that the follower's matcher (the same
 * topic, topic count, filter and ABI checks) decides what it is notified of. No address is watched.
 */
export function eventLookupOf(
  subscription: WatchedEndpoint & { contractEvent: ContractEventSpec },
  contracts: readonly string[],
): Lookup {
  const index = createEventIndex((network) => (network === subscription.network ? 'evm' : undefined));
  index.upsert(subscription, subscription.contractEvent.anyContract ? undefined : contracts);
  return {
    lookup: () => [],
    followsEvents: (network) => index.follows(network),
    matchLog: (network, log) => index.match(network, log),
  };
}
