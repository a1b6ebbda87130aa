import net from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { waitFor } from '../helpers/process.js';
import { sampleRegistryBody } from '../helpers/registry-body.js';

// Short limits keep the test quick; the margin covers the server's periodic timeout check.
const HEADERS_TIMEOUT_MS = 500;
const REQUEST_TIMEOUT_MS = 1_500;
const MARGIN_MS = 2_000;
// A slow client that is never cut off would trickle this long before the test gives up on it.
const GIVE_UP_MS = REQUEST_TIMEOUT_MS + 6_000;

interface SlowClient {
  /** Resolves with the milliseconds from connect until the server closed the connection. */
  closed: Promise<number>;
  /** What the server sent. */
  received(): string;
  stop(): void;
}

/**
 * A raw connection that sends `head` at once, then `trickle` one byte every 100 ms (a slowloris),
 * until the server closes it or the test gives up.
 */
function slowClient(url: string, head: string, trickle: string): SlowClient {
  const { port } = new URL(url);
  const socket = net.connect(Number(port), '127.0.0.1');
  const started = Date.now();
  let received = '';
  let sent = 0;
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
  });
  socket.on('error', () => {}); // a reset is one way of being cut off
  socket.write(head);
  const timer = setInterval(() => {
    if (socket.destroyed || socket.writableEnded) return;
    socket.write(trickle[sent++ % trickle.length] ?? ' ');
  }, 100);
  const giveUp = setTimeout(() => socket.destroy(), GIVE_UP_MS);
  const closed = new Promise<number>((resolve) =>
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolve(Date.now() - started);
    }),
  );
  return {
    closed,
    received: () => received,
    stop: () => socket.destroy(),
  };
}

interface LogLine {
  level: number;
  msg: string;
  statusCode?: number;
  method?: string;
  url?: string;
  route?: string;
}

