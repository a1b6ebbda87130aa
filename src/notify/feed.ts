import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { createSleeper } from '../shared/sleeper.js';
import { type Db, limitOf, type Store } from '../store/db.js';
import { OUTBOX_CHANNEL } from './outbox.js';

/**
 * The event feed's order. Producers only queue a notification (feed_queue, in their own
 * transaction); one sequencer at a time, under a transaction-level advisory lock, moves what has
 * committed from the queue into feed_events with the next numbers after the highest taken.
 *
 * Why a reader never skips a row committed late: a pass numbers only rows committed before its
 * statement began, starting after the highest number already committed; passes follow one another
 * strictly (the lock), and PostgreSQL releases a transaction's locks only after its commit is
 * visible, so each pass sees every earlier pass. Hence pass k's numbers are all above pass k-1's,
 * and any snapshot that sees pass k sees pass k-1: what a reader sees is always 1..H without a hole.
 * A reader resuming after H can only ever find numbers above H. A notification whose transaction
 * commits late is numbered by the pass after its commit, above everything read before.
 */

/** NOTIFY channel on which the sequencer announces new feed events (payload: account ids, or ''). */
export const FEED_CHANNEL = 'ledgerhook_feed';

/** Advisory lock (two-key form) held by a sequencing pass, and by a reorganisation deciding what was read. */
const FEED_LOCK_SPACE = 7_461_006;
const FEED_LOCK_KEY = 1;

/** Notifications in the feed are the ones webhook delivery sends: neither held nor cancelled. */
const FEED_STATES = sql`('pending', 'delivered', 'failed')`;

/** NOTIFY payloads are limited to 8,000 bytes: past this many accounts, every reader is woken. */
const MAX_NOTIFIED_ACCOUNTS = 150;

const rowsOf = <T>(result: unknown): T[] => (result as { rows: T[] }).rows;

/**
 * Within a reorganisation's transaction: of `ids`, those already in the feed (a reader may have
 * them, so they count as sent). Holds the sequencer off until the transaction ends, so that one
 * found outside the feed cannot enter it before the transaction cancels it.
 */
export async function alreadyInFeed(tx: Db, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  await tx.execute(sql`SELECT pg_advisory_xact_lock(${FEED_LOCK_SPACE}, ${FEED_LOCK_KEY})`);
  const rows = rowsOf<{ id: string }>(
    await tx.execute(sql`
      SELECT notification_id AS id FROM feed_events
      WHERE notification_id = ANY(${sql.param(ids)}::uuid[])`),
  );
  return new Set(rows.map((r) => r.id));
}

export interface SequencedPass {
  /** False when another process held the lock: nothing was done. */
  locked: boolean;
  /** Queue entries taken (sequenced, or dropped as cancelled). */
  taken: number;
  /** Feed events created. */
  sequenced: number;
  /** Accounts that got new events. */
  accounts: string[];
}

/**
 * One sequencing pass: at most `batch` committed queue entries, in creation order, numbered
 * after the highest number taken. Exported for tests; the sequencer below runs it.
 */
