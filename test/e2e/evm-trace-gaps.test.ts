/**
 * A node that cannot trace older blocks (a full node keeps the state of its last 128) must not stop
 * a network's notifications. A JSON-RPC proxy in front of anvil answers the trace
 * methods as a pruned geth does; the network keeps the default `traces: auto`. Every plain transfer
 * is notified, the untraced blocks are recorded as trace gaps (with their hashes, in the
 * transaction of their block), /readyz, the metric and the log say so once, a reorganisation
 * replaces the gaps of the blocks it replaces, and once the node traces again internal transfers
 * are notified again. A node whose traces keep failing otherwise gives gaps after the trace wait.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { getAddress, type Hex, parseEther } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { chainNotificationId } from '../../src/notify/outbox.js';
import { launchChromium } from '../helpers/browser.js';
import type { Body, Devnet } from '../helpers/devnet.js';
import { startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';

const TRACE_METHODS = ['debug_traceBlockByNumber', 'trace_block'];
const SCREENSHOTS = fileURLToPath(new URL('../../test-artifacts/console', import.meta.url));
const PRUNED = { code: -32000, message: 'required historical state unavailable (reexec=128)' };

interface Line {
  level: number;
  msg: string;
  block?: number;
  from?: number;
  to?: number;
  gaps?: number;
  reason?: string;
}

interface GapRow {
  height: number;
  hash: string;
  reason: string;
}

describe.each(backends)('trace gaps on %s', (backend) => {
  let d: Devnet;
  const lines: Line[] = [];
  let forwarder: Hex;
  let deposit: Hex;
  /** The internal transfer notified live, before the node stopped tracing. */
  let live: { body: Body; blockHash: Hex };
  /** The internal transfer of a block committed without its traces. */
  let missed: { hash: Hex; block: bigint };
  /** The plain transfers of the untraced blocks, notified live. */
  let plainInGap: Hex[];

  beforeAll(async () => {
    d = await startDevnet(backend, {
      proxy: true,
      traces: 'auto',
      env: { LEDGERHOOK_TRACE_WAIT: '2s' },
      logger: pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) }),
    });
    forwarder = await d.deploy('Forwarder');
    deposit = getAddress(privateKeyToAddress(generatePrivateKey()));
    d.subs.set(deposit, await d.subscribe(deposit, { mempool: false }));
  });

  afterAll(async () => {
    await d?.close();
  });

  const gapRows = async (): Promise<GapRow[]> =>
    (
      (await d.t.app.store.db.execute(
        "SELECT height::int AS height, hash, reason FROM trace_gaps WHERE network = 'DEVNET' ORDER BY height, hash" as never,
      )) as unknown as { rows: GapRow[] }
    ).rows;

  const devnetReady = async () => {
    const ready = await d.t.request('GET', '/readyz', { token: null });
    return (ready.body as { networks: Record<string, unknown>[] }).networks.find(
      (n) => n.network === 'DEVNET',
    )!;
  };

  /** Sends value to the deposit: `plain` from a dev account, else through the forwarder (an internal transfer). */
  const pay = async (how: 'plain' | 'forwarded', ether: string) =>
    how === 'plain'
      ? d.send(1, deposit, parseEther(ether))
      : d.call(2, forwarder, 'Forwarder', 'forward', [deposit], undefined, parseEther(ether));

  const notified = (hash: Hex): Body[] => d.received(hash);

  test('a pruned node: every other notification goes on, the untraced blocks are gaps, /readyz and the log say so', async () => {
    // Traced: a plain and an internal transfer, both notified.
    const traced = [await pay('plain', '1'), await pay('forwarded', '2')];
    for (const sent of traced) await d.receivedAtLeast(sent.hash, 1);
    expect(notified(traced[1]!.hash)).toMatchObject([
      { internal: true, amount: '-2', traceAddress: '0', counterAddress: deposit },
    ]);
    live = {
      body: notified(traced[1]!.hash)[0]!,
      blockHash: (await d.chain.getBlock({ blockNumber: traced[1]!.block })).hash,
    };
    expect(await devnetReady()).toMatchObject({
      healthy: true,
      internalTransfers: true,
      traceGaps: { count: 0, first: null, last: null },
    });

    // The node no longer has the state of what it is asked to trace.
    d.proxy!.intercept((request) => (TRACE_METHODS.includes(request.method) ? { error: PRUNED } : undefined));
    const untraced = [
      await pay('plain', '3'),
      await pay('forwarded', '4'),
      await pay('plain', '5'),
      await pay('plain', '6'),
    ];
    // Every plain transfer is notified, in its block: the network does not stall.
    for (const sent of untraced.filter((_, i) => i !== 1)) {
      const [body] = await d.receivedAtLeast(sent.hash, 1);
      expect(body).toMatchObject({ address: getAddress(d.addresses[1]!), blockNumber: Number(sent.block) });
    }
    const first = untraced[0]!.block;
    const last = untraced[3]!.block;
    await d.processed(last);
    // The forwarded one moved value to the deposit inside a contract call: not notified in the gap.
    expect(notified(untraced[1]!.hash)).toEqual([]);
    missed = untraced[1]!;
    plainInGap = untraced.filter((_, i) => i !== 1).map((t) => t.hash);
    expect(await d.chain.getBalance({ address: deposit })).toBe(parseEther('21'));

    const hashes = await Promise.all(
      Array.from({ length: Number(last - first) + 1 }, async (_, i) => {
        const block = await d.chain.getBlock({ blockNumber: first + BigInt(i) });
        return { height: Number(block.number), hash: block.hash };
      }),
    );
    const rows = await gapRows();
    expect(rows.map(({ height, hash }) => ({ height, hash }))).toEqual(hashes);
    for (const row of rows)
      expect(row.reason).toBe(
        "the node no longer has this block's state (The node answered JSON-RPC error -32000: required historical state unavailable (reexec=128))",
      );
    expect(await devnetReady()).toMatchObject({
      healthy: true,
      lastError: null,
      traceGaps: { count: rows.length, first: Number(first), last: Number(last) },
    });
    const metrics = await d.t.request('GET', '/metrics', { token: null });
    expect(metrics.text).toMatch(
      new RegExp(`^ledgerhook_trace_gaps_open\\{network="DEVNET"\\} ${rows.length}$`, 'm'),
    );
    // Said once when the run began, not per block; nothing about follower failures.
    const began = lines.filter((l) =>
      l.msg.startsWith('blocks are committed without their internal transfers'),
    );
    expect(began).toEqual([expect.objectContaining({ level: 40, block: Number(first) })]);
    expect(began[0]!.reason).toMatch(/required historical state unavailable/);
    expect(lines.filter((l) => l.level >= 40 && /follower|round/i.test(l.msg))).toEqual([]);
  });

  test('the gaps are listed, oldest first, a page at a time; bad requests are 400 naming the parameter', async () => {
    const rows = await gapRows();
    const list = (query: string) => d.t.request('GET', `/api/v1/network/devnet/trace-gaps${query}`);
    const all = await list('');
    expect(all.status, all.text).toBe(200);
    expect(all.body).toEqual({
      network: 'DEVNET',
      count: rows.length,
      data: rows.map((row) => ({
        block: row.height,
        hash: row.hash,
        reason: row.reason,
        since: expect.any(String),
        tries: expect.any(Number),
        triedAt: expect.toSatisfy((v: unknown) => v === null || typeof v === 'string'),
      })),
      next_cursor: null,
    });
    const first = (await list('?limit=2')).body as { data: { block: number }[]; next_cursor: string };
    const second = (await list(`?limit=2&cursor=${first.next_cursor}`)).body as { data: { block: number }[] };
    expect([...first.data, ...second.data].map((g) => g.block)).toEqual(rows.map((r) => r.height));
    const ranged = (await list(`?from=${rows[1]!.height}&to=${rows[2]!.height}`)).body as { data: unknown[] };
    expect(ranged.data).toHaveLength(2);
    for (const [path, parameter] of [
      ['/api/v1/network/DEVNET/trace-gaps?cursor=bm9wZQ', 'cursor'],
      [`/api/v1/network/DEVNET/trace-gaps?from=${rows[2]!.height}&to=${rows[1]!.height}`, 'from'],
      ['/api/v1/network/DEVNET/trace-gaps?limit=0', 'limit'],
      ['/api/v1/network/NOPE/trace-gaps', 'network'],
      ['/api/v1/network/BTC/trace-gaps', 'network'],
    ] as const) {
      const res = await d.t.request('GET', path);
      expect(res.status, path).toBe(400);
      expect((res.body as { errors: { parameter: string }[] }).errors[0]?.parameter, path).toBe(parameter);
    }
    expect((await d.t.request('GET', '/api/v1/network/DEVNET/trace-gaps', { token: null })).status).toBe(401);
  });

  test("the console's followers view shows the open gaps", async () => {
    const { count, first, last } = (await devnetReady()).traceGaps as {
      count: number;
      first: number;
      last: number;
    };
    const browser = await launchChromium(15_000);
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
      page.setDefaultTimeout(15_000);
      await page.goto(`${d.t.app.url}/console`, { waitUntil: 'load' });
      await page.getByLabel('API token').fill(d.t.token);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('link', { name: 'Followers' }).click();
      const gaps = page.locator('tr[data-network="DEVNET"] [data-trace-gaps]');
      await gaps.waitFor();
      expect(await gaps.innerText()).toBe(
        `${count} blocks without them (trace gaps, blocks ${first}–${last}): the node could not trace them`,
      );
      fs.mkdirSync(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SCREENSHOTS, `followers-trace-gaps-${backend}.png`) });
    } finally {
      await browser.close();
    }
  });

  test('a backfill over the untraceable blocks finishes, counting them in its result', async () => {
    const rows = await gapRows();
    const sub = d.subs.get(deposit)!;
    const started = await d.t.request('POST', `/api/v1/subscription/${sub.id}/backfill`, {
      body: { from: rows[0]!.height, to: rows[rows.length - 1]!.height },
    });
    expect(started.status, started.text).toBe(202);
    const done = await waitFor(async () => {
      const res = await d.t.request('GET', `/api/v1/subscription/${sub.id}/backfill`);
      const job = res.body as { state: string; traceGaps: number; found: number; error: string | null };
      return job.state === 'running' ? undefined : job;
    }, 'the backfill to end');
    // Every plain transfer was notified live: nothing new, and the same gaps, none doubled.
    expect(done).toMatchObject({ state: 'done', error: null, found: 0, traceGaps: rows.length });
    expect(await gapRows()).toEqual(rows);
  });

  test('a reorganisation replaces the gaps of the blocks it replaces', async () => {
    const before = await gapRows();
    const last = before[before.length - 1]!;
    // The last block replaced by one holding another transfer to the deposit; still untraceable.
    await d.chain.request({
      method: 'anvil_reorg' as never,
      params: [
        1,
        [[{ from: d.addresses[3], to: deposit, value: `0x${parseEther('7').toString(16)}` }, 0]],
      ] as never,
    });
    const replaced = await d.chain.getBlock({ blockNumber: BigInt(last.height) });
    expect(replaced.hash).not.toBe(last.hash);
    await waitFor(
      async () => ((await gapRows()).some((row) => row.hash === replaced.hash) ? true : undefined),
      'the new block recorded as a gap',
    );
    const after = await gapRows();
    expect(after.map((row) => row.hash)).toEqual([
      ...before.slice(0, -1).map((row) => row.hash),
      replaced.hash,
    ]);
    expect((await devnetReady()).traceGaps).toEqual({
      count: after.length,
      first: after[0]!.height,
      last: last.height,
    });
  });

  test('traced again: the gaps fill, each missed internal transfer once with the id it would have had live', async () => {
    const sub = d.subs.get(deposit)!;
    // A gap of a block that is not (or no longer) on the chain: closed with nothing notified.
    const orphan = { height: Number(missed.block), hash: `0x${'ab'.repeat(32)}` };
    await d.t.app.store.db.execute(
      sql`INSERT INTO trace_gaps (network, height, hash, reason, since) VALUES ('DEVNET', ${orphan.height}, ${orphan.hash}, 'a test', now())`,
    );
    const delivered = d.receiver.requests.length;
    d.proxy!.intercept(() => undefined);
    const sent = await pay('forwarded', '8');
    const [next] = await d.receivedAtLeast(sent.hash, 1);
    expect(next).toMatchObject({ internal: true, amount: '-8', blockNumber: Number(sent.block) });
    const ended = lines.filter((l) => l.msg.startsWith('blocks are traced again'));
    expect(ended).toEqual([expect.objectContaining({ level: 30, gaps: expect.any(Number) })]);

    // Filled in the background, now that the node traces again: the missed one arrives once.
    const [filled] = await d.receivedAtLeast(missed.hash, 1);
    const blockHash = (await d.chain.getBlock({ blockNumber: missed.block })).hash;
    // Ids are derived from what a notification is (docs/watching-chains.md): the live one's derivation, for its block.
    const idOf = (hash: Hex, tx: Hex) => chainNotificationId(sub.id, 'DEVNET', `${hash}:${tx}:trace:0`);
    expect(live.body.id).toBe(idOf(live.blockHash, live.body.txId as Hex));
    expect(filled).toEqual({
      ...live.body,
      id: idOf(blockHash, missed.hash),
      txId: missed.hash,
      blockNumber: Number(missed.block),
      amount: '-4',
    });
    await waitFor(
      async () => ((await gapRows()).length === 0 ? true : undefined),
      'every gap filled or closed',
    );
    expect((await devnetReady()).traceGaps).toEqual({ count: 0, first: null, last: null });
    const metrics = await d.t.request('GET', '/metrics', { token: null });
    expect(metrics.text).toMatch(/^ledgerhook_trace_gaps_open\{network="DEVNET"\} 0$/m);
    // Nothing else was sent again: the plain transfers of the gap blocks went out live, once.
    // (Deliveries of the reorganisation before may still arrive: its withdrawal and its new block.)
    const since = d.receiver.requests.slice(delivered).map((r) => JSON.parse(r.body) as Body);
    expect(since.filter((b) => b.txId === missed.hash)).toHaveLength(1);
    expect(since.filter((b) => plainInGap.includes(b.txId as Hex) && b.reorg !== true)).toEqual([]);

    // A fill whose end was lost (a process killed after it notified) notifies nothing twice.
    await d.t.app.store.db.execute(
      sql`INSERT INTO trace_gaps (network, height, hash, reason, since) VALUES ('DEVNET', ${Number(missed.block)}, ${blockHash}, 'again', now())`,
    );
    await waitFor(async () => ((await gapRows()).length === 0 ? true : undefined), 'the gap filled again');
    const outbox = (await d.t.app.store.db.execute(
      sql`SELECT count(*)::int AS n FROM notifications WHERE id = ${filled!.id as string}`,
    )) as unknown as { rows: { n: number }[] };
    expect(outbox.rows[0]!.n).toBe(1);
    expect(d.received(missed.hash)).toHaveLength(1);
  });

  test('traces that keep failing otherwise (HTTP 503) hold the block for the trace wait, then it is a gap', async () => {
    d.proxy!.intercept((request) =>
      TRACE_METHODS.includes(request.method) ? { httpStatus: 503 } : undefined,
    );
    const sent = await pay('plain', '9');
    const [body] = await d.receivedAtLeast(sent.hash, 1);
    const row = (await gapRows()).find((r) => r.height === Number(sent.block));
    expect(row?.reason).toBe('its traces kept failing for 2 s (The node answered HTTP 503)');
    expect(body).toMatchObject({ blockNumber: Number(sent.block) });
    d.proxy!.intercept(() => undefined);
  });
});

