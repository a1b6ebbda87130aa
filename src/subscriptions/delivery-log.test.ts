/**
 * The delivery logs as a client reads them: the account-wide log (`GET /api/v1/notification`) and
 * the time window both logs take, over notifications the real dispatcher delivered (or failed to)
 * to a receiver on loopback. Another account's token finds none of them.
 */
import crypto from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../../test/helpers/app.js';
import { backends } from '../../test/helpers/env.js';
import { waitFor } from '../../test/helpers/process.js';
import { ACK, type Receiver, startReceiver } from '../../test/helpers/receiver.js';
import { chainNotificationId, enqueueNotifications } from '../notify/outbox.js';
import type { NotificationView, SubscriptionView } from './service.js';

interface LogPage {
  data: NotificationView[];
  next_cursor: string | null;
}

interface Problem {
  status: number;
  errors?: { parameter?: string; detail: string }[];
}

const randomEvm = () => `0x${crypto.randomBytes(20).toString('hex')}`;

describe.each(backends)('delivery logs on %s', (backend) => {
  let t: TestApp;
  let receiver: Receiver;
  let otherToken: string;
  /** Account A's subscriptions (the last one's endpoint answers 500) and account B's one. */
  let first: string;
  let second: string;
  let failingSubscription: string;
  let others: string;
  /** A's notifications, oldest first: first's and second's delivered, then the failing one's failed. */
  const sent: string[] = [];
  let otherSent: string;

  async function subscribe(url: string, token?: string, chain = 'ETH'): Promise<string> {
    const r = await t.request('POST', '/api/v1/subscription', {
      token,
      body: { type: 'ADDRESS_TRANSACTION', attr: { address: randomEvm(), chain, url } },
    });
    expect(r.status, r.text).toBe(201);
    return (r.body as { id: string }).id;
  }

  /** Sends a test notification and waits until its delivery is settled (delivered or failed). */
  async function sendSettled(subscription: string, token?: string): Promise<string> {
    const r = await t.request('POST', `/api/v1/subscription/${subscription}/test`, { token });
    expect(r.status, r.text).toBe(202);
    const id = (r.body as { notificationId: string }).notificationId;
    await waitFor(
      async () => {
        const log = (await t.request('GET', `/api/v1/subscription/${subscription}/notifications`, { token }))
          .body as LogPage;
        const n = log.data.find((item) => item.id === id);
        return n && n.state !== 'pending' ? true : undefined;
      },
      `notification ${id} to settle`,
      15_000,
    );
    return id;
  }

  async function log(query: string, token?: string): Promise<LogPage> {
    const r = await t.request('GET', `/api/v1/notification${query}`, { token });
    expect(r.status, r.text).toBe(200);
    return r.body as LogPage;
  }

  beforeAll(async () => {
    receiver = await startReceiver((request) => (request.path === '/fail' ? { status: 500 } : ACK));
    // One retry 50 ms after the first attempt, then failed: a failed notification in a moment.
    t = await startTestApp(backend, { LEDGERHOOK_RETRY_SCHEDULE: '50ms' });
    otherToken = await t.tokenFor('someone-else');
    first = await subscribe(receiver.url);
    second = await subscribe(receiver.url);
    others = await subscribe(receiver.url, otherToken);
    sent.push(await sendSettled(first));
    sent.push(await sendSettled(second));
    otherSent = await sendSettled(others, otherToken);
    failingSubscription = await subscribe(receiver.url.replace('/hook', '/fail'));
    sent.push(await sendSettled(failingSubscription));
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
  });

  test("lists every notification of the account's subscriptions, newest first, as each subscription's log does", async () => {
    const page = await log('?limit=100');
    expect(page.data.map((n) => n.id)).toEqual([...sent].reverse());
    expect(page.next_cursor).toBeNull();
    expect(page.data.map((n) => n.state)).toEqual(['failed', 'delivered', 'delivered']);
    const failed = page.data[0]!;
    expect(failed.subscriptionId).toBe(failingSubscription);
    expect(failed.attempts.map((a) => [a.statusCode, a.outcome])).toEqual([
      [500, 'retry'],
      [500, 'failed'],
    ]);
    // The same items, field for field, as the subscriptions' own logs hold.
    for (const item of page.data) {
      const own = (await t.request('GET', `/api/v1/subscription/${item.subscriptionId}/notifications`))
        .body as LogPage;
      expect(own.data.find((n) => n.id === item.id)).toEqual(item);
    }
  });

  test('narrows to a state, a subscription and a time window; pages with a cursor', async () => {
    expect((await log('?state=failed')).data.map((n) => n.id)).toEqual([sent[2]]);
    expect((await log('?state=delivered')).data.map((n) => n.id)).toEqual([sent[1], sent[0]]);
    expect((await log('?state=pending')).data).toEqual([]);
    expect((await log(`?subscription=${first}`)).data.map((n) => n.id)).toEqual([sent[0]]);
    expect((await log(`?subscription=${second}&state=failed`)).data).toEqual([]);

    // since is inclusive and until exclusive, so the middle notification's time splits the log.
    const all = (await log('')).data;
    const middle = all.find((n) => n.id === sent[1])!.createdAt;
    const since = encodeURIComponent(middle);
    expect((await log(`?since=${since}`)).data.map((n) => n.id)).toEqual([sent[2], sent[1]]);
    expect((await log(`?until=${since}`)).data.map((n) => n.id)).toEqual([sent[0]]);
    const last = all[0]!.createdAt;
    expect((await log(`?since=${since}&until=${encodeURIComponent(last)}`)).data.map((n) => n.id)).toEqual([
      sent[1],
    ]);
    // Any time zone names the same instant.
    const shifted = new Date(Date.parse(middle));
    const inOffset = `${new Date(shifted.getTime() + 2 * 3_600_000).toISOString().slice(0, 23)}+02:00`;
    expect((await log(`?since=${encodeURIComponent(inOffset)}`)).data.map((n) => n.id)).toEqual([
      sent[2],
      sent[1],
    ]);

    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: LogPage = await log(`?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((n) => n.id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen).toEqual([...sent].reverse());
  });

  test('chain notifications, whose ids carry no order, are logged newest first; a cursor from before is honoured', async () => {
    // An account of its own, so the other tests' logs and lists stay as they were.
    const token = await t.tokenFor('log-order');
    const subscription = await subscribe(receiver.url, token);
    const {
      rows: [row],
    } = (await t.app.store.db.execute(
      sql`SELECT account_id FROM subscriptions WHERE id = ${subscription}::uuid`,
    )) as unknown as { rows: { account_id: string }[] };
    // Written in descending id order, one statement each: a log ordered by id would come out reversed.
    const ids = Array.from({ length: 6 }, (_, i) =>
      chainNotificationId(subscription, 'ETH', `0xblock:tx:${i}`),
    )
      .sort()
      .reverse();
    for (const id of ids)
      await enqueueNotifications(t.app.store.db, [
        {
          id,
          accountId: row!.account_id,
          subscriptionId: subscription,
          eventType: 'address.transaction',
          body: JSON.stringify({ id }),
          dedupeKey: id,
          state: 'failed',
          lastError: 'kept out of delivery',
        },
      ]);
    const newestFirst = [...ids].reverse();
    const path = `/api/v1/subscription/${subscription}/notifications`;
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r = await t.request('GET', `${path}?limit=4${cursor ? `&cursor=${cursor}` : ''}`, { token });
      expect(r.status, r.text).toBe(200);
      const page = r.body as LogPage;
      seen.push(...page.data.map((n) => n.id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen).toEqual(newestFirst);

    // Before the outbox had its own order, a cursor was the last id shown: it still goes on from there.
    const old = Buffer.from(newestFirst[1]!, 'utf8').toString('base64url');
    const rest = (await t.request('GET', `${path}?cursor=${old}`, { token })).body as LogPage;
    expect(rest.data.map((n) => n.id)).toEqual(newestFirst.slice(2));
    for (const key of ['0', '-1', '1e3', '99999999999999999999']) {
      const bad = await t.request('GET', `${path}?cursor=${Buffer.from(key).toString('base64url')}`, {
        token,
      });
      expect(bad.status, key).toBe(400);
    }
  });

  test("a subscription's log takes the same time window", async () => {
    const created = (await t.request('GET', `/api/v1/subscription/${first}/notifications`)).body as LogPage;
    const at = encodeURIComponent(created.data[0]!.createdAt);
    const path = `/api/v1/subscription/${first}/notifications`;
    const inWindow = (await t.request('GET', `${path}?since=${at}&state=delivered`)).body as LogPage;
    expect(inWindow.data.map((n) => n.id)).toEqual([sent[0]]);
    const before = (await t.request('GET', `${path}?until=${at}`)).body as LogPage;
    expect(before.data).toEqual([]);
  });

  test("another account's token sees none of it, even naming the subscription", async () => {
    const theirs = await log('?limit=100', otherToken);
    expect(theirs.data.map((n) => n.id)).toEqual([otherSent]);
    expect((await log(`?subscription=${first}`, otherToken)).data).toEqual([]);
    expect((await log(`?subscription=${others}`)).data).toEqual([]);
    const mine = await log('?limit=100');
    expect(mine.data.map((n) => n.id)).not.toContain(otherSent);
    expect(JSON.stringify(mine)).not.toContain(others);
  });

  test('bad filters are 400 naming the parameter', async () => {
    for (const [query, parameter] of [
      ['since=yesterday', 'since'],
      ['since=2026-11-20', 'since'],
      ['since=2026-11-20T10:00:00', 'since'],
      ['until=2026-13-01T00:00:00Z', 'until'],
      ['since=2016-12-31T23:59:60Z', 'since'],
      ['since=2026-11-20T10:00:00Z&until=2026-11-20T10:00:00Z', 'until'],
      ['since=2026-11-20T10:00:00Z&until=2026-11-19T10:00:00Z', 'until'],
      ['state=held', 'state'],
      ['subscription=not-a-uuid', 'subscription'],
      ['limit=0', 'limit'],
      ['cursor=AA', 'cursor'],
      ['chain=ETH', 'chain'],
    ] as const) {
      for (const path of ['/api/v1/notification', `/api/v1/subscription/${first}/notifications`]) {
        const r = await t.request('GET', `${path}?${query}`);
        expect(r.status, `${path}?${query}: ${r.text}`).toBe(400);
        expect(r.headers.get('content-type')).toContain('application/problem+json');
        expect((r.body as Problem).errors?.map((e) => e.parameter)).toContain(parameter);
      }
    }
    expect((await t.request('GET', '/api/v1/notification', { token: null })).status).toBe(401);
  });

  test('the subscription list narrows to a network, by any of its names', async () => {
    const pol = await subscribe(receiver.url, undefined, 'POL');
    const glrm = await subscribe(receiver.url, undefined, 'moonbeam-mainnet');
    const ids = async (query: string) => {
      const r = await t.request('GET', `/api/v1/subscription?limit=100&${query}`);
      expect(r.status, r.text).toBe(200);
      return (r.body as { data: SubscriptionView[] }).data.map((s) => s.id);
    };
    expect(await ids('chain=pol')).toEqual([pol]);
    expect(await ids('chain=GLMR')).toEqual([glrm]);
    expect(await ids('chain=ETH')).toEqual([failingSubscription, second, first]);
    expect(await ids('chain=BTC')).toEqual([]);
    const unknown = await t.request('GET', '/api/v1/subscription?chain=NOPE');
    expect(unknown.status).toBe(400);
    const error = (unknown.body as Problem).errors?.[0];
    expect(error?.parameter).toBe('chain');
    expect(error?.detail).toContain('ETH');
    expect(await ids('chain=ETH')).not.toContain(others);
  });
});
