/**
 * Delivery end to end: the real service (outbox, dispatcher, SSRF-safe egress) posting to real HTTP
 * receivers on loopback, notifications produced through the public API (`/subscription/{id}/test`),
 * every request's signature verified with the `standardwebhooks` package. docs/watching-chains.md, docs/webhooks.md.
 */
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, TEST_SERVICE_ENV, type TestApp } from '../../test/helpers/app.js';
import { startDnsServer } from '../../test/helpers/dns-server.js';
import { backends } from '../../test/helpers/env.js';
import { waitFor } from '../../test/helpers/process.js';
import {
  ACK,
  type ReceivedRequest,
  type Receiver,
  type Reply,
  startReceiver,
} from '../../test/helpers/receiver.js';
import type { AttemptView, NotificationView } from '../subscriptions/service.js';

/** The delays of TEST_SERVICE_ENV's retry schedule, in milliseconds. */
const SCHEDULE = TEST_SERVICE_ENV.LEDGERHOOK_RETRY_SCHEDULE!.split(',').map((d) => Number.parseInt(d, 10));
/**
 * Upper bounds are loose on purpose: on a loaded machine (parallel test files, two CPUs) a retry
 * can leave a second or more late. They still catch a retry waiting a wrong schedule step, the
 * default 5 s schedule, an unclamped Retry-After, or a lease. Lower bounds are firm.
 */
const LATE_MS = 3_000;
/** Room between an attempt's end and the recording of its result, which stamps `nextAttemptAt`. */
const RECORD_MS = 1_000;
const ADDRESS = '0x000000000000000000000000000000000000dEaD';

interface Created {
  id: string;
  secret: string;
  callbackToken: string;
}

/** The delivery log's shapes, as the API documents them. */
type Attempt = AttemptView;
type LoggedNotification = Omit<NotificationView, 'payload'> & { payload: Record<string, unknown> };

interface SubscriptionView {
  id: string;
  status: string;
  ack: string;
  disabledReason: string | null;
  disabledAt: string | null;
}

let subscribed = 0;
async function subscribe(t: TestApp, url: string, extra: Record<string, unknown> = {}): Promise<Created> {
  // A receiver may get the port of one closed earlier in the file, whose subscription (same
  // address, same URL) would make this one a duplicate: each URL is made unique.
  const unique = `${url}?subscription=${++subscribed}`;
  const res = await t.request('POST', '/api/v1/subscription', {
    body: { type: 'ADDRESS_TRANSACTION', attr: { address: ADDRESS, chain: 'ETH', url: unique }, ...extra },
  });
  expect(res.status, res.text).toBe(201);
  const created = res.body as Created;
  expect(created.secret).toMatch(/^whsec_/);
  return created;
}

async function sendTest(t: TestApp, subscriptionId: string): Promise<string> {
  const res = await t.request('POST', `/api/v1/subscription/${subscriptionId}/test`);
  expect(res.status, res.text).toBe(202);
  return (res.body as { notificationId: string }).notificationId;
}

async function subscription(t: TestApp, id: string): Promise<SubscriptionView> {
  const res = await t.request('GET', `/api/v1/subscription/${id}`);
  expect(res.status, res.text).toBe(200);
  return res.body as SubscriptionView;
}

async function deliveryLog(t: TestApp, subscriptionId: string, query = ''): Promise<LoggedNotification[]> {
  const res = await t.request('GET', `/api/v1/subscription/${subscriptionId}/notifications${query}`);
  expect(res.status, res.text).toBe(200);
  return (res.body as { data: LoggedNotification[] }).data;
}

/** Polls the delivery log until the notification satisfies `ready`. */
function waitForLog(
  t: TestApp,
  created: Created,
  notificationId: string,
  ready: (n: LoggedNotification) => boolean,
  what: string,
  timeoutMs = 15_000,
): Promise<LoggedNotification> {
  return waitFor(
    async () => {
      const n = (await deliveryLog(t, created.id)).find((x) => x.id === notificationId);
      return n && ready(n) ? n : undefined;
    },
    `notification ${notificationId}: ${what}`,
    timeoutMs,
  );
}

const inState = (state: string) => (n: LoggedNotification) => n.state === state;
const withAttempts = (count: number) => (n: LoggedNotification) => n.attempts.length >= count;

/**
 * Checks one delivered request as a receiver would: bearer token, content type, and the Standard
 * Webhooks signature over the exact bytes received. Returns the verified payload.
 */
