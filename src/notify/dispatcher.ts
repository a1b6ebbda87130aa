import crypto from 'node:crypto';
import os from 'node:os';
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { v7 as uuidv7 } from 'uuid';
import type { Envelope, Sealed } from '../secrets/envelope.js';
import { createSleeper } from '../shared/sleeper.js';
import { type Db, limitOf, type Store } from '../store/db.js';
import { dispatchPost, type PostInFlight, postTarget } from './http-post.js';
import { OUTBOX_CHANNEL } from './outbox.js';
import { parseRetryAfter, type RetryPolicy } from './retry-policy.js';
import { type SigningKey, signingKey, signWebhook } from './signing.js';

/** What the dispatcher reports about each attempt, e.g. to Prometheus. */
export interface DeliveryObserver {
  attempt(outcome: 'delivered' | 'retry' | 'failed', durationMs: number): void;
}

export interface DispatcherOptions {
  store: Store;
  observer?: DeliveryObserver;
  /**
   * Release every claim at start. Only safe when no other dispatcher can share the database
   * (the embedded one, held by this process alone): claims left by a killed process go at once
   * instead of waiting for their lease to run out.
   */
  releaseAllClaimsOnStart?: boolean;
  envelope: Envelope;
  /** Outbound HTTP through the SSRF-safe connector. */
  httpDispatcher: Dispatcher;
  policy: RetryPolicy;
  logger: Logger;
  workerId?: string;
  /** Deliveries in flight at once. */
  concurrency?: number;
  /** Rows claimed per query. */
  batchSize?: number;
  /** How long a claim is held; longer than the request timeout, so a live worker never loses one. */
  leaseMs?: number;
  /** The floor under LISTEN/NOTIFY: due retries are found at least this often. */
  pollIntervalMs?: number;
  requestTimeoutMs?: number;
  /** A subscription failing for this long without one success is disabled. */
  disableAfterMs?: number;
  maxResponseBytes?: number;
  userAgent?: string;
  now?: () => number;
}

const MAINTENANCE_INTERVAL_MS = 30_000;
/** The usual acknowledgement, recognised without parsing it. */
const ACKNOWLEDGEMENT = '{"status":"success"}';
/**
 * Results wait this long for more to record with them (or until a batch is full). At 10 ms a
 * busy dispatcher wrote batches of 25-50 rows, paying a statement's fixed cost (and on PGlite its
 * planning in this process) several times over.
 */
const RECORD_DELAY_MS = 50;
/** Time left in a lease after a request's timeout for its result to be recorded. */
const RECORD_ROOM_MS = 1_000;

/** Sealing contexts of a subscription's secrets (shared with the subscription service). */
export const secretContext = (subscriptionId: string) => `subscription:${subscriptionId}:secret`;
export const tokenContext = (subscriptionId: string) => `subscription:${subscriptionId}:token`;

interface Job {
  id: string;
  subscriptionId: string;
  /** Sent as the Ledgerhook-Event-Type header, so receivers can route without parsing. */
  eventType: string;
  body: string;
  attempts: number;
  scheduleStep: number;
  armedBy: string;
  url: string;
  ack: string;
  /** Changes when the secret is rotated, so cached credentials are reloaded. */
  credentialsVersion: string;
  subscriptionStatus: string;
  subscriptionDeleted: boolean;
}

/** A subscription's opened secrets, kept in memory between deliveries. */
interface Credentials {
  version: string;
  /**
   * The current key, then each rotated-out key with the time it stops signing; parsed once here
   * (an HMAC key, or an Ed25519 KeyObject), not per delivery.
   */
  signingKeys: { key: SigningKey; until: number }[];
  authorization: string;
}

type Outcome = 'delivered' | 'retry' | 'failed';

interface Completion {
  id: string;
  subscriptionId: string;
  /** Absent when nothing was sent (the subscription was disabled meanwhile). */
  attempt?: {
    number: number;
    trigger: string;
    startedAt: Date;
    durationMs: number;
    statusCode: number | null;
    error: string | null;
    responseBody: string | null;
  };
  outcome: Outcome;
  scheduleStep: number;
  delayMs: number | null;
  statusCode: number | null;
  error: string | null;
  /** Disable the subscription at once (410 Gone). */
  disableReason?: string;
}

