/**
 * How the watcher (watcher.ts) follows a network of each family: its block source, its matcher,
 * and what runs beside its follower (an EVM network's mempool watcher).
 */
import type { Logger } from 'pino';
import { createPublicClient, fallback, http, type PublicClient } from 'viem';
import { createAlgorandSource, createAssetInfoCache } from '../chains/algorand/source.js';
import { bitcoinParams } from '../chains/bitcoin/params.js';
import { createBitcoinSource } from '../chains/bitcoin/source.js';
import { createTokenInfoCache } from '../chains/evm/activity.js';
import { evmSource } from '../chains/evm/source.js';
import { createTraceReader, type TraceReader, type TracesStatus } from '../chains/evm/trace-reader.js';
import type { Network } from '../chains/networks.js';
import { createSolanaSource } from '../chains/solana/source.js';
import type { BlockSource } from '../chains/source.js';
import type { Db } from '../store/db.js';
import type { AddressIndex } from './address-index.js';
import { algorandMatcher } from './algorand-notifications.js';
import { bitcoinMatcher } from './bitcoin-notifications.js';
import { evmMatcher } from './evm-notifications.js';
import type { BlockMatcher, Follower } from './follower.js';
import { createEvmMempoolWatcher, type EvmMempoolWatcher } from './mempool.js';
import { solanaMatcher } from './solana-notifications.js';

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
  ) => Follower;
  /** The mempool watchers beside EVM followers, by network. */
  mempools: Map<string, EvmMempoolWatcher>;
  /** Counts a log that matched a followed event's topic0 but does not fit its ABI. */
  onMismatch: (network: string) => void;
}

export function evmClient(rpcUrls: string[]): PublicClient {
  const transports = rpcUrls.map((url) => http(url, { timeout: 10_000, retryCount: 0 }));
  // cacheTime 0: viem would otherwise answer getBlockNumber from a 4 s cache, delaying every block.
  return createPublicClient({
    transport: transports.length === 1 ? transports[0]! : fallback(transports),
    cacheTime: 0,
  });
}

/** A Bitcoin network, through Esplora (the default) or Bitcoin Core. */
export function followBitcoin(deps: FamilyDeps, network: Network): void {
  const source = createBitcoinSource({
    url: network.rpcUrls[0]!,
    network: bitcoinParams(network.bitcoinChain),
    api: network.api,
  });
  deps.startFollower(network, source, bitcoinMatcher({ network, index: deps.index }));
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
  const reader = createTraceReader(client, setting, { onChange: report });
  if (setting === 'off') report(reader.status());
  return reader;
}

/** An EVM network: its follower, its mempool watcher, and newHeads when there is a WebSocket. */
export function followEvm(deps: FamilyDeps, network: Network): void {
  const client = evmClient(network.rpcUrls);
  const tokens = createTokenInfoCache(client);
  const heads =
    network.wsUrls.length > 0
      ? { wsUrl: network.wsUrls[0]!, logger: deps.logger.child({ network: network.name }) }
      : undefined;
  const follower = deps.startFollower(
    network,
    evmSource(client, undefined, heads, traceReaderOf(deps, network, client)),
    evmMatcher({ network, index: deps.index, tokens, onMismatch: deps.onMismatch }),
  );
  const mempool = createEvmMempoolWatcher({
    db: deps.db,
    network,
    client,
    index: deps.index,
    tokens,
    logger: deps.logger,
    pollIntervalMs: deps.pollIntervalMs,
    isFollowing: () => !follower.status().standby,
  });
  deps.mempools.set(network.name, mempool);
  mempool.start();
}