function verified(request: ReceivedRequest, created: Created): Record<string, unknown> {
  expect(request.method).toBe('POST');
  expect(request.headers['content-type']).toBe('application/json');
  expect(request.headers.authorization).toBe(`Bearer ${created.callbackToken}`);
  const payload = new Webhook(created.secret).verify(request.body, {
    'webhook-id': request.headers['webhook-id'] as string,
    'webhook-timestamp': request.headers['webhook-timestamp'] as string,
    'webhook-signature': request.headers['webhook-signature'] as string,
  }) as Record<string, unknown>;
  expect(payload.id).toBe(request.headers['webhook-id']);
  return payload;
}

/** Every request is the same notification: verified, same webhook-id, byte-identical body. */
function expectSameNotification(requests: ReceivedRequest[], created: Created, notificationId: string): void {
  for (const request of requests) {
    const payload = verified(request, created);
    expect(request.headers['webhook-id']).toBe(notificationId);
    expect(payload.id).toBe(notificationId);
    expect(request.body).toBe(requests[0]!.body);
  }
}

/** Milliseconds between consecutive arrivals. */
const gaps = (requests: ReceivedRequest[]) => requests.slice(1).map((r, i) => r.at - requests[i]!.at);

/** Milliseconds from an attempt's start to the retry it scheduled. */
const scheduledAfter = (a: Attempt) => Date.parse(a.nextAttemptAt!) - Date.parse(a.startedAt);

const failure = (n: number): Reply => ({
  status: 500,
  headers: { 'content-type': 'text/plain' },
  body: `failure ${n}`,
});

async function withReceivers<T>(count: number, body: (...r: Receiver[]) => Promise<T>): Promise<T> {
  const receivers = await Promise.all(Array.from({ length: count }, () => startReceiver()));
  try {
    return await body(...receivers);
  } finally {
    await Promise.all(receivers.map((r) => r.close()));
  }
}

