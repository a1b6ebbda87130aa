/**
 * Pending EVM transactions that left the pool without being mined (evm-mempool.ts): evicted,
 * dropped by the node (`anvil_dropTransaction`, a restart), or replaced on a node that never saw
 * the replacement. One whose nonce a mined transaction used is withdrawn by the follower
 * (pending-lifecycle.ts); one gone for `LEDGERHOOK_MEMPOOL_DROP_AFTER` is withdrawn here, without
 * `replacedBy` (docs/mempool.md). Each round asks the node about a share of the announcements: in a
 * block, forgotten (the follower notifies it); pending, back in the pool; not found, missing since
 * this round, so a node restarting with an empty pool only starts the clock.
 */
import type { Logger } from 'pino';
import { type Hex, type PublicClient, TransactionNotFoundError } from 'viem';
import type { PendingLifecycle, TrackedTransaction } from './pending-lifecycle.js';

/** Announced transactions asked about per round (the rest in the next rounds, in turn). */
const CHECKS_PER_ROUND = 256;
const CHECK_CONCURRENCY = 8;
/**
 * Rounds are at most this often apart: a tenth of the drop timeout (so a withdrawal comes at most
 * a tenth late), and never more than 30 s, instead of every mempool poll (2 s by default).
 */
const roundEvery = (dropAfterMs: number) => Math.min(dropAfterMs / 10, 30_000);

type Whereabouts = 'mined' | 'pending' | 'missing';

export interface DropCheckDeps {
  client: PublicClient;
  lifecycle: Pick<PendingLifecycle, 'tracked' | 'forget' | 'withdraw' | 'markMissing'>;
  /** How long a transaction may be missing from the pool before its announcement is withdrawn. */
  dropAfterMs: number;
  log: Logger;
}

export function createDropCheck(deps: DropCheckDeps) {
  const { client, lifecycle, dropAfterMs, log } = deps;
  let next = 0;
  let lastRound = Number.NEGATIVE_INFINITY;

  async function whereabouts(hash: string): Promise<Whereabouts> {
    try {
      const tx = await client.getTransaction({ hash: hash as Hex });
      return tx.blockNumber === null ? 'pending' : 'mined';
    } catch (err) {
      if (err instanceof TransactionNotFoundError) return 'missing';
      throw err;
    }
  }

  /** The share of the announced transactions this round asks about. */
  function share(tracked: TrackedTransaction[]): TrackedTransaction[] {
    if (tracked.length <= CHECKS_PER_ROUND) return tracked;
    if (next >= tracked.length) next = 0;
    const part = tracked.slice(next, next + CHECKS_PER_ROUND);
    next += part.length;
    return part;
  }

  return async function checkDrops(now = new Date()): Promise<void> {
    if (now.getTime() - lastRound < roundEvery(dropAfterMs)) return;
    lastRound = now.getTime();
    const batch = share(await lifecycle.tracked());
    if (batch.length === 0) return;
    const found = new Map<TrackedTransaction, Whereabouts>();
    let i = 0;
    const worker = async () => {
      while (i < batch.length) {
        const t = batch[i++]!;
        found.set(t, await whereabouts(t.txId));
      }
    };
    await Promise.all(Array.from({ length: Math.min(CHECK_CONCURRENCY, batch.length) }, worker));

    const mined: string[] = [];
    const back: string[] = [];
    const gone: string[] = [];
    const expired: string[] = [];
    for (const [t, where] of found) {
      if (where === 'mined') mined.push(t.txId);
      else if (where === 'pending' && t.missingSince) back.push(t.txId);
      else if (where === 'missing' && !t.missingSince) gone.push(t.txId);
      else if (where === 'missing' && now.getTime() - t.missingSince!.getTime() >= dropAfterMs)
        expired.push(t.txId);
    }
    await lifecycle.forget(mined);
    await lifecycle.markMissing(back, null);
    await lifecycle.markMissing(gone, now);
    if (expired.length > 0) {
      log.info(
        { transactions: expired.length },
        'pending transactions gone from the pool too long; withdrawn',
      );
      await lifecycle.withdraw(expired);
    }
  };
}
