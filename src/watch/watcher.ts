import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { createPublicClient, fallback, http, type PublicClient } from 'viem';
import { createAlgorandSource, createAssetInfoCache } from '../chains/algorand/source.js';
import { bitcoinParams } from '../chains/bitcoin/params.js';
import { createBitcoinSource } from '../chains/bitcoin/source.js';
import { createTokenInfoCache } from '../chains/evm/activity.js';
import { evmSource } from '../chains/evm/source.js';
import { createTraceReader, type TraceReader, type TracesStatus } from '../chains/evm/trace-reader.js';
import type { Network, NetworkCatalog } from '../chains/networks.js';
import { createSolanaSource } from '../chains/solana/source.js';
import type { BlockSource } from '../chains/source.js';
import type { Db, Store } from '../store/db.js';
import {
  SUBSCRIPTIONS_CHANNEL,
  type SubscriptionChange,
  type SubscriptionNotice,
} from '../subscriptions/events.js';
import type { AddressIndex } from './address-index.js';
import { algorandMatcher } from './algorand-notifications.js';
import { bitcoinMatcher } from './bitcoin-notifications.js';
import { evmMatcher } from './evm-notifications.js';
import { type BlockMatcher, createFollower, type Follower, type FollowerStatus } from './follower.js';
import { createEvmMempoolWatcher, type EvmMempoolWatcher, type MempoolStatus } from './mempool.js';
import type { RiskEnricher } from './risk/enricher.js';
import { withRiskScores } from './risk/with-risk.js';
import { solanaMatcher } from './solana-notifications.js';

export interface WatcherDeps {
  db: Db;
  networks: NetworkCatalog;
  index: AddressIndex;
  logger: Logger;
  pollIntervalMs: number;
  /** Networks followed from the start even without subscriptions (the devnet). */
  alwaysFollow?: string[];
  /** One follower per network across processes (see Store.tryLock). */
  tryLock?: Store['tryLock'];
  /** Subscription changes made by API processes elsewhere arrive by NOTIFY. */
  listen?: Store['listen'];
  /** Risk scores for `addressesRiskRatio` (Solana's matcher will read them; unused until then). */
  risk?: RiskEnricher;
  /** This app instance's mark on its NOTIFY payloads: those were applied through onSubscriptionChange. */
  origin?: string;
}

export function evmClient(rpcUrls: string[]): PublicClient {
  const transports = rpcUrls.map((url) => http(url, { timeout: 10_000, retryCount: 0 }));
  // cacheTime 0: viem would otherwise answer getBlockNumber from a 4 s cache, delaying every block.
  return createPublicClient({
    transport: transports.length === 1 ? transports[0]! : fallback(transports),
    cacheTime: 0,
  });
}

/**
 * Runs one follower per network that has watched addresses, starting a network's follower when
 * its first subscription arrives: EVM networks with a mempool watcher beside it, Bitcoin networks
 * through Esplora or Bitcoin Core, Algorand networks through algod or the indexer, Solana networks
 * through JSON-RPC.
 */
