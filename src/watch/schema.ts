import { bigint, pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * How far each network has been processed. Written in the same transaction as the notifications
 * the block produced, so a restart resumes with no block skipped and none notified twice.
 */
export const chainCursors = pgTable('chain_cursors', {
  network: text('network').primaryKey(),
  height: bigint('height', { mode: 'number' }).notNull(),
  hash: text('hash').notNull(),
  updatedAt: timestamp('updated_at', { withTimezone: true, precision: 3, mode: 'date' }).notNull(),
});

/** The last blocks processed per network, to find the common ancestor when the chain reorganises. */
export const chainHeaders = pgTable(
  'chain_headers',
  {
    network: text('network').notNull(),
    height: bigint('height', { mode: 'number' }).notNull(),
    hash: text('hash').notNull(),
    parentHash: text('parent_hash').notNull(),
  },
  (t) => [primaryKey({ columns: [t.network, t.height] })],
);
