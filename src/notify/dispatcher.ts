/**
 * The dispatcher: claims due notifications from the outbox, sends them, and records the results.
 * Composed of its parts, which share one context built here: the claimer (claims and leases,
 * claimer.ts), the credentials cache (credentials.ts), the sender (sender.ts), the recorder
 * (recorder.ts) and the loop that drives them (dispatch-loop.ts). This file owns the lifecycle.
 */
import { createClaimer } from './claimer.js';
import { createCredentials } from './credentials.js';
import { type DispatcherOptions, dispatchContext } from './dispatch-context.js';
import { createDispatchLoop } from './dispatch-loop.js';
import { OUTBOX_CHANNEL } from './outbox.js';
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
  const { inflight, loop, startClaiming, stopClaiming, wake } = createDispatchLoop(ctx, claimer, sender);

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
    /** Notifications in flight in this process. */
    inflightCount: () => inflight.size,
  };
}

export type NotificationDispatcher = ReturnType<typeof createDispatcher>;
