/**
 * The dispatcher's results: finished attempts collected into batches and recorded, each batch in
 * one statement (or one transaction): the notifications' new state and retry time, their attempt
 * rows, the subscriptions' health, and the disabling of subscriptions that keep failing.
 */
import { sql } from 'drizzle-orm';
import { v7 as uuidv7 } from 'uuid';
import { type Completion, type DispatchContext, list, rowsOf } from './dispatch-context.js';

/**
 * Results wait this long for more to record with them (or until a batch is full): with a shorter
 * wait a busy dispatcher wrote small batches, paying a statement's fixed cost (and on PGlite its
 * planning in this process) several times over
 * (bench/results/2026-12-07-measurements-behind-the-code.md#delivery-results).
 */
const RECORD_DELAY_MS = 50;

/**
 * A batch of results as one JSON parameter, read with json_to_recordset: one JSON.stringify costs
 * far less than binding a dozen arrays, which pg serialises element by element (its arrayString was
 * the dispatcher's largest allocation site under load).
 */
function resultsJson(batch: Completion[]): string {
  return JSON.stringify(
    batch.map((c) => {
      // All keys always present (an object spread of the attempt cost more than the stringify).
      const a = c.attempt;
      return {
        id: c.id,
        outcome: c.outcome,
        counted: a ? 1 : 0,
        step: c.scheduleStep,
        delay_ms: c.delayMs,
        status_code: c.statusCode,
        error: wellFormed(c.error),
        attempt_id: a ? uuidv7() : null,
        attempt_number: a ? a.number : null,
        trigger: a ? a.trigger : null,
        started_at: a ? a.startedAt.toISOString() : null,
        duration_ms: a ? a.durationMs : null,
        response_body: a ? wellFormed(a.responseBody) : null,
      };
    }),
  );
}

/**
 * PostgreSQL's JSON refuses \u0000 and an unpaired surrogate (\ud800) when read as text, and one such
 * string would fail the whole batch: NUL is dropped (text cannot hold it) and a lone surrogate becomes
 * U+FFFD, as UTF-8 encoding made it before.
 */
function wellFormed(text: string | null): string | null {
  const es2024 = text as (string & { isWellFormed(): boolean; toWellFormed(): string }) | null;
  if (es2024 === null) return null;
  const kept = es2024.includes('\u0000') ? es2024.replaceAll('\u0000', '') : es2024;
  return es2024.isWellFormed() ? kept : (kept as typeof es2024).toWellFormed();
}

