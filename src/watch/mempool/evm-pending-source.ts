/**
 * Where the mempool watcher (evm-mempool.ts) gets pending transactions, each into `enqueue`. A
 * pending-transaction filter gives everything entering the node's pool, but lives in one node:
 * behind a load balancer it is soon "not found". The pending block is one call but holds only what
 * the node would mine next, and many providers answer their latest block instead (told by its
 * number, never taken). So the filter first, the pending block where there is none or it keeps
 * being lost (docs/mempool.md); each new filter takes in the pending block once, so a transaction
 * that entered the pool before the filter existed (at start, after a lost filter) is not missed.
 */
import type { Logger } from 'pino';
import type { Hex, PublicClient } from 'viem';
import { isMethodUnavailable } from '../../chains/node-errors.js';
import type { PendingTransaction } from './pending-transfers.js';

/** A filter lost this many times in a row: the endpoint balances over several nodes. */
const LOST_FILTER_LIMIT = 3;

const FILTER_LOST = /filter.{0,80}(not found|does not exist|doesn't exist|expired|unknown)|unknown filter/i;

function isFilterLost(err: unknown): boolean {
  return FILTER_LOST.test(err instanceof Error ? err.message : String(err));
}

/**
 * @param enqueue takes a pending transaction's hash, with the transaction when it came whole (the
 *   pending block) or null when it is still to be read (the filter).
 */
export function createPendingSource(
  client: PublicClient,
  log: Logger,
  enqueue: (hash: Hex, tx: PendingTransaction | null) => void,
) {
  let source: 'filter' | 'pending-block' = 'filter';
  let filterId: Hex | undefined;
  let lostInARow = 0;

  /**
   * The pending block's transactions, or undefined when the node answers a mined block instead
   * (many providers alias "pending" to "latest"): those are not pending, the follower has them.
   */
  async function pendingBlock(): Promise<PendingTransaction[] | undefined> {
    const latest = await client.getBlockNumber();
    const block = await client.getBlock({ blockTag: 'pending', includeTransactions: true });
    if (block.number !== null && block.number <= latest) return undefined;
    return block.transactions;
  }

  /** Takes in what entered the pool before a new filter existed; best effort (the filter works without). */
  async function sweepPendingBlock(): Promise<void> {
    try {
      for (const tx of (await pendingBlock()) ?? []) enqueue(tx.hash, tx);
    } catch (err) {
      log.debug({ err: (err as Error).message.split('\n')[0] }, 'no pending block to sweep');
    }
  }

  function usePendingBlock(reason: string): void {
    source = 'pending-block';
    filterId = undefined;
    log.info({ reason }, 'polling the pending block for pending transactions');
  }

  async function pollFilter(): Promise<void> {
    let id: Hex;
    if (filterId !== undefined) id = filterId;
    else {
      try {
        id = await client.request({ method: 'eth_newPendingTransactionFilter' });
      } catch (err) {
        if (!isMethodUnavailable(err)) throw err;
        usePendingBlock('the node has no pending-transaction filters');
        return pollPendingBlock();
      }
      filterId = id;
      await sweepPendingBlock();
    }
    let hashes: Hex[];
    try {
      hashes = (await client.request({ method: 'eth_getFilterChanges', params: [id] })) as Hex[];
    } catch (err) {
      if (!isFilterLost(err)) throw err;
      filterId = undefined;
      if (++lostInARow >= LOST_FILTER_LIMIT) usePendingBlock('the node keeps losing the filter');
      return;
    }
    lostInARow = 0;
    for (const hash of hashes) if (typeof hash === 'string') enqueue(hash, null);
  }

  async function pollPendingBlock(): Promise<void> {
    const txs = await pendingBlock();
    if (txs === undefined) {
      throw new Error(
        'the node shows no pending transactions: no lasting pending-transaction filter, and its "pending" block is a mined one',
      );
    }
    for (const tx of txs) enqueue(tx.hash, tx);
  }

  async function forgetFilter(): Promise<void> {
    const id = filterId;
    filterId = undefined;
    if (id === undefined) return;
    try {
      await client.request({ method: 'eth_uninstallFilter', params: [id] });
    } catch {
      // it expires on its own
    }
  }

  return {
    /** Where pending transactions come from now. */
    get source() {
      return source;
    },
    pollFilter,
    pollPendingBlock,
    /** Uninstalls the filter, if there is one (best effort). */
    forgetFilter,
  };
}
