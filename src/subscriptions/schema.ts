import { bigserial, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';

// The subscriptions table is the webhook endpoint delivery reads (notify/schema.ts); this domain
// writes it, and owns what a subscription watches.
export { type PreviousSecret, subscriptions } from '../notify/schema.js';

const at = (name: string) => timestamp(name, { withTimezone: true, precision: 3, mode: 'date' });

/**
 * The addresses an ADDRESS_TRANSACTION subscription watches, one row each (a subscription may
 * watch many of its network). `network` repeats the subscription's, so a row says alone what it
 * watches.
 */
export const subscriptionAddresses = pgTable(
  'subscription_addresses',
  {
    // No foreign key: its check per row was a large share of adding 100,000 addresses
    // (bench/results/2026-12-07-measurements-behind-the-code.md#subscription-addresses), and nothing
    // deletes a subscription's row (deletion is `deleted_at`); rows are written only with their
    // subscription, in the transaction that creates it or under its row lock.
    subscriptionId: uuid('subscription_id').notNull(),
    network: text('network').notNull(),
    /** As stored (normalised per family). */
    address: text('address').notNull(),
    createdAt: at('created_at').notNull(),
  },
  // No index by (network, address): nothing reads it so (the watchers keep that in memory), and it
  // made adding many addresses much slower.
  (t) => [primaryKey({ columns: [t.subscriptionId, t.address] })],
);

/**
 * Subscription changes too large for a NOTIFY payload (PostgreSQL's limit is 8000 bytes): the
 * payload carries `seq`, and the watchers of other processes read the change (JSON) here. Rows
 * older than a few minutes are deleted by later changes.
 */
export const subscriptionChanges = pgTable('subscription_changes', {
  seq: bigserial('seq', { mode: 'bigint' }).primaryKey(),
  change: text('change').notNull(),
  createdAt: at('created_at').notNull().defaultNow(),
});
