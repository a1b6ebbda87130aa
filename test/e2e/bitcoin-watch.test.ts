/**
 * Watching Bitcoin end to end: the real service follows a loopback node of our own (Esplora REST
 * or Bitcoin Core JSON-RPC) serving real recorded blocks, and delivers signed notifications to a
 * real receiver. The btcd test chain brings a real depth-2 reorganisation with a double spend and
 * a transaction on both branches (test/fixtures/chains/bitcoin/README.md).
 */
import { Block, address as btcAddress, networks as btcNetworks } from 'bitcoinjs-lib';
import { eq } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { formatUnits } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { chainCursors, chainHeaders } from '../../src/watch/schema.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { BTCD_MAIN, BTCD_SIDE, block702861, btcdBlock, mainnetRun } from '../helpers/bitcoin-blocks.js';
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

/**
 * What block 702861 must notify, computed here with bitcoinjs-lib alone from the raw block: per
 * transaction and watched address, the outputs paying it less the outputs of this block it spends
 * (the block's other inputs spend earlier blocks the fixtures do not hold, which the loopback node
 * serves as spends of unknown, addressless outputs), and the single other party.
 */
function expected702861(watched: Set<string>): Map<string, { amount: bigint; counterAddress?: string }> {
  const block = Block.fromBuffer(block702861());
  const addressOf = (script: Uint8Array) => {
    try {
      return btcAddress.fromOutputScript(script, btcNetworks.bitcoin);
    } catch {
      return null;
    }
  };
  const outputs = new Map<string, { address: string | null; value: bigint }[]>();
  for (const tx of block.transactions!) {
    outputs.set(
      tx.getId(),
      tx.outs.map((o) => ({ address: addressOf(o.script), value: BigInt(o.value) })),
    );
  }
  const result = new Map<string, { amount: bigint; counterAddress?: string }>();
  for (const [i, tx] of block.transactions!.entries()) {
    const spent =
      i === 0
        ? []
        : tx.ins.map(
            (input) => outputs.get(Buffer.from(input.hash).reverse().toString('hex'))?.[input.index] ?? null,
          );
    const paid = outputs.get(tx.getId())!;
    const touched = new Set([...spent, ...paid].flatMap((e) => (e?.address ? [e.address] : [])));
    for (const address of touched) {
      if (!watched.has(address)) continue;
      const sum = (list: ({ address: string | null; value: bigint } | null)[]) =>
        list.reduce((s, e) => (e?.address === address ? s + e.value : s), 0n);
      const amount = sum(paid) - sum(spent);
      const side = amount < 0n ? paid : spent;
      const others = new Set(side.flatMap((e) => (e?.address && e.address !== address ? [e.address] : [])));
      const counterAddress = i > 0 && amount !== 0n && others.size === 1 ? [...others][0] : undefined;
      result.set(`${tx.getId()}:${address}`, counterAddress ? { amount, counterAddress } : { amount });
    }
  }
  return result;
}