describe.each(backends)('a tracing node of its own (tracesRpc) on %s', (backend) => {
  let d: Devnet;

  beforeAll(async () => {
    // Blocks and receipts through the proxy, which no longer traces; traces from anvil itself.
    d = await startDevnet(backend, { proxy: true, traces: 'auto', tracingNode: true });
    d.proxy!.intercept((request) => (TRACE_METHODS.includes(request.method) ? { error: PRUNED } : undefined));
  });

  afterAll(async () => {
    await d?.close();
  });

  test('internal transfers come from the tracing node: no gap, and /readyz names it', async () => {
    const forwarder = await d.deploy('Forwarder');
    const deposit = getAddress(privateKeyToAddress(generatePrivateKey()));
    d.subs.set(deposit, await d.subscribe(deposit, { mempool: false }));
    const sent = await d.call(2, forwarder, 'Forwarder', 'forward', [deposit], undefined, parseEther('1'));
    const [body] = await d.receivedAtLeast(sent.hash, 1);
    expect(body).toMatchObject({ internal: true, amount: '-1', counterAddress: deposit });
    expect(d.proxy!.methods.filter((m) => TRACE_METHODS.includes(m))).toEqual([]);
    const ready = await d.t.request('GET', '/readyz', { token: null });
    const devnet = (ready.body as { networks: Record<string, unknown>[] }).networks.find(
      (n) => n.network === 'DEVNET',
    );
    expect(devnet).toMatchObject({
      internalTransfers: true,
      tracesNode: new URL(d.anvil.rpcUrl).host,
      traceGaps: { count: 0, first: null, last: null },
    });
  });
});