describe.each(backends)('webhook delivery on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(backend);
  });
  afterAll(async () => {
    await t?.close();
  });

  test('a failing receiver gets retries on schedule with one webhook-id and identical bytes, all logged', () =>
    withReceivers(1, async (receiver) => {
      receiver.respond((_, i) => (i < 3 ? failure(i + 1) : ACK));
      const created = await subscribe(t, receiver.url);
      const id = await sendTest(t, created.id);

      const n = await waitForLog(t, created, id, inState('delivered'), 'delivered');
      const requests = receiver.requests;
      expect(requests).toHaveLength(4);
      expectSameNotification(requests, created, id);
      expect(JSON.parse(requests[0]!.body)).toMatchObject({
        id,
        subscriptionId: created.id,
        chain: 'ETH',
        address: ADDRESS,
        watchedAddress: ADDRESS,
      });

      // Arrivals follow the schedule (100, 200, 300 ms, each ±20%): never early, not much late.
      gaps(requests).forEach((gap, i) => {
        expect(gap).toBeGreaterThanOrEqual(0.8 * SCHEDULE[i]! - 1);
        expect(gap).toBeLessThanOrEqual(2 * SCHEDULE[i]! + LATE_MS);
      });

      expect(n).toMatchObject({
        id,
        subscriptionId: created.id,
        eventType: 'test',
        state: 'delivered',
        attemptCount: 4,
        nextAttemptAt: null,
        lastStatusCode: 200,
        lastError: null,
      });
      expect(n.deliveredAt).not.toBeNull();
      expect(n.payload).toEqual(JSON.parse(requests[0]!.body));
      expect(n.attempts.map((a) => [a.attempt, a.trigger, a.statusCode, a.outcome])).toEqual([
        [1, 'test', 500, 'retry'],
        [2, 'retry', 500, 'retry'],
        [3, 'retry', 500, 'retry'],
        [4, 'retry', 200, 'delivered'],
      ]);
      expect(n.attempts.map((a) => a.response)).toEqual([
        'failure 1',
        'failure 2',
        'failure 3',
        '{"status":"success"}',
      ]);
      expect(n.attempts.map((a) => a.error)).toEqual(['HTTP 500', 'HTTP 500', 'HTTP 500', null]);
      for (const a of n.attempts) {
        expect(Number.isInteger(a.durationMs)).toBe(true);
        expect(a.durationMs).toBeGreaterThanOrEqual(0);
        expect(a.durationMs).toBeLessThan(3_000);
      }
      n.attempts.slice(0, 3).forEach((a, i) => {
        expect(scheduledAfter(a)).toBeGreaterThanOrEqual(0.8 * SCHEDULE[i]! - 1);
        expect(scheduledAfter(a)).toBeLessThanOrEqual(1.2 * SCHEDULE[i]! + a.durationMs + RECORD_MS);
        // Each retry really left no earlier than it was scheduled.
        expect(Date.parse(n.attempts[i + 1]!.startedAt)).toBeGreaterThanOrEqual(Date.parse(a.nextAttemptAt!));
      });
      expect(n.attempts[3]!.nextAttemptAt).toBeNull();
    }));

  test('410 Gone disables the subscription; after enable, recover resends the failed notification', () =>
    withReceivers(1, async (receiver) => {
      receiver.respond((_, i) => (i === 0 ? { status: 410, body: 'gone' } : ACK));
      const created = await subscribe(t, receiver.url);
      const since = new Date(Date.now() - 1_000).toISOString();
      const id = await sendTest(t, created.id);

      const failed = await waitForLog(t, created, id, inState('failed'), 'failed');
      expect(failed.attemptCount).toBe(1);
      expect(failed.attempts).toMatchObject([
        { attempt: 1, statusCode: 410, outcome: 'failed', response: 'gone', nextAttemptAt: null },
      ]);
      expect(failed.nextAttemptAt).toBeNull();
      const disabled = await subscription(t, created.id);
      expect(disabled.status).toBe('disabled');
      expect(disabled.disabledReason).toMatch(/410/);
      expect(disabled.disabledAt).not.toBeNull();
      expect(receiver.requests).toHaveLength(1);

      // Nothing can be sent to a disabled subscription.
      expect((await t.request('POST', `/api/v1/subscription/${created.id}/test`)).status).toBe(409);
      expect((await t.request('POST', `/api/v1/notification/${id}/resend`)).status).toBe(409);
      const early = await t.request('POST', `/api/v1/subscription/${created.id}/recover`, {
        body: { since },
      });
      expect(early.status).toBe(409);

      const enabled = await t.request('POST', `/api/v1/subscription/${created.id}/enable`);
      expect(enabled.status).toBe(200);
      expect(enabled.body).toMatchObject({
        id: created.id,
        status: 'active',
        disabledReason: null,
        disabledAt: null,
      });

      // `since` selects by creation time: a later one finds nothing to resend.
      const none = await t.request('POST', `/api/v1/subscription/${created.id}/recover`, {
        body: { since: new Date(Date.now() + 60_000).toISOString() },
      });
      expect(none.status).toBe(202);
      expect(none.body).toEqual({ resent: 0 });
      const recovered = await t.request('POST', `/api/v1/subscription/${created.id}/recover`, {
        body: { since },
      });
      expect(recovered.status).toBe(202);
      expect(recovered.body).toEqual({ resent: 1 });

      const n = await waitForLog(t, created, id, inState('delivered'), 'delivered after recover');
      expect(receiver.requests).toHaveLength(2);
      expectSameNotification(receiver.requests, created, id);
      expect(n.attemptCount).toBe(2);
      expect(n.attempts.map((a) => [a.attempt, a.trigger, a.statusCode, a.outcome])).toEqual([
        [1, 'test', 410, 'failed'],
        [2, 'recover', 200, 'delivered'],
      ]);
      expect((await subscription(t, created.id)).status).toBe('active');
    }));

  test('a 3xx is a failed attempt and its Location is never followed', () =>
    withReceivers(2, async (receiver, target) => {
      const redirects = [301, 302, 307, 308];
      receiver.respond((_, i) =>
        i < redirects.length ? { status: redirects[i], headers: { location: target.url }, body: '' } : ACK,
      );
      const created = await subscribe(t, receiver.url);
      const id = await sendTest(t, created.id);

      const n = await waitForLog(t, created, id, inState('delivered'), 'delivered');
      expect(n.attempts.map((a) => [a.statusCode, a.outcome])).toEqual([
        ...redirects.map((status) => [status, 'retry']),
        [200, 'delivered'],
      ]);
      for (const a of n.attempts.slice(0, redirects.length)) expect(a.error).toMatch(/redirect/);
      expect(receiver.requests).toHaveLength(redirects.length + 1);
      expectSameNotification(receiver.requests, created, id);
      expect(target.requests).toHaveLength(0);
    }));

  test('Retry-After on 429 and 503 is honoured, clamped to 1-2x the scheduled delay', () =>
    withReceivers(1, async (receiver) => {
      // 60 s asked, but the schedule says 100 ms: at most 2 x 120 ms. 1 s asked after 200 ms
      // scheduled: 2 x 160-240 ms, i.e. longer than the schedule alone would ever wait.
      receiver.respond((_, i) =>
        i === 0
          ? { status: 429, headers: { 'retry-after': '60' }, body: 'slow down' }
          : i === 1
            ? { status: 503, headers: { 'retry-after': '1' }, body: 'busy' }
            : ACK,
      );
      const created = await subscribe(t, receiver.url);
      const id = await sendTest(t, created.id);

      const n = await waitForLog(t, created, id, inState('delivered'), 'delivered', 10_000);
      expect(n.attempts.map((a) => [a.statusCode, a.outcome])).toEqual([
        [429, 'retry'],
        [503, 'retry'],
        [200, 'delivered'],
      ]);
      expectSameNotification(receiver.requests, created, id);
      const [first, second] = gaps(receiver.requests);
      expect(first).toBeGreaterThanOrEqual(2 * 0.8 * SCHEDULE[0]! - 1);
      expect(first).toBeLessThanOrEqual(2 * 1.2 * SCHEDULE[0]! + LATE_MS);
      expect(second).toBeGreaterThanOrEqual(2 * 0.8 * SCHEDULE[1]! - 1);
      expect(second).toBeLessThanOrEqual(2 * 1.2 * SCHEDULE[1]! + LATE_MS);
      n.attempts.slice(0, 2).forEach((a, i) => {
        expect(scheduledAfter(a)).toBeGreaterThanOrEqual(2 * 0.8 * SCHEDULE[i]! - 1);
        expect(scheduledAfter(a)).toBeLessThanOrEqual(2 * 1.2 * SCHEDULE[i]! + a.durationMs + RECORD_MS);
      });
    }));

  test('a 2xx without {"status":"success"} is retried, and accepted under ack "2xx"', () =>
    withReceivers(2, async (strict, lenient) => {
      const unacknowledged: Reply[] = [
        { status: 204 },
        { status: 200, headers: { 'content-type': 'application/json' }, body: '{"status":"ok"}' },
        { status: 200, headers: { 'content-type': 'text/plain' }, body: 'success' },
      ];
      strict.respond((_, i) => unacknowledged[i] ?? ACK);
      const created = await subscribe(t, strict.url);
      const id = await sendTest(t, created.id);
      const n = await waitForLog(t, created, id, inState('delivered'), 'delivered');
      expect(n.attempts.map((a) => [a.statusCode, a.outcome])).toEqual([
        [204, 'retry'],
        [200, 'retry'],
        [200, 'retry'],
        [200, 'delivered'],
      ]);
      for (const a of n.attempts.slice(0, 3)) expect(a.error).toMatch(/acknowledgement/);
      expect(n.attempts.map((a) => a.response)).toEqual([
        '',
        '{"status":"ok"}',
        'success',
        '{"status":"success"}',
      ]);
      expectSameNotification(strict.requests, created, id);

      // The same replies satisfy a subscription that only asks for a 2xx.
      lenient.respond((_, i) => unacknowledged[i % unacknowledged.length]!);
      const relaxed = await subscribe(t, lenient.url, { ack: '2xx' });
      expect((await subscription(t, relaxed.id)).ack).toBe('2xx');
      const ids = [
        await sendTest(t, relaxed.id),
        await sendTest(t, relaxed.id),
        await sendTest(t, relaxed.id),
      ];
      for (const nid of ids) {
        const m = await waitForLog(t, relaxed, nid, inState('delivered'), 'delivered under ack 2xx');
        expect(m.attemptCount).toBe(1);
        expect(m.attempts).toMatchObject([{ attempt: 1, outcome: 'delivered', error: null }]);
      }
      expect(lenient.requests).toHaveLength(3);
      for (const r of lenient.requests) verified(r, relaxed);
    }));

  test('a response body over 20 KB is kept truncated to exactly 20480 bytes', () =>
    withReceivers(1, async (receiver) => {
      const big = Array.from({ length: 50_000 }, (_, i) => String.fromCharCode(97 + (i % 26))).join('');
      // 3-byte characters: 20480 bytes would end inside one, which is left out rather than mangled.
      const euros = '€'.repeat(10_000);
      const replies: Reply[] = [
        { status: 500, headers: { 'content-type': 'text/plain' }, body: big },
        { status: 500, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: euros },
      ];
      receiver.respond((_, i) => replies[i] ?? ACK);
      const created = await subscribe(t, receiver.url);
      const id = await sendTest(t, created.id);
      const n = await waitForLog(t, created, id, inState('delivered'), 'delivered');
      const kept = n.attempts[0]!.response!;
      expect(Buffer.byteLength(kept)).toBe(20_480);
      expect(kept).toBe(big.slice(0, 20_480));
      expect(n.attempts[0]).toMatchObject({ statusCode: 500, outcome: 'retry', error: 'HTTP 500' });
      const keptEuros = n.attempts[1]!.response!;
      expect(keptEuros).toBe('€'.repeat(Math.floor(20_480 / 3)));
      expect(n.attempts[1]).toMatchObject({ statusCode: 500, outcome: 'retry', error: 'HTTP 500' });
      expect(n.attempts[2]).toMatchObject({
        statusCode: 200,
        outcome: 'delivered',
        response: '{"status":"success"}',
      });
    }));

  test('a response body with NUL, quotes, control and astral characters is kept, the batch recorded', () =>
    withReceivers(1, async (receiver) => {
      // Results are recorded as one JSON batch: text PostgreSQL's JSON refuses (\u0000, a lone
      // surrogate) must not fail the batch, and JSON escapes must come back as the characters sent.
      const odd = 'a\u0000b "quoted" \\ back\tslash \u0001\n é 😀 \ud800';
      receiver.respond((_, i) =>
        i === 0 ? { status: 500, headers: { 'content-type': 'text/plain' }, body: odd } : ACK,
      );
      const created = await subscribe(t, receiver.url);
      const id = await sendTest(t, created.id);
      const n = await waitForLog(t, created, id, inState('delivered'), 'delivered');
      // NUL is dropped (PostgreSQL text cannot hold it); the lone surrogate went out as U+FFFD.
      expect(n.attempts[0]).toMatchObject({
        statusCode: 500,
        outcome: 'retry',
        error: 'HTTP 500',
        response: 'ab "quoted" \\ back\tslash \u0001\n é 😀 \ufffd',
      });
      expect(n.attempts[1]).toMatchObject({ statusCode: 200, outcome: 'delivered' });
    }));

  test('resend delivers a delivered notification again, same webhook-id, logged as a resend', () =>
    withReceivers(1, async (receiver) => {
      const created = await subscribe(t, receiver.url);
      const id = await sendTest(t, created.id);
      await waitForLog(t, created, id, inState('delivered'), 'delivered');
      expect(receiver.requests).toHaveLength(1);

      const resend = await t.request('POST', `/api/v1/notification/${id}/resend`);
      expect(resend.status).toBe(202);
      expect(resend.body).toEqual({ id, state: 'pending' });
      const n = await waitForLog(
        t,
        created,
        id,
        (x) => x.state === 'delivered' && x.attemptCount === 2,
        'resent',
      );
      expect(receiver.requests).toHaveLength(2);
      expectSameNotification(receiver.requests, created, id);
      expect(n.attempts.map((a) => [a.attempt, a.trigger, a.statusCode, a.outcome])).toEqual([
        [1, 'test', 200, 'delivered'],
        [2, 'resend', 200, 'delivered'],
      ]);

      // Unknown notifications, and other accounts' ones, are not found.
      const missing = await t.request(
        'POST',
        '/api/v1/notification/00000000-0000-4000-8000-000000000000/resend',
      );
      expect(missing.status).toBe(404);
      const stranger = await t.tokenFor('someone-else');
      expect((await t.request('POST', `/api/v1/notification/${id}/resend`, { token: stranger })).status).toBe(
        404,
      );
      expect(receiver.requests).toHaveLength(2);
    }));

  test('resend while a delivery is in flight is refused, and the log keeps one attempt per number', () =>
    withReceivers(1, async (receiver) => {
      // The first request hangs until the delivery timeout (3 s in TEST_SERVICE_ENV); later ones are acknowledged.
      receiver.respond((_, i) => (i === 0 ? { hang: true } : ACK));
      const created = await subscribe(t, receiver.url);
      const id = await sendTest(t, created.id);
      await receiver.waitForRequests(1);

      const busy = await t.request('POST', `/api/v1/notification/${id}/resend`);
      expect(busy.status).toBe(409);
      expect(busy.body).toMatchObject({ status: 409, type: 'urn:ledgerhook:problem:conflict' });

      const n = await waitForLog(t, created, id, inState('delivered'), 'delivered after the timeout', 20_000);
      expect(n.attemptCount).toBe(2);
      expect(n.attempts.map((a) => [a.attempt, a.outcome])).toEqual([
        [1, 'retry'],
        [2, 'delivered'],
      ]);
      expect(n.attempts[0]!.error).toMatch(/timed out/);
      expectSameNotification(receiver.requests, created, id);
    }));

  test('after the last scheduled retry the notification is failed, and stays listed', () =>
    withReceivers(1, async (receiver) => {
      receiver.respond((_, i) => failure(i + 1));
      const created = await subscribe(t, receiver.url);
      const id = await sendTest(t, created.id);
      const n = await waitForLog(t, created, id, inState('failed'), 'failed after every attempt', 20_000);

      const attempts = SCHEDULE.length + 1;
      expect(n.attemptCount).toBe(attempts);
      expect(n.attempts).toHaveLength(attempts);
      expect(n.attempts.map((a) => a.outcome)).toEqual([...SCHEDULE.map(() => 'retry'), 'failed']);
      expect(n.attempts.map((a) => a.statusCode)).toEqual(Array(attempts).fill(500));
      expect(n.attempts.at(-1)!.nextAttemptAt).toBeNull();
      expect(n).toMatchObject({
        state: 'failed',
        nextAttemptAt: null,
        lastStatusCode: 500,
        deliveredAt: null,
      });
      expect(receiver.requests).toHaveLength(attempts);
      expectSameNotification(receiver.requests, created, id);

      // Kept and replayable: listed, also under its state, and the subscription is still active.
      expect((await deliveryLog(t, created.id, '?state=failed')).map((x) => x.id)).toEqual([id]);
      expect(await deliveryLog(t, created.id, '?state=pending')).toEqual([]);
      expect((await subscription(t, created.id)).status).toBe('active');
      expect(receiver.requests).toHaveLength(attempts);
    }));
});

