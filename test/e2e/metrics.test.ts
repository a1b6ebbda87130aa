/**
 * What an operator's Prometheus sees: followers (height, head, lag, health, node errors), watched
 * addresses, the outbox by state and its oldest due notification, subscriptions by state.
 */
import { parseEther } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { type Devnet, startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import { startReceiver } from '../helpers/receiver.js';

/** The samples of a Prometheus text exposition, by metric name and label set. */
async function scrape(t: TestApp): Promise<Map<string, number>> {
  const r = await t.request('GET', '/metrics', { token: null });
  expect(r.status).toBe(200);
  const samples = new Map<string, number>();
  for (const line of r.text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

/** Waits until the sample named `key` satisfies `ok` (database gauges refresh every few seconds). */
async function sampleWhere(
  t: TestApp,
  key: string,
  ok: (v: number) => boolean,
  what: string,
): Promise<number> {
  return waitFor(
    async () => {
      const v = (await scrape(t)).get(key);
      return v !== undefined && ok(v) ? v : undefined;
    },
    `${key} ${what}`,
    20_000,
  );
}

describe.each(backends)('/metrics on %s', (backend) => {
  let d: Devnet;
  beforeAll(async () => {
    d = await startDevnet(backend, { proxy: true });
  });
  afterAll(async () => {
    await d?.close();
  });

  test('followers: height, head and lag per network; node errors counted while the node fails', async () => {
    const [, alice, bob] = d.addresses;
    d.subs.set(alice!, await d.subscribe(alice!));
    const { hash, block } = await d.send(1, bob!, parseEther('1'));
    await d.receivedAtLeast(hash, 1);
    await d.processed(block);
    const samples = await scrape(d.t);
    expect(samples.get('ledgerhook_follower_height{network="DEVNET"}')).toBeGreaterThanOrEqual(Number(block));
    expect(samples.get('ledgerhook_follower_head{network="DEVNET"}')).toBeGreaterThanOrEqual(Number(block));
    expect(samples.get('ledgerhook_follower_lag_blocks{network="DEVNET"}')).toBe(0);
    expect(samples.get('ledgerhook_follower_healthy{network="DEVNET"}')).toBe(1);
    expect(samples.get('ledgerhook_follower_standby{network="DEVNET"}')).toBe(0);
    expect(samples.get('ledgerhook_watched_addresses{network="DEVNET"}')).toBe(1);
    const errorsBefore = samples.get('ledgerhook_node_errors_total{network="DEVNET",component="follower"}');
    expect(errorsBefore).toBe(0);

    d.proxy!.intercept(() => ({ httpStatus: 502 }));
    try {
      await sampleWhere(d.t, 'ledgerhook_follower_healthy{network="DEVNET"}', (v) => v === 0, 'to be 0');
      await sampleWhere(
        d.t,
        'ledgerhook_node_errors_total{network="DEVNET",component="follower"}',
        (v) => v >= 2,
        'to count the failures',
      );
    } finally {
      d.proxy!.intercept(() => undefined);
    }
    await sampleWhere(d.t, 'ledgerhook_follower_healthy{network="DEVNET"}', (v) => v === 1, 'to recover');
  });

  test('subscriptions by state: active, disabled (410) and deleted; failed notifications in the outbox', async () => {
    const gone = await startReceiver(() => ({ status: 410, body: 'gone' }));
    try {
      const before = await scrape(d.t);
      const created = await d.t.request('POST', '/api/v1/subscription', {
        body: {
          type: 'ADDRESS_TRANSACTION',
          attr: { address: d.addresses[3], chain: 'DEVNET', url: gone.url },
        },
      });
      expect(created.status, created.text).toBe(201);
      const id = (created.body as { id: string }).id;
      expect((await d.t.request('POST', `/api/v1/subscription/${id}/test`)).status).toBe(202);
      const doomed = await d.t.request('POST', '/api/v1/subscription', {
        body: {
          type: 'ADDRESS_TRANSACTION',
          attr: { address: d.addresses[4], chain: 'DEVNET', url: gone.url },
        },
      });
      expect(
        (await d.t.request('DELETE', `/api/v1/subscription/${(doomed.body as { id: string }).id}`)).status,
      ).toBe(204);
      const disabledBefore = before.get('ledgerhook_subscriptions{state="disabled"}') ?? 0;
      await sampleWhere(
        d.t,
        'ledgerhook_subscriptions{state="disabled"}',
        (v) => v === disabledBefore + 1,
        'to count the 410',
      );
      await sampleWhere(
        d.t,
        'ledgerhook_subscriptions{state="deleted"}',
        (v) => v === (before.get('ledgerhook_subscriptions{state="deleted"}') ?? 0) + 1,
        'to count the deletion',
      );
      await sampleWhere(
        d.t,
        'ledgerhook_outbox_notifications{state="failed"}',
        (v) => v >= (before.get('ledgerhook_outbox_notifications{state="failed"}') ?? 0) + 1,
        'to count the failed notification',
      );
      // A disabled subscription's address is still watched (its notifications are kept, failed);
      // the deleted one's is not.
      expect((await scrape(d.t)).get('ledgerhook_watched_addresses{network="DEVNET"}')).toBe(
        before.get('ledgerhook_watched_addresses{network="DEVNET"}')! + 1,
      );
    } finally {
      await gone.close();
    }
  });
});

describe('/metrics of an API process without a dispatcher', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp('pglite', { LEDGERHOOK_ROLES: 'api' });
  });
  afterAll(async () => {
    await t?.close();
  });

  test('due notifications nobody delivers: the outbox depth and the age of the oldest grow', async () => {
    const created = await t.request('POST', '/api/v1/subscription', {
      body: {
        type: 'ADDRESS_TRANSACTION',
        attr: {
          address: '0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045',
          chain: 'ETH',
          url: 'http://127.0.0.1:9/x',
        },
      },
    });
    const id = (created.body as { id: string }).id;
    const sentAt = Date.now();
    for (let i = 0; i < 3; i++)
      expect((await t.request('POST', `/api/v1/subscription/${id}/test`)).status).toBe(202);
    await sampleWhere(t, 'ledgerhook_outbox_due_notifications', (v) => v === 3, 'to be 3');
    expect((await scrape(t)).get('ledgerhook_outbox_notifications{state="pending"}')).toBe(3);
    const oldest = await sampleWhere(
      t,
      'ledgerhook_outbox_oldest_due_seconds',
      (v) => v >= 1,
      'to pass a second',
    );
    expect(oldest).toBeLessThanOrEqual((Date.now() - sentAt) / 1000 + 1);
    // No watcher in this process: no follower series at all.
    expect([...(await scrape(t)).keys()].some((k) => k.startsWith('ledgerhook_follower_'))).toBe(false);
  });
});
