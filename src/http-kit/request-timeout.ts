/**
 * Requests cut off by the server's own request timeout. Node answers 408 and closes the
 * connection itself, and the request then ends like one whose client hung up (aborted,
 * ECONNRESET): it is marked when Node times it out, so the log and the metrics can tell.
 */
import type { IncomingMessage } from 'node:http';

const timedOut = new WeakSet<IncomingMessage>();

export function markTimedOut(request: IncomingMessage): void {
  timedOut.add(request);
}

/** Whether the server cut this request off for not arriving in time (and answered 408). */
export function timedOutByServer(request: IncomingMessage): boolean {
  return timedOut.has(request);
}