describe.each(backends)('webhook delivery with a 1 s schedule and a 500 ms timeout on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(backend, {
      LEDGERHOOK_RETRY_SCHEDULE: '1s,1s,1s',
      LEDGERHOOK_DELIVERY_TIMEOUT: '500ms',
    });
  });
  afterAll(async () => {
    await t?.close();
  });

  test('429 Retry-After: 2 waits about 2 s; Retry-After: 0 still waits the scheduled delay', () =>
    withReceivers(1, async (receiver) => {
      receiver.respond((_, i) =>
        i === 0
          ? { status: 429, headers: { 'retry-after': '2' }, body: '' }
          : i === 1
            ? { status: 429, headers: { 'retry-after': '0' }, body: '' }
            : ACK,
      );
      const created = await subscribe(t, receiver.url);
      const id = await sendTest(t, created.id);
      const n = await waitForLog(t, created, id, inState('delivered'), 'delivered', 15_000);
      expect(n.attempts.map((a) => [a.statusCode, a.outcome])).toEqual([
        [429, 'retry'],
        [429, 'retry'],
        [200, 'delivered'],
      ]);
      expectSameNotification(receiver.requests, created, id);
      const [afterTwo, afterZero] = gaps(receiver.requests);
      // 2 s asked, 0.8-1.2 s scheduled: between the asked 2 s and twice the jittered delay.
      expect(afterTwo).toBeGreaterThanOrEqual(1_600 - 1);
      expect(afterTwo).toBeLessThanOrEqual(2_400 + LATE_MS);
      // 0 s asked: never sooner than the schedule.
      expect(afterZero).toBeGreaterThanOrEqual(800 - 1);
      expect(afterZero).toBeLessThanOrEqual(1_200 + LATE_MS);
    }));

  test('a receiver that never answers times out and is retried', () =>
    withReceivers(1, async (receiver) => {
      receiver.respond((_, i) => (i === 0 ? { hang: true } : ACK));
      const created = await subscribe(t, receiver.url);
      const id = await sendTest(t, created.id);
      const n = await waitForLog(t, created, id, inState('delivered'), 'delivered after a timeout');
      const [timedOut, delivered] = n.attempts;
      expect(timedOut).toMatchObject({ attempt: 1, statusCode: null, outcome: 'retry', response: null });
      expect(timedOut!.error).toMatch(/timed out/);
      expect(timedOut!.error).toMatch(/500 ms/);
      expect(timedOut!.durationMs).toBeGreaterThanOrEqual(450);
      expect(timedOut!.durationMs).toBeLessThan(500 + RECORD_MS);
      expect(timedOut!.nextAttemptAt).not.toBeNull();
      expect(delivered).toMatchObject({
        attempt: 2,
        trigger: 'retry',
        statusCode: 200,
        outcome: 'delivered',
      });
      expect(receiver.requests).toHaveLength(2);
      expectSameNotification(receiver.requests, created, id);
    }));
});

