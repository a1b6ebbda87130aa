import crypto from 'node:crypto';
import { sql } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { afterAll, describe, expect, test } from 'vitest';
import { enqueueNotifications, newNotificationId } from '../../src/notify/outbox.js';
import { openStore } from '../../src/store/db.js';
import { TEST_SERVICE_ENV } from '../helpers/app.js';
import { backends, createTestEnvironment, type TestEnvironment } from '../helpers/env.js';
import { type ServiceProcess, startServiceProcess, waitFor } from '../helpers/process.js';
import { ACK, type Receiver, startReceiver } from '../helpers/receiver.js';

const environments: TestEnvironment[] = [];
const receivers: Receiver[] = [];
const services: ServiceProcess[] = [];
afterAll(async () => {
  for (const s of services) await s.stop('SIGKILL');
  for (const r of receivers) await r.close();
  for (const e of environments) await e.cleanup();
});

async function api(service: ServiceProcess, token: string, method: string, route: string, body?: unknown) {
  const response = await fetch(`${service.url}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

function serviceEnv(
  environment: TestEnvironment,
  extra: Record<string, string> = {},
): Record<string, string> {
  const { PORT: _port, LOG_LEVEL: _level, ...delivery } = TEST_SERVICE_ENV;
  return { ...environment.env, ...delivery, LOG_LEVEL: 'warn', ...extra };
}

/** Every request's signature verifies, and requests with one webhook-id carry one body. */
function checkReceived(receiver: Receiver, secret: string): Map<string, string> {
  const webhook = new Webhook(secret);
  const bodies = new Map<string, string>();
  for (const r of receiver.requests) {
    const id = r.headers['webhook-id'] as string;
    webhook.verify(r.body, {
      'webhook-id': id,
      'webhook-timestamp': r.headers['webhook-timestamp'] as string,
      'webhook-signature': r.headers['webhook-signature'] as string,
    });
    expect((JSON.parse(r.body) as { id: string }).id).toBe(id);
    const earlier = bodies.get(id);
    if (earlier !== undefined) expect(r.body).toBe(earlier);
    bodies.set(id, r.body);
  }
  return bodies;
}

describe('delivery survives SIGKILL (embedded PGlite)', () => {
  test('killed while delivering 1,000 notifications, then restarted: all arrive, duplicates share their webhook-id', async () => {
    const environment = await createTestEnvironment('pglite');
    environments.push(environment);
    const receiver = await startReceiver(() => ({ ...ACK, delayMs: 5 }));
    receivers.push(receiver);

    // Enqueue with the API role alone, so that nothing is delivered yet; 1,000 test notifications
    // are far past the per-account limit on them, which is not what this test is about.
    const apiOnly = await startServiceProcess(
      serviceEnv(environment, {
        LEDGERHOOK_ROLES: 'api',
        LOG_LEVEL: 'info',
        LEDGERHOOK_TEST_RATE_LIMIT: 'off',
      }),
    );
    const token = apiOnly.printedToken!;
    const sub = await api(apiOnly, token, 'POST', '/api/v1/subscription', {
      type: 'ADDRESS_TRANSACTION',
      attr: { address: '0x000000000000000000000000000000000000dEaD', chain: 'ETH', url: receiver.url },
    });
    expect(sub.status).toBe(201);
    const subscriptionId = sub.body.id as string;
    const ids: string[] = [];
    for (let batch = 0; batch < 40; batch++) {
      const results = await Promise.all(
        Array.from({ length: 25 }, () =>
          api(apiOnly, token, 'POST', `/api/v1/subscription/${subscriptionId}/test`),
        ),
      );
      for (const r of results) {
        expect(r.status).toBe(202);
        ids.push(r.body.notificationId as string);
      }
    }
    expect(new Set(ids).size).toBe(1000);
    expect(await apiOnly.stop('SIGTERM')).toBe(0);
    expect(receiver.requests).toHaveLength(0);

    // Deliver, and kill the process mid-way.
    const env = serviceEnv(environment, { LEDGERHOOK_DISPATCH_CONCURRENCY: '8', LOG_LEVEL: 'info' });
    const first = await startServiceProcess(env);
    services.push(first);
    await receiver.waitForRequests(250, 30_000);
    await first.stop('SIGKILL');
    const beforeRestart = new Set(receiver.requests.map((r) => r.headers['webhook-id'] as string)).size;
    expect(beforeRestart).toBeLessThan(1000);

    const second = await startServiceProcess(env);
    services.push(second);
    await waitFor(
      () => (new Set(receiver.requests.map((r) => r.headers['webhook-id'])).size >= 1000 ? true : undefined),
      'all 1,000 notifications to arrive',
      60_000,
    );
    const bodies = checkReceived(receiver, sub.body.secret as string);
    expect([...bodies.keys()].sort()).toEqual([...ids].sort());

    // Every one is recorded as delivered, once the last results are written.
    await waitFor(async () => {
      const log = await api(
        second,
        token,
        'GET',
        `/api/v1/subscription/${subscriptionId}/notifications?state=pending&limit=1`,
      );
      return (log.body.data as unknown[]).length === 0 ? true : undefined;
    }, 'no pending notification');
    let delivered = 0;
    let cursor: string | null = null;
    do {
      const page = await api(
        second,
        token,
        'GET',
        `/api/v1/subscription/${subscriptionId}/notifications?state=delivered&limit=100${cursor ? `&cursor=${cursor}` : ''}`,
      );
      delivered += (page.body.data as unknown[]).length;
      cursor = page.body.next_cursor as string | null;
    } while (cursor);
    expect(delivered).toBe(1000);
    await second.stop();
  });
});

describe.each(backends.filter((b) => b === 'postgres'))('two dispatcher processes on %s', (backend) => {
  test('deliver 5,000 notifications with none sent twice while both stay up', async () => {
    const environment = await createTestEnvironment(backend);
    environments.push(environment);
    const masterKey = crypto.randomBytes(32).toString('hex');
    const receiver = await startReceiver(() => ({ ...ACK, delayMs: 1 }));
    receivers.push(receiver);
    const env = serviceEnv(environment, { LEDGERHOOK_MASTER_KEY: masterKey, LOG_LEVEL: 'info' });

    const a = await startServiceProcess(env);
    services.push(a);
    const b = await startServiceProcess({ ...env, LEDGERHOOK_ROLES: 'dispatcher' });
    services.push(b);
    const token = a.printedToken!;
    const sub = await api(a, token, 'POST', '/api/v1/subscription', {
      type: 'ADDRESS_TRANSACTION',
      attr: { address: '0x000000000000000000000000000000000000dEaD', chain: 'ETH', url: receiver.url },
    });
    expect(sub.status).toBe(201);
    const subscriptionId = sub.body.id as string;

    // A producer elsewhere writes 5,000 notifications in one transaction.
    const store = await openStore({ databaseUrl: environment.databaseUrl! });
    try {
      const [row] = (
        (await store.db.execute(
          sql`SELECT account_id FROM subscriptions WHERE id = ${subscriptionId}`,
        )) as unknown as {
          rows: { account_id: string }[];
        }
      ).rows;
      const ids = Array.from({ length: 5000 }, () => newNotificationId());
      await store.db.transaction((tx) =>
        enqueueNotifications(
          tx,
          ids.map((id, n) => ({
            id,
            accountId: row!.account_id,
            subscriptionId,
            eventType: 'test',
            body: JSON.stringify({ id, n }),
          })),
        ),
      );

      await waitFor(
        async () => {
          const result = (await store.db.execute(
            sql`SELECT count(*)::int AS n FROM notifications WHERE state = 'delivered' AND locked_by IS NULL`,
          )) as unknown as { rows: { n: number }[] };
          return result.rows[0]!.n >= 5000 ? true : undefined;
        },
        '5,000 notifications delivered',
        120_000,
      );
      const bodies = checkReceived(receiver, sub.body.secret as string);
      expect(bodies.size).toBe(5000);
      expect([...bodies.keys()].sort()).toEqual([...ids].sort());
      expect(receiver.requests).toHaveLength(5000);

      // Both took part.
      for (const service of [a, b]) {
        const metrics = await (await fetch(`${service.url}/metrics`)).text();
        const delivered = /ledgerhook_delivery_attempts_total\{outcome="delivered"\} (\d+)/.exec(metrics);
        expect(Number(delivered?.[1] ?? 0)).toBeGreaterThan(0);
      }
    } finally {
      await store.close();
    }
    await a.stop();
    await b.stop();
  });
});
