import type { Logger } from 'pino';
import type { Network, NetworkCatalog } from '../chains/networks.js';
import type { BlockSource } from '../chains/source.js';
import type { OutboxHandoff } from '../notify/outbox.js';
import type { Db, Store } from '../store/db.js';
import { SUBSCRIPTIONS_CHANNEL, type SubscriptionChange } from '../subscriptions/events.js';
import {
  type BlockMatcher,
  createFollower,
  type Follower,
  type FollowerDeps,
  type FollowerStatus,
} from './follower/follower.js';
import type { AddressIndex } from './matching/address-index.js';
import type { MempoolStatus, MempoolWatcher } from './mempool/evm-mempool.js';
import type { RiskEnricher } from './risk/enricher.js';
import { withRiskScores } from './risk/with-risk.js';
import { createChangeQueue } from './watcher-changes.js';
import {
  type FamilyDeps,
  followAlgorand,
  followBitcoin,
  followEvm,
  followSolana,
  followTron,
} from './watcher-families.js';

export { evmClient } from './watcher-families.js';

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
  /** LEDGERHOOK_MEMPOOL_DROP_AFTER: a pending EVM transaction gone from the pool this long is withdrawn. */
  mempoolDropAfterMs?: number;
  /** LEDGERHOOK_TRACE_WAIT: how long one block's traces may fail before it is a trace gap (0: for ever). */
  traceWaitMs?: number;
  /** The dispatcher of this process (dispatcher role too): followers hand it their new rows. */
  handoff?: OutboxHandoff;
}

/**
 * Runs one follower per network that has watched addresses, starting a network's follower when
 * its first subscription arrives: EVM networks with a mempool watcher beside it, Bitcoin networks
 * through Esplora or Bitcoin Core, Algorand networks through algod or the indexer, Solana networks
 * through JSON-RPC.
 *
 * Composed of its parts: the subscription changes, applied in order (watcher-changes.ts), and each
 * family's way to follow a network (watcher-families.ts); here are the followers and the lifecycle.
 */
export function createWatcher(deps: WatcherDeps) {
  const followers = new Map<string, Follower>();
  /** Beside each follower; it polls only while a subscription of its network wants the mempool. */
  const mempools = new Map<string, MempoolWatcher>();
  const companions = new Set<{ stop(): Promise<void> }>();
  let running = false;
  let unlisten: (() => Promise<void>) | undefined;
  const { apply, inOrder, onNotice, afterChanges } = createChangeQueue(deps, follow);
  /** Per network: logs whose topic0 matched a followed event but that do not fit its ABI. */
  const mismatchedLogs = new Map<string, number>();
  const families: FamilyDeps = {
    onMismatch: (network) => mismatchedLogs.set(network, (mismatchedLogs.get(network) ?? 0) + 1),
    db: deps.db,
    index: deps.index,
    logger: deps.logger,
    pollIntervalMs: deps.pollIntervalMs,
    startFollower,
    mempools,
    mempoolDropAfterMs: deps.mempoolDropAfterMs ?? 3_600_000,
    traceWaitMs: deps.traceWaitMs ?? 60_000,
    companions,
  };

  /** Starts the network's follower (and the family's companions) when its first subscription comes. */
  function follow(name: string): void {
    if (!running || followers.has(name)) return;
    const network = deps.networks.find(name);
    if (!network || network.rpcUrls.length === 0) return;
    if (network.family === 'evm') followEvm(families, network);
    else if (network.family === 'bitcoin') followBitcoin(families, network);
    else if (network.family === 'algorand') followAlgorand(families, network);
    else if (network.family === 'solana') followSolana(families, network);
    else if (network.family === 'tron') followTron(families, network);
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
    extra?: Pick<FollowerDeps<Activity>, 'settle' | 'onLead'>,
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
      handoff: deps.handoff,
      ...extra,
    });
    followers.set(network.name, follower);
    follower.start();
    return follower;
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
    /** Per network, logs not notified because they do not fit the ABI of the event they matched. */
    mismatchedLogs: (): Record<string, number> => Object.fromEntries(mismatchedLogs),
    /**
     * Stops every follower, mempool watcher and newHeads subscription at once. Nothing here waits
     * on a node: a round in progress ends with its request (which fails fast when the node is
     * gone), and sockets are closed rather than unsubscribed.
     */
    async stop(): Promise<void> {
      running = false;
      const watchers = [...followers.values(), ...mempools.values(), ...companions];
      followers.clear();
      mempools.clear();
      companions.clear();
      await Promise.all([unlisten?.(), ...watchers.map((w) => w.stop())]);
    },
  };
}

export type Watcher = ReturnType<typeof createWatcher>;
