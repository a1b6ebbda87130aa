import { sql } from 'drizzle-orm';
import {
  bigserial,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core';
import { accounts } from '../accounts/schema.js';
import type { SignatureScheme } from '../notify/signing.js';
import type { Sealed } from '../secrets/envelope.js';

/** A rotated-out signing secret and when it stops signing (ISO 8601). */
export interface PreviousSecret {
  secret: Sealed;
  expiresAt: string;
}

const at = (name: string) => timestamp(name, { withTimezone: true, precision: 3, mode: 'date' });

/**
 * A webhook endpoint and what it listens to: an address on a network (ADDRESS_TRANSACTION) or the
 * events of one registry (REGISTRY_EVENTS). The signing secret (or ed25519 private key) and the
 * callback token are sealed with the master key; they are shown once, at creation or rotation
 * (a private key never: its public key is shown instead).
 */
export const subscriptions = pgTable(
  'subscriptions',
  {
    id: uuid('id').primaryKey(),
    accountId: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    type: text('type').notNull(),
    network: text('network'),
    address: text('address'),
    registryId: uuid('registry_id'),
    url: text('url').notNull(),
    mempool: boolean('mempool').notNull().default(false),
    /** EVM: also a `type: "fee"` notification for each mined transaction the address sent. */
    fees: boolean('fees').notNull().default(false),
    confirmations: integer('confirmations').notNull().default(1),
    ack: text('ack').notNull().default('status'),
    /** hmac (`whsec_` secrets, `v1` signatures) or ed25519 (`whsk_` keys, `v1a` signatures). */
    signature: text('signature').$type<SignatureScheme>().notNull().default('hmac'),
    /** The signing secret: a `whsec_` secret, or an ed25519 subscription's `whsk_` private key. */
    secret: jsonb('secret').$type<Sealed>().notNull(),
    /** ed25519 only: the `whpk_` public key of `secret`, in clear (it is public, shown on every GET). */
    publicKey: text('public_key'),
    /** Rotated-out secrets that still sign beside `secret` until they expire (oldest first). */
    previousSecrets: jsonb('previous_secrets').$type<PreviousSecret[]>().notNull().default([]),
    /** Bumped by every rotation, so dispatchers know their cached keys are stale. */
    secretVersion: integer('secret_version').notNull().default(0),
    callbackToken: jsonb('callback_token').$type<Sealed>().notNull(),
    /** Addresses in subscription_addresses, kept by the statements that change them. */
    addressCount: integer('address_count').notNull().default(0),
    status: text('status').notNull().default('active'),
    disabledReason: text('disabled_reason'),
    disabledAt: at('disabled_at'),
    /** Start of the current run of failed attempts; cleared by any success. */
    failingSince: at('failing_since'),
    createdAt: at('created_at').notNull(),
    deletedAt: at('deleted_at'),
  },
  (t) => [
    index('subscriptions_account_idx').on(t.accountId, t.id),
    index('subscriptions_watch_idx').on(t.network, t.address).where(sql`deleted_at IS NULL`),
    // An ed25519 subscription without its public key could not be verified by anyone.
    check(
      'subscriptions_signature_check',
      sql`(${t.signature} = 'hmac' AND ${t.publicKey} IS NULL) OR (${t.signature} = 'ed25519' AND ${t.publicKey} IS NOT NULL)`,
    ),
  ],
);

/**
 * The addresses an ADDRESS_TRANSACTION subscription watches, one row each (a subscription may
 * watch many of its network). `network` repeats the subscription's, so a row says alone what it
 * watches.
 */
export const subscriptionAddresses = pgTable(
  'subscription_addresses',
  {
    // No foreign key: its check per row was a third to half of adding 100,000 addresses (PGlite
    // 1.43-1.53 s with it, 0.82-1.04 s without; PostgreSQL 0.98-1.02 s, 0.66-0.86 s), and nothing
    // deletes a subscription's row (deletion is `deleted_at`); rows are written only with their
    // subscription, in the transaction that creates it or under its row lock.
    subscriptionId: uuid('subscription_id').notNull(),
    network: text('network').notNull(),
    /** As stored (normalised per family). */
    address: text('address').notNull(),
    createdAt: at('created_at').notNull(),
  },
  // No index by (network, address): nothing reads it so (the watchers keep that in memory), and it
  // made adding 100,000 addresses up to twice as slow.
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
