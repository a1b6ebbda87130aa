/**
 * `ledgerhook listen` as a user runs it: the real CLI, as its own process, reads a devnet
 * service's event feed and forwards to a real local receiver (express with the receiver library's
 * middleware, verifying with the secret listen printed). Only what is committed after it starts,
 * and only of the subscription asked for, arrives, each printed as a line; a receiver that fails
 * or is down is reported and the next event goes on; SIGTERM ends the long-poll at once; a cursor
 * printed at the end replays from there.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type RequestHandler } from 'express';
import { parseEther } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { expressReceiver } from '../../packages/receiver/src/express.js';
import type { DeliveryContext } from '../../packages/receiver/src/receive.js';
import { isTest, type WebhookEvent } from '../../packages/receiver/src/types.js';
import { type Created, type Devnet, startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';
import { type CliProcess, runCli, startCli, waitFor } from '../helpers/process.js';

interface Logged {
  id: string;
  eventType: string;
  payload: { txId?: string; test?: boolean };
}

const line = (id: string, eventType: string, outcome: string) =>
  new RegExp(`^\\d\\d:\\d\\d:\\d\\d  ${id}  ${eventType.replaceAll('.', '\\.')}  ${outcome}  \\d+ms$`, 'm');

describe.each(backends)('ledgerhook listen (%s)', (backend) => {
  let d: Devnet;
  let watched: Created;
  let other: Created;
  let server: http.Server;
  let forwardTo: string;
  let receive: RequestHandler | undefined;
  const handled: { event: WebhookEvent; context: DeliveryContext }[] = [];
  let listen: CliProcess | undefined;
  let replay: CliProcess | undefined;
  /** Where the first listen started, as it printed it. */
  let firstCursor: string;
  let before: Logged;

  const api = () => ['--url', d.t.app.url, '--token', d.t.token];
  const log = async (sub: Created): Promise<Logged[]> => {
    const res = await d.t.request('GET', `/api/v1/subscription/${sub.id}/notifications?limit=100`);
    expect(res.status, res.text).toBe(200);
    return [...(res.body as { data: Logged[] }).data].reverse();
  };
  /** The log entry of a transaction once it is in the event feed (where listen reads). */
  const inFeed = (sub: Created, txId: string) =>
    waitFor(async () => {
      const entry = (await log(sub)).find((n) => n.payload.txId === txId);
      if (!entry) return undefined;
      const feed = await d.t.request('GET', `/api/v1/events?subscription=${sub.id}&limit=1000`);
      const ids = (feed.body as { data: { id: string }[] }).data.map((e) => e.id);
      return ids.includes(entry.id) ? entry : undefined;
    }, `the notification of ${txId} in the feed`);

  beforeAll(async () => {
    d = await startDevnet(backend);
    watched = await d.subscribe(d.addresses[1]!, { mempool: false });
    other = await d.subscribe(d.addresses[2]!, { mempool: false });
    // Committed before listen starts: not forwarded.
    before = await inFeed(watched, (await d.send(0, d.addresses[1]!, parseEther('1'))).hash);

    const app = express();
    // The receiver library's middleware, once listen has printed the secret to verify with.
    app.post('/hooks', (req, res, next) => (receive ? receive(req, res, next) : res.status(503).end()));
    server = http.createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    forwardTo = `http://localhost:${(server.address() as AddressInfo).port}/hooks`;
  });

  afterAll(async () => {
    await listen?.stop('SIGKILL');
    await replay?.stop('SIGKILL');
    server?.closeAllConnections();
    // Not made when beforeAll failed early: close would then never call back.
    if (server) await new Promise((resolve) => server.close(resolve));
    await d?.close();
  });

  let forwarded: Logged[];

  test('forwards exactly the notifications committed after it started, of the subscription asked for, verified with the printed secret', async () => {
    listen = startCli(['listen', '--forward-to', forwardTo, '--subscription', watched.id, ...api()], {});
    const secret = (await listen.waitForOutput(/^Signing secret: (whsec_\S+)/m, 'the signing secret'))[1]!;
    firstCursor = (await listen.waitForOutput(/^Starting after cursor (\S+)\./m, 'the start'))[1]!;
    expect(listen.stdout()).toContain(`Forwarding the events of subscription ${watched.id} to ${forwardTo}`);
    receive = expressReceiver({
      secret,
      handler: (event, context) => {
        handled.push({ event, context });
        if (isTest(event)) throw new Error('this receiver fails on test notifications');
      },
      onError: () => {},
    });

    // The other subscription's transfer comes between the watched one's: it must not be forwarded.
    const first = await d.send(0, d.addresses[1]!, parseEther('0.1'));
    const between = await d.send(0, d.addresses[2]!, parseEther('0.2'));
    const second = await d.send(0, d.addresses[1]!, parseEther('0.3'));
    await inFeed(other, between.hash);
    forwarded = [await inFeed(watched, first.hash), await inFeed(watched, second.hash)];
    await waitFor(() => (handled.length >= 2 ? true : undefined), 'two forwarded notifications');

    expect(handled.map((h) => h.context.id)).toEqual(forwarded.map((n) => n.id));
    expect(handled.map((h) => h.event)).toEqual(forwarded.map((n) => n.payload));
    expect(handled.map((h) => h.context.eventType)).toEqual(['address.transaction', 'address.transaction']);
    // listen prints a delivery's line once the answer is back, which may be after the handler ran.
    for (const n of forwarded)
      await listen.waitForOutput(line(n.id, 'address.transaction', '200'), `the line of ${n.id}`);
    expect(listen.stdout()).not.toContain(before.id);
  });

  test('a receiver that fails is reported, and the next event goes on', async () => {
    const sent = await d.t.request('POST', `/api/v1/subscription/${watched.id}/test`);
    expect(sent.status, sent.text).toBe(202);
    const next = await d.send(0, d.addresses[1]!, parseEther('0.4'));
    const sample = await waitFor(
      async () => (await log(watched)).find((n) => n.payload.test),
      'the test notification',
    );
    const after = await inFeed(watched, next.hash);
    await listen!.waitForOutput(line(after.id, 'address.transaction', '200'), 'the transfer after it');
    expect(listen!.stdout()).toMatch(line(sample.id, 'test', '500'));
    forwarded.push(sample, after);
  });

  test('SIGTERM ends it at once, though its long-poll is waiting, and it says where to go on', async () => {
    const begun = Date.now();
    expect(await listen!.stop('SIGTERM')).toBe(0);
    expect(Date.now() - begun).toBeLessThan(3_000);
    expect(listen!.stdout()).toMatch(/^Stopped\. To go on from here: --after \S+$/m);
  });

  test('from a cursor, to a receiver that is down: each event is reported failed, and listening goes on', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    replay = startCli(
      [
        'listen',
        '--forward-to',
        `http://127.0.0.1:${port}/hooks`,
        '--subscription',
        watched.id,
        '--after',
        firstCursor,
        ...api(),
      ],
      {},
    );
    for (const n of forwarded)
      await replay.waitForOutput(
        line(n.id, n.eventType, 'failed \\(ECONNREFUSED\\)'),
        `the failure of ${n.id}`,
      );
    expect(replay.stdout()).toMatch(new RegExp(`^Starting after cursor ${firstCursor}\\.`, 'm'));
    expect(await replay.stop('SIGINT')).toBe(0);
  });

  test('mistakes: no --forward-to is a usage error; a token the service refuses stops it in one line', async () => {
    const [missing, refused] = await Promise.all([
      runCli(['listen', ...api()], {}),
      runCli(['listen', '--forward-to', forwardTo, '--url', d.t.app.url, '--token', 'lh_nottherightone'], {}),
    ]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(
      /^ledgerhook: listen needs --forward-to URL: ledgerhook listen --forward-to URL \[/,
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^ledgerhook: cannot listen: the service answered 401/);
  });
});