describe.each(backends)('rows claimed ahead of a free slot on %s', (backend) => {
  test('a claimed notification that could outlive its lease waiting for a slot is left to it, and none is sent twice', async () => {
    // One slot, an 800 ms answer, and the shortest lease allowed (1 s timeout + 100 ms connect + 1 s):
    // a notification claimed behind two others would be sent 1.6 s after its claim and still be in
    // flight when its lease ends at 2.1 s, so this dispatcher would claim and send it again.
    const t = await startTestApp(backend, {
      LEDGERHOOK_DISPATCH_CONCURRENCY: '1',
      LEDGERHOOK_DELIVERY_TIMEOUT: '1s',
      LEDGERHOOK_CONNECT_TIMEOUT: '100ms',
      LEDGERHOOK_DISPATCH_LEASE: '2100ms',
    });
    try {
      await withReceivers(1, async (receiver) => {
        receiver.respond(() => ({ ...ACK, delayMs: 800 }));
        const created = await subscribe(t, receiver.url);
        const ids = [
          await sendTest(t, created.id),
          await sendTest(t, created.id),
          await sendTest(t, created.id),
        ];
        for (const id of ids) {
          await waitForLog(t, created, id, inState('delivered'), 'delivered', 20_000);
        }
        const sent = receiver.requests.map((r) => r.headers['webhook-id']);
        expect([...sent].sort()).toEqual([...ids].sort());
        for (const id of ids) {
          const n = (await deliveryLog(t, created.id)).find((x) => x.id === id)!;
          expect(n.attempts.map((a) => a.outcome)).toEqual(['delivered']);
        }
      });
    } finally {
      await t.close();
    }
  });
});

