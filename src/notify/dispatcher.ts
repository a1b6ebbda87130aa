/**
 * The dispatcher: claims due notifications from the outbox, sends them, and records the results.
 * Composed of its parts, which share one context built here: the claimer (claims and leases,
 * claimer.ts), the credentials cache (credentials.ts), the sender (sender.ts), the recorder
 * (recorder.ts) and the loop that drives them (dispatch-loop.ts). This file owns the lifecycle.
 */
import { type Claimer, createClaimer } from './claimer.js';
import { type CredentialCache, createCredentials } from './credentials.js';
import {
  type DispatchContext,
  type DispatcherOptions,
  dispatchContext,
  type Job,
} from './dispatch-context.js';
import { createDispatchLoop, type DispatchLoop } from './dispatch-loop.js';
import { CLAIMED_PAYLOAD, OUTBOX_CHANNEL, type OutboxHandoff } from './outbox.js';
import { createRecorder } from './recorder.js';
import { createSender } from './sender.js';

export { secretContext, tokenContext } from './credentials.js';
export type { DeliveryObserver, DispatcherOptions } from './dispatch-context.js';

export function createDispatcher(options: DispatcherOptions) {
  const ctx = dispatchContext(options);
  const { store, workerId, requestTimeoutMs, log } = ctx;
  const credentials = createCredentials(ctx);
  const claimer = createClaimer(ctx, credentials);
  const recorder = createRecorder(ctx);
  const sender = createSender(ctx, credentials, recorder);
  const dispatchLoop = createDispatchLoop(ctx, claimer, sender);
  const { inflight, loop, startClaiming, stopClaiming, wake } = dispatchLoop;
  const handoff = createHandoff(ctx, credentials, claimer, dispatchLoop);

  let startedOnce = false;
  let stopping: Promise<void> | undefined;
  let loopDone: Promise<void> | undefined;
  let unlisten: (() => Promise<void>) | undefined;

  return {
    workerId,
    /** Starts claiming and delivering until `stop`. */
    async start(): Promise<void> {
      if (startedOnce) return;
      startedOnce = true;
      startClaiming();
      if (options.releaseAllClaimsOnStart) {
        await claimer.releaseAllClaims();
      }
      // Rows inserted claimed by a producer (handoff) are already on their way: no claim to make.
      unlisten = await store.listen(OUTBOX_CHANNEL, (payload) => {
        if (payload !== CLAIMED_PAYLOAD) wake();
      });
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
        const timer = setTimeout(() => sender.abortAll(), graceMs);
        await loopDone;
        await Promise.all([...inflight]);
        clearTimeout(timer);
        await recorder.flush();
        await recorder.settled();
        try {
          await claimer.releaseOwnClaims();
          await unlisten?.();
        } catch (err) {
          // The leases expire by themselves; nothing is lost if the database is already gone.
          log.warn({ err }, 'could not release claimed notifications on stop');
        }
      })();
      return stopping;
    },
    /** For a producer in this process: its new rows, claimed as it inserts them (OutboxHandoff). */
    handoff,
    /** Notifications in flight in this process. */
    inflightCount: () => inflight.size,
  };
}

export type NotificationDispatcher = ReturnType<typeof createDispatcher>;

/**
 * The dispatcher's side of OutboxHandoff (outbox.ts): what a producer in this process may claim
 * (the room in the slots and read-ahead), and the rows it claimed, started as the loop's claims
 * are. A block's notification then leaves without the NOTIFY's trip and a claim query
 * (bench/README.md, "Issue 33: latency").
 */
function createHandoff(
  ctx: DispatchContext,
  { loadCredentials }: CredentialCache,
  { releaseClaims }: Pick<Claimer, 'releaseClaims'>,
  { room, accept }: Pick<DispatchLoop, 'room' | 'accept'>,
): OutboxHandoff {
  const { workerId, leaseMs, now, log } = ctx;

  /** Rows claimed for a dispatcher that stopped meanwhile go back to the claims at once. */
  function release(ids: string[]): void {
    releaseClaims(ids).catch((err) =>
      log.warn({ err }, 'could not release handed-over notifications; their lease will'),
    );
  }

  return {
    claim() {
      const limit = room();
      return limit > 0 ? { workerId, leaseMs, limit, claimedAt: now() } : undefined;
    },
    accept(claim, rows) {
      if (rows.length === 0) return;
      const jobs: Job[] = rows.map((r) => ({
        id: r.notification.id,
        subscriptionId: r.notification.subscriptionId,
        eventType: r.notification.eventType,
        body: r.notification.body,
        attempts: 0,
        scheduleStep: 0,
        armedBy: r.notification.armedBy ?? 'created',
        url: r.url,
        ack: r.ack,
        credentialsVersion: r.credentialsVersion,
        subscriptionStatus: r.subscriptionStatus,
        subscriptionDeleted: r.subscriptionDeleted,
      }));
      loadCredentials(jobs).then(
        () => {
          if (!accept(jobs, claim.claimedAt)) release(jobs.map((j) => j.id));
        },
        // As a failed claim: the rows wait for their lease, then any dispatcher sends them.
        (err) => log.error({ err }, 'loading the credentials of handed-over notifications failed'),
      );
    },
  };
}