export function createRecorder(ctx: DispatchContext) {
  const { db, workerId, batchSize, disableAfterMs, log } = ctx;
  /** Finished, waiting for the next flush. */
  const completions: Completion[] = [];
  let flushing: Promise<void> = Promise.resolve();
  let flushTimer: NodeJS.Timeout | undefined;

  function scheduleFlush(): void {
    if (completions.length >= batchSize) {
      void flush();
    } else if (!flushTimer) {
      flushTimer = setTimeout(() => void flush(), RECORD_DELAY_MS);
    }
  }

  /** Records finished attempts in one transaction per batch; batches run one after another. */
  function flush(): Promise<void> {
    if (flushTimer) {
      clearTimeout(flushTimer);
      flushTimer = undefined;
    }
    const batch = completions.splice(0);
    if (batch.length === 0) return flushing;
    flushing = flushing
      .then(() => record(batch))
      .catch((err) => log.error({ err }, 'could not record delivery results'));
    return flushing;
  }

  async function record(batch: Completion[]): Promise<void> {
    const attempts = batch.filter((c) => c.attempt);
    const succeeded = [
      ...new Set(attempts.filter((c) => c.outcome === 'delivered').map((c) => c.subscriptionId)),
    ];
    // Results, their attempt rows and the subscriptions' health in one statement: the common
    // case (everything delivered) costs one round trip. Only rows this worker still holds are
    // updated (a lease lost to another dispatcher, or a manual resend, wins); a retry for a
    // subscription disabled meanwhile fails at once.
    const statement = sql`
      WITH v AS (
        SELECT * FROM json_to_recordset(${resultsJson(batch)}::json)
          AS v(id uuid, outcome text, counted int, step int, delay_ms bigint, status_code int, error text,
               attempt_id uuid, attempt_number int, trigger text, started_at timestamptz, duration_ms int,
               response_body text)
      ),
      upd AS (
        UPDATE notifications n SET
          state = CASE
            WHEN v.outcome <> 'retry' THEN v.outcome
            WHEN s.status <> 'active' OR s.deleted_at IS NOT NULL THEN 'failed'
            ELSE 'pending' END,
          attempts = n.attempts + v.counted,
          schedule_step = v.step,
          next_attempt_at = CASE
            WHEN v.delay_ms IS NULL OR s.status <> 'active' OR s.deleted_at IS NOT NULL THEN NULL
            ELSE now() + v.delay_ms * interval '1 millisecond' END,
          delivered_at = CASE WHEN v.outcome = 'delivered' THEN now() ELSE n.delivered_at END,
          last_status_code = coalesce(v.status_code, n.last_status_code),
          last_error = CASE
            WHEN v.outcome = 'retry' AND s.deleted_at IS NOT NULL THEN 'subscription deleted'
            WHEN v.outcome = 'retry' AND s.status <> 'active' THEN 'subscription disabled: ' || coalesce(s.disabled_reason, '')
            ELSE v.error END,
          locked_by = NULL,
          locked_until = NULL
        FROM v, subscriptions s
        WHERE n.id = v.id AND s.id = n.subscription_id AND n.locked_by = ${workerId}
        RETURNING n.id, v.counted, v.attempt_id, v.attempt_number, v.trigger, v.started_at, v.duration_ms,
          v.status_code, v.error, v.response_body, v.outcome, v.delay_ms
      ),
      -- From the updated rows themselves: matching them back to v was a nested loop over both.
      ins AS (
        INSERT INTO delivery_attempts (id, notification_id, attempt_number, trigger, started_at, duration_ms,
                                       status_code, error, response_body, outcome, next_attempt_at)
        SELECT u.attempt_id, u.id, u.attempt_number, u.trigger, u.started_at, u.duration_ms, u.status_code,
               u.error, u.response_body, u.outcome,
               CASE WHEN u.delay_ms IS NULL THEN NULL ELSE now() + u.delay_ms * interval '1 millisecond' END
        FROM upd u
        WHERE u.counted = 1
        RETURNING 1
      ),
      healthy AS (
        UPDATE subscriptions SET failing_since = NULL
        WHERE id = ANY(${list(succeeded)}::uuid[]) AND failing_since IS NOT NULL
        RETURNING 1
      )
      SELECT (SELECT count(*) FROM upd) AS updated`;

    const failedSubs = [
      ...new Set(attempts.filter((c) => c.outcome !== 'delivered').map((c) => c.subscriptionId)),
    ];
    const stillFailing = failedSubs.filter((id) => !succeeded.includes(id));
    const disable = new Map<string, string>();
    for (const c of batch) if (c.disableReason) disable.set(c.subscriptionId, c.disableReason);
    if (stillFailing.length === 0 && disable.size === 0) {
      await db.execute(statement);
      return;
    }
    await db.transaction(async (tx) => {
      await tx.execute(statement);
      if (stillFailing.length > 0) {
        const result = await tx.execute(sql`
          UPDATE subscriptions SET failing_since = coalesce(failing_since, now())
          WHERE id = ANY(${list(stillFailing)}::uuid[])
          RETURNING id, failing_since < now() - ${disableAfterMs} * interval '1 millisecond' AS expired`);
        for (const row of rowsOf<{ id: string; expired: boolean }>(result)) {
          if (row.expired && !disable.has(row.id)) disable.set(row.id, 'every attempt failed for too long');
        }
      }
      for (const [subscriptionId, reason] of disable) {
        const disabled = await tx.execute(sql`
          UPDATE subscriptions SET status = 'disabled', disabled_reason = ${reason}, disabled_at = now()
          WHERE id = ${subscriptionId} AND status = 'active' RETURNING id`);
        if (rowsOf(disabled).length === 0) continue;
        log.warn({ subscription: subscriptionId, reason }, 'subscription disabled');
        // Its waiting notifications fail now; they stay replayable after it is re-enabled.
        await tx.execute(sql`
          UPDATE notifications SET state = 'failed', next_attempt_at = NULL, last_error = 'subscription disabled: ' || ${reason}
          WHERE subscription_id = ${subscriptionId} AND state = 'pending'`);
      }
    });
  }

  return {
    completions,
    scheduleFlush,
    flush,
    /** The batches being recorded, the last one included. */
    settled: (): Promise<void> => flushing,
  };
}

export type Recorder = ReturnType<typeof createRecorder>;