export function createWatcher(deps: WatcherDeps) {
  const followers = new Map<string, Follower>();
  /** Beside each follower; it polls only while a subscription of its network wants the mempool. */
  const mempools = new Map<string, EvmMempoolWatcher>();
  let running = false;
  let unlisten: (() => Promise<void>) | undefined;

  function apply(change: SubscriptionChange): void {
    deps.index.apply(change);
    if (change.type === 'upsert') follow(change.subscription.network);
  }

  /**
   * Changes are applied one at a time in the order they arrive (a NOTIFY's commit order), even
   * when one must first be read from the database; a block is matched only once every change
   * that arrived before it has been applied, so a change is in force for the next block.
   */
  let changes: Promise<void> = Promise.resolve();
  function inOrder(task: () => void | Promise<void>): Promise<void> {
    const run = changes.then(task);
    changes = run.catch((err) => deps.logger.error({ err }, 'applying a subscription change failed'));
    return run;
  }

  function reload(): void {
    void inOrder(() =>
      deps.index.load(deps.db).then(
        () => {},
        (err) => deps.logger.error({ err }, 'reloading watched addresses failed'),
      ),
    );
  }

  function onNotice(payload: string | undefined): void {
    // Without a payload (after a reconnect) changes may have been missed: reload them all.
    if (!payload) {
      reload();
      return;
    }
    const notice = JSON.parse(payload) as SubscriptionNotice;
    if (deps.origin !== undefined && notice.origin === deps.origin) return;
    if (notice.type !== 'stored') {
      void inOrder(() => apply(notice));
      return;
    }
    void inOrder(async () => {
      const result = (await deps.db.execute(
        sql`SELECT change FROM subscription_changes WHERE seq = ${notice.seq}::bigint`,
      )) as unknown as { rows: { change: string }[] };
      const row = result.rows[0];
      // Pruned before we read it (a listener minutes behind): read everything again.
      if (!row) return deps.index.load(deps.db).then(() => {});
      apply(JSON.parse(row.change) as SubscriptionChange);
    });
  }

  /** Matches a block once the changes that arrived before it are in force. */
  function afterChanges<Activity>(match: BlockMatcher<Activity>): BlockMatcher<Activity> {
    return async (block) => {
      await changes;
      return match(block);
    };
  }

  /** Starts the network's follower (and the family's companions) when its first subscription comes. */
  function follow(name: string): void {
    if (!running || followers.has(name)) return;
    const network = deps.networks.find(name);
    if (!network || network.rpcUrls.length === 0) return;
    if (network.family === 'evm') followEvm(network);
    else if (network.family === 'bitcoin') followBitcoin(network);
    else if (network.family === 'algorand') followAlgorand(network);
    else if (network.family === 'solana') followSolana(network);
    else notFollowed(network);
  }

  const warnedUnfollowed = new Set<string>();
  /** Subscriptions of a family not watched yet are kept; the log says so, once per network. */
  function notFollowed(network: Network): void {
    if (warnedUnfollowed.has(network.name)) return;
    warnedUnfollowed.add(network.name);
    deps.logger.warn(
      { network: network.name, family: network.family },
      'watching this family is not built yet: its subscriptions are kept but nothing is notified',
    );
  }

  function startFollower<Activity>(
    network: Network,
    source: BlockSource<Activity>,
    match: BlockMatcher<Activity>,
  ): Follower {
    const follower = createFollower({
      db: deps.db,
      network,
      source,
      // Risk scores on the networks that want them (LEDGERHOOK_RISK_NETWORKS), none elsewhere.
      match: afterChanges(withRiskScores(match, deps.risk?.forNetwork(network.name))),
      logger: deps.logger,
      pollIntervalMs: deps.pollIntervalMs,
      acquireLock: deps.tryLock ? () => deps.tryLock!(`follower:${network.name}`) : undefined,
    });
    followers.set(network.name, follower);
    follower.start();
    return follower;
  }

  /** A Bitcoin network, through Esplora (the default) or Bitcoin Core. */
  function followBitcoin(network: Network): void {
    const source = createBitcoinSource({
      url: network.rpcUrls[0]!,
      network: bitcoinParams(network.bitcoinChain),
      api: network.api,
    });
    startFollower(network, source, bitcoinMatcher({ network, index: deps.index }));
  }

  /**
   * An Algorand network, through algod (the default, its long poll announcing rounds) or, with
   * `api: indexer`, its indexer; the node's genesis is checked against the network's.
   */
  function followAlgorand(network: Network): void {
    const api = network.api === 'indexer' ? 'indexer' : 'algod';
    const url = api === 'indexer' ? (network.indexerUrls[0] ?? network.rpcUrls[0]!) : network.rpcUrls[0]!;
    const options = { url, api, genesisId: network.genesisId, genesisHash: network.genesisHash } as const;
    const assets = createAssetInfoCache(options);
    startFollower(
      network,
      createAlgorandSource(options),
      algorandMatcher({ network, index: deps.index, assets }),
    );
  }

  /**
   * A Solana network through its JSON-RPC node at the network's commitment (`confirmed` unless
   * configured), `slotSubscribe` on its WebSocket waking the follower when there is one.
   */
  function followSolana(network: Network): void {
    const source = createSolanaSource({
      url: network.rpcUrls[0]!,
      wsUrl: network.wsUrls[0],
      commitment: network.commitment,
    });
    const match = solanaMatcher({ network, index: deps.index });
    startFollower(network, source, match);
  }

  /**
   * The network's trace reader, saying in the log when internal transfers start or stop being
   * read (once per change, not per block): without traces they are not notified.
   */
  function traceReaderOf(network: Network, client: PublicClient): TraceReader {
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
  function followEvm(network: Network): void {
    const client = evmClient(network.rpcUrls);
    const tokens = createTokenInfoCache(client);
    const heads =
      network.wsUrls.length > 0
        ? { wsUrl: network.wsUrls[0]!, logger: deps.logger.child({ network: network.name }) }
        : undefined;
    const follower = startFollower(
      network,
      evmSource(client, undefined, heads, traceReaderOf(network, client)),
      evmMatcher({ network, index: deps.index, tokens }),
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
    mempools.set(network.name, mempool);
    mempool.start();
  }

  return {
    async start(): Promise<void> {
      running = true;
      unlisten = await deps.listen?.(SUBSCRIPTIONS_CHANNEL, onNotice);
      const started = performance.now();
      // In line with the changes heard meanwhile, which are applied after it.
      let loaded = 0;
      await inOrder(async () => {
        loaded = await deps.index.load(deps.db);
      });
      deps.logger.info(
        {
          subscriptions: loaded,
          addresses: deps.index.watches(),
          ms: Math.round(performance.now() - started),
        },
        'watched addresses loaded',
      );
      for (const name of [...(deps.alwaysFollow ?? []), ...deps.index.networks()]) follow(name);
    },
    /**
     * Keeps the address index in step with this process's API, in order with the changes heard
     * from others; a new network's follower starts at once.
     */
    onSubscriptionChange: (change: SubscriptionChange): Promise<void> => inOrder(() => apply(change)),
    status(): FollowerStatus[] {
      return [...followers.values()].map((f) => f.status());
    },
    mempoolStatus(): MempoolStatus[] {
      return [...mempools.values()].map((m) => m.status());
    },
    /** Distinct watched addresses per network. */
    addressCounts: () => deps.index.addressCounts(),
    /**
     * Stops every follower, mempool watcher and newHeads subscription at once. Nothing here waits
     * on a node: a round in progress ends with its request (which fails fast when the node is
     * gone), and sockets are closed rather than unsubscribed.
     */
    async stop(): Promise<void> {
      running = false;
      const watchers = [...followers.values(), ...mempools.values()];
      followers.clear();
      mempools.clear();
      await Promise.all([unlisten?.(), ...watchers.map((w) => w.stop())]);
    },
  };
}

export type Watcher = ReturnType<typeof createWatcher>;
