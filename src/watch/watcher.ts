import type { Logger } from 'pino';
import { createPublicClient, fallback, http, type PublicClient } from 'viem';
import { createTokenInfoCache, fetchBlockActivity } from '../chains/evm/activity.js';
import type { NetworkCatalog } from '../chains/networks.js';
import type { Db } from '../store/db.js';
import type { SubscriptionChange } from '../subscriptions/events.js';
import type { AddressIndex } from './address-index.js';
import { createEvmFollower, type EvmFollower, type FollowerStatus } from './follower.js';

export interface WatcherDeps {
  db: Db;
  networks: NetworkCatalog;
  index: AddressIndex;
  logger: Logger;
  pollIntervalMs: number;
  /** Networks followed from the start even without subscriptions (the devnet). */
  alwaysFollow?: string[];
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
  const followers = new Map<string, EvmFollower>();
  let running = false;

  function follow(name: string): void {
    if (!running || followers.has(name)) return;
    const network = deps.networks.find(name);
    if (network?.family !== 'evm' || network.rpcUrls.length === 0) return;
    const client = evmClient(network.rpcUrls);
    const follower = createEvmFollower({
      db: deps.db,
      network,
      client,
      index: deps.index,
      fetchActivity: fetchBlockActivity,
      tokens: createTokenInfoCache(client),
      logger: deps.logger,
      pollIntervalMs: deps.pollIntervalMs,
    });
    followers.set(name, follower);
    follower.start();
  }

  return {
    async start(): Promise<void> {
      running = true;
      const loaded = await deps.index.load(deps.db);
      deps.logger.info({ subscriptions: loaded }, 'watched addresses loaded');
      for (const name of [...(deps.alwaysFollow ?? []), ...deps.index.networks()]) follow(name);
    },
    /** Keeps the address index in step with the API; a new network's follower starts at once. */
    onSubscriptionChange(change: SubscriptionChange): void {
      deps.index.apply(change);
      if (change.type === 'upsert') follow(change.subscription.network);
    },
    status(): FollowerStatus[] {
      return [...followers.values()].map((f) => f.status());
    },
    async stop(): Promise<void> {
      running = false;
      await Promise.all([...followers.values()].map((f) => f.stop()));
      followers.clear();
    },
  };
}

export type Watcher = ReturnType<typeof createWatcher>;
