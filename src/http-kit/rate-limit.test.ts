import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../../test/helpers/app.js';
import { backends } from '../../test/helpers/env.js';
import { loadConfig } from '../config.js';

const FOLDERS = '/api/v1/folder';

async function notificationCount(t: TestApp): Promise<number> {
  const result = (await t.app.store.db.execute(
    sql`SELECT count(*)::int AS n FROM notifications`,
  )) as unknown as {
    rows: { n: number }[];
  };
  return result.rows[0]!.n;
}

describe.each(backends)('rate limits per account on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(backend, { LEDGERHOOK_RATE_LIMIT: '5/1m', LEDGERHOOK_TEST_RATE_LIMIT: '2/1m' });
  });
  afterAll(async () => {
    await t?.close();
  });

  test('over the limit is 429 with Retry-After and RateLimit headers; other accounts are not affected', async () => {
    const token = await t.tokenFor('busy');
    const remaining: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await t.request('GET', FOLDERS, { token });
      expect(r.status).toBe(200);
      expect(r.headers.get('ratelimit-limit')).toBe('5');
      remaining.push(Number(r.headers.get('ratelimit-remaining')));
      expect(Number(r.headers.get('ratelimit-reset'))).toBeGreaterThan(0);
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0]);
    const over = await t.request('GET', FOLDERS, { token });
    expect(over.status).toBe(429);
    expect(over.headers.get('content-type')).toContain('application/problem+json');
    expect(over.body).toMatchObject({
      status: 429,
      title: 'Too Many Requests',
      type: 'urn:ledgerhook:problem:rate_limited',
    });
    const retryAfter = Number(over.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(over.headers.get('ratelimit-remaining')).toBe('0');
    // Every route of the account counts, writes too, and nothing is written past the limit.
    const write = await t.request('POST', '/api/v1/registry/create', {
      token,
      body: { title: 'x', metadata: [], folder_id: 'f', template: 'STORAGE' },
    });
    expect(write.status).toBe(429);
    expect((await t.request('GET', FOLDERS, { token: await t.tokenFor('busy') })).status).toBe(429);

    // Another account has its own budget.
    expect((await t.request('GET', FOLDERS, { token: await t.tokenFor('calm') })).status).toBe(200);
    // Without a valid token it is 401, not a count against anyone.
    expect((await t.request('GET', FOLDERS, { token: null })).status).toBe(401);
  });

  test('test notifications have a limit of their own: none is enqueued past it', async () => {
    const token = await t.tokenFor('tester');
    const created = await t.request('POST', '/api/v1/subscription', {
      token,
      body: {
        type: 'ADDRESS_TRANSACTION',
        attr: {
          address: '0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045',
          chain: 'ETH',
          url: 'http://127.0.0.1:9/x',
        },
      },
    });
    expect(created.status, created.text).toBe(201);
    const id = (created.body as { id: string }).id;
    const before = await notificationCount(t);
    expect((await t.request('POST', `/api/v1/subscription/${id}/test`, { token })).status).toBe(202);
    const second = await t.request('POST', `/api/v1/subscription/${id}/test`, { token });
    expect(second.status).toBe(202);
    expect(second.headers.get('ratelimit-limit')).toBe('2');
    const third = await t.request('POST', `/api/v1/subscription/${id}/test`, { token });
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(await notificationCount(t)).toBe(before + 2);
  });
});

describe('rate limit configuration', () => {
  test('defaults: 1000 requests a second per account, 60 test notifications a minute', () => {
    const config = loadConfig({});
    expect(config.rateLimit).toEqual({ max: 1000, windowMs: 1_000 });
    expect(config.testRateLimit).toEqual({ max: 60, windowMs: 60_000 });
  });

  test('off turns a limit off; other values are <requests>/<duration>', () => {
    expect(loadConfig({ LEDGERHOOK_RATE_LIMIT: 'off' }).rateLimit).toBeUndefined();
    expect(loadConfig({ LEDGERHOOK_RATE_LIMIT: '300/10s' }).rateLimit).toEqual({
      max: 300,
      windowMs: 10_000,
    });
    for (const bad of ['fast', '0/1s', '10', '10/', '10/1y', '-5/1s', '10/10ms'])
      expect(() => loadConfig({ LEDGERHOOK_RATE_LIMIT: bad }), bad).toThrow(/^LEDGERHOOK_RATE_LIMIT /);
    expect(() => loadConfig({ LEDGERHOOK_TEST_RATE_LIMIT: 'x' })).toThrow(/^LEDGERHOOK_TEST_RATE_LIMIT /);
  });

  test('with LEDGERHOOK_RATE_LIMIT=off no request is limited or carries RateLimit headers', async () => {
    const t = await startTestApp('pglite', { LEDGERHOOK_RATE_LIMIT: 'off' });
    try {
      for (let i = 0; i < 30; i++) {
        const r = await t.request('GET', FOLDERS);
        expect(r.status).toBe(200);
        expect(r.headers.get('ratelimit-limit')).toBeNull();
      }
    } finally {
      await t.close();
    }
  });
});
