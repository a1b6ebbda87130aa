/**
 * Contract event subscriptions as an attacker with an ordinary token would make them:
 * ABI types whose declared size no log could carry, deep nesting, huge tuples, signatures that
 * differ only to fill a cache, and a real log whose offsets point many values at one long string.
 * Every create answers 201 or 400 within a deadline, a sample is as large as a log could be and no
 * larger, nothing is kept for a refused request, and a hostile log is not decoded into a flood.
 */

import v8 from 'node:v8';
import vm from 'node:vm';
import { sql } from 'drizzle-orm';
import {
  concat,
  encodeAbiParameters,
  type Hex,
  keccak256,
  numberToHex,
  parseAbiParameter,
  stringToHex,
  toBytes,
} from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Body, Created, Devnet } from '../helpers/devnet.js';
import { startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** The most data an event's arguments may take at least (README, "Limits"). */
const MAX_EVENT_DATA = 1024 * 1024;
/** Levels of tuples and array dimensions one argument may nest. */
const MAX_DEPTH = 16;
/** Far longer than any of these requests takes; the old code took minutes or died. */
const ANSWER_DEADLINE_MS = 10_000;

const word = (n: number | bigint): Hex => numberToHex(n, { size: 32 });

/** `levels` tuples around a uint256: `((uint256))` has two. */
function nestedTuple(levels: number): string {
  let type = 'uint256';
  for (let i = 0; i < levels; i++) type = `(${type})`;
  return type;
}

/** A case: the event's one argument `x`, and the fewest bytes it encodes to, worked out by hand. */
interface TypeCase {
  type: string;
  /** Bytes at least, or Infinity; undefined when it is refused for its shape, not its size. */
  leastBytes: number | undefined;
  /** Elements a sample's `x` has (its outer array), when it is accepted. */
  sampleLength?: number;
}

function typeCases(): TypeCase[] {
  const cases: TypeCase[] = [];
  const sizes = [
    1,
    2,
    31,
    32,
    33,
    1000,
    16_383,
    16_384,
    32_767,
    32_768,
    32_769,
    65_536,
    2 ** 20,
    2 ** 32 - 1,
  ];
  for (const n of sizes) {
    // A static element is its word; a string element an offset and an empty string's length word.
    cases.push({ type: `uint8[${n}]`, leastBytes: 32 * n, sampleLength: n });
    cases.push({ type: `string[${n}]`, leastBytes: 32 + 64 * n, sampleLength: n });
    cases.push({ type: `(uint8 a, bytes32 b)[${n}]`, leastBytes: 64 * n, sampleLength: n });
  }
  for (const digits of ['100000000000000000000', '9'.repeat(300)])
    cases.push({ type: `uint256[${digits}]`, leastBytes: Number.POSITIVE_INFINITY });
  cases.push({ type: 'uint8[1000][1000][1000]', leastBytes: 32e9 });
  cases.push({ type: 'uint8[100][100]', leastBytes: 320_000, sampleLength: 100 });
  cases.push({ type: `uint8${'[1]'.repeat(MAX_DEPTH)}`, leastBytes: 32, sampleLength: 1 });
  cases.push({ type: `uint8${'[1]'.repeat(MAX_DEPTH + 1)}`, leastBytes: undefined });
  cases.push({ type: `uint8${'[]'.repeat(1300)}`, leastBytes: undefined });
  cases.push({ type: nestedTuple(MAX_DEPTH), leastBytes: 32 });
  cases.push({ type: nestedTuple(MAX_DEPTH + 1), leastBytes: undefined });
  cases.push({ type: nestedTuple(2000), leastBytes: undefined });
  // A tuple as wide as the length limit lets it be: 330 members.
  const members = Array.from({ length: 330 }, (_, i) => `uint8 m${i}`).join(',');
  cases.push({ type: `(${members})`, leastBytes: 330 * 32 });
  return cases;
}

/** `p` within the deadline, or a failure saying what hung. */
async function answered<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`no answer within ${ANSWER_DEADLINE_MS} ms: ${what}`)),
      ANSWER_DEADLINE_MS,
    );
  });
  try {
    return await Promise.race([p, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

describe.each(backends)('hostile contract events (%s)', (backend) => {
  let d: Devnet;

  beforeAll(async () => {
    d = await startDevnet(backend, {
      env: { LEDGERHOOK_TEST_RATE_LIMIT: '1000/1m', LEDGERHOOK_RATE_LIMIT: '100000/1s' },
    });
  });

  afterAll(async () => {
    await d?.close();
  });

  const create = (event: unknown, chain = 'DEVNET') =>
    d.t.request('POST', '/api/v1/subscription', {
      body: { type: 'CONTRACT_LOG_EVENT', attr: { chain, url: d.receiver.url, event } },
    });

  /** The sample of `sub` as the receiver got it. */
  const sampleOf = (sub: string): Promise<Body> =>
    waitFor(
      () =>
        d.receiver.requests
          .map((r) => JSON.parse(r.body) as Body)
          .find((body) => body.subscriptionId === sub && body.test === true),
      `the sample of ${sub}`,
    );

  test('every ABI type, fixed arrays up to absurd sizes, nesting and wide tuples: 201 or 400 naming the event; samples as large as a log could be', async () => {
    for (const c of typeCases()) {
      const signature = `event E(${c.type} x)`;
      // A fragment is refused for its length alone past 4,096 characters: only short types are tried so.
      const fragment =
        c.type.length < 1000
          ? { type: 'event', name: 'E', inputs: [parseAbiParameter(`${c.type} x`)] }
          : undefined;
      const forms = fragment && JSON.stringify(fragment).length <= 4096 ? [signature, fragment] : [signature];
      for (const event of forms) {
        const form = typeof event === 'string' ? 'signature' : 'fragment';
        const res = await answered(create(event), `create ${c.type.slice(0, 60)} (${form})`);
        const accepted = c.leastBytes !== undefined && c.leastBytes <= MAX_EVENT_DATA;
        expect(res.status, `${c.type.slice(0, 60)} (${form}): ${res.text.slice(0, 300)}`).toBe(
          accepted ? 201 : 400,
        );
        if (!accepted) {
          const problem = res.body as { errors: { pointer: string; detail: string }[] };
          expect(problem.errors.length).toBeGreaterThan(0);
          for (const error of problem.errors) expect(error.pointer).toMatch(/^#\/attr\/event/);
          continue;
        }
        if (form === 'fragment') continue; // the same event: one sample is enough
        const { id } = res.body as Created;
        const sent = await answered(
          d.t.request('POST', `/api/v1/subscription/${id}/test`),
          `test ${c.type.slice(0, 60)}`,
        );
        expect(sent.status, sent.text).toBe(202);
        const sample = await sampleOf(id);
        // The sample's data is the event's least encoding, and its argument decoded from it.
        expect(((sample.data as string).length - 2) / 2).toBe(c.leastBytes);
        const x = (sample.args as { x: unknown }).x;
        if (c.sampleLength !== undefined) expect((x as unknown[]).length).toBe(c.sampleLength);
      }
    }
    expect((await d.t.request('GET', '/healthz', { token: null })).status).toBe(200);
  });

  test('an event stored before the bound (its type past what a log holds) gets 409 from /test, not a dead process', async () => {
    const res = await create('event Big(uint256[4] x)');
    expect(res.status).toBe(201);
    const { id } = res.body as Created;
    await d.t.app.store.db.execute(
      sql`UPDATE subscriptions SET contract_event = jsonb_set(contract_event, '{event,abi,inputs,0,type}', '"uint256[4294967295]"') WHERE id = ${id}`,
    );
    const sent = await answered(
      d.t.request('POST', `/api/v1/subscription/${id}/test`),
      'test of a stored oversize event',
    );
    expect(sent.status, sent.text).toBe(409);
    expect((sent.body as { detail: string }).detail).toMatch(/more than a log can carry/);
    expect((await d.t.request('GET', '/healthz', { token: null })).status).toBe(200);
  });

  test('refused creates keep nothing: thousands of distinct long signatures leave the heap where it was', async () => {
    // Each differs in its names, as an attacker's would, and is refused for its network.
    const signature = (i: number) =>
      `event Flood${i}(${Array.from({ length: 60 }, (_, j) => `uint256[${(j % 7) + 1}] a${i}_${j}`).join(', ')})`;
    const send = async (from: number, count: number) => {
      for (let i = from; i < from + count; i++) {
        const res = await create(signature(i), 'NOPE');
        expect(res.status).toBe(400);
      }
    };
    await send(0, 300); // warms what any request warms
    gc();
    const before = process.memoryUsage().heapUsed;
    await send(1_000, 2_000);
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    // abitype's cache of parsed parameters keeps 32 MB for these 2,000 signatures, parsed alone.
    expect(grown).toBeLessThan(6 * 1024 * 1024);
  });

  test('a filter of 100,000 keys, 10 MB of filter values or 100,000 unknown fields: one short 400 each', async () => {
    const request = (attr: Record<string, unknown>) =>
      answered(
        d.t.request('POST', '/api/v1/subscription', {
          body: { type: 'CONTRACT_LOG_EVENT', attr: { chain: 'DEVNET', url: d.receiver.url, ...attr } },
        }),
        'a create with a huge filter',
      );
    const event = 'event Labelled(string indexed label)';
    const keys = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`k${i}`, '1']));
    const values = { label: Array.from({ length: 1000 }, (_, i) => `${i}`.padEnd(10_000, 'x')) };
    const unknown = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`f${i}`, 1]));
    for (const [attr, pointer] of [
      [{ event, filter: keys }, '#/attr/filter'],
      [{ event, filter: values }, '#/attr/filter'],
      [{ event, ...unknown }, '#/attr/f0'],
    ] as const) {
      const res = await request(attr);
      expect(res.status).toBe(400);
      const problem = res.body as { detail: string; errors: { pointer: string }[] };
      expect(problem.errors[0]?.pointer).toBe(pointer);
      // The answer names the first problems and counts the rest.
      expect(problem.errors.length).toBeLessThanOrEqual(101);
      if (pointer === '#/attr/f0')
        expect(problem.errors[100]).toEqual({
          pointer: '#',
          detail: 'and 99900 more errors (100000 in all)',
        });
      expect(res.text.length).toBeLessThan(16 * 1024);
    }
  });

  test('a log whose offsets point many strings at one long string is not the event; the next real one is notified', async () => {
    const res = await create('event Parts(string[] parts)');
    expect(res.status).toBe(201);
    const sub = res.body as Created;
    const raw = await d.deploy('RawLogs');
    const topic0 = keccak256(toBytes('Parts(string[])'));
    // 30 offsets to one 20,000-byte string: 22 KB of data that decodes to 600 KB of text.
    const copies = 30;
    const text = stringToHex('z'.repeat(20_000));
    const padded = concat([text, `0x${'00'.repeat(32 - (20_000 % 32))}`]);
    const aliased = concat([
      word(32),
      word(copies),
      ...Array.from({ length: copies }, () => word(32 * copies)),
      word(20_000),
      padded,
    ]);
    const flood = await d.call(0, raw, 'RawLogs', 'emitLog', [[topic0], aliased], 3_000_000n);
    expect(flood.status).toBe('success');
    const real = encodeAbiParameters([{ type: 'string[]' }], [['first', 'second']]);
    const honest = await d.call(0, raw, 'RawLogs', 'emitLog', [[topic0], real], 3_000_000n);
    await d.processed(honest.block);
    const received = await waitFor(() => {
      const bodies = d.receiver.requests
        .map((r) => JSON.parse(r.body) as Body)
        .filter((body) => body.subscriptionId === sub.id);
      return bodies.some((body) => body.txId === honest.hash) ? bodies : undefined;
    }, 'the real Parts log');
    expect(received.map((body) => body.txId)).toEqual([honest.hash]);
    expect(received[0]?.args).toEqual({ parts: ['first', 'second'] });
  });
});
