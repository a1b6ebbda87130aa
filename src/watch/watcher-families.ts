/**
 * How the watcher (watcher.ts) follows a network of each family: its block source, its matcher,
 * and what runs beside its follower (an EVM network's mempool watcher).
 */
import type { Logger } from 'pino';
import { createPublicClient, fallback, type PublicClient } from 'viem';
import { createAlgorandSource, createAssetInfoCache } from '../chains/algorand/source.js';
import { createBitcoinMempoolReader } from '../chains/bitcoin/mempool.js';
import { bitcoinParams } from '../chains/bitcoin/params.js';
import { createBitcoinSource } from '../chains/bitcoin/source.js';
import { createTokenInfoCache } from '../chains/evm/activity.js';
import { jsonRpcHttp } from '../chains/evm/rpc-transport.js';
import { evmSource } from '../chains/evm/source.js';
import { createTraceReader, type TraceReader, type TracesStatus } from '../chains/evm/trace-reader.js';
import type { EvmBlockActivity } from '../chains/evm/types.js';
import type { Network } from '../chains/networks.js';
import { createSolanaSource } from '../chains/solana/source.js';
import type { BlockSource } from '../chains/source.js';
import { createTronSource } from '../chains/tron/source.js';
import { createTronTokenDecimals } from '../chains/tron/token-info.js';
import type { Db } from '../store/db.js';
import type { BlockMatcher, Follower, FollowerDeps } from './follower/follower.js';
import type { AddressIndex } from './matching/address-index.js';
import { nonceClaim } from './mempool/backlog.js';
import { createBitcoinMempoolWatcher } from './mempool/bitcoin-mempool.js';
import { createEvmMempoolWatcher, type MempoolWatcher } from './mempool/evm-mempool.js';
import { type Claimed, createPendingLifecycle } from './mempool/pending-lifecycle.js';
import { algorandMatcher } from './notifications/algorand.js';
import { bitcoinClaims, bitcoinMatcher } from './notifications/bitcoin.js';
import { evmMatcher } from './notifications/evm.js';
import { solanaMatcher } from './notifications/solana.js';
import { tronMatcher } from './notifications/tron.js';
import { createTraceGapFiller, fillInBackground } from './trace-gaps/filler.js';
import { bothSettlers, createTraceGapTracker } from './trace-gaps/tracker.js';

/** What following a network takes, from the watcher. */
export interface FamilyDeps {
  db: Db;
  index: AddressIndex;
  logger: Logger;
  pollIntervalMs: number;
  /** Starts and keeps the network's follower, over its source and matcher. */
  startFollower: <Activity>(
    network: Network,
    source: BlockSource<Activity>,
    match: BlockMatcher<Activity>,
    extra?: Pick<FollowerDeps<Activity>, 'settle' | 'onLead'>,
  ) => Follower;
  /** The mempool watchers beside EVM and Bitcoin followers, by network. */
  mempools: Map<string, MempoolWatcher>;
  /** How long a pending EVM transaction may be gone from the pool before it is withdrawn. */
  mempoolDropAfterMs: number;
  /** Counts a log that matched a followed event's topic0 but does not fit its ABI. */
  onMismatch: (network: string) => void;
  /** How long one block's traces may fail before it is committed as a trace gap (0: for ever). */
  traceWaitMs: number;
  /** What runs beside the followers and stops with them (trace gap fillers). */
  companions: Set<{ stop(): Promise<void> }>;
}

export function evmClient(rpcUrls: string[], timeoutMs = 10_000): PublicClient {
  const transports = rpcUrls.map((url) => jsonRpcHttp(url, { timeoutMs }));
  // cacheTime 0: viem would otherwise answer getBlockNumber from a 4 s cache, delaying every block.
  return createPublicClient({
    transport: transports.length === 1 ? transports[0]! : fallback(transports),
    cacheTime: 0,
  });
}

/**
 * A Bitcoin network, through Esplora (the default) or Bitcoin Core, and its mempool watcher
 * beside the follower (it polls only while a subscription wants pending notifications).
 */
export function followBitcoin(deps: FamilyDeps, network: Network): void {
  const options = {
    url: network.rpcUrls[0]!,
    network: bitcoinParams(network.bitcoinChain),
    api: network.api,
  };
  const lifecycle = createPendingLifecycle({ db: deps.db, network: network.name, logger: deps.logger });
  const follower = deps.startFollower(
    network,
    createBitcoinSource(options),
    bitcoinMatcher({ network, index: deps.index }),
    { settle: lifecycle.blockSettler(bitcoinClaims), onLead: lifecycle.reload },
  );
  const mempool = createBitcoinMempoolWatcher({
    db: deps.db,
    network,
    reader: createBitcoinMempoolReader(options),
    index: deps.index,
    lifecycle,
    logger: deps.logger,
    pollIntervalMs: deps.pollIntervalMs,
    isFollowing: () => !follower.status().standby,
  });
  deps.mempools.set(network.name, mempool);
  mempool.start();
}

/**
 * An Algorand network, through algod (the default, its long poll announcing rounds) or, with
 * `api: indexer`, its indexer; the node's genesis is checked against the network's.
 */
export function followAlgorand(deps: FamilyDeps, network: Network): void {
  const api = network.api === 'indexer' ? 'indexer' : 'algod';
  const url = api === 'indexer' ? (network.indexerUrls[0] ?? network.rpcUrls[0]!) : network.rpcUrls[0]!;
  const options = { url, api, genesisId: network.genesisId, genesisHash: network.genesisHash } as const;
  const assets = createAssetInfoCache(options);
  deps.startFollower(
    network,
    createAlgorandSource(options),
    algorandMatcher({ network, index: deps.index, assets }),
  );
}

