/**
 * Watching Bitcoin end to end: the real service follows a loopback node of our own (Esplora REST
 * or Bitcoin Core JSON-RPC) serving real recorded blocks, and delivers signed notifications to a
 * real receiver. The btcd test chain brings a real depth-2 reorganisation with a double spend and
 * a transaction on both branches (test/fixtures/chains/bitcoin/README.md).
 */
import { eq } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { chainCursors } from '../../src/watch/schema.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { BTCD_MAIN, BTCD_SIDE, btcdBlock, mainnetRun } from '../helpers/bitcoin-blocks.js';
import { type BitcoinNode, startBitcoinNode } from '../helpers/bitcoin-node.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

type Body = Record<string, unknown>;

// The btcd chain's P2PKH addresses (mainnet-encoded), and the transactions moving between them.
const A10 = '1KXFNhNtrRMfgbdiQeuJqnfD7dR4PhniyJ'; // paid 10 BTC in block 2
const A40 = '1NiEGXeURREqqMjCvjCeZn6SwEBZ9AdVet'; // paid 40 BTC in block 2
const SINK = '1JyMKvPHkrCQd8jQrqTR1rBsAd1VpRhTiE'; // paid by both spends in block 3 and by block 4
const TX = {
  split: '29c25cf0ca03c7b3a0c001bd02e479c2d50f60119463c81d5bd24bdeaaca477f', // block 2: 50 → 10 + 40
  both: 'd75b0bc6316e0283171228d0b1b9ebf2213b7c884619c750bb2059776b9c1726', // 3 and 3A: 40 → SINK
  orphaned: '509866fa6b6a33190bbf03473bc798adad72d08418832e7b391fb95a71fdc42c', // 3 only: 10 → SINK
  doubleSpend: 'c4d8535471dded0c0a48ed5e5e421340112b2ae8073ee013b1230e8030e9d648', // 3A: the same 10 → A40
  moved: '94dfb6d62c9fd8bb3205dc6135aa79500578a5965185f9d0b787be53f7123222', // 4, then 5A: 50 → SINK
};
const HASH_5A = '00000000195f85184e77c18914bd0febd11278d950f5e4731a38f71ed79f044e';

/** What a notification must say, worked out by hand from the README's table of the btcd blocks. */
type Expected = {
  watched: string;
  txId: string;
  blockNumber: number;
  amount: string;
  counterAddress?: string;
};
const MAIN_BRANCH: Expected[] = [
  // The split spends a pay-to-pubkey coinbase output, which has no address: no counterparty.
  { watched: A10, txId: TX.split, blockNumber: 2, amount: '10' },
  { watched: A40, txId: TX.split, blockNumber: 2, amount: '40' },
  { watched: A40, txId: TX.both, blockNumber: 3, amount: '-40', counterAddress: SINK },
  { watched: SINK, txId: TX.both, blockNumber: 3, amount: '40', counterAddress: A40 },
  { watched: A10, txId: TX.orphaned, blockNumber: 3, amount: '-10', counterAddress: SINK },
  { watched: SINK, txId: TX.orphaned, blockNumber: 3, amount: '10', counterAddress: A10 },
  { watched: SINK, txId: TX.moved, blockNumber: 4, amount: '50' },
];

