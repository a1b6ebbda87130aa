import { type Hex, numberToHex, parseEther } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { comparableBody, storedBodies } from '../helpers/backfill.js';
import { type Devnet, startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';

type Body = Record<string, unknown>;
interface View {
  id: string;
  state: string;
  from: number;
  to: number;
  position: number;
  found: number;
  blocksDone: number;
  blocksTotal: number;
  progress: number;
  etaSeconds: number | null;
  method: string;
}

/**
 * Blocks of history the comparison covers: 20 chunks of LEDGERHOOK_BACKFILL_BLOCKS. (It was 2,000
 * blocks in chunks of 100, the test suite's most costly file in CPU for the same chunks.)
 */
const BLOCKS = 400;
/** Blocks among them that hold transfers (the others are empty, mined in bulk). */
const ACTIVE = 40;
/** Given, so that nothing is estimated against a mempool whose order is not known yet. */
const GAS = 300_000n;

describe.each(backends)('backfill on anvil (%s)', (backend) => {
  let d: Devnet;
  let first: number;
  let last: number;
  let live: { id: string };

  const bodiesOf = (subscriptionId: string) => storedBodies(d.t.app.store.db, [subscriptionId]);
  const comparable = comparableBody;
  const subscribe = async (extra: Record<string, unknown> = {}, path = '') => {
    const res = await d.t.request('POST', '/api/v1/subscription', {
      body: {
        type: 'ADDRESS_TRANSACTION',
        attr: { address: d.addresses[1], chain: 'DEVNET', url: `${d.receiver.url}${path}` },
        mempool: false,
        ...extra,
      },
    });
    expect(res.status, res.text).toBe(201);
    return res.body as { id: string };
  };
  const start = (id: string, body: unknown) =>
    d.t.request('POST', `/api/v1/subscription/${id}/backfill`, { body });
  const view = async (id: string) => {
    const res = await d.t.request('GET', `/api/v1/subscription/${id}/backfill`);
    expect(res.status, res.text).toBe(200);
    return res.body as View;
  };
  const finished = (id: string) =>
    waitFor(
      async () => {
        const v = await view(id);
        return v.state === 'running' ? undefined : v;
      },
      `backfill of ${id} finished`,
      60_000,
    );

  beforeAll(async () => {
    d = await startDevnet(backend, {
      env: { LEDGERHOOK_BACKFILL_RPS: '0', LEDGERHOOK_BACKFILL_BLOCKS: '20' },
    });
    const [, alice, bob, carol] = d.addresses as [Hex, Hex, Hex, Hex];
    live = await subscribe();
    const token = await d.deploy('TestToken');
    const nft = await d.deploy('TestNFT');
    const multi = await d.deploy('TestMulti');
    // Pays alice from a contract: an internal transfer, found only in the block's traces.
    const forwarder = await d.deploy('Forwarder');
    // Balances to move, minted before the range.
    await d.call(0, token, 'TestToken', 'mint', [alice, 10n ** 12n]);
    await d.call(0, multi, 'TestMulti', 'mint', [alice, 1n, 10n ** 6n]);
    first = Number(await d.chain.getBlockNumber()) + 1;
    // Transactions wait in the mempool and are mined a block at a time: many transfers per block.
    await d.setAutomine(false);
    const blocksPerActive = Math.floor(BLOCKS / ACTIVE);
    for (let i = 0; i < ACTIVE; i++) {
      // One account's transactions in order (nonces); the accounts at once.
      const chainOf = async (steps: (() => Promise<Hex>)[]) => {
        for (const step of steps) await step();
      };
      await Promise.all([
        chainOf([
          () => d.submit(1, bob, parseEther('0.01')),
          () => d.submitCall(1, token, 'TestToken', 'transfer', [carol, 1_000n], GAS),
          () => d.submitCall(1, multi, 'TestMulti', 'safeTransferFrom', [alice, carol, 1n, 2n, '0x'], GAS),
          () => d.submitCall(1, nft, 'TestNFT', 'transferFrom', [alice, bob, BigInt(1000 + i)], GAS),
          // Reverts after moving tokens: notifies nothing, live or backfilled.
          () => d.submitCall(1, token, 'TestToken', 'transferThenRevert', [bob, 5n], GAS),
        ]),
        chainOf([
          () => d.submit(0, alice, parseEther('0.02')),
          () => d.submitCall(0, token, 'TestToken', 'mint', [alice, 5_000n], GAS),
          () => d.submitCall(0, nft, 'TestNFT', 'mint', [alice, BigInt(1000 + i)], GAS),
          () => d.submitCall(0, multi, 'TestMulti', 'mintBatch', [alice, [1n, 2n, 3n], [10n, 20n, 30n]], GAS),
        ]),
        chainOf([
          () => d.submit(3, d.addresses[4]!, parseEther('0.03')),
          () => d.submitCall(3, token, 'TestToken', 'mint', [bob, 7n], GAS),
          () => d.submitCall(3, forwarder, 'Forwarder', 'forward', [alice], GAS, parseEther('0.04')),
        ]),
      ]);
      // The NFT minted in this block moves in the next: mine the mints first.
      await d.mine();
      await d.chain.request({
        method: 'anvil_mine' as never,
        params: [numberToHex(blocksPerActive - 1)] as never,
      });
    }
    await d.setAutomine(true);
    last = Number(await d.chain.getBlockNumber());
    await d.processed(BigInt(last));
  }, 240_000);

  afterAll(async () => {
    await d?.close();
  });

  test('a backfill of the blocks notifies exactly what the live follower did', async () => {
    const inRange = (b: Body) => Number(b.blockNumber) >= first && Number(b.blockNumber) <= last;
    const liveBodies = (await bodiesOf(live.id)).filter(inRange);
    expect(last - first + 1).toBeGreaterThanOrEqual(BLOCKS);
    // Native, ERC-20, ERC-721 and ERC-1155 (single and batch) both ways; none of the reverted.
    expect(new Set(liveBodies.map((b) => `${b.type}:${b.tokenId === undefined ? '' : 't'}`)).size).toBe(3);
    expect(liveBodies.length).toBeGreaterThan(ACTIVE * 9);
    // One internal transfer to alice in each active block, from the block's traces.
    expect(liveBodies.filter((b) => b.internal === true && b.traceAddress === '0')).toHaveLength(ACTIVE);

    const fresh = await subscribe({}, '/fresh');
    const started = await start(fresh.id, { from: first, to: last });
    expect(started.status, started.text).toBe(202);
    const running = started.body as View;
    expect(running).toMatchObject({ state: 'running', from: first, to: last, position: first - 1 });
    expect(running.method).toMatch(/eth_getLogs/);
    expect(running.method).toMatch(/internal transfers from each block’s traces/);
    const done = await finished(fresh.id);
    expect(done).toMatchObject({ state: 'done', position: last, progress: 1, blocksDone: last - first + 1 });

    const backfilled = await bodiesOf(fresh.id);
    expect(backfilled.every((b) => b.backfill === true)).toBe(true);
    expect(done.found).toBe(backfilled.length);
    const want = liveBodies.map(comparable).sort();
    const got = backfilled.map(comparable).sort();
    expect(got).toEqual(want);
  }, 120_000);

  test('on a subscription the follower already notified, a backfill adds nothing', async () => {
    const before = await bodiesOf(live.id);
    const started = await start(live.id, { from: first, to: last });
    expect(started.status, started.text).toBe(202);
    const done = await finished(live.id);
    expect(done).toMatchObject({ state: 'done', found: 0 });
    const after = await bodiesOf(live.id);
    expect(after.length).toBe(before.length);
    const keys = after.map(comparable);
    expect(new Set(keys).size).toBe(keys.length);
  }, 60_000);

  test('one running per subscription, cancel stops it, and bad input is refused naming the field', async () => {
    const sub = await subscribe({}, '/cancel');
    // A range the default `to` (the follower's cursor) closes.
    const started = await start(sub.id, { from: 0 });
    expect(started.status, started.text).toBe(202);
    const again = await start(sub.id, { from: 0 });
    expect(again.status).toBe(409);
    expect((again.body as { existingId: string }).existingId).toBe((started.body as View).id);

    const cancelled = await d.t.request('DELETE', `/api/v1/subscription/${sub.id}/backfill`);
    expect(cancelled.status, cancelled.text).toBe(200);
    const at = cancelled.body as View;
    expect(at.state).toBe('cancelled');
    // A new one may start now; the cancelled one never moves again (its commits check its state).
    const next = await start(sub.id, { from: last, to: last });
    expect(next.status, next.text).toBe(202);
    await finished(sub.id);
    const rows = await d.t.app.store.db.execute(
      `SELECT position FROM backfills WHERE id = '${at.id}'` as never,
    );
    expect(Number((rows as unknown as { rows: { position: string }[] }).rows[0]!.position)).toBe(at.position);

    const count = async () =>
      (await d.t.app.store.db.execute('SELECT count(*)::int AS n FROM backfills' as never)) as unknown as {
        rows: { n: number }[];
      };
    const stored = (await count()).rows[0]!.n;
    const bad: [unknown, number, string][] = [
      [{ from: last, to: first }, 400, '/from'],
      [{ from: 'yesterday-ish' }, 400, '/from'],
      [{ from: 'a\u0000b' }, 400, '/from'],
      [{ from: last + 1_000_000 }, 400, '/from'],
      [{ from: 1, to: '2999-01-01T00:00:00Z' }, 400, '/to'],
      [{ from: -1 }, 400, '/from'],
      [{}, 400, '/from'],
      [{ from: 1, extra: true }, 400, ''],
    ];
    for (const [body, status, pointer] of bad) {
      const res = await start(sub.id, body);
      expect(res.status, `${JSON.stringify(body)}: ${res.text}`).toBe(status);
      expect(res.headers.get('content-type')).toMatch(/problem\+json/);
      if (pointer) expect(res.text).toContain(pointer);
    }
    const unknown = await start('0190f0f0-0000-7000-8000-000000000000', { from: 1 });
    expect(unknown.status).toBe(404);
    const other = await d.t.tokenFor('someone-else');
    const foreign = await d.t.request('POST', `/api/v1/subscription/${sub.id}/backfill`, {
      token: other,
      body: { from: 1 },
    });
    expect(foreign.status).toBe(404);
    const deleted = await subscribe({}, '/deleted');
    expect((await d.t.request('DELETE', `/api/v1/subscription/${deleted.id}`)).status).toBe(204);
    const onDeleted = await start(deleted.id, { from: 1 });
    expect(onDeleted.status).toBe(400);
    expect(onDeleted.text).toContain('"id"');
    expect((await count()).rows[0]!.n).toBe(stored);
  }, 60_000);
});
