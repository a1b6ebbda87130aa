import { and, eq, inArray, ne, notLike } from 'drizzle-orm';
import { alreadyInFeed } from '../../notify/feed.js';
import { chainNotificationId, enqueueNotifications, type NewNotification } from '../../notify/outbox.js';
import { notifications } from '../../notify/schema.js';
import type { Db } from '../../store/db.js';

export type Announced = typeof notifications.$inferSelect;

/**
 * A chain notification's dedupe key is its block's hash and the transfer's key (see
 * follower.ts); the same transfer on another branch has the same transfer key.
 */
export const blockDedupeKey = (blockHash: string, transferKey: string): string =>
  `${blockHash}:${transferKey}`;

/** Where a transfer is, whichever block holds it: equal on two branches when nothing moved. */
const placeOf = (subscriptionId: string, transferKey: string, height: number | null | undefined): string =>
  `${subscriptionId}|${height}|${transferKey}`;

export interface ReorgDiff {
  /** Announced from an orphaned block and on the new branch at the same height: left alone. */
  kept: { row: Announced; blockHash: string; dedupeKey: string }[];
  /** Announced from an orphaned block and not on the new branch where it was. */
  gone: Announced[];
  /** On the new branch and not announced before: notified as usual. */
  fresh: NewNotification[];
}

/**
 * Compares what the orphaned blocks announced with what the new branch holds. A transfer in
 * both at the same height is neither withdrawn nor notified again; one that moved to another
 * height is withdrawn and notified anew, since its blockNumber changed.
 */
export function diffBranches(announced: Announced[], newBranch: NewNotification[]): ReorgDiff {
  const byPlace = new Map<string, NewNotification>();
  for (const n of newBranch) {
    const transferKey = n.dedupeKey!.slice(n.blockHash!.length + 1);
    byPlace.set(placeOf(n.subscriptionId, transferKey, n.blockNumber), n);
  }
  const kept: ReorgDiff['kept'] = [];
  const gone: Announced[] = [];
  for (const row of announced) {
    const transferKey = row.dedupeKey?.slice((row.blockHash?.length ?? 0) + 1) ?? '';
    const place = placeOf(row.subscriptionId, transferKey, row.blockNumber);
    const again = byPlace.get(place);
    if (again) {
      kept.push({ row, blockHash: again.blockHash!, dedupeKey: again.dedupeKey! });
      byPlace.delete(place);
    } else gone.push(row);
  }
  return { kept, gone, fresh: [...byPlace.values()] };
}

/** What the orphaned blocks announced, withdrawals excluded. */
export async function announcedIn(db: Db, network: string, blockHashes: string[]): Promise<Announced[]> {
  if (blockHashes.length === 0) return [];
  return db
    .select()
    .from(notifications)
    .where(
      and(
        eq(notifications.chain, network),
        inArray(notifications.blockHash, blockHashes),
        ne(notifications.state, 'cancelled'),
        notLike(notifications.dedupeKey, 'reorg:%'),
      ),
    );
}

/**
 * Within the reorganisation's transaction: the kept notifications now point at their block on
 * the new branch (so a later reorganisation finds them there); the gone ones are cancelled if
 * never sent, else withdrawn by a `reorg: true` notification; the fresh ones are enqueued.
 */
export async function applyDiff(tx: Db, network: string, diff: ReorgDiff): Promise<void> {
  for (const { row, blockHash, dedupeKey } of diff.kept) {
    await tx.update(notifications).set({ blockHash, dedupeKey }).where(eq(notifications.id, row.id));
  }
  const { sent } = await cancelUnsent(tx, diff.gone, 'its block left the canonical chain before it was sent');
  await enqueueNotifications(tx, [...sent.map((n) => withdrawal(network, n)), ...diff.fresh]);
}

/**
 * Of notifications to take back, cancels those no receiver can have seen yet (held, or waiting for
 * their first attempt, not in the event feed) with `reason`, and returns the others, which need a
 * withdrawal notification.
 */
export async function cancelUnsent(
  tx: Db,
  rows: Announced[],
  reason: string,
): Promise<{ sent: Announced[] }> {
  // Once in the event feed, a notification may have been read there: it counts as sent.
  const read = await alreadyInFeed(
    tx,
    rows.map((n) => n.id),
  );
  const unsent = rows.filter(
    (n) =>
      !read.has(n.id) && (n.state === 'held' || (n.state === 'pending' && n.attempts === 0 && !n.lockedBy)),
  );
  if (unsent.length > 0) {
    await tx
      .update(notifications)
      .set({ state: 'cancelled', nextAttemptAt: null, lastError: reason })
      .where(
        inArray(
          notifications.id,
          unsent.map((n) => n.id),
        ),
      );
  }
  return { sent: rows.filter((n) => !unsent.includes(n)) };
}

/**
 * The notification that takes back a sent one: the same body, an id of its own, `reorg: true`, and the
 * event type of the one it takes back with `.reorg` (`address.transaction.reorg`, `contract.log.reorg`).
 */
function withdrawal(network: string, n: Announced): NewNotification {
  const dedupeKey = `reorg:${n.id}`;
  const id = chainNotificationId(n.subscriptionId, network, dedupeKey);
  return {
    id,
    accountId: n.accountId,
    subscriptionId: n.subscriptionId,
    eventType: `${n.eventType}.reorg`,
    body: JSON.stringify({ ...(JSON.parse(n.body) as object), id, reorg: true }),
    dedupeKey,
    chain: network,
    blockNumber: n.blockNumber ?? undefined,
    blockHash: n.blockHash ?? undefined,
  };
}