describe.each(
  backends.flatMap((backend) => (['esplora', 'bitcoind'] as const).map((api) => [backend, api] as const)),
)('watching Bitcoin on %s through %s', (backend, api) => {
  let node: BitcoinNode;
  let t: TestApp;
  let receiver: Receiver;
  const secrets = new Map<string, string>();
  const subscriptionOf = new Map<string, string>();

  const bodies = (): Body[] =>
    receiver.requests.map((r) => {
      const body = JSON.parse(r.body) as Body;
      const secret = secrets.get(body.subscriptionId as string)!;
      new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
      return body;
    });
  const btcStatus = async () => {
    const ready = (await (await fetch(`${t.app.url}/readyz`)).json()) as {
      networks: { network: string; height: number | null; healthy: boolean; lastError: string | null }[];
    };
    return ready.networks.find((n) => n.network === 'BTC');
  };
  const at = (height: number) =>
    waitFor(
      async () => ((await btcStatus())?.height === height ? true : undefined),
      `BTC at ${height}`,
      30_000,
    );
  const subscribe = async (address: string) => {
    const res = await t.request('POST', '/api/v1/subscription', {
      body: {
        type: 'ADDRESS_TRANSACTION',
        attr: { chain: 'BTC', address, url: receiver.url },
        confirmations: 1,
      },
    });
    expect(res.status, res.text).toBe(201);
    const { id, secret } = res.body as { id: string; secret: string };
    secrets.set(id, secret);
    subscriptionOf.set(address, id);
  };
  const expectBody = (body: Body, e: Expected) =>
    expect(body).toEqual({
      address: e.watched,
      txId: e.txId,
      type: 'native',
      blockNumber: e.blockNumber,
      asset: 'BTC',
      amount: e.amount,
      ...(e.counterAddress ? { counterAddress: e.counterAddress } : {}),
      id: body.id,
      subscriptionId: subscriptionOf.get(e.watched),
      chain: 'BTC',
      watchedAddress: e.watched,
      confirmations: 1,
      ...(body.reorg === true ? { reorg: true } : {}),
    });
  const find = (list: Body[], e: Expected, reorg: boolean) =>
    list.filter(
      (b) =>
        b.txId === e.txId &&
        b.watchedAddress === e.watched &&
        b.blockNumber === e.blockNumber &&
        (b.reorg === true) === reorg,
    );

  beforeAll(async () => {
    node = await startBitcoinNode();
    node.setChain([btcdBlock('0')]);
    receiver = await startReceiver();
    t = await startTestApp(backend, {
      LEDGERHOOK_ROLES: 'all',
      LEDGERHOOK_RPC_BTC: node.url,
      LEDGERHOOK_API_BTC: api,
      LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms',
    });
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
    await node?.close();
  });

  test('the btcd chain, then its longer side branch: only what left is withdrawn, only what is new notified', async () => {
    for (const address of [A10, A40, SINK]) await subscribe(address);
    await at(0);

    // The node serves 1-4, failing on the way: a 500, then a page of transactions one short.
    node.failNext(2);
    node.truncateNextPage();
    node.setChain(BTCD_MAIN.map(btcdBlock));
    await at(4);
    await receiver.waitForRequests(MAIN_BRANCH.length);
    const main = bodies();
    expect(main).toHaveLength(MAIN_BRANCH.length);
    for (const e of MAIN_BRANCH) {
      const [body] = find(main, e, false);
      expect(body, `${e.txId} for ${e.watched}`).toBeDefined();
      expectBody(body!, e);
    }

    // 3A and 4A replace 3 and 4, and 5A makes the side branch the longer one.
    node.setChain(BTCD_SIDE.map(btcdBlock));
    await at(5);
    const withdrawn = MAIN_BRANCH.filter((e) => e.txId === TX.orphaned || e.txId === TX.moved);
    const fresh: Expected[] = [
      { watched: A10, txId: TX.doubleSpend, blockNumber: 3, amount: '-10', counterAddress: A40 },
      { watched: A40, txId: TX.doubleSpend, blockNumber: 3, amount: '10', counterAddress: A10 },
      { watched: SINK, txId: TX.moved, blockNumber: 5, amount: '50' },
    ];
    await receiver.waitForRequests(MAIN_BRANCH.length + withdrawn.length + fresh.length);
    const all = bodies();
    for (const e of withdrawn) {
      const [withdrawal] = find(all, e, true);
      expect(withdrawal, `withdrawal of ${e.txId} for ${e.watched}`).toBeDefined();
      expectBody(withdrawal!, e);
      const [original] = find(all, e, false);
      expect(withdrawal).toEqual({ ...original, id: withdrawal!.id, reorg: true });
    }
    for (const e of fresh) {
      const [body] = find(all, e, false);
      expect(body, `${e.txId} for ${e.watched} at ${e.blockNumber}`).toBeDefined();
      expectBody(body!, e);
    }
    // The transaction on both branches at height 3 was neither withdrawn nor notified again.
    expect(all.filter((b) => b.txId === TX.both)).toHaveLength(2);
    expect(all).toHaveLength(MAIN_BRANCH.length + withdrawn.length + fresh.length);
    for (const address of [A10, A40, SINK]) {
      const log = await t.request('GET', `/api/v1/subscription/${subscriptionOf.get(address)}/notifications`);
      expect(log.status).toBe(200);
      const items = (log.body as { data: { payload: Body }[] }).data;
      expect(items.filter((n) => n.payload.txId === TX.both).length).toBe(address === A10 ? 0 : 1);
    }

    // The cursor is on 5A; the node's failures were counted on the way, and are over.
    const [cursor] = await t.app.store.db.select().from(chainCursors).where(eq(chainCursors.network, 'BTC'));
    expect(cursor).toMatchObject({ height: 5, hash: HASH_5A });
    expect(await btcStatus()).toMatchObject({ height: 5, healthy: true, lastError: null });
    const metrics = await (await fetch(`${t.app.url}/metrics`)).text();
    const errors = /ledgerhook_node_errors_total\{network="BTC",component="follower"\} (\d+)/.exec(metrics);
    expect(Number(errors?.[1])).toBeGreaterThanOrEqual(2);
  });
});

describe.each(backends)('following 255 mainnet blocks on %s', (backend) => {
  test('every block is processed in order; pay-to-pubkey outputs have no address, so nothing is notified', async () => {
    const node = await startBitcoinNode();
    const receiver = await startReceiver();
    const blocks = mainnetRun();
    node.setChain(blocks.slice(0, 1));
    const t = await startTestApp(backend, {
      LEDGERHOOK_ROLES: 'all',
      LEDGERHOOK_RPC_BTC: node.url,
      LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms',
    });
    try {
      // The P2PKH form of the key block 9's coinbase paid (and that later paid Hal in block 170):
      // the coins were never at that address, so watching it notifies nothing.
      const res = await t.request('POST', '/api/v1/subscription', {
        body: {
          type: 'ADDRESS_TRANSACTION',
          attr: { chain: 'BTC', address: '12cbQLTFMXRnSzktFkuoG3eHoMeFtpTu3S', url: receiver.url },
        },
      });
      expect(res.status, res.text).toBe(201);
      await waitFor(async () => {
        const ready = (await (await fetch(`${t.app.url}/readyz`)).json()) as {
          networks: { network: string; height: number | null }[];
        };
        return ready.networks.find((n) => n.network === 'BTC')?.height === 0 ? true : undefined;
      }, 'BTC at 0');
      node.setChain(blocks);
      await waitFor(
        async () => {
          const ready = (await (await fetch(`${t.app.url}/readyz`)).json()) as {
            networks: { network: string; height: number | null }[];
          };
          return ready.networks.find((n) => n.network === 'BTC')?.height === 255 ? true : undefined;
        },
        'BTC at 255',
        60_000,
      );
      expect(receiver.requests).toEqual([]);
    } finally {
      await t.close();
      await receiver.close();
      await node.close();
    }
  });
});
