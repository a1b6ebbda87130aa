/**
 * The dispatcher's claims on the outbox: claiming due notifications under a lease, finding when the
 * next one is due, keeping the claim query on its index, and releasing the leases.
 */
import { sql } from 'drizzle-orm';
import { limitOf } from '../store/db.js';
import type { CredentialCache } from './credentials.js';
import { type DispatchContext, type Job, list, rowsOf } from './dispatch-context.js';

const MAINTENANCE_INTERVAL_MS = 30_000;

export function createClaimer(ctx: DispatchContext, { loadCredentials }: CredentialCache) {
  const { store, db, workerId, leaseMs, pollIntervalMs, now, log } = ctx;
  let lastMaintenance = 0;

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

  /**
   * Keeps the claim query on its index: after a burst of inserts, stale statistics make the
   * planner read and sort the whole backlog. PGlite has no autovacuum, so it is vacuumed here too.
   * `busySince` is set while claims come back full, i.e. there is a backlog.
   */
  async function maintain(busySince: number | undefined): Promise<void> {
    const at = now();
    if (busySince === undefined || at - lastMaintenance < MAINTENANCE_INTERVAL_MS) return;
    lastMaintenance = at;
    const started = now();
    await db.execute(
      store.kind === 'pglite' ? sql`VACUUM (ANALYZE) notifications` : sql`ANALYZE notifications`,
    );
    log.debug({ ms: now() - started }, 'outbox statistics refreshed');
  }

  /** Releases every claim, this dispatcher's or not (see `releaseAllClaimsOnStart`). */
  function releaseAllClaims() {
    return db.execute(
      sql`UPDATE notifications SET locked_by = NULL, locked_until = NULL WHERE locked_by IS NOT NULL`,
    );
  }

  /** Releases the rows this dispatcher still holds, so that they are sent again at once. */
  function releaseOwnClaims() {
    return db.execute(
      sql`UPDATE notifications SET locked_by = NULL, locked_until = NULL WHERE locked_by = ${workerId}`,
    );
  }

  /** Releases the rows of `ids` this dispatcher holds (rows handed over after it began stopping). */
  function releaseClaims(ids: string[]) {
    return db.execute(
      sql`UPDATE notifications SET locked_by = NULL, locked_until = NULL
          WHERE id = ANY(${list(ids)}::uuid[]) AND locked_by = ${workerId}`,
    );
  }

  return { claim, untilNextDue, maintain, releaseAllClaims, releaseOwnClaims, releaseClaims };
}

export type Claimer = ReturnType<typeof createClaimer>;
