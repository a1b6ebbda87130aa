import { eq } from 'drizzle-orm';
import type { Logger } from 'pino';
import { createSleeper } from '../shared/sleeper.js';
import type { Db, HeldLock } from '../store/db.js';
import type { BackfillFamily } from './families.js';
import type { BackfillRow } from './jobs.js';
import { createJobRunner, Stopped } from './replay.js';
import { backfills } from './schema.js';

export interface BackfillRunnerDeps {
  db: Db;
  family(network: string): BackfillFamily | undefined;
  logger: Logger;
  /** How often running backfills (created by other processes, or left by a dead one) are looked for. */
  pollIntervalMs: number;
  /** One process runs a backfill at a time (PostgreSQL advisory lock; always granted on PGlite). */
  tryLock?: (name: string) => Promise<HeldLock | undefined>;
  /** Backfills run at once in this process. */
  concurrency?: number;
  /** Longest wait between retries when a node or the database fails. */
  maxBackoffMs?: number;
}

/**
 * Runs backfills: each range is replayed a chunk at a time through its family's history source and
 * the follower's matcher; a chunk's notifications and the job's new position commit together, so a
 * process killed mid-way resumes after the last chunk committed. Notifications carry the dedupe
 * keys the follower's would, so nothing the follower sent is sent again, nor the reverse.
 */
export function createBackfillRunner(deps: BackfillRunnerDeps) {
  const log = deps.logger.child({ component: 'backfill' });
  const sleeper = createSleeper();
  const active = new Map<string, Promise<void>>();
  /** Each job waits on its own, so that stopping wakes them all. */
  const jobSleepers = new Set<ReturnType<typeof createSleeper>>();
  const concurrency = deps.concurrency ?? 2;
  let running = false;
  let loopDone: Promise<void> | undefined;
  const { run } = createJobRunner(deps, { log, jobSleepers, isRunning: () => running });

  async function claim(job: BackfillRow): Promise<void> {
    const lock = deps.tryLock ? await deps.tryLock(`backfill:${job.id}`) : undefined;
    if (deps.tryLock && !lock) return;
    const done = run(job, lock)
      .catch((err: unknown) => {
        if (!(err instanceof Stopped)) log.error({ err, backfill: job.id }, 'backfill stopped by an error');
      })
      .finally(async () => {
        active.delete(job.id);
        await lock?.release().catch(() => {});
        sleeper.wake();
      });
    active.set(job.id, done);
  }

  async function loop(): Promise<void> {
    while (running) {
      try {
        if (active.size < concurrency) {
          const jobs = await deps.db
            .select()
            .from(backfills)
            .where(eq(backfills.state, 'running'))
            .orderBy(backfills.createdAt);
          for (const job of jobs) {
            if (!running || active.size >= concurrency) break;
            if (!active.has(job.id)) await claim(job);
          }
        }
      } catch (err) {
        log.warn({ err }, 'looking for backfills failed; retrying');
      }
      await sleeper.sleep(deps.pollIntervalMs);
    }
  }

  return {
    start(): void {
      if (running) return;
      running = true;
      loopDone = loop();
    },
    /** A backfill was created in this process: look now. */
    wake: sleeper.wake,
    async stop(): Promise<void> {
      running = false;
      sleeper.wake();
      for (const nap of jobSleepers) nap.wake();
      await loopDone;
      await Promise.all(active.values());
    },
  };
}

export type BackfillRunner = ReturnType<typeof createBackfillRunner>;
