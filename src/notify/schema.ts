import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { accounts } from '../accounts/schema.js';
import type { FollowedEvent } from '../chains/evm/followed-event.js';
import type { Sealed } from '../secrets/envelope.js';
import type { SignatureScheme } from './signing.js';

const at = (name: string) => timestamp(name, { withTimezone: true, precision: 3, mode: 'date' });

/** A rotated-out signing secret and when it stops signing (ISO 8601). */
export interface PreviousSecret {
  secret: Sealed;
  expiresAt: string;
}

/**
 * What a CONTRACT_LOG_EVENT subscription follows: the event (its ABI and compiled filter), on any
 * contract or on those of its address list, and the filter as its owner gave it (shown on GET).
 */
export interface ContractEventSpec {
  event: FollowedEvent;
  /** No contract list: any contract that emits the event (Tatum's CONTRACT_LOG_EVENT). */
  anyContract: boolean;
  /** `attr.filter` as given, values normalised (addresses EIP-55); null without one. */
  filter: Record<string, unknown> | null;
}

/**
 * A webhook endpoint and what it listens to (written by the subscriptions domain, read here by
 * delivery, which needs its URL, secrets, acknowledgement and state): an address on a network
 * (ADDRESS_TRANSACTION), an event of contracts (CONTRACT_LOG_EVENT) or the events of one registry
 * (REGISTRY_EVENTS). The signing secret (or ed25519 private key) and the
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
    /** CONTRACT_LOG_EVENT: the event followed; its contracts are its addresses. */
    contractEvent: jsonb('contract_event').$type<ContractEventSpec>(),
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
 * The outbox. A row is written in the producer's transaction and never deleted; dispatchers
 * claim due rows with FOR UPDATE SKIP LOCKED and hold them under a lease (`locked_until`).
 * `body` is the exact JSON sent, so every retry carries the same bytes and the same id.
 */
export const notifications = pgTable(
  'notifications',
  {
    /**
     * A chain notification's id is derived from what it is (`chainNotificationId`), so it carries
     * no order; `seq` is the outbox's own key in insertion order, which the delivery log pages by
     * and the feed orders a batch by.
     */
    id: uuid('id').primaryKey(),
    seq: bigint('seq', { mode: 'number' }).notNull().generatedAlwaysAsIdentity(),
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
    index('notifications_subscription_idx').on(t.subscriptionId, t.seq),
    index('notifications_account_idx').on(t.accountId, t.seq),
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
    /** … and its `seq`, so entries created together keep the order they were written in. */
    seq: bigint('seq', { mode: 'number' }).notNull(),
  },
  (t) => [index('feed_queue_order_idx').on(t.createdAt, t.seq)],
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
