import { sql } from 'drizzle-orm';
import { bigint, index, integer, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { accounts } from '../accounts/schema.js';
import { subscriptions } from '../subscriptions/schema.js';

const at = (name: string) => timestamp(name, { withTimezone: true, precision: 3, mode: 'date' });

/**
 * A history backfill of one subscription: the block range it replays and how far it has come.
 * `position` is the last block whose notifications are committed, written in the same transaction
 * as them, so a restarted process resumes right after it.
 */
export const backfills = pgTable(
  'backfills',
  {
    id: uuid('id').primaryKey(),
    accountId: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    subscriptionId: uuid('subscription_id')
      .notNull()
      .references(() => subscriptions.id, { onDelete: 'cascade' }),
    network: text('network').notNull(),
    fromHeight: bigint('from_height', { mode: 'number' }).notNull(),
    toHeight: bigint('to_height', { mode: 'number' }).notNull(),
    /** Last block done; from − 1 before the first. */
    position: bigint('position', { mode: 'number' }).notNull(),
    /** Notifications this backfill added (not those the live follower had already made). */
    found: integer('found').notNull().default(0),
    /** Blocks of the range read without their internal transfers: trace gaps (watch/trace-gaps/). */
    traceGaps: integer('trace_gaps').notNull().default(0),
    /** running, done, cancelled or failed. */
    state: text('state').notNull(),
    error: text('error'),
    /** What was asked (block numbers or times), as given. */
    requestedFrom: text('requested_from').notNull(),
    requestedTo: text('requested_to'),
    createdAt: at('created_at').notNull(),
    /** When processing (re)started in the current process: the ETA counts from here. */
    startedAt: at('started_at'),
    /** The position at `startedAt`. */
    startedPosition: bigint('started_position', { mode: 'number' }),
    updatedAt: at('updated_at').notNull(),
    finishedAt: at('finished_at'),
  },
  (t) => [
    // One running backfill per subscription, whatever races the API processes run.
    uniqueIndex('backfills_one_running_idx').on(t.subscriptionId).where(sql`state = 'running'`),
    index('backfills_subscription_idx').on(t.subscriptionId, t.createdAt),
    index('backfills_running_idx').on(t.state).where(sql`state = 'running'`),
  ],
);
