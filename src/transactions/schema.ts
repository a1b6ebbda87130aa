import { pgTable, primaryKey, text, timestamp } from 'drizzle-orm/pg-core';

/** Final transactions, as the exact JSON the API returns: they can no longer change. */
export const transactionCache = pgTable(
  'transaction_cache',
  {
    network: text('network').notNull(),
    txId: text('tx_id').notNull(),
    body: text('body').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, precision: 3, mode: 'date' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.network, t.txId] })],
);