describe('slow clients are cut off (headers and request timeouts)', () => {
  let t: TestApp;
  const lines: LogLine[] = [];
  beforeAll(async () => {
    t = await startTestApp(
      'pglite',
      {
        LEDGERHOOK_HEADERS_TIMEOUT: `${HEADERS_TIMEOUT_MS}ms`,
        LEDGERHOOK_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`,
        LOG_LEVEL: 'info',
      },
      { logDestination: { write: (line: string) => void lines.push(JSON.parse(line)) } },
    );
  });
  afterAll(async () => {
    await t?.close();
  });

  /** The service's count of requests cut off by its timeouts, per method and route, from /metrics. */
  const timeoutsByRoute = async (): Promise<Record<string, number>> => {
    const metrics = await t.request('GET', '/metrics', { token: null });
    const counts: Record<string, number> = {};
    for (const [, method, route, n] of metrics.text.matchAll(
      /^ledgerhook_http_client_aborts_total\{method="([^"]+)",route="([^"]+)",reason="request_timeout"\} (\d+)$/gm,
    ))
      counts[`${method} ${route}`] = Number(n);
    return counts;
  };

  test('headers sent one byte at a time: the connection is closed once the headers timeout passes', async () => {
    const client = slowClient(
      t.app.url,
      'GET /api/v1/folder HTTP/1.1\r\nHost: localhost\r\n',
      'X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n',
    );
    const before = (await timeoutsByRoute())['unknown unmatched'] ?? 0;
    const firstLine = lines.length;
    const ms = await client.closed;
    expect(ms).toBeLessThan(HEADERS_TIMEOUT_MS + MARGIN_MS);
    // Never a response to the unfinished request, at most a 408.
    expect(client.received()).toMatch(/^(HTTP\/1\.1 408 [^\r]*\r\n[\s\S]*)?$/);
    // No request exists yet to name: the line says which timeout, and the count has no route.
    const timedOut = lines.slice(firstLine).filter((l) => /^request timed out/.test(l.msg));
    expect(timedOut).toEqual([
      expect.objectContaining({ level: 40, statusCode: 408, msg: expect.stringMatching(/headers/) }),
    ]);
    expect((await timeoutsByRoute())['unknown unmatched']).toBe(before + 1);
  });

  test.each([
    ['with a valid token', true],
    ['without a token', false],
  ])(
    '20 bodies trickled one byte every 100 ms %s are all cut off within the request timeout',
    async (_, withToken) => {
      const headers = [
        'POST /api/v1/registry/create HTTP/1.1',
        'Host: localhost',
        'Content-Type: application/json',
        'Content-Length: 100000',
        ...(withToken ? [`Authorization: Bearer ${t.token}`] : []),
        '',
        '',
      ].join('\r\n');
      const clients = Array.from({ length: 20 }, () => slowClient(t.app.url, headers, '{"title": "x", '));
      try {
        const times = await Promise.all(clients.map((c) => c.closed));
        for (const ms of times) expect(ms).toBeLessThan(REQUEST_TIMEOUT_MS + MARGIN_MS);
        for (const c of clients) {
          const status = /^HTTP\/1\.1 (\d{3})/.exec(c.received())?.[1];
          // The authenticated request never got its body: 408 or a closed connection, never a 2xx.
          if (withToken) expect(status === undefined || status === '408').toBe(true);
          else expect(status).toBe('401');
        }
      } finally {
        for (const c of clients) c.stop();
      }
    },
  );

  test('a body that never completes: 408, a warn line naming the route, counted as a timeout, not a hang-up', async () => {
    // Not the route the trickling clients above used: their lines cannot be taken for this one's.
    const route = '/api/v1/subscription';
    const before = (await timeoutsByRoute())[`POST ${route}`] ?? 0;
    const firstLine = lines.length;
    const { port } = new URL(t.app.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
    });
    socket.on('error', () => {});
    socket.write(
      `POST ${route} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`,
    );
    try {
      const status = await waitFor(
        () => /^HTTP\/1\.1 (\d{3})/.exec(received)?.[1],
        'the server to answer the unfinished request',
        REQUEST_TIMEOUT_MS + MARGIN_MS,
      );
      expect(status).toBe('408');
      const logged = await waitFor(
        () => {
          const found = lines
            .slice(firstLine)
            .filter((l) => /^request timed out/.test(l.msg) && l.url === route);
          return found.length > 0 ? found : undefined;
        },
        'the timeout to be logged',
        5_000,
      );
      expect(logged).toEqual([
        expect.objectContaining({ level: 40, statusCode: 408, method: 'POST', url: route, route }),
      ]);
      expect(logged[0]!.msg).toMatch(/LEDGERHOOK_REQUEST_TIMEOUT/);
      // The server's timeout, not the client's doing: no "client aborted" line, no error.
      const others = lines
        .slice(firstLine)
        .filter((l) => l.msg === 'client aborted the request' || l.level >= 50);
      expect(others).toEqual([]);
      const counted = await waitFor(
        async () => {
          const n = (await timeoutsByRoute())[`POST ${route}`];
          return n === before + 1 ? n : undefined;
        },
        'the timeout to be counted',
        5_000,
      );
      expect(counted).toBe(before + 1);
    } finally {
      socket.destroy();
    }
  });

  test('a client that sends its body in pieces within the limits is served', async () => {
    const body = JSON.stringify(sampleRegistryBody());
    const pieces = [body.slice(0, 40), body.slice(40, 120), body.slice(120)];
    const { port } = new URL(t.app.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('utf8');
    });
    socket.write(
      [
        'POST /api/v1/registry/create HTTP/1.1',
        'Host: localhost',
        'Content-Type: application/json',
        `Content-Length: ${Buffer.byteLength(body)}`,
        `Authorization: Bearer ${t.token}`,
        '',
        '',
      ].join('\r\n'),
    );
    try {
      for (const piece of pieces) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        socket.write(piece);
      }
      await waitFor(() => (/\r\n\r\n/.test(received) ? true : undefined), 'the response', 5_000);
      expect(received).toMatch(/^HTTP\/1\.1 201 /);
    } finally {
      socket.destroy();
    }
  });
});
