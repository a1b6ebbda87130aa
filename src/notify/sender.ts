/**
 * Sending one claimed notification: the request built and signed, posted through undici with a
 * timeout, at most `maxResponseBytes` of the answer read, and the outcome classified (delivered,
 * retried after the policy's delay, or failed) and handed to the recorder.
 */
import type { CredentialCache } from './credentials.js';
import type { DispatchContext, Job, Outcome } from './dispatch-context.js';
import { dispatchPost, type PostInFlight, postTarget } from './http-post.js';
import type { Recorder } from './recorder.js';
import { parseRetryAfter } from './retry-policy.js';
import { signWebhook } from './signing.js';

/** The usual acknowledgement, recognised without parsing it. */
const ACKNOWLEDGEMENT = '{"status":"success"}';

interface HttpResult {
  statusCode: number | null;
  responseBody: string | null;
  error: string | null;
  retryAfterMs?: number;
}

function errorText(err: unknown): string {
  const e = err as Error & { code?: string; cause?: unknown };
  const cause = e.cause as (Error & { code?: string }) | undefined;
  // undici wraps connect failures; the cause names what really happened (refused, blocked, DNS).
  if (cause?.message && cause.message !== e.message) return `${e.message}: ${cause.message}`;
  return e.code && !e.message.includes(e.code) ? `${e.code}: ${e.message}` : e.message;
}

/** Whether an answer acknowledges the notification, and if not, why not. */
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

export function createSender(
  ctx: DispatchContext,
  { credentials }: CredentialCache,
  { completions, scheduleFlush }: Pick<Recorder, 'completions' | 'scheduleFlush'>,
) {
  const { options, httpDispatcher, policy, requestTimeoutMs, maxResponseBytes, userAgent, now, log } = ctx;
  /** Requests in flight, aborted if they outlast the shutdown grace period. */
  const live = new Set<PostInFlight>();
  let aborting = false;

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

  /** Aborts every request in flight: shutdown's grace period is over. */
  function abortAll(): void {
    aborting = true;
    for (const request of live) request.abort(new Error('shutdown'));
  }

  return { handle, abortAll };
}

export type Sender = ReturnType<typeof createSender>;
