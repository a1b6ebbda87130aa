import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { comparableBody, runBackfills, storedBodies } from '../helpers/backfill.js';
import { BTCD_MAIN, btcdBlock } from '../helpers/bitcoin-blocks.js';
import { type BitcoinNode, startBitcoinNode } from '../helpers/bitcoin-node.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

// The btcd chain's addresses that move coins in blocks 2-4 (see bitcoin-watch.test.ts).
const WATCHED = [
  '1KXFNhNtrRMfgbdiQeuJqnfD7dR4PhniyJ',
  '1NiEGXeURREqqMjCvjCeZn6SwEBZ9AdVet',
  '1JyMKvPHkrCQd8jQrqTR1rBsAd1VpRhTiE',
];
/** Notifications the follower makes of blocks 1-4 for them, worked out in bitcoin-watch.test.ts. */
const LIVE_COUNT = 7;
const TIP = BTCD_MAIN.length - 1;

describe.each(
  backends.flatMap((backend) => (['esplora', 'bitcoind'] as const).map((api) => [backend, api] as const)),
)('backfill on Bitcoin on %s through %s', (backend, api) => {
  let node: BitcoinNode;
  let t: TestApp;
  let receiver: Receiver;
  const live: string[] = [];

  const subscribe = async (address: string, path: string) => {
    const res = await t.request('POST', '/api/v1/subscription', {
      body: {
        type: 'ADDRESS_TRANSACTION',
        attr: { chain: 'BTC', address, url: `${receiver.url}${path}` },
        confirmations: 1,
      },
    });
    expect(res.status, res.text).toBe(201);
    return (res.body as { id: string }).id;
  };
  const bodiesOf = (ids: string[]) => storedBodies(t.app.store.db, ids);
  const comparable = comparableBody;
  /** Backfills each subscription over the chain and waits for all to end. */
  const backfill = (ids: string[]) =>
    runBackfills<{ state: string; found: number; method: string }>(t, ids, { from: 1, to: TIP });

  beforeAll(async () => {
    node = await startBitcoinNode();
    node.setChain([btcdBlock('0')]);
    receiver = await startReceiver();
    t = await startTestApp(backend, {
      LEDGERHOOK_ROLES: 'all',
      LEDGERHOOK_RPC_BTC: node.url,
      LEDGERHOOK_API_BTC: api,
      LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms',
      LEDGERHOOK_BACKFILL_RPS: '0',
      LEDGERHOOK_BACKFILL_BLOCKS: '2',
    });
    for (const address of WATCHED) live.push(await subscribe(address, '/live'));
    const at = async (height: number) => {
      const ready = (await (await fetch(`${t.app.url}/readyz`)).json()) as {
        networks: { network: string; height: number | null }[];
      };
      return ready.networks.find((n) => n.network === 'BTC')?.height === height ? true : undefined;
    };
    await waitFor(() => at(0), 'BTC at 0');
    node.setChain(BTCD_MAIN.map(btcdBlock));
    await waitFor(() => at(TIP), `BTC at ${TIP}`, 20_000);
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
    await node?.close();
  });

  test('a backfill of the chain on fresh subscriptions notifies exactly what the follower did', async () => {
    const liveBodies = await bodiesOf(live);
    expect(liveBodies).toHaveLength(LIVE_COUNT);

    const fresh: string[] = [];
    for (const address of WATCHED) fresh.push(await subscribe(address, '/fresh'));
    const before = node.requests.length;
    const views = await backfill(fresh);
    for (const v of views) expect(v.state).toBe('done');
    // Each API's own way: Esplora's address histories, Core's blocks (it indexes no addresses).
    const asked = node.requests.slice(before);
    if (api === 'esplora') {
      expect(views[0]!.method).toMatch(/address/);
      expect(asked.some((r) => r.path.startsWith('/address/'))).toBe(true);
      expect(asked.some((r) => r.path.includes('/txs/') && r.path.startsWith('/block/'))).toBe(false);
    } else {
      expect(views[0]!.method).toMatch(/getblock/);
      expect(asked.some((r) => r.rpc.includes('getblock'))).toBe(true);
    }

    const backfilled = await bodiesOf(fresh);
    expect(backfilled.every((b) => b.backfill === true)).toBe(true);
    expect(views.reduce((n, v) => n + v.found, 0)).toBe(backfilled.length);
    expect(backfilled.map(comparable).sort()).toEqual(liveBodies.map(comparable).sort());
  }, 40_000);

  test('on the subscriptions the follower already notified, a backfill adds nothing', async () => {
    const views = await backfill(live);
    for (const v of views) expect(v).toMatchObject({ state: 'done', found: 0 });
    const after = await bodiesOf(live);
    expect(after).toHaveLength(LIVE_COUNT);
    expect(after.some((b) => b.backfill === true)).toBe(false);
  }, 40_000);

  test('a time resolves to a block through the node', async () => {
    // Block 2's own timestamp, read by the node's block header (Core) or block (Esplora).
    const id = await subscribe(WATCHED[0]!, '/time');
    const block2 = btcdBlock('2');
    const seconds = block2.readUInt32LE(68);
    const res = await t.request('POST', `/api/v1/subscription/${id}/backfill`, {
      body: { from: new Date(seconds * 1000).toISOString(), to: TIP },
    });
    expect(res.status, res.text).toBe(202);
    expect((res.body as { from: number }).from).toBe(2);
  }, 20_000);
});