describe.each(backends)('block 702861 on %s', (backend) => {
  test('watched addresses of every output type: one notification per transaction and address, nets exact to the satoshi', async () => {
    const raw = block702861();
    const block = Block.fromBuffer(raw);
    const node = await startBitcoinNode({ unheldPrevouts: 'placeholder' });
    node.setChain([raw], 702861);
    const receiver = await startReceiver();
    const t = await startTestApp(backend, {
      LEDGERHOOK_ROLES: 'all',
      LEDGERHOOK_RPC_BTC: node.url,
      LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms',
    });
    try {
      // Five addresses of each output type, and every address whose output this block spends.
      const byType = new Map<string, Set<string>>();
      const spentHere = new Set<string>();
      const ids = new Set(block.transactions!.map((tx) => tx.getId()));
      const outputsOf = new Map(block.transactions!.map((tx) => [tx.getId(), tx.outs]));
      for (const tx of block.transactions!) {
        for (const o of tx.outs) {
          let address: string;
          try {
            address = btcAddress.fromOutputScript(o.script, btcNetworks.bitcoin);
          } catch {
            continue;
          }
          const type = address.startsWith('1')
            ? 'p2pkh'
            : address.startsWith('3')
              ? 'p2sh'
              : address.length === 42
                ? 'p2wpkh'
                : 'p2wsh';
          const set = byType.get(type) ?? new Set<string>();
          if (set.size < 5) set.add(address);
          byType.set(type, set);
        }
        for (const input of tx.ins) {
          const prev = Buffer.from(input.hash).reverse().toString('hex');
          if (!ids.has(prev)) continue;
          try {
            spentHere.add(
              btcAddress.fromOutputScript(outputsOf.get(prev)![input.index]!.script, btcNetworks.bitcoin),
            );
          } catch {}
        }
      }
      expect([...byType.keys()].sort()).toEqual(['p2pkh', 'p2sh', 'p2wpkh', 'p2wsh']);
      expect(spentHere.size).toBeGreaterThan(0);
      const watched = new Set([...[...byType.values()].flatMap((s) => [...s]), ...spentHere]);

      await node.stop();
      // Follow from the block before: the cursor where a node that served 702860 would leave it.
      const parent = Buffer.from(block.prevHash!).reverse().toString('hex');
      await t.app.store.db
        .insert(chainCursors)
        .values({ network: 'BTC', height: 702860, hash: parent, updatedAt: new Date() });
      await t.app.store.db
        .insert(chainHeaders)
        .values({ network: 'BTC', height: 702860, hash: parent, parentHash: '00'.repeat(32) });
      const subscriptionOf = new Map<string, { id: string; secret: string }>();
      for (const address of watched) {
        const res = await t.request('POST', '/api/v1/subscription', {
          body: {
            type: 'ADDRESS_TRANSACTION',
            attr: { chain: 'BTC', address, url: receiver.url },
            confirmations: 1,
          },
        });
        expect(res.status, res.text).toBe(201);
        subscriptionOf.set(address, res.body as { id: string; secret: string });
      }

      const expected = expected702861(watched);
      // The node was unreachable while the subscriptions were made (so that the block is matched
      // against all of them): the follower says so in /readyz, and carries on once it is back.
      const status = await waitFor(async () => {
        const ready = (await (await fetch(`${t.app.url}/readyz`)).json()) as {
          networks: { network: string; healthy: boolean; lastError: string | null; height: number | null }[];
        };
        const btc = ready.networks.find((n) => n.network === 'BTC');
        return btc?.lastError ? btc : undefined;
      }, 'the unreachable node in /readyz');
      expect(status).toMatchObject({ healthy: false, height: null });
      expect(status.lastError).toContain(new URL(node.url).host);
      await node.start();
      const distinctIds = () => new Set(receiver.requests.map((r) => r.headers['webhook-id'])).size;
      await waitFor(() => (distinctIds() >= expected.size ? true : undefined), 'every notification', 60_000);
      const requests = receiver.requests;
      const got = new Map<string, Body>();
      for (const r of requests) {
        const body = JSON.parse(r.body) as Body;
        const sub = subscriptionOf.get(body.watchedAddress as string)!;
        new Webhook(sub.secret).verify(r.body, r.headers as Record<string, string>);
        const key = `${body.txId}:${body.watchedAddress}`;
        // One notification per transaction and address; a slow answer may bring it again (the
        // same id: at least once), never another notification of the same thing.
        if (got.has(key)) expect(got.get(key)!.id, `${key} notified once`).toBe(body.id);
        got.set(key, body);
      }
      expect([...got.keys()].sort()).toEqual([...expected.keys()].sort());
      for (const [key, e] of expected) {
        const body = got.get(key)!;
        const [txId, address] = key.split(':');
        expect(body).toEqual({
          address,
          txId,
          type: 'native',
          blockNumber: 702861,
          asset: 'BTC',
          amount: formatUnits(e.amount, 8),
          ...(e.counterAddress ? { counterAddress: e.counterAddress } : {}),
          id: body.id,
          subscriptionId: subscriptionOf.get(address!)!.id,
          chain: 'BTC',
          watchedAddress: address,
          confirmations: 1,
        });
      }
      // Some of them are debits: the spends inside the block.
      expect([...expected.values()].some((e) => e.amount < 0n)).toBe(true);
    } finally {
      await t.close();
      await receiver.close();
      await node.close();
    }
  });
});
