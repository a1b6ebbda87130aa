import { sql } from 'drizzle-orm';
import { v7 as uuidv7 } from 'uuid';
import type { Db } from '../store/db.js';
import { notifications } from './schema.js';

/** NOTIFY channel that wakes dispatchers (in this and other processes) when work is added. */
export const OUTBOX_CHANNEL = 'ledgerhook_outbox';

export interface NewNotification {
  /** The notification id, also `webhook-id` and the body's `id`; see `newNotificationId`. */
  id: string;
  accountId: string;
  subscriptionId: string;
  eventType: string;
  /** The exact JSON to send. */
  body: string;
  dedupeKey?: string;
  /**
   * 'held' waits for confirmations (see `releaseHeight`); 'failed' records a notification for a
   * disabled subscription: kept, replayable, not sent.
   */
  state?: 'pending' | 'held' | 'failed';
  lastError?: string;
  armedBy?: string;
  /** Where a chain notification's transfer was seen. */
  chain?: string;
  blockNumber?: number;
  blockHash?: string;
  releaseHeight?: number;
}

const ROWS_PER_INSERT = 1_000;

/** Time-ordered, so the delivery log pages by id. */
export function newNotificationId(): string {
  return uuidv7();
}

/**
 * Writes notifications in the caller's transaction, so they commit (or not) with whatever
 * produced them. A dedupe key already present for the subscription inserts nothing.
 * Returns the ids inserted.
 */
export async function enqueueNotifications(
  tx: Db,
  items: NewNotification[],
  now: Date = new Date(),
): Promise<string[]> {
  if (items.length === 0) return [];
  const inserted: string[] = [];
  // PostgreSQL binds at most 65,535 parameters per statement; a row takes 15.
  for (let start = 0; start < items.length; start += ROWS_PER_INSERT) {
    const rows = await tx
      .insert(notifications)
      .values(
        items.slice(start, start + ROWS_PER_INSERT).map((n) => ({
          id: n.id,
          accountId: n.accountId,
          subscriptionId: n.subscriptionId,
          eventType: n.eventType,
          body: n.body,
          dedupeKey: n.dedupeKey ?? null,
          state: n.state ?? 'pending',
          armedBy: n.armedBy ?? 'created',
          lastError: n.lastError ?? null,
          nextAttemptAt: (n.state ?? 'pending') === 'pending' ? now : null,
          createdAt: now,
          chain: n.chain ?? null,
          blockNumber: n.blockNumber ?? null,
          blockHash: n.blockHash ?? null,
          releaseHeight: n.releaseHeight ?? null,
        })),
      )
      .onConflictDoNothing({ target: [notifications.subscriptionId, notifications.dedupeKey] })
      .returning({ id: notifications.id });
    for (const r of rows) inserted.push(r.id);
  }
  if (items.some((n) => (n.state ?? 'pending') === 'pending')) await signalOutbox(tx);
  return inserted;
}

/** Wakes dispatchers in every process when the caller's transaction commits. */
export async function signalOutbox(tx: Db): Promise<void> {
  await tx.execute(sql`SELECT pg_notify(${OUTBOX_CHANNEL}, '')`);
}
