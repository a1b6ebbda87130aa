import { sql } from 'drizzle-orm';
import { bigint, index, integer, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { subscriptions } from '../subscriptions/schema.js';

const at = (name: string) => timestamp(name, { withTimezone: true, precision: 3, mode: 'date' });

/**
 * The outbox. A row is written in the producer's transaction and never deleted; dispatchers
 * claim due rows with FOR UPDATE SKIP LOCKED and hold them under a lease (`locked_until`).
 * `body` is the exact JSON sent, so every retry carries the same bytes and the same id.
 */
export const notifications = pgTable(
  'notifications',
  {
    id: uuid('id').primaryKey(),
    accountId: uuid('account_id').notNull(),
    subscriptionId: uuid('subscription_id')
      .notNull()
      .references(() => subscriptions.id),
    eventType: text('event_type').notNull(),
    body: text('body').notNull(),
    /** Producer's key for "the same notification" (e.g. tx + transfer), so replays insert nothing. */
    dedupeKey: text('dedupe_key'),
    /**
     * pending | delivered | failed, or held (waiting for confirmations) | cancelled (its block left
     * the canonical chain before it was sent).
     */
    state: text('state').notNull().default('pending'),
    /** Attempts made in all. */
    attempts: integer('attempts').notNull().default(0),
    /** Attempts since it was last armed; drives the retry schedule. */
    scheduleStep: integer('schedule_step').notNull().default(0),
    /** What armed it last: created | resend | recover | test */
    armedBy: text('armed_by').notNull().default('created'),
    nextAttemptAt: at('next_attempt_at'),
    lockedBy: text('locked_by'),
    lockedUntil: at('locked_until'),
    lastStatusCode: integer('last_status_code'),
    lastError: text('last_error'),
    createdAt: at('created_at').notNull(),
    deliveredAt: at('delivered_at'),
    /** For chain notifications: where the transfer was seen, to withdraw it if that block is orphaned. */
    chain: text('chain'),
    blockNumber: bigint('block_number', { mode: 'number' }),
    blockHash: text('block_hash'),
    /** A held notification becomes pending once the chain's head reaches this height. */
    releaseHeight: bigint('release_height', { mode: 'number' }),
  },
  (t) => [
    index('notifications_due_idx').on(t.nextAttemptAt).where(sql`state = 'pending'`),
    index('notifications_subscription_idx').on(t.subscriptionId, t.id),
    uniqueIndex('notifications_dedupe_idx').on(t.subscriptionId, t.dedupeKey),
    index('notifications_block_idx').on(t.chain, t.blockHash).where(sql`chain IS NOT NULL`),
    index('notifications_held_idx').on(t.chain, t.releaseHeight).where(sql`state = 'held'`),
    // Failed notifications are few and asked for often: recover, and the outbox depth in /metrics.
    index('notifications_failed_idx').on(t.subscriptionId, t.createdAt).where(sql`state = 'failed'`),
  ],
);

/** One row per HTTP attempt: what was answered, how long it took, and what happens next. */
export const deliveryAttempts = pgTable(
  'delivery_attempts',
  {
    id: uuid('id').primaryKey(),
    // No foreign key: its check (a lookup and a row lock per attempt, run as a trigger) was 17-31
    // µs of the ~110 µs PGlite spent recording each result (EXPLAIN ANALYZE of the result
    // statement, bench/README.md "Delivery on PGlite"). Attempts are inserted only from the result
    // statement's UPDATE … RETURNING of their notification, and resends and tests arm rows that
    // exist; no notification is ever deleted.
    notificationId: uuid('notification_id').notNull(),
    attemptNumber: integer('attempt_number').notNull(),
    /** scheduled | retry | resend | recover | test */
    trigger: text('trigger').notNull(),
    startedAt: at('started_at').notNull(),
    durationMs: integer('duration_ms').notNull(),
    statusCode: integer('status_code'),
    error: text('error'),
    /** At most 20 KB of what the endpoint answered. */
    responseBody: text('response_body'),
    /** delivered | retry | failed */
    outcome: text('outcome').notNull(),
    nextAttemptAt: at('next_attempt_at'),
  },
  (t) => [index('delivery_attempts_notification_idx').on(t.notificationId, t.attemptNumber)],
);

/**
 * Notifications waiting for a place in the event feed: written in the producer's transaction (or
 * when a held notification is released), taken by the sequencer once that transaction committed.
 * A queue of its own keeps the outbox's wide rows from being rewritten to sequence them. No
 * foreign keys here: their checks would lock outbox rows, and the sequencer must never wait on a
 * row lock while it holds the feed's lock (a reorganisation takes that lock holding row locks).
 */
export const feedQueue = pgTable(
  'feed_queue',
  {
    notificationId: uuid('notification_id').primaryKey(),
    /**
     * The notification's own created_at, copied so a pass takes the oldest entries by an index
     * range read instead of joining the whole queue with the outbox and sorting it.
     */
    createdAt: at('created_at').notNull(),
  },
  (t) => [index('feed_queue_order_idx').on(t.createdAt, t.notificationId)],
);

/**
 * The event feed: each notification's place in one total order, assigned after its transaction
 * committed by one sequencer at a time (see feed.ts), so `seq` grows without gaps in commit order.
 */
export const feedEvents = pgTable(
  'feed_events',
  {
    seq: bigint('seq', { mode: 'bigint' }).primaryKey(),
    notificationId: uuid('notification_id').notNull(),
    accountId: uuid('account_id').notNull(),
    subscriptionId: uuid('subscription_id').notNull(),
  },
  (t) => [
    uniqueIndex('feed_events_notification_idx').on(t.notificationId),
    index('feed_events_account_idx').on(t.accountId, t.seq),
    index('feed_events_subscription_idx').on(t.subscriptionId, t.seq),
  ],
);