/**
 * A Solana network through its JSON-RPC node at the network's commitment (`confirmed` unless
 * configured), `slotSubscribe` on its WebSocket waking the follower when there is one.
 */
export function followSolana(deps: FamilyDeps, network: Network): void {
  const source = createSolanaSource({
    url: network.rpcUrls[0]!,
    wsUrl: network.wsUrls[0],
    commitment: network.commitment,
  });
  const match = solanaMatcher({ network, index: deps.index });
  deps.startFollower(network, source, match);
}

/** A Tron network through java-tron's HTTP API, with the network's headers (an API key). */
export function followTron(deps: FamilyDeps, network: Network): void {
  const node = { url: network.rpcUrls[0]!, headers: network.headers };
  const tokens = createTronTokenDecimals(node);
  deps.startFollower(network, createTronSource(node), tronMatcher({ network, index: deps.index, tokens }));
}

/**
 * The network's trace reader, saying in the log when internal transfers start or stop being
 * read (once per change, not per block): without traces they are not notified.
 */
function traceReaderOf(deps: FamilyDeps, network: Network, client: PublicClient): TraceReader {
  const log = deps.logger.child({ network: network.name });
  const setting = network.traces ?? 'auto';
  const report = ({ available, method, reason }: TracesStatus) => {
    if (available) log.info({ method }, 'internal transfers are read from the node’s traces');
    else log.warn({ reason }, 'internal transfers are not notified on this network');
  };
  const reader = createTraceReader(client, setting, { onChange: report, waitMs: deps.traceWaitMs });
  if (setting === 'off') report(reader.status());
  return reader;
}

/**
 * Fills the network's trace gaps in the background while this process follows it and its follower
 * is at the head (trace-gaps/filler.ts): a catch-up is never slowed by it.
 */
function fillTraceGapsBeside(
  deps: FamilyDeps,
  follower: Follower,
  parts: {
    network: string;
    source: BlockSource<EvmBlockActivity>;
    match: BlockMatcher<EvmBlockActivity>;
    onChange: () => Promise<void>;
  },
): { retryNow(): void } {
  const filler = createTraceGapFiller({
    db: deps.db,
    network: parts.network,
    block: (height) => parts.source.block(height),
    head: async () => (await parts.source.tip()).height,
    match: parts.match,
    logger: deps.logger,
  });
  const background = fillInBackground(filler, {
    canFill: () => {
      const s = follower.status();
      return !s.standby && s.healthy && s.height !== null && s.head !== null && s.head - s.height <= 1;
    },
    intervalMs: Math.max(1_000, 20 * deps.pollIntervalMs),
    onChange: parts.onChange,
  });
  deps.companions.add(background);
  background.start();
  return background;
}

/** What a block's EVM transactions took: each sender's nonce. */
function evmClaims(activity: EvmBlockActivity): Claimed[] {
  return activity.payments
    .filter((p) => p.nonce !== null)
    .map((p) => ({ txId: p.txHash, claims: [nonceClaim(p.from, p.nonce!)] }));
}

/** An EVM network: its follower, its mempool watcher, and newHeads when there is a WebSocket. */
export function followEvm(deps: FamilyDeps, network: Network): void {
  const client = evmClient(network.rpcUrls);
  const tokens = createTokenInfoCache(client);
  const heads =
    network.wsUrls.length > 0
      ? { wsUrl: network.wsUrls[0]!, logger: deps.logger.child({ network: network.name }) }
      : undefined;
  const lifecycle = createPendingLifecycle({ db: deps.db, network: network.name, logger: deps.logger });
  let tracedAgain = () => {};
  const gaps = createTraceGapTracker<EvmBlockActivity>({
    db: deps.db,
    network: network.name,
    logger: deps.logger,
    gapOf: (activity) => activity.traceGap,
    onTracedAgain: () => tracedAgain(),
  });
  // A tracing node of its own, if the network names one: blocks and receipts still come from rpc.
  const tracer = network.tracesRpcUrls ? evmClient(network.tracesRpcUrls) : client;
  const source = evmSource(client, undefined, heads, traceReaderOf(deps, network, tracer));
  const traces = source.status;
  const tracesNode = network.tracesRpcUrls ? new URL(network.tracesRpcUrls[0]!).host : undefined;
  source.status = () => ({
    ...traces?.(),
    ...(tracesNode === undefined ? {} : { tracesNode }),
    traceGaps: gaps.status(),
  });
  const match = evmMatcher({ network, index: deps.index, tokens, onMismatch: deps.onMismatch });
  const follower = deps.startFollower(network, source, match, {
    settle: bothSettlers(lifecycle.blockSettler(evmClaims), gaps.settler),
    onLead: async () => {
      await lifecycle.reload();
      await gaps.load();
    },
  });
  const filling = fillTraceGapsBeside(deps, follower, {
    network: network.name,
    source,
    match,
    onChange: gaps.load,
  });
  tracedAgain = filling.retryNow;
  const mempool = createEvmMempoolWatcher({
    db: deps.db,
    network,
    client,
    index: deps.index,
    tokens,
    logger: deps.logger,
    pollIntervalMs: deps.pollIntervalMs,
    isFollowing: () => !follower.status().standby,
    lifecycle,
    dropAfterMs: deps.mempoolDropAfterMs,
  });
  deps.mempools.set(network.name, mempool);
  mempool.start();
}
