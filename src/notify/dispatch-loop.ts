/**
 * The dispatcher's loop: claims while there is room in the slots and the read-ahead, starts the
 * claimed jobs as slots free up, and sleeps until woken (new work, a free claim's worth of room)
 * or the next notification is due.
 */
import { createSleeper } from '../shared/sleeper.js';
import type { Claimer } from './claimer.js';
import type { DispatchContext, Job } from './dispatch-context.js';
import type { Sender } from './sender.js';

/** Time left in a lease after a request's timeout for its result to be recorded. */
const RECORD_ROOM_MS = 1_000;

export function createDispatchLoop(
  ctx: DispatchContext,
  { claim, untilNextDue, maintain }: Pick<Claimer, 'claim' | 'untilNextDue' | 'maintain'>,
  { handle }: Pick<Sender, 'handle'>,
) {
  const { concurrency, batchSize, leaseMs, pollIntervalMs, requestTimeoutMs, now, log } = ctx;
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
  /** True from start until shutdown begins; nothing is claimed or sent once it is false. */
  let running = false;

  const { sleep, wake } = createSleeper();

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
          await maintain(busySince);
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
   * The first step of shutdown, synchronous so that nothing can slip in after it: no notification
   * is claimed or sent from now on. Deliveries already in flight go on until `stop`.
   */
  function stopClaiming(): void {
    running = false;
    wake();
  }

  /** From start until `stopClaiming`: claims may be made and jobs sent. */
  function startClaiming(): void {
    running = true;
  }

  /** Rows a claim could take now: free slots and read-ahead (0 once shutdown began). */
  function room(): number {
    return running ? Math.max(0, concurrency + readAhead - inflight.size - ready.length) : 0;
  }

  /**
   * Jobs claimed by a producer of this process in its own transaction (outbox.ts, OutboxHandoff),
   * started as slots are free, as the loop's claims are. False when shutdown has begun: none is
   * taken, and the caller releases them.
   */
  function accept(jobs: readonly Job[], claimedAt: number): boolean {
    if (!running) return false;
    for (const job of jobs) ready.push({ job, claimedAt });
    startReady();
    return true;
  }

  return { inflight, loop, startClaiming, stopClaiming, wake, room, accept };
}

export type DispatchLoop = ReturnType<typeof createDispatchLoop>;
