import { sql } from 'drizzle-orm';
import { parse as uuidParse, v5 as uuidv5, v7 as uuidv7 } from 'uuid';
import type { Db } from '../store/db.js';

/** NOTIFY channel that wakes dispatchers (in this and other processes) when work is added. */
export const OUTBOX_CHANNEL = 'ledgerhook_outbox';

export interface NewNotification {
  /**
   * The notification id, also `webhook-id` and the body's `id`: `chainNotificationId` for what a
   * chain did, `newNotificationId` for the rest (tests, registries).
   */
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

/**
 * Rows per statement: the columns travel as one array each, so there is no limit on parameters;
 * this bounds the statement's size (a backfill may write many thousands).
 */
const ROWS_PER_INSERT = 2_000;

/** A random id, for notifications that are not a chain event (tests, registry callbacks). */
export function newNotificationId(): string {
  return uuidv7();
}

/**
 * The namespace of chain notification ids (a fixed random UUID). Changing it changes every id
 * a receiver has stored, so it never changes.
 */
export const CHAIN_NOTIFICATION_NAMESPACE = '3f0c2b4e-8d1a-4c6f-9b52-7a2e1d9c4f08';
const NAMESPACE_BYTES = uuidParse(CHAIN_NOTIFICATION_NAMESPACE);

/**
 * The id of a chain notification, a function of what it is: a name-based UUID (version 5) of the
 * subscription, the network and the producer's dedupe key, which names the block hash and the
 * transfer (or log) for a mined one, the transaction for a pending one, and the notification it
 * takes back for a withdrawal (`reorg:`, `dropped:`). A block processed again, after a restart,
 * a backfill, a failover to a replica that lost the last commits or a restore, yields the same
 * ids, so a receiver that deduplicates by `webhook-id` never processes one chain event twice.
 */
export function chainNotificationId(subscriptionId: string, chain: string, dedupeKey: string): string {
  // As bytes: uuid's own UTF-8 encoding of a string (through encodeURIComponent) and its parse of
  // the namespace cost 5% of a follower's CPU on blocks full of hits (bench/README.md, issue 33).
  return uuidv5(Buffer.from(`${subscriptionId}\n${chain}\n${dedupeKey}`, 'utf8'), NAMESPACE_BYTES);
}

/**
 * Writes notifications in the caller's transaction, so they commit (or not) with whatever
 * produced them. A dedupe key already present for the subscription inserts nothing.
 * Returns the ids inserted.
 *
 * One statement writes the rows and their places in the event feed: the columns travel as arrays
 * (`unnest`), which costs a fifth of the client CPU of a multi-row VALUES of 15 parameters a row
 * and halves the transaction on both backends (bench/README.md, "Issue 33: the outbox write").
 */
export async function enqueueNotifications(
  tx: Db,
  items: NewNotification[],
  now: Date = new Date(),
): Promise<string[]> {
  return (await enqueueAndClaim(tx, items, undefined, now)).inserted;
}

/**
 * A dispatcher in the producer's own process, which takes the new rows without a claim query: the
 * producer inserts them already claimed under the dispatcher's lease, and hands them over once its
 * transaction commits. Rows the dispatcher has no room for are left to claims, as are all of them
 * when it takes none (`claim` undefined: shutting down, or full). A process that dies holding them
 * leaves them to the lease, like any claim.
 */
export interface OutboxHandoff {
  /** What the next transaction may claim, as of now (the lease's start). */
  claim(): OutboxClaim | undefined;
  /** After the commit: the rows claimed under `claim`, with their subscriptions. */
  accept(claim: OutboxClaim, rows: ClaimedNotification[]): void;
}

export interface OutboxClaim {
  workerId: string;
  leaseMs: number;
  /** Rows to claim at most, the first pending ones. */
  limit: number;
  /** When the lease starts, in the dispatcher's clock (before the transaction's own now()). */
  claimedAt: number;
}

/** A notification inserted claimed, with what sending it needs of its subscription. */
export interface ClaimedNotification {
  notification: NewNotification;
  url: string;
  ack: string;
  subscriptionStatus: string;
  subscriptionDeleted: boolean;
  credentialsVersion: string;
}

/** NOTIFY payload of rows inserted claimed: the feed's sequencer wakes, dispatchers need not. */
export const CLAIMED_PAYLOAD = 'claimed';

/** `enqueueNotifications`, inserting up to `claim.limit` pending rows claimed (OutboxHandoff). */
export async function enqueueAndClaim(
  tx: Db,
  items: NewNotification[],
  claim: OutboxClaim | undefined,
  now: Date = new Date(),
): Promise<{ inserted: string[]; claimed: ClaimedNotification[] }> {
  const inserted: string[] = [];
  const claimed: ClaimedNotification[] = [];
  let toClaim = claim?.limit ?? 0;
  for (let start = 0; start < items.length; start += ROWS_PER_INSERT) {
    const chunk = items.slice(start, start + ROWS_PER_INSERT);
    const claiming = chunk.map((n) => (n.state ?? 'pending') === 'pending' && toClaim-- > 0);
    const anyClaimed = claim !== undefined && claiming.some(Boolean);
    const rows = rowsOf<ClaimedRow>(
      await tx.execute(insertStatement(chunk, now, anyClaimed ? { claim, claiming } : undefined)),
    );
    const byId = anyClaimed ? new Map(chunk.map((n) => [n.id, n])) : undefined;
    for (const r of rows) {
      inserted.push(r.id);
      if (byId && r.url !== null && r.url !== undefined) claimed.push(claimedOf(byId.get(r.id)!, r));
    }
  }
  return { inserted, claimed };
}

interface ClaimedRow {
  id: string;
  url?: string | null;
  ack?: string;
  status?: string;
  deleted?: boolean;
  version?: number | string;
}

function claimedOf(notification: NewNotification, r: ClaimedRow): ClaimedNotification {
  return {
    notification,
    url: r.url!,
    ack: r.ack!,
    subscriptionStatus: r.status!,
    subscriptionDeleted: r.deleted === true,
    credentialsVersion: String(r.version),
  };
}

/**
 * The notifications in insertion order (so `seq` follows the array), and those not held in the
 * feed queue with the notification's `created_at` and `seq` (held ones enter it when released, as
 * they are sent only then). Data-modifying WITH clauses always run to completion, so the queue's
 * insert happens though the outer query does not read it. A row that enters the queue wakes
 * dispatchers and the feed's sequencer at commit (a failed one, for a disabled subscription, is in
 * the feed too); PostgreSQL sends one NOTIFY per transaction and payload however many rows ask.
 * With `claiming`, the rows marked are inserted under the claim's lease and come back with their
 * subscription's sending details.
 */
function insertStatement(
  items: readonly NewNotification[],
  now: Date,
  claiming?: { claim: OutboxClaim; claiming: boolean[] },
) {
  const column = <T>(value: (n: NewNotification) => T) => sql.param(items.map(value));
  const at = now.toISOString();
  const lockedBy = claiming ? sql`CASE WHEN claimed THEN ${claiming.claim.workerId} END` : sql`NULL`;
  const lockedUntil = claiming
    ? sql`CASE WHEN claimed THEN now() + ${claiming.claim.leaseMs} * interval '1 millisecond' END`
    : sql`NULL::timestamptz`;
  const result = claiming
    ? sql`SELECT i.id, s.url, s.ack, s.status, s.deleted_at IS NOT NULL AS deleted, s.secret_version AS version,
        CASE WHEN i.state <> 'held'
          THEN pg_notify(${OUTBOX_CHANNEL}, CASE WHEN i.locked_by IS NULL THEN '' ELSE ${CLAIMED_PAYLOAD} END) END
      FROM inserted i LEFT JOIN subscriptions s ON i.locked_by IS NOT NULL AND s.id = i.subscription_id`
    : sql`SELECT id, CASE WHEN state <> 'held' THEN pg_notify(${OUTBOX_CHANNEL}, '') END FROM inserted`;
  return sql`
    WITH inserted AS (
      INSERT INTO notifications (id, account_id, subscription_id, event_type, body, dedupe_key, state,
        armed_by, last_error, next_attempt_at, created_at, chain, block_number, block_hash, release_height,
        locked_by, locked_until)
      SELECT id, account_id, subscription_id, event_type, body, dedupe_key, state, armed_by, last_error,
        CASE WHEN state = 'pending' THEN ${at}::timestamptz END, ${at}::timestamptz,
        chain, block_number, block_hash, release_height, ${lockedBy}, ${lockedUntil}
      FROM unnest(${column((n) => n.id)}::uuid[], ${column((n) => n.accountId)}::uuid[],
        ${column((n) => n.subscriptionId)}::uuid[], ${column((n) => n.eventType)}::text[],
        ${column((n) => n.body)}::text[], ${column((n) => n.dedupeKey ?? null)}::text[],
        ${column((n) => n.state ?? 'pending')}::text[], ${column((n) => n.armedBy ?? 'created')}::text[],
        ${column((n) => n.lastError ?? null)}::text[], ${column((n) => n.chain ?? null)}::text[],
        ${column((n) => n.blockNumber ?? null)}::bigint[], ${column((n) => n.blockHash ?? null)}::text[],
        ${column((n) => n.releaseHeight ?? null)}::bigint[], ${sql.param(claiming?.claiming ?? [])}::boolean[])
        AS r(id, account_id, subscription_id, event_type, body, dedupe_key, state, armed_by, last_error,
          chain, block_number, block_hash, release_height, claimed)
      ON CONFLICT (subscription_id, dedupe_key) DO NOTHING
      RETURNING id, seq, state, locked_by, subscription_id
    ), queued AS (
      INSERT INTO feed_queue (notification_id, created_at, seq)
      SELECT id, ${at}::timestamptz, seq FROM inserted WHERE state <> 'held'
      ON CONFLICT DO NOTHING
    )
    ${result}`;
}

/**
 * Within the producer's transaction: these notifications take their place in the event feed
 * (see feed.ts) once it commits, in the order of their `createdAt` (the notification's own),
 * then of their `seq`.
 */
export async function queueForFeed(tx: Db, entries: readonly FeedEntry[]): Promise<void> {
  if (entries.length === 0) return;
  await tx.execute(sql`
    INSERT INTO feed_queue (notification_id, created_at, seq)
    SELECT * FROM unnest(${sql.param(entries.map((e) => e.id))}::uuid[],
                         ${sql.param(entries.map((e) => e.createdAt.toISOString()))}::timestamptz[],
                         ${sql.param(entries.map((e) => e.seq))}::bigint[])
    ON CONFLICT DO NOTHING`);
}

/** A notification entering the event feed, when it was created, and its place in the outbox. */
export interface FeedEntry {
  id: string;
  createdAt: Date;
  seq: number;
}

/** Wakes dispatchers in every process when the caller's transaction commits. */
export async function signalOutbox(tx: Db): Promise<void> {
  await tx.execute(sql`SELECT pg_notify(${OUTBOX_CHANNEL}, '')`);
}

/** How much waits in the outbox, for /metrics. */
export interface OutboxStats {
  /** Notifications by state: pending (due or scheduled), held (for confirmations), failed. */
  byState: Record<'pending' | 'held' | 'failed', number>;
  /** Pending, due now and claimed by no dispatcher. */
  due: number;
  /** Seconds the oldest due notification has waited (0 when none is due). */
  oldestDueSeconds: number;
}

const rowsOf = <T>(result: unknown): T[] => (result as { rows: T[] }).rows;

/**
 * Counts each state on its own partial index, so the outbox's growing history of delivered
 * notifications is never scanned.
 */
export async function outboxStats(db: Db): Promise<OutboxStats> {
  const [pending] = rowsOf<{ pending: number; due: number; oldest: number | string }>(
    await db.execute(sql`
      SELECT count(*)::int AS pending,
        count(*) FILTER (WHERE next_attempt_at <= now() AND (locked_until IS NULL OR locked_until < now()))::int AS due,
        coalesce(extract(epoch FROM now() - min(next_attempt_at)
          FILTER (WHERE next_attempt_at <= now() AND (locked_until IS NULL OR locked_until < now()))), 0) AS oldest
      FROM notifications WHERE state = 'pending'`),
  );
  const [held] = rowsOf<{ n: number }>(
    await db.execute(sql`SELECT count(*)::int AS n FROM notifications WHERE state = 'held'`),
  );
  const [failed] = rowsOf<{ n: number }>(
    await db.execute(sql`SELECT count(*)::int AS n FROM notifications WHERE state = 'failed'`),
  );
  return {
    byState: { pending: pending?.pending ?? 0, held: held?.n ?? 0, failed: failed?.n ?? 0 },
    due: pending?.due ?? 0,
    oldestDueSeconds: Math.max(0, Number(pending?.oldest ?? 0)),
  };
}