describe.each(backends)('failing endpoints and SSRF on %s', (backend) => {
  test('a subscription failing for longer than LEDGERHOOK_DISABLE_AFTER is disabled, its pending notifications failed', async () => {
    const t = await startTestApp(backend, { LEDGERHOOK_DISABLE_AFTER: '300ms' });
    try {
      await withReceivers(1, async (receiver) => {
        receiver.respond((_, i) => failure(i + 1));
        const created = await subscribe(t, receiver.url);
        const ids = [await sendTest(t, created.id), await sendTest(t, created.id)];

        const disabled = await waitFor(
          async () => {
            const s = await subscription(t, created.id);
            return s.status === 'disabled' ? s : undefined;
          },
          'the subscription to be disabled',
          10_000,
        );
        expect(disabled.disabledReason).toMatch(/fail/);
        expect(disabled.disabledAt).not.toBeNull();
        const log = await waitFor(
          async () => {
            const all = await deliveryLog(t, created.id);
            // An attempt in flight when the subscription was disabled is recorded, then failed.
            const attempted = all.reduce((sum, n) => sum + n.attemptCount, 0);
            const settled = all.every((n) => n.state === 'failed') && attempted === receiver.requests.length;
            return settled ? all : undefined;
          },
          'every notification to fail, every request recorded',
          10_000,
        );
        expect(log.map((n) => n.id).sort()).toEqual([...ids].sort());
        for (const n of log) {
          expect(n.nextAttemptAt).toBeNull();
          expect(n.lastError).toMatch(/subscription disabled/);
        }
        // Failed for at least LEDGERHOOK_DISABLE_AFTER before giving up (how many attempts fit in
        // that time depends on the machine's pace), and fewer attempts than the schedule allows.
        const attempts = log.reduce((sum, n) => sum + n.attemptCount, 0);
        const firstFailure = Math.min(...log.flatMap((n) => n.attempts.map((a) => Date.parse(a.startedAt))));
        expect(Date.parse(disabled.disabledAt!) - firstFailure).toBeGreaterThanOrEqual(300);
        expect(attempts).toBeGreaterThanOrEqual(2);
        expect(attempts).toBeLessThan(2 * (SCHEDULE.length + 1));
        expect(receiver.requests).toHaveLength(attempts);
        for (const r of receiver.requests) verified(r, created);
        expect((await t.request('POST', `/api/v1/subscription/${created.id}/test`)).status).toBe(409);
      });
    } finally {
      await t.close();
    }
  });

  test('the callback host is checked again at connect time: a DNS answer turned private is refused', async () => {
    const host = 'flip.example-public.com';
    const dns = await startDnsServer({ [host]: ['127.0.0.1'] });
    const t = await startTestApp(backend, {
      LEDGERHOOK_DNS_SERVERS: `127.0.0.1:${dns.port}`,
      LEDGERHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    });
    try {
      await withReceivers(1, async (receiver) => {
        const url = `http://${host}:${new URL(receiver.url).port}/hook`;
        // Allowed at subscription time: the name resolves to the allowlisted loopback.
        const created = await subscribe(t, url);

        dns.set(host, ['10.0.0.7']);
        // A new subscription to the same URL is refused now, naming the field and the address.
        const refused = await t.request('POST', '/api/v1/subscription', {
          body: { type: 'ADDRESS_TRANSACTION', attr: { address: ADDRESS, chain: 'ETH', url } },
        });
        expect(refused.status).toBe(400);
        expect(refused.text).toContain('#/attr/url');
        expect(refused.text).toContain('10.0.0.7');

        const id = await sendTest(t, created.id);
        const blocked = await waitForLog(t, created, id, withAttempts(1), 'a refused attempt');
        expect(blocked.attempts[0]).toMatchObject({
          attempt: 1,
          statusCode: null,
          outcome: 'retry',
          response: null,
        });
        expect(blocked.attempts[0]!.error).toContain('10.0.0.7');
        expect(blocked.attempts[0]!.error).toContain('private');
        expect(receiver.requests).toHaveLength(0);

        // Back to the allowed address, a later retry connects and is delivered.
        dns.set(host, ['127.0.0.1']);
        const n = await waitForLog(t, created, id, inState('delivered'), 'delivered after DNS changed back');
        for (const a of n.attempts.slice(0, -1)) expect(a.statusCode).toBeNull();
        expect(receiver.requests).toHaveLength(1);
        expectSameNotification(receiver.requests, created, id);
        expect(receiver.requests[0]!.headers.host).toBe(new URL(url).host);
      });
    } finally {
      await t.close();
      await dns.close();
    }
  });
});