export async function sequencePass(db: Db, batch = 2_000): Promise<SequencedPass> {
  return db.transaction(async (tx) => {
    const [lock] = rowsOf<{ ok: boolean }>(
      await tx.execute(sql`SELECT pg_try_advisory_xact_lock(${FEED_LOCK_SPACE}, ${FEED_LOCK_KEY}) AS ok`),
    );
    if (!lock?.ok) return { locked: false, taken: 0, sequenced: 0, accounts: [] };
    // A statement of its own, after the lock: in READ COMMITTED its snapshot is taken now, so it
    // sees every earlier pass (in the lock's statement it might not). Under a stricter isolation
    // the primary key on seq turns a stale maximum into an error and a retry, never a duplicate.
    // Rows are found by index alone (the queue's order, then ids as arrays): a join here let the
    // planner hash the whole outbox on every pass (bench/README, "The feed's sequencer").
    const [row] = rowsOf<{ taken: number | string; sequenced: number | string; accounts: string | null }>(
      await tx.execute(sql`
        WITH next AS (
          SELECT notification_id AS id FROM feed_queue
          ORDER BY created_at, seq
          ${limitOf(batch)}
        ),
        taken AS (
          DELETE FROM feed_queue WHERE notification_id = ANY(ARRAY(SELECT id FROM next))
          RETURNING notification_id AS id
        ),
        top AS (SELECT coalesce(max(seq), 0) AS seq FROM feed_events),
        added AS (
          INSERT INTO feed_events (seq, notification_id, account_id, subscription_id)
          SELECT top.seq + row_number() OVER (ORDER BY n.created_at, n.seq), n.id, n.account_id, n.subscription_id
          FROM notifications n CROSS JOIN top
          WHERE n.id = ANY(ARRAY(SELECT id FROM taken)) AND n.state IN ${FEED_STATES}
          RETURNING account_id
        )
        SELECT (SELECT count(*) FROM taken) AS taken, (SELECT count(*) FROM added) AS sequenced,
          (SELECT string_agg(DISTINCT account_id::text, ',') FROM added) AS accounts`),
    );
    const accounts = row?.accounts ? row.accounts.split(',') : [];
    const sequenced = Number(row?.sequenced ?? 0);
    if (accounts.length > 0) {
      const payload = accounts.length > MAX_NOTIFIED_ACCOUNTS ? '' : accounts.join(',');
      await tx.execute(sql`SELECT pg_notify(${FEED_CHANNEL}, ${payload})`);
    }
    return { locked: true, taken: Number(row?.taken ?? 0), sequenced, accounts };
  });
}

export interface FeedSequencerOptions {
  store: Store;
  logger: Logger;
  /** The floor under LISTEN/NOTIFY: the queue is looked at least this often. */
  pollIntervalMs: number;
  /** After a pass that added events: the accounts that got them (wakes this process's readers). */
  onSequenced(accounts: string[]): void;
  batch?: number;
}

/** When another process holds the lock, look again this soon: its pass may have missed a commit. */
const BUSY_RETRY_MS = 20;

/**
 * Runs sequencing passes whenever the outbox signals new work (NOTIFY, from this process or
 * another), and at least every `pollIntervalMs`. Every process serving the API runs one; the lock
 * lets one pass run at a time and the others wait for their next signal.
 */
export function createFeedSequencer(options: FeedSequencerOptions) {
  const { store, logger, pollIntervalMs, onSequenced } = options;
  const batch = options.batch ?? 2_000;
  const log = logger.child({ component: 'feed-sequencer' });
  const { sleep, wake } = createSleeper();
  let running = false;
  let loopDone: Promise<void> | undefined;
  let unlisten: (() => Promise<void>) | undefined;

  async function loop(): Promise<void> {
    while (running) {
      let delay = pollIntervalMs;
      try {
        const pass = await sequencePass(store.db, batch);
        if (pass.accounts.length > 0) onSequenced(pass.accounts);
        if (!pass.locked) delay = Math.min(pollIntervalMs, BUSY_RETRY_MS);
        else if (pass.taken === batch) continue; // a backlog: the next batch at once
      } catch (err) {
        if (!running) break;
        log.error({ err }, 'sequencing the event feed failed; retrying');
      }
      if (running) await sleep(delay);
    }
  }

  return {
    async start(): Promise<void> {
      if (running) return;
      running = true;
      unlisten = await store.listen(OUTBOX_CHANNEL, wake);
      loopDone = loop();
    },
    /** Nudges the loop, e.g. after this process committed notifications. */
    wake,
    async stop(): Promise<void> {
      if (!running) return;
      running = false;
      wake();
      await loopDone;
      await unlisten?.().catch(() => {});
    },
  };
}

export type FeedSequencer = ReturnType<typeof createFeedSequencer>;
