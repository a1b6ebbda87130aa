/**
 * The mempool of one EVM network: pending transactions that move value from or to a watched
 * address are notified with `mempool: true` and no `blockNumber`; the follower notifies them again
 * once they are in a block.
 *
 * Where pending transactions come from. Nodes offer two ways over HTTP, and neither works
 * everywhere:
 * - `eth_newPendingTransactionFilter` + `eth_getFilterChanges` (then `eth_getTransactionByHash`
 *   per hash): every transaction that enters the node's pool, whatever its fee. Geth, Nethermind,
 *   Erigon, Reth and anvil serve it. The filter lives in one node, so behind a load balancer (most
 *   public endpoints) it is soon "not found".
 * - `eth_getBlockByNumber("pending", true)`: one call, full transactions, but only those the node
 *   would put in its next block; anvil and Geth build one, while many providers answer the latest
 *   block instead (recognised here by its number, and never taken for pending transactions).
 * So the filter is used first; a node without it, or one that keeps losing it, is polled for its
 * pending block instead. Each new filter also takes in the pending block once, so a transaction
 * that entered the pool before the filter existed (at start, after a lost filter) is not missed.
 *
 * Only top-level value is visible before execution: native value (a contract creation's to the
 * address the contract will have), and ERC-20 `transfer` / `transferFrom` calldata sent straight
 * to the token. Whether the transaction will succeed is not
 * known yet; a pending transaction that is dropped or replaced stays notified once (its
 * replacement, another hash, is notified as well) and is never withdrawn.
 *
 * Composed of its parts: what a pending transaction moves (pending-transfers.ts), where pending
 * transactions come from (mempool-source.ts), what they notify (mempool-match.ts) and the backlog
 * of those waiting to be read and matched (mempool-backlog.ts); here are the status, the loop and
 * the lifecycle.
 */
import type { Logger } from 'pino';
import type { Hex, PublicClient } from 'viem';
import type { TokenInfo } from '../chains/evm/types.js';
import type { Network } from '../chains/networks.js';
import { createSleeper } from '../shared/sleeper.js';
import type { Db } from '../store/db.js';
import type { AddressIndex } from './address-index.js';
import { createBacklog } from './mempool-backlog.js';
import { createPendingMatcher } from './mempool-match.js';
import { createPendingSource } from './mempool-source.js';
import { describeWatchError, runPolling } from './polling.js';

export { type PendingTransaction, type PendingTransfer, pendingTransfers } from './pending-transfers.js';

export interface MempoolStatus {
  network: string;
  /** Where pending transactions come from; null until the first poll. */
  source: 'filter' | 'pending-block' | null;
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
}

/** Polls one EVM network's mempool while at least one of its subscriptions asks for mempool notifications. */
export function createEvmMempoolWatcher(deps: EvmMempoolWatcherDeps) {
  const { db, network, client, index } = deps;
  const log = deps.logger.child({ component: 'mempool', network: network.name });
  const maxBackoffMs = deps.maxBackoffMs ?? 30_000;
  const status: MempoolStatus = {
    network: network.name,
    source: null,
    active: false,
    healthy: false,
    lastError: null,
    errors: 0,
  };
  let running = false;
  let loopDone: Promise<void> | undefined;

  const sleeper = createSleeper();
  const { wake } = sleeper;

  const notificationsOf = createPendingMatcher(deps);
  const backlog = createBacklog({ db, client, log, notificationsOf, isRunning: () => running });
  const pending = createPendingSource(client, log, backlog.enqueue);
  const { pollFilter, pollPendingBlock, forgetFilter } = pending;
  const { drain } = backlog;

  async function poll(): Promise<void> {
    status.active = index.watchesMempool(network.name) && (deps.isFollowing?.() ?? true);
    if (!status.active) {
      backlog.clear();
      await forgetFilter();
      return;
    }
    if (pending.source === 'filter') await pollFilter();
    else await pollPendingBlock();
    status.source = pending.source;
    await drain();
  }

  function loop(): Promise<void> {
    return runPolling({
      intervalMs: deps.pollIntervalMs,
      maxBackoffMs,
      sleeper,
      isRunning: () => running,
      status,
      round: async () => {
        await poll();
        return undefined;
      },
      describe: (err) => describeWatchError(network, err),
      onError: (reason, retryInMs, err) =>
        log.warn({ reason, err, retryInMs }, 'mempool unavailable; retrying'),
    });
  }

  return {
    network: network.name,
    status: (): MempoolStatus => ({ ...status }),
    start(): void {
      if (running) return;
      running = true;
      loopDone = loop();
    },
    async stop(): Promise<void> {
      running = false;
      wake();
      await loopDone;
      await forgetFilter();
    },
  };
}

export type EvmMempoolWatcher = ReturnType<typeof createEvmMempoolWatcher>;
