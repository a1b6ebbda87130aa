import { and, eq, lt, min, sql } from 'drizzle-orm';
import { queueForFeed, signalOutbox } from '../../notify/outbox.js';
import { notifications } from '../../notify/schema.js';
import type { Db } from '../../store/db.js';

/**
 * Confirmations: a network's held notifications become due once the head reaches their release
 * height. It remembers the lowest release height still held so that most blocks (most
 * subscriptions want one confirmation) skip the query.
 */
export function createReleaser(network: string) {
  /**
   * The lowest release height among held notifications: undefined when none are held, null when
   * not known (at start, and after a failure, which may have rolled back what was computed).
   */
  let nextRelease: number | undefined | null = null;

  /** Whether release() at this head has anything to do (or must look, not knowing). */
  const due = (head: number): boolean =>
    nextRelease === null || (nextRelease !== undefined && head >= nextRelease);

  return {
    /** Within the transaction that wrote them: notifications held until a height. */
    held(releaseHeights: number[]): void {
      if (nextRelease === null) return;
      for (const height of releaseHeights)
        nextRelease = Math.min(nextRelease ?? Number.POSITIVE_INFINITY, height);
    },

    /** After a failed transaction: what was remembered may have been rolled back. */
    forget(): void {
      nextRelease = null;
    },

    due,

    /** Held notifications whose block is now deep enough become due. */
    async release(tx: Db, head: number): Promise<void> {
      if (!due(head)) return;
      const released = await tx
        .update(notifications)
        .set({ state: 'pending', nextAttemptAt: sql`now()` })
        .where(
          and(
            eq(notifications.chain, network),
            eq(notifications.state, 'held'),
            lt(notifications.releaseHeight, head + 1),
          ),
        )
        .returning({ id: notifications.id, createdAt: notifications.createdAt, seq: notifications.seq });
      if (released.length > 0) {
        // Sent from now on, so readable through the event feed too.
        await queueForFeed(tx, released);
        await signalOutbox(tx);
      }
      const [left] = await tx
        .select({ lowest: min(notifications.releaseHeight) })
        .from(notifications)
        .where(and(eq(notifications.chain, network), eq(notifications.state, 'held')));
      nextRelease = left?.lowest === null || left?.lowest === undefined ? undefined : Number(left.lowest);
    },
  };
}

export type Releaser = ReturnType<typeof createReleaser>;
