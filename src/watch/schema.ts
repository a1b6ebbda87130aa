import { bigint, index, integer, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';

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

/**
 * Pending announcements that may still be withdrawn (docs/mempool.md): one row per
 * `address.transaction.pending` notification sent for a transaction not yet seen in a block. A
 * row goes when its transaction is mined, or when the announcement is withdrawn (`dropped: true`)
 * because another transaction took what it needed. Kept in the database so a process killed
 * between the announcement and the withdrawal still sends the withdrawal, once.
 */
export const pendingAnnouncements = pgTable(
  'pending_announcements',
  {
    /** The pending notification this row may withdraw. */
    notificationId: uuid('notification_id').primaryKey(),
    network: text('network').notNull(),
    txId: text('tx_id').notNull(),
    /**
     * What the transaction needs and another could take: on EVM its sender and nonce
     * (`0xsender:nonce`, lower case), on Bitcoin the outputs its inputs spend (`txid:vout`).
     */
    claims: text('claims').array().notNull(),
    announcedAt: timestamp('announced_at', { withTimezone: true, precision: 3, mode: 'date' }).notNull(),
    /** EVM: since when the node's pool has not held the transaction; null while it does. */
    missingSince: timestamp('missing_since', { withTimezone: true, precision: 3, mode: 'date' }),
  },
  (t) => [index('pending_announcements_network_idx').on(t.network, t.txId)],
);

/**
 * Trace gaps: EVM blocks committed without their internal transfers because the node could not
 * trace them (its state pruned, or its traces failing past LEDGERHOOK_TRACE_WAIT). Written in the
 * transaction that commits the block, so a crash neither loses nor doubles one; a gap goes when
 * it is filled or its block leaves the chain.
 */
export const traceGaps = pgTable(
  'trace_gaps',
  {
    network: text('network').notNull(),
    height: bigint('height', { mode: 'number' }).notNull(),
    hash: text('hash').notNull(),
    /** Why the node could not trace it, in our words (no node address). */
    reason: text('reason').notNull(),
    /** When the block was committed without its traces. */
    since: timestamp('since', { withTimezone: true, precision: 3, mode: 'date' }).notNull(),
    /** Attempts to fill it so far, and when the last one was made. */
    tries: integer('tries').notNull().default(0),
    triedAt: timestamp('tried_at', { withTimezone: true, precision: 3, mode: 'date' }),
  },
  (t) => [primaryKey({ columns: [t.network, t.height, t.hash] })],
);