describe('failed attempts in the service log', () => {
  test('each failed attempt is a warning naming subscription, notification, status and error', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'info' }, { write: (chunk: string) => void lines.push(JSON.parse(chunk)) });
    const t = await startTestApp('pglite', { LEDGERHOOK_RETRY_SCHEDULE: '100ms' }, { logger });
    try {
      await withReceivers(1, async (receiver) => {
        receiver.respond(() => ({ status: 503, body: 'down for maintenance' }));
        const created = await subscribe(t, receiver.url);
        const id = await sendTest(t, created.id);
        await waitForLog(t, created, id, inState('failed'), 'both attempts to fail');
        const failed = await waitFor(
          () => {
            const found = lines.filter((l) => l.notification === id);
            return found.length >= 2 ? found : undefined;
          },
          'two log lines about the notification',
          5_000,
        );
        expect(failed).toEqual([
          expect.objectContaining({
            level: 40,
            component: 'dispatcher',
            subscription: created.id,
            notification: id,
            attempt: 1,
            status: 503,
            error: 'HTTP 503',
            outcome: 'retry',
            msg: 'delivery attempt failed; will retry',
          }),
          expect.objectContaining({
            level: 40,
            subscription: created.id,
            notification: id,
            attempt: 2,
            status: 503,
            outcome: 'failed',
            msg: 'delivery failed: no attempts left',
          }),
        ]);
        // The callback token and the body never reach the log.
        expect(JSON.stringify(lines)).not.toContain(created.callbackToken);
      });
    } finally {
      await t.close();
    }
  });
});
