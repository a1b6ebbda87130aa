/**
 * One backfill job replayed a chunk at a time (see createBackfillRunner): the job marked started,
 * each chunk's notifications committed with its new position, failures retried with a backoff
 * shown in the job's `error`, and the job finished.
 */
import { and, eq, sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { Network } from '../chains/networks.js';
import { isNodeError, nodeUnavailable } from '../chains/node-errors.js';
import type { ChainBlock, HistoryScan, UntracedBlock } from '../chains/source.js';
import { LedgerhookError } from '../errors.js';
import { enqueueNotifications, type NewNotification } from '../notify/outbox.js';
import { createSleeper } from '../shared/sleeper.js';
import type { Db, HeldLock } from '../store/db.js';
import { isDatabaseUnavailable } from '../store/unavailable.js';
import type { WatchedEndpoint } from '../subscriptions/events.js';
import { subscriptions } from '../subscriptions/schema.js';
import { blockNotifications } from '../watch/follower/follower.js';
import { recordTraceGaps } from '../watch/trace-gaps/tracker.js';
import { type BackfillFamily, eventLookupOf, type Lookup, lookupOf } from './families.js';
import type { BackfillRow } from './jobs.js';
import { backfills } from './schema.js';
import { watchedAddresses } from './watched.js';

/** The runner's settings a job reads (its BackfillRunnerDeps). */
export interface JobRunnerDeps {
  db: Db;
  family(network: string): BackfillFamily | undefined;
  /** How often running backfills (created by other processes, or left by a dead one) are looked for. */
  pollIntervalMs: number;
  /** Longest wait between retries when a node or the database fails. */
  maxBackoffMs?: number;
}

/** What a job shares with its runner: the log, the sleepers stopping wakes, whether it still runs. */
export interface JobRunnerParts {
  log: Logger;
  /** Each job waits on its own, so that stopping wakes them all. */
  jobSleepers: Set<ReturnType<typeof createSleeper>>;
  /** The runner has not been stopped. */
  isRunning: () => boolean;
}

/** Why a chunk failed, as the job's owner reads it in `error`. */
function progressError(network: Network, err: unknown): string {
  if (isNodeError(err)) return nodeUnavailable(network, err).message;
  if (isDatabaseUnavailable(err)) return 'The database is unavailable';
  return 'An unexpected error stopped this chunk; the service log has its detail';
}

/**
 * A chunk's notifications, as the live follower would have made them for its blocks (with
 * `backfill: true`): an address subscription's transfers of the addresses it watches, an event
 * subscription's logs of its event on its contracts (or any). Lists are re-read per chunk: they
 * may change while a long backfill runs.
 */
async function chunkNotifications(
  db: Db,
  family: BackfillFamily,
  job: BackfillRow,
  watching: WatchedEndpoint,
  { from, to, head }: { from: number; to: number; head: number },
): Promise<{ items: NewNotification[]; traceGaps: UntracedBlock[] }> {
  let scan: HistoryScan<unknown>;
  let lookup: Lookup;
  const { contractEvent } = watching;
  if (contractEvent) {
    // Checked when the job starts (replay): a family without events never gets here.
    if (!family.events) throw new Error(`the ${job.network} network has no history of contract events`);
    const contracts = contractEvent.anyContract
      ? undefined
      : await watchedAddresses(db, job.subscriptionId, family.caseless);
    scan = await family.events.scan(from, to, { event: contractEvent.event, contracts });
    lookup = eventLookupOf({ ...watching, contractEvent }, scan.watched);
  } else {
    const watched = await watchedAddresses(db, job.subscriptionId, family.caseless);
    scan = await family.history.scan(from, to, watched);
    lookup = lookupOf(watching, scan.watched, family.caseless);
  }
  const match = family.matcher(lookup);
  const items: NewNotification[] = [];
  for (const block of scan.blocks as ChainBlock<unknown>[])
    items.push(...blockNotifications(job.network, block, await match(block), head, { backfill: true }));
  return { items, traceGaps: scan.traceGaps ?? [] };
}

/** The job stopped on purpose (cancelled, subscription gone, lock lost): not an error. */
export class Stopped extends LedgerhookError {}

/** Runs one job's chunks to its end; throws Stopped when it stops on purpose. */
export function createJobRunner(deps: JobRunnerDeps, { log, jobSleepers, isRunning }: JobRunnerParts) {
  async function stillRunning(id: string): Promise<boolean> {
    const [row] = await deps.db
      .select({ state: backfills.state })
      .from(backfills)
      .where(eq(backfills.id, id));
    return row?.state === 'running';
  }

  async function finish(id: string, state: 'done' | 'failed', error: string | null): Promise<void> {
    const now = new Date();
    await deps.db
      .update(backfills)
      .set({ state, error, updatedAt: now, finishedAt: now })
      .where(and(eq(backfills.id, id), eq(backfills.state, 'running')));
  }

  async function run(job: BackfillRow, lock: HeldLock | undefined): Promise<void> {
    const jlog = log.child({ backfill: job.id, subscription: job.subscriptionId });
    const nap = createSleeper();
    jobSleepers.add(nap);
    try {
      await replay(job, lock, jlog, nap);
    } finally {
      jobSleepers.delete(nap);
    }
  }

  async function replay(
    job: BackfillRow,
    lock: HeldLock | undefined,
    jlog: Logger,
    nap: ReturnType<typeof createSleeper>,
  ): Promise<void> {
    let lost = false;
    void lock?.lost.then(() => {
      lost = true;
    });
    const family = deps.family(job.network);
    if (!family) {
      await finish(job.id, 'failed', `the ${job.network} network has no node configured here`);
      return;
    }
    const [sub] = await deps.db.select().from(subscriptions).where(eq(subscriptions.id, job.subscriptionId));
    if (!sub || sub.deletedAt) {
      await finish(job.id, 'failed', 'the subscription was deleted');
      return;
    }
    if (sub.contractEvent && !family.events) {
      await finish(job.id, 'failed', `contract events have no history on the ${job.network} network here`);
      return;
    }
    const watching: WatchedEndpoint = {
      id: sub.id,
      accountId: sub.accountId,
      network: job.network,
      confirmations: sub.confirmations,
      mempool: sub.mempool,
      ...(sub.contractEvent ? { contractEvent: sub.contractEvent } : {}),
    };
    const depth = Math.max(1, sub.confirmations);
    let position = job.position;
    await deps.db
      .update(backfills)
      .set({ startedAt: new Date(), startedPosition: position, updatedAt: new Date() })
      .where(eq(backfills.id, job.id));
    jlog.info({ from: position + 1, to: job.toHeight }, 'backfill running');
    let failures = 0;
    while (position < job.toHeight) {
      if (!isRunning() || lost || !(await stillRunning(job.id))) throw new Stopped();
      try {
        const from = position + 1;
        let to = Math.min(job.toHeight, position + family.history.chunk);
        // A block is notified once as deep as the subscription asks, as the follower does: the
        // range's last blocks wait for their confirmations rather than be held in the outbox.
        const head = await family.history.tip();
        to = Math.min(to, head - depth + 1);
        if (to < from) {
          await nap.sleep(deps.pollIntervalMs);
          continue;
        }
        const { items, traceGaps } = await chunkNotifications(deps.db, family, job, watching, {
          from,
          to,
          head,
        });
        await deps.db.transaction(async (tx) => {
          const inserted = await enqueueNotifications(tx, items);
          // Its untraceable blocks are gaps like the follower's, filled the same way.
          await recordTraceGaps(tx, job.network, traceGaps);
          const moved = await tx
            .update(backfills)
            .set({
              position: to,
              found: sql`${backfills.found} + ${inserted.length}`,
              traceGaps: sql`${backfills.traceGaps} + ${traceGaps.length}`,
              error: null,
              updatedAt: new Date(),
            })
            .where(and(eq(backfills.id, job.id), eq(backfills.state, 'running')))
            .returning({ id: backfills.id });
          // Cancelled meanwhile: none of this chunk is kept.
          if (moved.length === 0) throw new Stopped();
        });
        position = to;
        failures = 0;
      } catch (err) {
        if (err instanceof Stopped) throw err;
        failures++;
        const waitMs = Math.min(
          deps.maxBackoffMs ?? 30_000,
          deps.pollIntervalMs * 2 ** Math.min(failures, 10),
        );
        // The job's view shows this to its owner: our words, never the node's URL or a library's.
        const message = progressError(family.network, err);
        jlog.warn({ err, retryInMs: waitMs }, 'backfill chunk failed; retrying');
        await deps.db
          .update(backfills)
          .set({ error: message.slice(0, 1_000), updatedAt: new Date() })
          .where(and(eq(backfills.id, job.id), eq(backfills.state, 'running')))
          .catch(() => {});
        await nap.sleep(waitMs);
      }
    }
    await finish(job.id, 'done', null);
    jlog.info('backfill done');
  }

  return { run };
}
