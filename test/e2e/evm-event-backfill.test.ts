/**
 * The backfill of contract event subscriptions (CONTRACT_LOG_EVENT) on a real anvil chain, beside
 * the live follower: past events found through eth_getLogs in small chunks, decoded, marked
 * `backfill: true`, each once whoever notified it first; one contract, a list with a filter, any
 * contract, a bare topic0 and an anonymous event each finding exactly what the follower found; the
 * eth_getLogs requests each sends; and a node refusing ranges as too large, whose ranges are
 * halved until they pass.
 */
import { eq, inArray } from 'drizzle-orm';
import { getAddress, type Hex, numberToHex, pad, toEventSelector, zeroAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { notifications } from '../../src/notify/schema.js';
import { comparableBody, runBackfills, type StoredBody, storedBodies } from '../helpers/backfill.js';
import { deliveredAtLeast, subscribeEvent } from '../helpers/contract-events.js';
import { type Created, type Devnet, startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';

const TRANSFER = 'event Transfer(address indexed from, address indexed to, uint256 value)';
const TRANSFER_TOPIC = toEventSelector('Transfer(address,address,uint256)');
/** Emitted raw by RawLogs: no topic0, the one indexed argument in topic 0. */
const NOTE = 'event Note(address indexed who, uint256 value) anonymous';
/** Blocks a backfill reads at once here: a range of history is many chunks. */
const CHUNK = 7;
const ROUNDS = 8;
/** Given, so that a reverting call is sent rather than refused by estimation. */
const GAS = 300_000n;

const word = (address: Hex): Hex => pad(address.toLowerCase() as Hex, { size: 32 });
const uint = (n: bigint): Hex => pad(numberToHex(n), { size: 32 });

interface View {
  state: string;
  found: number;
  blocksTotal: number;
  method: string;
}

/** An eth_getLogs request the service sent to the node. */
interface LogsRequest {
  fromBlock: Hex;
  toBlock: Hex;
  topics?: unknown[];
  address?: Hex[];
}

describe.each(backends)('backfill of contract event subscriptions on anvil (%s)', (backend) => {
  let d: Devnet;
  let alice: Hex;
  let bob: Hex;
  let carol: Hex;
  let tokenA: Hex;
  let tokenB: Hex;
  let raw: Hex;
  let first: number;
  let last: number;
  /** Subscribed before the events: what the follower notified. */
  const live = {} as Record<'one' | 'any' | 'listed' | 'bare' | 'anon', Created>;
  /** Every eth_getLogs request the service sent, and those the proxy refused. */
  const asked: LogsRequest[] = [];
  const refused: LogsRequest[] = [];
  /** The node refuses eth_getLogs over more blocks than this (unlimited while undefined). */
  let maxRange: number | undefined;

  /** Each subscription of the kinds followed here, made with the receiver's `path`. */
  const subscribeAll = async (path: string) => ({
    one: await subscribeEvent(d, {
      event: TRANSFER,
      contractAddress: tokenA,
      url: `${d.receiver.url}${path}`,
    }),
    any: await subscribeEvent(d, { event: TRANSFER, url: `${d.receiver.url}${path}` }),
    listed: await subscribeEvent(d, {
      event: TRANSFER,
      addresses: [tokenA, tokenB],
      filter: { to: bob },
      url: `${d.receiver.url}${path}`,
    }),
    bare: await subscribeEvent(d, {
      event: TRANSFER_TOPIC,
      contractAddress: tokenB,
      url: `${d.receiver.url}${path}`,
    }),
    anon: await subscribeEvent(d, { event: NOTE, contractAddress: raw, url: `${d.receiver.url}${path}` }),
  });

  const inRange = (b: StoredBody) => Number(b.blockNumber) >= first && Number(b.blockNumber) <= last;
  const bodiesOf = async (sub: Created) => storedBodies(d.t.app.store.db, [sub.id]);
  const key = (b: StoredBody) => `${b.txId}:${b.logIndex}`;

  beforeAll(async () => {
    d = await startDevnet(backend, {
      proxy: true,
      env: { LEDGERHOOK_BACKFILL_RPS: '0', LEDGERHOOK_BACKFILL_BLOCKS: String(CHUNK) },
    });
    d.proxy!.intercept((request) => {
      if (request.method !== 'eth_getLogs') return undefined;
      const filter = (request.params as [LogsRequest])[0];
      asked.push(filter);
      if (maxRange !== undefined && Number(filter.toBlock) - Number(filter.fromBlock) + 1 > maxRange) {
        refused.push(filter);
        return { error: { code: -32005, message: 'query returned more than 10000 results' } };
      }
      return undefined;
    });
    [, alice, bob, carol] = d.addresses as [Hex, Hex, Hex, Hex];
    tokenA = await d.deploy('TestToken');
    tokenB = await d.deploy('TestToken');
    raw = await d.deploy('RawLogs');
    Object.assign(live, await subscribeAll(''));
    first = Number(await d.chain.getBlockNumber()) + 1;
    for (let i = 0n; i < BigInt(ROUNDS); i++) {
      const calls: [number, Hex, 'TestToken' | 'RawLogs', string, unknown[]][] = [
        [0, tokenA, 'TestToken', 'mint', [alice, 10n + i]],
        [1, tokenA, 'TestToken', 'transfer', [bob, 1n + i]],
        [0, tokenB, 'TestToken', 'mint', [bob, 100n + i]],
        // Not a Transfer; and a transfer that reverts, whose logs are not the chain's.
        [1, tokenA, 'TestToken', 'approve', [carol, i]],
        [1, tokenA, 'TestToken', 'transferThenRevert', [carol, 1n]],
        // The anonymous Note; a log of two topics, which is not it; a Transfer of a third contract.
        [2, raw, 'RawLogs', 'emitLog', [[word(carol)], uint(i)]],
        [2, raw, 'RawLogs', 'emitLog', [[word(carol), word(bob)], uint(i)]],
        [2, raw, 'RawLogs', 'emitLog', [[TRANSFER_TOPIC, word(alice), word(carol)], uint(1_000n + i)]],
      ];
      for (const [from, address, name, fn, args] of calls) {
        const { status } = await d.call(from, address, name, fn, args, GAS);
        expect(status, fn).toBe(fn === 'transferThenRevert' ? 'reverted' : 'success');
      }
      // Blocks without events between the rounds.
      await d.chain.request({ method: 'anvil_mine' as never, params: [numberToHex(3)] as never });
    }
    last = Number(await d.chain.getBlockNumber());
    await d.processed(BigInt(last));
  }, 120_000);

  afterAll(async () => {
    await d?.close();
  });

  test('a new subscription: the past events, decoded, marked, once each, as the follower notified them', async () => {
    expect(last - first + 1).toBeGreaterThan(8 * CHUNK);
    const liveBodies = (await bodiesOf(live.one)).filter(inRange);
    expect(liveBodies).toHaveLength(2 * ROUNDS);

    const fresh = await subscribeEvent(d, {
      event: TRANSFER,
      contractAddress: tokenA,
      url: `${d.receiver.url}/fresh`,
    });
    const [done] = await runBackfills<View>(d.t, [fresh.id], { from: first, to: last }, 60_000);
    expect(done).toMatchObject({ state: 'done', found: 2 * ROUNDS, blocksTotal: last - first + 1 });
    expect(done!.method).toMatch(/eth_getLogs with the event's topic0/);

    const backfilled = await bodiesOf(fresh);
    expect(backfilled).toHaveLength(2 * ROUNDS);
    expect(backfilled.every((b) => b.backfill === true)).toBe(true);
    expect(backfilled.map(comparableBody).sort()).toEqual(liveBodies.map(comparableBody).sort());
    // Decoded: the values sent, as the body gives them.
    const args = backfilled.map((b) => b.args as Record<string, unknown>);
    const sent: Record<string, unknown>[] = [];
    for (let i = 0; i < ROUNDS; i++)
      sent.push(
        { from: zeroAddress, to: alice, value: String(10 + i) },
        { from: alice, to: bob, value: String(1 + i) },
      );
    const byValue = (a: Record<string, unknown>, b: Record<string, unknown>) =>
      JSON.stringify(a).localeCompare(JSON.stringify(b));
    expect(args.sort(byValue)).toEqual(sent.sort(byValue));
    for (const b of backfilled) {
      expect(b).toMatchObject({
        chain: 'DEVNET',
        contractAddress: getAddress(tokenA),
        event: 'Transfer',
        signature: 'Transfer(address,address,uint256)',
        subscriptionId: fresh.id,
      });
    }
    const types = await d.t.app.store.db
      .select({ eventType: notifications.eventType })
      .from(notifications)
      .where(eq(notifications.subscriptionId, fresh.id));
    expect(new Set(types.map((t) => t.eventType))).toEqual(new Set(['contract.log']));
    // Delivered, signed for the new subscription, each once.
    const got = await deliveredAtLeast(d.receiver, fresh, 2 * ROUNDS);
    expect(got).toHaveLength(2 * ROUNDS);
    expect(new Set(got.map((g) => key(g.body))).size).toBe(2 * ROUNDS);

    // Beside the follower, which notified these already: nothing more, on either.
    const [again, twice] = await runBackfills<View>(
      d.t,
      [live.one.id, fresh.id],
      { from: first, to: last },
      60_000,
    );
    expect(again).toMatchObject({ state: 'done', found: 0 });
    expect(twice).toMatchObject({ state: 'done', found: 0 });
    const liveAfter = await bodiesOf(live.one);
    expect(new Set(liveAfter.map(key)).size).toBe(liveAfter.length);
    expect(liveAfter.filter(inRange).map(key).sort()).toEqual(liveBodies.map(key).sort());
    expect(await bodiesOf(fresh)).toHaveLength(2 * ROUNDS);
  }, 120_000);

  test('any contract, a list with a filter, a bare topic0, an anonymous event: what the follower found', async () => {
    const wanted = { one: 2, any: 4, listed: 2, bare: 1, anon: 1 } as const;
    const kinds = Object.keys(wanted) as (keyof typeof wanted)[];
    for (const kind of kinds) {
      const bodies = (await bodiesOf(live[kind])).filter(inRange);
      expect(bodies, kind).toHaveLength(wanted[kind] * ROUNDS);
    }
    asked.length = 0;
    const fresh = await subscribeAll('/kinds');
    const views = await runBackfills<View>(
      d.t,
      kinds.map((kind) => fresh[kind].id),
      { from: first, to: last },
      60_000,
    );
    for (const [i, kind] of kinds.entries()) {
      expect(views[i], kind).toMatchObject({ state: 'done', found: wanted[kind] * ROUNDS });
      const want = (await bodiesOf(live[kind])).filter(inRange);
      const got = await bodiesOf(fresh[kind]);
      expect(got.every((b) => b.backfill === true)).toBe(true);
      expect(got.map(comparableBody).sort(), kind).toEqual(want.map(comparableBody).sort());
    }
    // Any contract: the event of the three contracts that emitted it.
    const contracts = new Set((await bodiesOf(fresh.any)).map((b) => b.contractAddress));
    expect(contracts).toEqual(new Set([tokenA, tokenB, raw].map((a) => getAddress(a))));
    // The bare topic0: raw topics and data, nothing decoded.
    for (const b of await bodiesOf(fresh.bare)) {
      expect(b).not.toHaveProperty('args');
      expect(b).not.toHaveProperty('event');
      expect((b.topics as Hex[])[0]).toBe(TRANSFER_TOPIC);
    }
    // The anonymous event: the one-topic logs only, decoded.
    const notes = (await bodiesOf(fresh.anon)).map((b) => b.args);
    expect(notes).toHaveLength(ROUNDS);
    for (const args of notes) expect(args).toMatchObject({ who: carol });

    // What the node was asked: each backfill's event and contracts, filter values in their topic.
    const lower = (a: Hex) => a.toLowerCase();
    const shapes = new Set(
      asked.map((a) =>
        JSON.stringify({ topics: a.topics ?? [], address: a.address ? [...a.address].sort() : null }),
      ),
    );
    expect(shapes).toEqual(
      new Set(
        [
          { topics: [TRANSFER_TOPIC], address: [lower(tokenA)] },
          { topics: [TRANSFER_TOPIC], address: null },
          { topics: [TRANSFER_TOPIC, null, [word(bob)]], address: [tokenA, tokenB].map(lower).sort() },
          { topics: [TRANSFER_TOPIC], address: [lower(tokenB)] },
          { topics: [], address: [lower(raw)] },
        ].map((s) => JSON.stringify(s)),
      ),
    );
    // Every range within a chunk.
    for (const a of asked) expect(Number(a.toBlock) - Number(a.fromBlock) + 1).toBeLessThanOrEqual(CHUNK);
  }, 120_000);

  test('a node refusing ranges as too large: they are halved until they pass, and every event is found once', async () => {
    asked.length = 0;
    refused.length = 0;
    maxRange = 2;
    try {
      const fresh = await subscribeEvent(d, { event: TRANSFER, url: `${d.receiver.url}/split` });
      const [done] = await runBackfills<View>(d.t, [fresh.id], { from: first, to: last }, 60_000);
      expect(done).toMatchObject({ state: 'done', found: 4 * ROUNDS });
      const want = (await bodiesOf(live.any)).filter(inRange);
      const got = await bodiesOf(fresh);
      expect(got.map(comparableBody).sort()).toEqual(want.map(comparableBody).sort());
      expect(new Set(got.map(key)).size).toBe(got.length);
      expect(refused.length).toBeGreaterThan(0);
      // What passed covers the range once, in pieces the node accepts.
      const passed = asked
        .filter((a) => !refused.includes(a))
        .map((a) => [Number(a.fromBlock), Number(a.toBlock)] as const)
        .sort((a, b) => a[0] - b[0]);
      let next = first;
      for (const [from, to] of passed) {
        expect(from).toBe(next);
        expect(to - from + 1).toBeLessThanOrEqual(2);
        next = to + 1;
      }
      expect(next).toBe(last + 1);
    } finally {
      maxRange = undefined;
    }
  }, 120_000);

  test('the subscriptions the follower notified are left as they were', async () => {
    const ids = Object.values(live).map((s) => s.id);
    const rows = await d.t.app.store.db
      .select({ body: notifications.body })
      .from(notifications)
      .where(inArray(notifications.subscriptionId, ids));
    const bodies = rows.map((r) => JSON.parse(r.body) as StoredBody);
    expect(bodies.some((b) => b.backfill === true)).toBe(false);
    const keys = bodies.map((b) => `${b.subscriptionId}:${key(b)}`);
    expect(new Set(keys).size).toBe(keys.length);
  });
});
