/**
 * A client that hangs up before its request is done is the client's doing: it is logged at info as
 * a client abort and counted in `ledgerhook_http_client_aborts_total`, never logged as a database
 * outage (an alert on "database unavailable" would page someone for it), and it writes nothing.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import { snapshotDatabase } from '../helpers/snapshot.js';

interface LogLine {
  level: number;
  msg: string;
  req?: { url: string };
}

describe.each(backends)('clients that hang up mid-request, on %s', (backend) => {
  let t: TestApp;
  const lines: LogLine[] = [];
  beforeAll(async () => {
    t = await startTestApp(
      backend,
      { LOG_LEVEL: 'info' },
      { logDestination: { write: (line: string) => void lines.push(JSON.parse(line)) } },
    );
  });
  afterAll(async () => {
    await t?.close();
  });

  /** The service's count of client hang-ups (reason client_closed) per route, from /metrics. */
  const abortsByRoute = async (): Promise<Record<string, number>> => {
    const metrics = await t.request('GET', '/metrics', { token: null });
    const counts: Record<string, number> = {};
    for (const [, route, n] of metrics.text.matchAll(
      /^ledgerhook_http_client_aborts_total\{method="[A-Z]+",route="([^"]+)",reason="client_closed"\} (\d+)$/gm,
    ))
      counts[route!] = Number(n);
    return counts;
  };

  /**
   * Sends the head of a request and `partial` (less than its Content-Length says), waits until
   * the service has logged the request's arrival, then hangs up.
   */
  async function hangUp(target: string, head: string, partial: string): Promise<void> {
    const arrived = lines.filter((l) => l.msg === 'incoming request' && l.req?.url === target).length;
    const socket = net.connect(Number(new URL(t.app.url).port), '127.0.0.1');
    socket.on('error', () => {});
    socket.write(`${head}Authorization: Bearer ${t.token}\r\nHost: x\r\n\r\n${partial}`);
    await waitFor(
      () =>
        lines.filter((l) => l.msg === 'incoming request' && l.req?.url === target).length > arrived
          ? true
          : undefined,
      `the service to receive ${target}`,
    );
    socket.destroy();
  }

  test('a body cut short is a client abort, counted and logged as one, and nothing is written', async () => {
    const sub = await t.request('POST', '/api/v1/subscription', {
      body: {
        type: 'ADDRESS_TRANSACTION',
        attr: {
          address: '0x000000000000000000000000000000000000dEaD',
          chain: 'ETH',
          url: 'http://127.0.0.1:9/h',
        },
      },
    });
    expect(sub.status).toBe(201);
    const subscriptionId = (sub.body as { id: string }).id;
    const before = await snapshotDatabase(t.app.store);
    const firstLine = lines.length;
    const cut = [
      ['/api/v1/registry/create', '/api/v1/registry/create', '{"title":'],
      ['/api/v1/subscription', '/api/v1/subscription', '{"type":"ADDRESS_TRANSACTION","attr":{"addr'],
      ['/api/v1/registry/verify', '/api/v1/registry/verify', '{"receipt":{"type":"Ledger'],
      [`/api/v1/subscription/${subscriptionId}/recover`, '/api/v1/subscription/:id/recover', '{"since":"20'],
    ] as const;
    for (const [target, , partial] of cut) {
      await hangUp(
        target,
        `POST ${target} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n`,
        partial,
      );
    }
    // A hang-up while waiting for the answer (a long-poll of the feed) is counted too.
    await hangUp('/api/v1/events?wait=20', 'GET /api/v1/events?wait=20 HTTP/1.1\r\n', '');

    const expected = Object.fromEntries([...cut.map(([, route]) => [route, 1]), ['/api/v1/events', 1]]);
    const counted = await waitFor(async () => {
      const counts = await abortsByRoute();
      return Object.keys(expected).every((route) => counts[route] === 1) ? counts : undefined;
    }, 'every abort counted');
    expect(counted).toEqual(expected);

    const logged = lines.slice(firstLine);
    const aborted = logged.filter((l) => l.msg === 'client aborted the request');
    expect(aborted).toHaveLength(cut.length);
    for (const line of aborted) expect(line.level).toBe(30);
    expect(logged.filter((l) => /database/i.test(l.msg))).toEqual([]);
    expect(logged.filter((l) => l.level >= 40)).toEqual([]);
    expect(await snapshotDatabase(t.app.store)).toEqual(before);
    expect((await t.request('GET', '/readyz', { token: null })).status).toBe(200);
  });
});
