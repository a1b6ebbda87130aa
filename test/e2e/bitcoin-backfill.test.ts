/**
 * Backfill on Bitcoin against the live follower, on the recorded btcd chain served by the loopback
 * node (test/fixtures/chains/bitcoin/README.md): through Esplora the watched addresses' histories,
 * through Bitcoin Core the range's blocks; either way the follower's notifications exactly.
 */
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { notifications } from '../../src/notify/schema.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { BTCD_MAIN, btcdBlock } from '../helpers/bitcoin-blocks.js';
import { type BitcoinNode, startBitcoinNode } from '../helpers/bitcoin-node.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

type Body = Record<string, unknown>;

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
  const bodiesOf = async (ids: string[]): Promise<Body[]> => {
    const out: Body[] = [];
    for (const id of ids) {
      const rows = await t.app.store.db
        .select({ body: notifications.body })
        .from(notifications)
        .where(eq(notifications.subscriptionId, id));
      out.push(...rows.map((r) => JSON.parse(r.body) as Body));
    }
    return out;
  };
  const comparable = ({ id: _i, subscriptionId: _s, backfill: _b, ...rest }: Body) => JSON.stringify(rest);
  /** Backfills each subscription over the chain and waits for all to end. */
  const backfill = async (ids: string[]) => {
    const views: { state: string; found: number; method: string }[] = [];
    for (const id of ids) {
      const res = await t.request('POST', `/api/v1/subscription/${id}/backfill`, {
        body: { from: 1, to: TIP },
      });
      expect(res.status, res.text).toBe(202);
    }
    for (const id of ids) {
      views.push(
        await waitFor(
          async () => {
            const res = await t.request('GET', `/api/v1/subscription/${id}/backfill`);
            const v = res.body as { state: string; found: number; method: string };
            return v.state === 'running' ? undefined : v;
          },
          `backfill of ${id}`,
          20_000,
        ),
      );
    }
    return views;
  };

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