interface HttpResult {
  statusCode: number | null;
  responseBody: string | null;
  error: string | null;
  retryAfterMs?: number;
}

const rowsOf = <T>(result: unknown): T[] => (result as { rows: T[] }).rows;
/** Binds a JS array as one PostgreSQL array parameter (drizzle would otherwise expand it into a list). */
const list = (values: unknown[]) => sql.param(values);

function errorText(err: unknown): string {
  const e = err as Error & { code?: string; cause?: unknown };
  const cause = e.cause as (Error & { code?: string }) | undefined;
  // undici wraps connect failures; the cause names what really happened (refused, blocked, DNS).
  if (cause?.message && cause.message !== e.message) return `${e.message}: ${cause.message}`;
  return e.code && !e.message.includes(e.code) ? `${e.code}: ${e.message}` : e.message;
}

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

export function createDispatcher(options: DispatcherOptions) {
  const { store, envelope, httpDispatcher, policy, logger } = options;
  const db: Db = store.db;
  const workerId =
    options.workerId ?? `${os.hostname()}:${process.pid}:${crypto.randomBytes(3).toString('hex')}`;
  const concurrency = options.concurrency ?? 256;
  const batchSize = options.batchSize ?? 200;
  const leaseMs = options.leaseMs ?? 60_000;
  const pollIntervalMs = options.pollIntervalMs ?? 1_000;
  const requestTimeoutMs = options.requestTimeoutMs ?? 15_000;
  const disableAfterMs = options.disableAfterMs ?? 5 * 86_400_000;
  const maxResponseBytes = options.maxResponseBytes ?? 20 * 1024;
  const userAgent = options.userAgent ?? 'Ledgerhook-Webhooks';
  const now = options.now ?? Date.now;
  const log = logger.child({ component: 'dispatcher', workerId });

  const inflight = new Set<Promise<void>>();
  /** Rows claimed per claim under load: a claim of a row or two would spend the database on claims. */
  const claimSize = Math.max(1, Math.min(batchSize, Math.floor(concurrency / 4)));
  /**
   * Claimed and waiting for a free slot. The next claim runs while the rows claimed before it are
   * sent: a claim waited for with the slots empty left them empty for its whole round trip.
   */
  const ready: { job: Job; claimedAt: number }[] = [];
  /** Claimed rows kept ahead of the free slots, at most. */
  const readAhead = 2 * claimSize;
  /** How long a claimed row may wait for a slot: its lease must outlast the request and its record. */
  const maxWaitMs = leaseMs - requestTimeoutMs - RECORD_ROOM_MS;
  /** When slots and read-ahead together fall to this, a claim's worth of room is free. */
  const wakeAt = concurrency + readAhead - claimSize;
  /** Set while claims come back full, i.e. there is a backlog. */
  let busySince: number | undefined;
  let lastMaintenance = 0;
  const completions: Completion[] = [];
  /** Requests in flight, aborted if they outlast the shutdown grace period. */
  const live = new Set<PostInFlight>();
  let aborting = false;
  /** True from start until shutdown begins; nothing is claimed or sent once it is false. */
  let running = false;
  let startedOnce = false;
  let stopping: Promise<void> | undefined;
  let loopDone: Promise<void> | undefined;
  let flushing: Promise<void> = Promise.resolve();
  let flushTimer: NodeJS.Timeout | undefined;
  let unlisten: (() => Promise<void>) | undefined;

  const { sleep, wake } = createSleeper();

  const credentials = new Map<string, Credentials>();

  /** Opens the secrets of subscriptions whose cached credentials are missing or outdated. */
  async function loadCredentials(jobs: Job[]): Promise<void> {
    const stale = [
      ...new Set(
        jobs
          .filter((j) => credentials.get(j.subscriptionId)?.version !== j.credentialsVersion)
          .map((j) => j.subscriptionId),
      ),
    ];
    if (stale.length === 0) return;
    const result = await db.execute(sql`
      SELECT id, secret, previous_secrets, secret_version, callback_token
      FROM subscriptions WHERE id = ANY(${list(stale)}::uuid[])`);
    if (credentials.size > 50_000) credentials.clear();
    for (const r of rowsOf<Record<string, unknown>>(result)) {
      const id = r.id as string;
      // The secret's prefix says how it signs (whsec_: v1 HMAC, whsk_: v1a Ed25519).
      const open = (sealed: Sealed) => signingKey(envelope.open(sealed, secretContext(id)));
      // Rotated-out secrets, as the subscriptions' previous_secrets column holds them.
      const previous = (r.previous_secrets ?? []) as { secret: Sealed; expiresAt: string }[];
      credentials.set(id, {
        version: String(r.secret_version),
        signingKeys: [
          { key: open(r.secret as Sealed), until: Number.POSITIVE_INFINITY },
          ...previous.map((p) => ({ key: open(p.secret), until: Date.parse(p.expiresAt) })),
        ],
        authorization: `Bearer ${envelope.open(r.callback_token as Sealed, tokenContext(id))}`,
      });
    }
  }

  async function claim(limit: number): Promise<Job[]> {
    const result = await db.execute(sql`
      WITH due AS (
        SELECT id FROM notifications
        WHERE state = 'pending' AND next_attempt_at <= now()
          AND (locked_until IS NULL OR locked_until < now())
        ORDER BY next_attempt_at
        ${limitOf(limit)}
        FOR UPDATE SKIP LOCKED
      )
      UPDATE notifications n
      SET locked_by = ${workerId}, locked_until = now() + ${leaseMs} * interval '1 millisecond'
      FROM due, subscriptions s
      WHERE n.id = due.id AND s.id = n.subscription_id
      RETURNING n.id, n.subscription_id, n.event_type, n.body, n.attempts, n.schedule_step, n.armed_by,
        s.url, s.ack, s.status, s.deleted_at IS NOT NULL AS deleted, s.secret_version AS version`);
    const jobs = rowsOf<Record<string, unknown>>(result).map((r) => ({
      id: r.id as string,
      subscriptionId: r.subscription_id as string,
      eventType: r.event_type as string,
      body: r.body as string,
      attempts: Number(r.attempts),
      scheduleStep: Number(r.schedule_step),
      armedBy: r.armed_by as string,
      url: r.url as string,
      ack: r.ack as string,
      credentialsVersion: String(r.version),
      subscriptionStatus: r.status as string,
      subscriptionDeleted: r.deleted === true,
    }));
    await loadCredentials(jobs);
    return jobs;
  }

  async function post(job: Job, headers: Record<string, string>): Promise<HttpResult> {
    let request: PostInFlight;
    try {
      request = dispatchPost(httpDispatcher, postTarget(job.url), headers, job.body, maxResponseBytes);
    } catch (err) {
      return { statusCode: null, responseBody: null, error: errorText(err) };
    }
    // A plain timer per request: AbortSignal.any/timeout cost measurably more.
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      request.abort(new Error('timed out'));
    }, requestTimeoutMs);
    live.add(request);
    try {
      const response = await request.done;
      const status = response.statusCode;
      const text = response.body;
      return {
        statusCode: status,
        // PostgreSQL text cannot hold NUL characters.
        responseBody: text.includes('\u0000') ? text.replaceAll('\u0000', '') : text,
        error: null,
        retryAfterMs:
          status === 429 || status === 503 ? parseRetryAfter(response.retryAfter, now()) : undefined,
      };
    } catch (err) {
      if (aborting) return { statusCode: null, responseBody: null, error: 'shutdown' };
      if (timedOut)
        return { statusCode: null, responseBody: null, error: `timed out after ${requestTimeoutMs} ms` };
      return { statusCode: null, responseBody: null, error: errorText(err) };
    } finally {
      clearTimeout(timer);
      live.delete(request);
    }
  }

  function acknowledged(job: Job, result: HttpResult): { ok: boolean; why?: string } {
    const status = result.statusCode;
    if (status === null) return { ok: false, why: result.error ?? 'no response' };
    if (status >= 300 && status < 400) return { ok: false, why: `redirect (${status}) not followed` };
    if (status < 200 || status >= 300) return { ok: false, why: `HTTP ${status}` };
    if (job.ack === '2xx' || result.responseBody === ACKNOWLEDGEMENT) return { ok: true };
    try {
      const parsed = JSON.parse(result.responseBody ?? '') as { status?: unknown };
      if (parsed && parsed.status === 'success') return { ok: true };
    } catch {
      // not JSON
    }
    return { ok: false, why: `HTTP ${status} without the acknowledgement body {"status":"success"}` };
  }

  async function handle(job: Job): Promise<void> {
    if (job.subscriptionStatus !== 'active' || job.subscriptionDeleted) {
      const why = job.subscriptionDeleted ? 'subscription deleted' : 'subscription disabled';
      completions.push({
        id: job.id,
        subscriptionId: job.subscriptionId,
        outcome: 'failed',
        scheduleStep: job.scheduleStep,
        delayMs: null,
        statusCode: null,
        error: why,
      });
      scheduleFlush();
      return;
    }
    const creds = credentials.get(job.subscriptionId);
    if (!creds) throw new Error(`no credentials loaded for subscription ${job.subscriptionId}`);
    const at = now();
    const keys = creds.signingKeys.filter((k) => k.until > at).map((k) => k.key);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      authorization: creds.authorization,
      'user-agent': userAgent,
      'ledgerhook-event-type': job.eventType,
      ...signWebhook(job.id, Math.floor(at / 1000), job.body, keys),
    };
    const startedAt = new Date(now());
    const result = await post(job, headers);
    const durationMs = Math.max(0, now() - startedAt.getTime());
    if (result.error === 'shutdown') return; // released below, not counted as an attempt

    const step = job.scheduleStep + 1;
    const ack = acknowledged(job, result);
    let outcome: Outcome;
    let delayMs: number | null = null;
    let disableReason: string | undefined;
    if (ack.ok) {
      outcome = 'delivered';
    } else if (result.statusCode === 410) {
      outcome = 'failed';
      disableReason = 'endpoint answered 410 Gone';
    } else {
      const next = policy.next(step, result.retryAfterMs);
      outcome = next.delayMs === undefined ? 'failed' : 'retry';
      delayMs = next.delayMs ?? null;
    }
    const error = ack.ok ? null : (ack.why ?? null);
    completions.push({
      id: job.id,
      subscriptionId: job.subscriptionId,
      attempt: {
        number: job.attempts + 1,
        trigger: job.scheduleStep === 0 ? (job.armedBy === 'created' ? 'scheduled' : job.armedBy) : 'retry',
        startedAt,
        durationMs,
        statusCode: result.statusCode,
        error,
        responseBody: result.responseBody,
      },
      outcome,
      scheduleStep: step,
      delayMs,
      statusCode: result.statusCode,
      error,
      disableReason,
    });
    // An operator reads the log, not only the API's delivery log: every failed attempt is a line.
    if (outcome !== 'delivered') {
      log.warn(
        {
          subscription: job.subscriptionId,
          notification: job.id,
          attempt: job.attempts + 1,
          status: result.statusCode,
          error,
          outcome,
          retryInMs: delayMs,
        },
        outcome === 'retry'
          ? 'delivery attempt failed; will retry'
          : disableReason
            ? `delivery failed: ${disableReason}; subscription disabled`
            : 'delivery failed: no attempts left',
      );
    }
    options.observer?.attempt(outcome, durationMs);
    scheduleFlush();
  }

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

  /**
   * How long until the earliest unclaimed notification is due, so retries leave on time without
   * busy polling (rows other dispatchers hold are not ours to wait for).
   */
  async function untilNextDue(): Promise<number> {
    try {
      const result = await db.execute(sql`
        SELECT extract(epoch FROM (min(next_attempt_at) - now())) * 1000 AS ms
        FROM notifications
        WHERE state = 'pending' AND (locked_until IS NULL OR locked_until < now())`);
      const ms = rowsOf<{ ms: string | number | null }>(result)[0]?.ms;
      if (ms === null || ms === undefined) return pollIntervalMs;
      return Math.min(pollIntervalMs, Math.max(5, Math.ceil(Number(ms))));
    } catch {
      return pollIntervalMs;
    }
  }

  /** Starts waiting jobs while slots are free. */
  function startReady(): void {
    while (running && inflight.size < concurrency && ready.length > 0) {
      const { job, claimedAt } = ready.shift()!;
      // Sent only if its request and the recording of its result end inside the lease; otherwise
      // the lease runs out and the row is claimed again (here or elsewhere), never sent twice.
      if (now() - claimedAt > maxWaitMs) {
        log.debug({ notification: job.id }, 'claimed notification waited too long; left to its lease');
        continue;
      }
      const task: Promise<void> = handle(job)
        .catch((err) => log.error({ err, notification: job.id }, 'delivery crashed'))
        .finally(() => {
          const above = inflight.size + ready.length > wakeAt;
          inflight.delete(task);
          startReady();
          // Once per crossing: waking on every finished delivery would claim a row or two each time.
          if (above && inflight.size + ready.length <= wakeAt) wake();
        });
      inflight.add(task);
    }
  }

  async function loop(): Promise<void> {
    while (running) {
      const room = concurrency + readAhead - inflight.size - ready.length;
      const wanted = Math.min(batchSize, room);
      if (room >= claimSize) {
        let claimed: Job[];
        // The lease runs from the claim's start (the database's now()), not from its answer.
        const claimedAt = now();
        try {
          await maintain();
          if (!running) break;
          claimed = await claim(wanted);
        } catch (err) {
          if (!running) break;
          log.error({ err }, 'claiming notifications failed; retrying');
          await sleep(pollIntervalMs);
          continue;
        }
        // Shutdown began while the claim was under way: send none of it (stop releases the rows).
        if (!running) break;
        if (claimed.length === wanted) busySince ??= now();
        else busySince = undefined;
        for (const job of claimed) ready.push({ job, claimedAt });
        startReady();
        // A full claim means a backlog: claim again at once if there is room for another.
        if (claimed.length < wanted) await sleep(await untilNextDue());
      } else {
        // Woken once a claim's worth of room is free, or by new work.
        await sleep(pollIntervalMs);
      }
    }
  }

  /**
   * Keeps the claim query on its index: after a burst of inserts, stale statistics make the
   * planner read and sort the whole backlog. PGlite has no autovacuum, so it is vacuumed here too.
   */
  async function maintain(): Promise<void> {
    const at = now();
    if (busySince === undefined || at - lastMaintenance < MAINTENANCE_INTERVAL_MS) return;
    lastMaintenance = at;
    const started = now();
    await db.execute(
      store.kind === 'pglite' ? sql`VACUUM (ANALYZE) notifications` : sql`ANALYZE notifications`,
    );
    log.debug({ ms: now() - started }, 'outbox statistics refreshed');
  }

  /**
   * The first step of shutdown, synchronous so that nothing can slip in after it: no notification
   * is claimed or sent from now on. Deliveries already in flight go on until `stop`.
   */
  function stopClaiming(): void {
    running = false;
    wake();
  }

  return {
    workerId,
    /** Starts claiming and delivering until `stop`. */
    async start(): Promise<void> {
      if (startedOnce) return;
      startedOnce = true;
      running = true;
      if (options.releaseAllClaimsOnStart) {
        await db.execute(
          sql`UPDATE notifications SET locked_by = NULL, locked_until = NULL WHERE locked_by IS NOT NULL`,
        );
      }
      unlisten = await store.listen(OUTBOX_CHANNEL, wake);
      loopDone = loop();
    },
    /** Nudges the loop, e.g. after this process enqueued something. */
    wake,
    stopClaiming,
    /**
     * Stops claiming, lets deliveries in flight finish for up to `graceMs` and aborts the rest,
     * records the results, and releases every row still claimed (aborted or never sent) so that
     * the next start, or another dispatcher, sends it at once.
     */
    stop(graceMs = requestTimeoutMs + 1_000): Promise<void> {
      if (!startedOnce) return Promise.resolve();
      stopping ??= (async () => {
        stopClaiming();
        // The grace runs from now, whatever the loop is waiting for (a slow database included).
        const timer = setTimeout(() => {
          aborting = true;
          for (const request of live) request.abort(new Error('shutdown'));
        }, graceMs);
        await loopDone;
        await Promise.all([...inflight]);
        clearTimeout(timer);
        await flush();
        await flushing;
        try {
          await db.execute(
            sql`UPDATE notifications SET locked_by = NULL, locked_until = NULL WHERE locked_by = ${workerId}`,
          );
          await unlisten?.();
        } catch (err) {
          // The leases expire by themselves; nothing is lost if the database is already gone.
          log.warn({ err }, 'could not release claimed notifications on stop');
        }
      })();
      return stopping;
    },
    /** Notifications in flight in this process. */
    inflightCount: () => inflight.size,
  };
}

export type NotificationDispatcher = ReturnType<typeof createDispatcher>;
