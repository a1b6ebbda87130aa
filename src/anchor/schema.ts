import { sql } from 'drizzle-orm';
import { bigint, index, integer, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';

const at = (name: string) => timestamp(name, { withTimezone: true, precision: 3, mode: 'date' });

/**
 * One leaf per registry: SHA-256 over its salt and canonical JSON, computed when the registry is
 * created. `salt` is null for an encrypted registry, whose salt is sealed with its content.
 * `batchId` is set, with the leaf's position, in the transaction that builds the batch's tree.
 */
export const anchorLeaves = pgTable(
  'anchor_leaves',
  {
    registryId: uuid('registry_id').primaryKey(),
    accountId: uuid('account_id').notNull(),
    leaf: text('leaf').notNull(),
    salt: text('salt'),
    /** The registry's callback endpoint, told `registry.anchored`; null without a callback_url. */
    subscriptionId: uuid('subscription_id'),
    batchId: uuid('batch_id'),
    position: integer('position'),
    createdAt: at('created_at').notNull(),
  },
  (t) => [
    index('anchor_leaves_unbatched_idx').on(t.registryId).where(sql`batch_id IS NULL`),
    index('anchor_leaves_batch_idx').on(t.batchId, t.position),
  ],
);

/**
 * A Merkle tree of leaves and where its root is on chain. `state`: `pending` until a transaction
 * holding the root is `confirmations` deep, then `anchored`; `final` once it is deep enough that
 * it can no longer leave the chain (it is no longer watched). A batch whose transaction leaves the
 * chain goes back to `pending` and is sent again.
 */
export const anchorBatches = pgTable(
  'anchor_batches',
  {
    id: uuid('id').primaryKey(),
    network: text('network').notNull(),
    /** The chain the network was when the batch was cut: `eip155:<chain id>`, or an Algorand genesis hash. */
    chain: text('chain').notNull(),
    root: text('root').notNull(),
    leafCount: integer('leaf_count').notNull(),
    state: text('state').notNull(),
    txId: text('tx_id'),
    blockNumber: bigint('block_number', { mode: 'number' }),
    blockHash: text('block_hash'),
    anchoredAt: at('anchored_at'),
    createdAt: at('created_at').notNull(),
  },
  (t) => [index('anchor_batches_open_idx').on(t.network, t.createdAt).where(sql`state <> 'final'`)],
);

/**
 * Every transaction signed for a batch, recorded before it is broadcast so that a restart sends
 * the same bytes again rather than a second transaction. `sentAt` is null until the node took it.
 * `state`: `live` (may still be included), `replaced` (a higher fee took its nonce), `dropped`
 * (left the chain, failed or expired; a new transaction was signed).
 */
export const anchorTransactions = pgTable(
  'anchor_transactions',
  {
    txId: text('tx_id').primaryKey(),
    batchId: uuid('batch_id').notNull(),
    network: text('network').notNull(),
    raw: text('raw').notNull(),
    /** The family's own details: nonce and fees on EVM, the validity window on Algorand. */
    details: jsonb('details').$type<Record<string, string | number>>().notNull(),
    state: text('state').notNull(),
    createdAt: at('created_at').notNull(),
    sentAt: at('sent_at'),
  },
  (t) => [index('anchor_transactions_batch_idx').on(t.batchId)],
);
