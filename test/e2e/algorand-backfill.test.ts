/**
 * Backfill on Algorand against the live follower (which reads algod): with an indexer, through
 * the watched address's account transactions; without one, round by round through algod. The
 * loopback node serves the recorded testnet round 24099447 and rounds ASSEMBLED from it
 * (test/helpers/algorand-node.ts, test/fixtures/chains/algorand/README.md).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  type AlgorandNode,
  assembleRun,
  RECORDED_HASH,
  RECORDED_ROUND,
  recordedAlgodBlock,
  recordedIndexerBlock,
  startAlgorandNode,
  TESTNET,
} from '../helpers/algorand-node.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { comparableBody, runBackfills, storedBodies } from '../helpers/backfill.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

type View = { state: string; found: number; method: string; from: number };

/** The sender of the round's four self-payments (see algorand-watch.test.ts). */
const BFO7 = 'BFO7NQTTXGYDPUEWJYLWPFZRUFQISHY4E2SKXARM7UROMAW36YYBGPSUYY';
/** Rounds the follower notifies after the recorded one, four payments each. */
const ADDED = 3;
const FIRST = RECORDED_ROUND + 1;
const LAST = RECORDED_ROUND + ADDED;

function configFile(nodeUrl: string, withIndexer: boolean): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-algorand-'));
  const file = path.join(dir, 'config.json');
  const network = { family: 'algorand', symbol: 'ALGO', decimals: 6, rpc: nodeUrl, api: 'algod', ...TESTNET };
  fs.writeFileSync(
    file,
    JSON.stringify({ networks: { TALGO: withIndexer ? { ...network, indexer: nodeUrl } : network } }),
  );
  return file;
}

describe.each(
  backends.flatMap((backend) => (['indexer', 'algod only'] as const).map((mode) => [backend, mode] as const)),
)('backfill on Algorand on %s with %s', (backend, mode) => {
  let node: AlgorandNode;
  let t: TestApp;
  let receiver: Receiver;
  let live = '';

  const subscribe = async (url: string) => {
    const res = await t.request('POST', '/api/v1/subscription', {
      body: { type: 'ADDRESS_TRANSACTION', attr: { chain: 'TALGO', address: BFO7, url } },
    });
    expect(res.status, res.text).toBe(201);
    return (res.body as { id: string }).id;
  };
  const bodiesOf = (id: string) => storedBodies(t.app.store.db, [id]);
  const comparable = comparableBody;
  const backfill = async (id: string, range: unknown = { from: FIRST, to: LAST }): Promise<View> =>
    (await runBackfills<View>(t, [id], range))[0]!;
  const height = async () => {
    const ready = (await (await fetch(`${t.app.url}/readyz`)).json()) as {
      networks: { network: string; height: number | null }[];
    };
    return ready.networks.find((n) => n.network === 'TALGO')?.height;
  };

  beforeAll(async () => {
    node = await startAlgorandNode();
    node.setRounds([{ algod: recordedAlgodBlock(), indexer: recordedIndexerBlock() }]);
    receiver = await startReceiver();
    t = await startTestApp(backend, {
      LEDGERHOOK_ROLES: 'all',
      LEDGERHOOK_CONFIG: configFile(node.url, mode === 'indexer'),
      LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms',
      LEDGERHOOK_BACKFILL_RPS: '0',
      LEDGERHOOK_BACKFILL_BLOCKS: '2',
    });
    live = await subscribe(`${receiver.url}/live`);
    await waitFor(async () => ((await height()) === RECORDED_ROUND ? true : undefined), 'the recorded round');
    for (const round of assembleRun(FIRST, ADDED, RECORDED_HASH)) node.addRound(round);
    await waitFor(async () => ((await height()) === LAST ? true : undefined), `round ${LAST}`, 20_000);
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
    await node?.close();
  });

  test('a backfill of the rounds on a fresh subscription notifies exactly what the follower did', async () => {
    const liveBodies = await bodiesOf(live);
    expect(liveBodies).toHaveLength(4 * ADDED);
    const fresh = await subscribe(`${receiver.url}/fresh`);
    const before = node.requests.length;
    const done = await backfill(fresh);
    expect(done).toMatchObject({ state: 'done', found: 4 * ADDED });
    // The follower polls algod meanwhile (msgpack); the backfill's reads are told apart by query.
    const asked = node.requests.slice(before);
    const rounds = (query: RegExp) =>
      asked.filter((r) => /^\/v2\/blocks\/\d+$/.test(r.path) && query.test(r.query)).length;
    if (mode === 'indexer') {
      expect(done.method).toMatch(/indexer/);
      expect(asked.some((r) => r.path === `/v2/accounts/${BFO7}/transactions`)).toBe(true);
      // Headers for the rounds' hashes (and the tip's), never a whole round from the indexer.
      expect(rounds(/header-only=true/)).toBeGreaterThanOrEqual(ADDED);
      expect(rounds(/^$/)).toBe(0);
    } else {
      expect(done.method).toMatch(/algod/);
      expect(asked.some((r) => r.path.startsWith('/v2/accounts/'))).toBe(false);
    }
    const backfilled = await bodiesOf(fresh);
    expect(backfilled.every((b) => b.backfill === true)).toBe(true);
    expect(backfilled.map(comparable).sort()).toEqual(liveBodies.map(comparable).sort());
  }, 30_000);

  test('on the subscription the follower already notified, a backfill adds nothing', async () => {
    const done = await backfill(live);
    expect(done).toMatchObject({ state: 'done', found: 0 });
    const after = await bodiesOf(live);
    expect(after).toHaveLength(4 * ADDED);
    expect(after.some((b) => b.backfill === true)).toBe(false);
  }, 30_000);
});
