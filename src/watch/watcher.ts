import type { Logger } from 'pino';
import { createPublicClient, fallback, http, type PublicClient, webSocket } from 'viem';
import { createTokenInfoCache } from '../chains/evm/activity.js';
import { evmSource } from '../chains/evm/source.js';
import type { NetworkCatalog } from '../chains/networks.js';
import type { Db, Store } from '../store/db.js';
import { SUBSCRIPTIONS_CHANNEL, type SubscriptionChange } from '../subscriptions/events.js';
import type { AddressIndex } from './address-index.js';
import { evmMatcher } from './evm-notifications.js';
import { createFollower, type Follower, type FollowerStatus } from './follower.js';
import { createEvmMempoolWatcher, type EvmMempoolWatcher, type MempoolStatus } from './mempool.js';

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
}

interface WebSocketSubscriber {
  subscribe(args: {
    params: ['newHeads'];
    onData: (data: unknown) => void;
    onError: (err: Error) => void;
  }): Promise<{ unsubscribe: () => Promise<unknown> }>;
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
 * Runs one follower per EVM network that has watched addresses, starting a network's follower
 * when its first subscription arrives. (Bitcoin, Algorand and Solana followers come later.)
 */
export function createWatcher(deps: WatcherDeps) {
  const followers = new Map<string, Follower>();
  /** Beside each follower; it polls only while a subscription of its network wants the mempool. */
  const mempools = new Map<string, EvmMempoolWatcher>();
  let running = false;
  let unlisten: (() => Promise<void>) | undefined;
  const headSubscriptions = new Map<string, () => void>();

  function apply(change: SubscriptionChange): void {
    deps.index.apply(change);
    if (change.type === 'upsert') follow(change.subscription.network);
  }

  function follow(name: string): void {
    if (!running || followers.has(name)) return;
    const network = deps.networks.find(name);
    if (network?.family !== 'evm' || network.rpcUrls.length === 0) return;
    const client = evmClient(network.rpcUrls);
    const tokens = createTokenInfoCache(client);
    const follower = createFollower({
      db: deps.db,
      network,
      source: evmSource(client),
      match: evmMatcher({ network, index: deps.index, tokens }),
      logger: deps.logger,
      pollIntervalMs: deps.pollIntervalMs,
      acquireLock: deps.tryLock ? () => deps.tryLock!(`follower:${name}`) : undefined,
    });
    followers.set(name, follower);
    follower.start();
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
    mempools.set(name, mempool);
    mempool.start();
    if (network.wsUrls.length > 0)
      headSubscriptions.set(name, subscribeToHeads(name, network.wsUrls[0]!, follower));
  }

  /**
   * New heads by WebSocket (`newHeads`) wake the follower at once; polling stays the floor, so a
   * dropped socket only costs latency. Reconnection is ours (with backoff, logged once per
   * failure): viem's own reconnect loop prints its failures to the console. Returns a function
   * that ends the subscription at once, without waiting on the node.
   */
  function subscribeToHeads(name: string, url: string, follower: Follower): () => void {
    const log = deps.logger.child({ component: 'heads', network: name });
    let closed = false;
    let backoffMs = 1_000;
    /** This attempt's socket, taken when it was made: viem caches sockets by URL. */
    let current: Promise<{ close(): void }> | undefined;
    let retry: NodeJS.Timeout | undefined;

    /**
     * Closing the socket ends its subscriptions on the node. No eth_unsubscribe: over a socket
     * that died it is never answered, and viem would wait for the answer forever.
     */
    const drop = () => {
      const socket = current;
      current = undefined;
      void socket?.then((rpc) => rpc.close()).catch(() => {});
    };
    const reconnectLater = (why: string) => {
      if (closed || retry) return;
      log.warn({ err: why, retryInMs: backoffMs }, 'newHeads unavailable; following by polling meanwhile');
      drop();
      retry = setTimeout(() => {
        retry = undefined;
        connect();
      }, backoffMs);
      retry.unref();
      backoffMs = Math.min(60_000, backoffMs * 2);
    };
    function connect(): void {
      if (closed) return;
      const transport = createPublicClient({
        transport: webSocket(url, { reconnect: false, keepAlive: true, retryCount: 0 }),
      }).transport as unknown as WebSocketSubscriber & { getRpcClient(): Promise<{ close(): void }> };
      const socket = transport.getRpcClient();
      current = socket;
      transport
        .subscribe({
          params: ['newHeads'],
          onData: () => follower.wake(),
          onError: (err: Error) => {
            if (current === socket) reconnectLater(err.message);
          },
        })
        .then(
          () => {
            // Closed or replaced while subscribing: this socket is no longer anyone's.
            if (current !== socket) {
              void socket.then((rpc) => rpc.close()).catch(() => {});
              return;
            }
            backoffMs = 1_000;
            // Blocks mined while the subscription was being set up brought no event: look now.
            follower.wake();
          },
          (err: Error) => {
            if (current === socket) reconnectLater(err.message);
          },
        );
    }
    connect();
    return () => {
      closed = true;
      if (retry) clearTimeout(retry);
      drop();
    };
  }

  return {
    async start(): Promise<void> {
      running = true;
      unlisten = await deps.listen?.(SUBSCRIPTIONS_CHANNEL, (payload) => {
        // Without a payload (after a reconnect) changes may have been missed: reload them all.
        if (payload) apply(JSON.parse(payload) as SubscriptionChange);
        else
          void deps.index
            .load(deps.db)
            .catch((err) => deps.logger.error({ err }, 'reloading watched addresses failed'));
      });
      const loaded = await deps.index.load(deps.db);
      deps.logger.info({ subscriptions: loaded }, 'watched addresses loaded');
      for (const name of [...(deps.alwaysFollow ?? []), ...deps.index.networks()]) follow(name);
    },
    /** Keeps the address index in step with the API; a new network's follower starts at once. */
    onSubscriptionChange: apply,
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
      for (const close of headSubscriptions.values()) close();
      headSubscriptions.clear();
      const watchers = [...followers.values(), ...mempools.values()];
      followers.clear();
      mempools.clear();
      await Promise.all([unlisten?.(), ...watchers.map((w) => w.stop())]);
    },
  };
}

export type Watcher = ReturnType<typeof createWatcher>;
