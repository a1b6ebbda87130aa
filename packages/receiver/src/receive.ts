/**
 * What a webhook endpoint does with one request, whatever serves it: verify, deduplicate, call
 * the handler, and answer as Ledgerhook reads answers (a 2xx with `{"status":"success"}` is
 * delivered; anything else is retried). The express and fastify adapters only move bytes.
 */
import { createMemoryStore, type DeliveryStore } from './dedupe.js';
import { type EventType, eventTypeOf, type WebhookEvent } from './types.js';
import { createVerifier, type HeaderSource, type VerifyOptions, WebhookVerificationError } from './verify.js';

export interface DeliveryContext {
  /** `webhook-id`, equal to the body's `id`. */
  id: string;
  /** When this attempt was signed. */
  timestamp: Date;
  /** Told from the verified body (the Ledgerhook-Event-Type header is not signed). */
  eventType: EventType;
}

export type WebhookHandler = (event: WebhookEvent, context: DeliveryContext) => unknown;

export interface ReceiverOptions extends VerifyOptions {
  /** The subscription's `whsec_` secret or `whpk_` public key, or several during a rotation. */
  secret: string | readonly string[];
  /** Called once per notification; the acknowledgement waits for it. A throw answers 500, so it is retried. */
  handler: WebhookHandler;
  /**
   * Deduplication by `webhook-id`: a notification already handled is acknowledged without calling
   * the handler again. `false` turns it off. Default: in memory, for 24 hours.
   */
  dedupe?:
    | false
    | {
        store?: DeliveryStore;
        /** How long a handled id is remembered (default 24 h). */
        windowMs?: number;
        /** How long an id being handled is held against other processes sharing the store (default 60 s). */
        leaseMs?: number;
      };
  /** Told of handler and store failures (default: one line on stderr); they answer 500. */
  onError?: (error: unknown, id: string) => void;
}

/** The answer to send: status, content type, body. */
export interface ReceiverAnswer {
  status: number;
  contentType: string;
  body: string;
}

const DAY_MS = 24 * 60 * 60 * 1000;
const ACK: ReceiverAnswer = { status: 200, contentType: 'application/json', body: '{"status":"success"}' };

/** An RFC 9457 problem: the delivery log of Ledgerhook keeps the answer, so say what went wrong. */
export function problem(status: number, title: string, detail: string): ReceiverAnswer {
  return {
    status,
    contentType: 'application/problem+json',
    body: JSON.stringify({ type: 'about:blank', title, status, detail }),
  };
}

/** Turns (raw body, headers) into the answer, calling the handler when the delivery is new. */
export function createReceiver(
  options: ReceiverOptions,
): (rawBody: Uint8Array | string, headers: HeaderSource) => Promise<ReceiverAnswer> {
  const verify = createVerifier(options.secret, options);
  const dedupe = options.dedupe === false ? undefined : (options.dedupe ?? {});
  const store = dedupe ? (dedupe.store ?? createMemoryStore()) : undefined;
  const windowMs = dedupe?.windowMs ?? DAY_MS;
  const leaseMs = dedupe?.leaseMs ?? 60_000;
  const onError =
    options.onError ??
    ((error: unknown, id: string) =>
      console.error(`@ledgerhook/receiver: notification ${id} failed:`, error));
  // Deliveries of one id being handled in this process: a duplicate meanwhile gets the same answer.
  const inFlight = new Map<string, Promise<ReceiverAnswer>>();

  async function handle(event: WebhookEvent, context: DeliveryContext): Promise<ReceiverAnswer> {
    if (store) {
      let state: Awaited<ReturnType<DeliveryStore['begin']>>;
      try {
        state = await store.begin(context.id, leaseMs);
      } catch (error) {
        onError(error, context.id);
        return problem(500, 'Internal Server Error', 'the deduplication store failed');
      }
      if (state === 'done') return ACK;
      if (state === 'in-progress')
        return problem(
          409,
          'Conflict',
          'this notification is being handled by another delivery; retry later',
        );
    }
    try {
      await options.handler(event, context);
    } catch (error) {
      onError(error, context.id);
      await Promise.resolve(store?.forget(context.id)).catch((e: unknown) => onError(e, context.id));
      return problem(500, 'Internal Server Error', 'the handler failed');
    }
    try {
      await store?.done(context.id, windowMs);
    } catch (error) {
      // Handled all the same: acknowledge, or the retry would run the handler a second time too.
      onError(error, context.id);
    }
    return ACK;
  }

  return async (rawBody, headers) => {
    let delivery: ReturnType<typeof verify>;
    try {
      delivery = verify(rawBody, headers);
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error;
      return error.reason === 'invalid_body'
        ? problem(400, 'Bad Request', error.message)
        : problem(401, 'Unauthorized', error.message);
    }
    const context: DeliveryContext = {
      id: delivery.id,
      timestamp: delivery.timestamp,
      eventType: eventTypeOf(delivery.event),
    };
    if (!store) return handle(delivery.event, context);
    const running = inFlight.get(context.id);
    if (running) return running;
    const answer = handle(delivery.event, context);
    inFlight.set(context.id, answer);
    try {
      return await answer;
    } finally {
      inFlight.delete(context.id);
    }
  };
}
