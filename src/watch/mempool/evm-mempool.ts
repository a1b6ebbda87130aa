/**
 * The mempool of one EVM network (docs/mempool.md): pending transactions moving value from or to a
 * watched address are notified with `mempool: true` and no `blockNumber`, then again once mined.
 * Before execution only top-level value shows (native value, a creation's to its future address,
 * ERC-20 `transfer`/`transferFrom` sent to the token), and not whether it will succeed. Its parts:
 * what a pending transaction moves (pending-transfers.ts), where they come from
 * (evm-pending-source.ts), what they notify (match.ts), the backlog waiting to be read (backlog.ts)
 * and withdrawals (pending-lifecycle.ts, drops.ts); here are the status, the loop and the lifecycle.
 */
import type { Logger } from 'pino';
import type { Hex, PublicClient } from 'viem';
import type { TokenInfo } from '../../chains/evm/types.js';
import type { Network } from '../../chains/networks.js';
import { createSleeper } from '../../shared/sleeper.js';
import type { Db } from '../../store/db.js';
import { describeWatchError, runPolling } from '../follower/polling.js';
import type { AddressIndex } from '../matching/address-index.js';
import { createBacklog } from './backlog.js';
import { createDropCheck } from './drops.js';
import { createPendingSource } from './evm-pending-source.js';
import { createPendingMatcher } from './match.js';
import type { PendingLifecycle } from './pending-lifecycle.js';

export { type PendingTransaction, type PendingTransfer, pendingTransfers } from './pending-transfers.js';

export interface MempoolStatus {
  network: string;
  /**
   * Where pending transactions come from; null until the first poll. EVM: the node's pending
   * transaction filter or its pending block; Bitcoin: Esplora's or Bitcoin Core's pool list.
   */
  source: 'filter' | 'pending-block' | 'esplora' | 'bitcoind' | null;
  /** False while no subscription of the network wants mempool notifications (nothing is polled). */
  active: boolean;
  healthy: boolean;
  lastError: string | null;
  /** Polls that failed since the process started. */
  errors: number;
}

export interface EvmMempoolWatcherDeps {
  db: Db;
  network: Network;
  client: PublicClient;
  index: AddressIndex;
  tokens: { get(token: Hex): Promise<TokenInfo> };
  logger: Logger;
  pollIntervalMs: number;
  /** False while another process follows this network (a standby): it watches the mempool too. */
  isFollowing?: () => boolean;
  /** Longest wait between retries while the node is unreachable. */
  maxBackoffMs?: number;
  /** The network's pending announcements, shared with its follower. */
  lifecycle: PendingLifecycle;
  /** How long a pending transaction may be gone from the pool before it is withdrawn. */
  dropAfterMs: number;
}

/** What the watcher (watcher.ts) sees of a network's mempool watcher, whatever its family. */
export interface MempoolWatcher {
  network: string;
  status(): MempoolStatus;
  start(): void;
  stop(): Promise<void>;
}

export interface MempoolLoopOptions {
  network: Network;
  log: Logger;
  pollIntervalMs: number;
  maxBackoffMs?: number;
  /**
   * One round: reads the pool and writes what it notifies; sets `active` and `source`. True when
   * more is waiting to be read (a big pool at start): the next round comes at once.
   */
  poll: (status: MempoolStatus) => Promise<boolean>;
  /** False once the watcher stops. */
  running?: { value: boolean };
  /** After the loop ends (the EVM filter is uninstalled). */
  onStop?: () => Promise<void>;
}

/** What a mempool watcher of any family shares: its status, its polling loop, start and stop. */
export function mempoolLoop(options: MempoolLoopOptions): MempoolWatcher {
  const { network, log } = options;
  const status: MempoolStatus = {
    network: network.name,
    source: null,
    active: false,
    healthy: false,
    lastError: null,
    errors: 0,
  };
  const running = options.running ?? { value: false };
  const sleeper = createSleeper();
  let loopDone: Promise<void> | undefined;
  return {
    network: network.name,
    status: (): MempoolStatus => ({ ...status }),
    start(): void {
      if (running.value) return;
      running.value = true;
      loopDone = runPolling({
        intervalMs: options.pollIntervalMs,
        maxBackoffMs: options.maxBackoffMs ?? 30_000,
        sleeper,
        isRunning: () => running.value,
        status,
        round: async () => {
          if ((await options.poll(status)) !== true) return undefined;
          status.healthy = true;
          status.lastError = null;
          return 0;
        },
        describe: (err) => describeWatchError(network, err),
        onError: (reason, retryInMs, err) =>
          log.warn({ reason, err, retryInMs }, 'mempool unavailable; retrying'),
      });
    },
    async stop(): Promise<void> {
      running.value = false;
      sleeper.wake();
      await loopDone;
      await options.onStop?.();
    },
  };
}

/** Polls one EVM network's mempool while at least one of its subscriptions asks for mempool notifications. */
export function createEvmMempoolWatcher(deps: EvmMempoolWatcherDeps): MempoolWatcher {
  const { db, network, client, index, lifecycle } = deps;
  const log = deps.logger.child({ component: 'mempool', network: network.name });
  const running = { value: false };
  const notificationsOf = createPendingMatcher(deps);
  const isRunning = () => running.value;
  const backlog = createBacklog({ db, client, log, notificationsOf, isRunning, lifecycle });
  const checkDrops = createDropCheck({ client, lifecycle, dropAfterMs: deps.dropAfterMs, log });
  const pending = createPendingSource(client, log, backlog.enqueue);
  const { pollFilter, pollPendingBlock, forgetFilter } = pending;

  async function poll(status: MempoolStatus): Promise<boolean> {
    status.active = index.watchesMempool(network.name) && (deps.isFollowing?.() ?? true);
    if (!status.active) {
      backlog.clear();
      await forgetFilter();
      // Announcements made while someone wanted the mempool may still need withdrawing.
      if (deps.isFollowing?.() ?? true) await checkDrops();
      return false;
    }
    if (pending.source === 'filter') await pollFilter();
    else await pollPendingBlock();
    status.source = pending.source;
    await backlog.drain();
    await checkDrops();
    return false;
  }

  return mempoolLoop({
    network,
    log,
    pollIntervalMs: deps.pollIntervalMs,
    maxBackoffMs: deps.maxBackoffMs,
    poll,
    running,
    onStop: forgetFilter,
  });
}

export type EvmMempoolWatcher = MempoolWatcher;
