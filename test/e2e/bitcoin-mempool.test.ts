/**
 * Bitcoin's pending lifecycle end to end: the real service follows the pool of a loopback node of
 * our own (Esplora REST or Bitcoin Core JSON-RPC) serving real transactions, announces those of
 * addresses watched with `mempool: true`, and withdraws an announcement (`dropped: true`,
 * `replacedBy`) when another transaction spends one of its inputs: replace-by-fee in the pool
 * (an RBF pair assembled from block 702861's real transactions) or a double spend in a block
 * (btcd's real side branch). What each notification must say is computed here with bitcoinjs-lib
 * from the raw transactions (test/fixtures/chains/bitcoin/README.md).
 */
import fs from 'node:fs';
import { Block, address as btcAddress, networks, Transaction } from 'bitcoinjs-lib';
import { Webhook } from 'standardwebhooks';
import { formatUnits } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { BTCD_SIDE, btcdBlock } from '../helpers/bitcoin-blocks.js';
import { type BitcoinNode, startBitcoinNode } from '../helpers/bitcoin-node.js';
import { backends } from '../helpers/env.js';
import { fixturePath } from '../helpers/fixture-node.js';
import { waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

type Body = Record<string, unknown>;

const rbf = (name: 'parent' | 'original' | 'replacement') =>
  Transaction.fromHex(
    fs.readFileSync(fixturePath('chains/bitcoin/constructed', `rbf-702861-${name}.hex`), 'utf8').trim(),
  );
const PARENT = rbf('parent');
const ORIGINAL = rbf('original');
const REPLACEMENT = rbf('replacement');

/** btcd's block 3 transaction spending 29c25cf0…:0, which block 3A spends in another. */
const btcdTx = (block: '2' | '3' | '3A', txid: string) =>
  Block.fromBuffer(btcdBlock(block)).transactions!.find((tx) => tx.getId() === txid)!;
const ORPHANED = '509866fa6b6a33190bbf03473bc798adad72d08418832e7b391fb95a71fdc42c';
const DOUBLE_SPEND = 'c4d8535471dded0c0a48ed5e5e421340112b2ae8073ee013b1230e8030e9d648';
const SPLIT = '29c25cf0ca03c7b3a0c001bd02e479c2d50f60119463c81d5bd24bdeaaca477f';

const addressOf = (script: Uint8Array): string | null => {
  try {
    return btcAddress.fromOutputScript(script, networks.bitcoin);
  } catch {
    return null;
  }
};

/**
 * What a pending notification of `tx` for `watched` must say, worked out from the transaction
 * and the outputs its inputs spend (`spent`, in input order): the net change and the single
 * counterparty (the other side's addresses when exactly one).
 */
function expectedPending(tx: Transaction, spent: Transaction[], watched: string) {
  const ins = tx.ins.map((input, i) => spent[i]!.outs[input.index]!);
  const paid = tx.outs.filter((o) => addressOf(o.script) === watched).reduce((s, o) => s + o.value, 0n);
  const spentBy = ins.filter((o) => addressOf(o.script) === watched).reduce((s, o) => s + o.value, 0n);
  const net = paid - spentBy;
  const otherSide = net < 0n ? tx.outs : ins;
  const others = [...new Set(otherSide.map((o) => addressOf(o.script)))].filter((a) => a !== watched);
  return {
    address: watched,
    txId: tx.getId(),
    type: 'native',
    asset: 'BTC',
    amount: formatUnits(net, 8),
    mempool: true,
    ...(others.length === 1 && others[0] ? { counterAddress: others[0] } : {}),
    chain: 'BTC',
    watchedAddress: watched,
    confirmations: 0,
  };
}

describe.each(
  backends.flatMap((backend) => (['esplora', 'bitcoind'] as const).map((api) => [backend, api] as const)),
)('the Bitcoin pool on %s through %s', (backend, api) => {
  let node: BitcoinNode;
  let t: TestApp;
  let receiver: Receiver;
  const secrets = new Map<string, string>();
  const subscriptionOf = new Map<string, string>();

  const bodies = (): Body[] =>
    receiver.requests.map((r) => {
      const body = JSON.parse(r.body) as Body;
      new Webhook(secrets.get(body.subscriptionId as string)!).verify(
        r.body,
        r.headers as Record<string, string>,
      );
      expect(body.id).toBe(r.headers['webhook-id']);
      return body;
    });
  const received = (count: number, what: string) =>
    waitFor(() => (bodies().length >= count ? bodies() : undefined), what, 30_000);
  const subscribe = async (address: string) => {
    const res = await t.request('POST', '/api/v1/subscription', {
      body: {
        type: 'ADDRESS_TRANSACTION',
        attr: { chain: 'BTC', address, url: receiver.url },
        mempool: true,
      },
    });
    expect(res.status, res.text).toBe(201);
    const { id, secret } = res.body as { id: string; secret: string };
    secrets.set(id, secret);
    subscriptionOf.set(address, id);
  };
  const eventTypes = async (address: string, txId: string) => {
    const log = await t.request('GET', `/api/v1/subscription/${subscriptionOf.get(address)}/notifications`);
    expect(log.status).toBe(200);
    return (log.body as { data: { eventType: string; payload: Body }[] }).data
      .filter((n) => n.payload.txId === txId)
      .map((n) => n.eventType)
      .reverse();
  };
  /** Polls of the pool the node has answered so far. */
  const poolPolls = () =>
    node.requests.filter((r) => r.path === '/mempool/txids' || r.rpc.includes('getrawmempool')).length;

  beforeAll(async () => {
    // The RBF parent spends a block the node does not hold: its stand-in prevout lets it be read.
    node = await startBitcoinNode({ unheldPrevouts: 'placeholder' });
    node.setChain((['0', '1', '2'] as const).map(btcdBlock));
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

  test('replace-by-fee: the announced transaction is withdrawn, replacedBy the one spending its input', async () => {
    const payee = addressOf(ORIGINAL.outs[1]!.script)!; // 15Fsx1…, paid 117,500 sat
    const newPayee = addressOf(REPLACEMENT.outs[1]!.script)!; // 1KhQjp9…, paid instead
    await subscribe(payee);
    await subscribe(newPayee);

    node.setMempool([PARENT.toBuffer(), ORIGINAL.toBuffer()]);
    const [pending] = await received(1, 'the original announced');
    expect(pending).toEqual({
      ...expectedPending(ORIGINAL, [PARENT], payee),
      id: pending!.id,
      subscriptionId: subscriptionOf.get(payee),
    });
    expect(pending).toMatchObject({
      amount: '0.001175',
      counterAddress: 'bc1q6v9jmpf2t5dhcs7ld6jyzpdcnaulzwphhsqkh5',
    });

    // The replacement spends the same output; the node evicts the original, as BIP 125 has it.
    node.setMempool([PARENT.toBuffer(), REPLACEMENT.toBuffer()]);
    const all = await received(3, 'the withdrawal and the replacement announced');
    const dropped = all.find((b) => b.dropped === true)!;
    expect(dropped).toEqual({ ...pending, id: dropped.id, dropped: true, replacedBy: REPLACEMENT.getId() });
    expect(dropped.id).not.toBe(pending!.id);
    const announced = all.find((b) => b.txId === REPLACEMENT.getId())!;
    expect(announced).toEqual({
      ...expectedPending(REPLACEMENT, [PARENT], newPayee),
      id: announced.id,
      subscriptionId: subscriptionOf.get(newPayee),
    });
    expect(await eventTypes(payee, ORIGINAL.getId())).toEqual([
      'address.transaction.pending',
      'address.transaction.dropped',
    ]);
  });

  test('a double spend in a block withdraws the announcement; a pool emptied by a restart does not', async () => {
    const before = bodies().length;
    const orphaned = btcdTx('3', ORPHANED);
    const watched = ['1KXFNhNtrRMfgbdiQeuJqnfD7dR4PhniyJ', '1JyMKvPHkrCQd8jQrqTR1rBsAd1VpRhTiE']; // A10, SINK
    for (const address of watched) await subscribe(address);
    expect(orphaned.ins.map((i) => `${Buffer.from(i.hash).reverse().toString('hex')}:${i.index}`)).toEqual([
      `${SPLIT}:0`,
    ]);

    node.setMempool([orphaned.toBuffer()]);
    const announced = (await received(before + 2, 'both sides announced')).slice(before);
    for (const address of watched) {
      const body = announced.find((b) => b.watchedAddress === address)!;
      expect(body).toEqual({
        ...expectedPending(orphaned, [btcdTx('2', SPLIT)], address),
        id: body.id,
        subscriptionId: subscriptionOf.get(address),
      });
    }

    // The node restarts with an empty pool: leaving the pool is no proof, so nothing is withdrawn.
    const polls = poolPolls();
    node.setMempool([]);
    await waitFor(() => (poolPolls() >= polls + 3 ? true : undefined), 'the empty pool polled');
    expect(bodies()).toHaveLength(before + 2);

    // The side branch mines c4d85354…, which spends the same output: a double spend.
    node.setChain(BTCD_SIDE.map(btcdBlock));
    const spender = btcdTx('3A', DOUBLE_SPEND);
    expect(spender.ins.map((i) => `${Buffer.from(i.hash).reverse().toString('hex')}:${i.index}`)).toEqual([
      `${SPLIT}:0`,
    ]);
    const withdrawn = await waitFor(() => {
      const found = bodies().filter((b) => b.dropped === true && b.txId === ORPHANED);
      return found.length === 2 ? found : undefined;
    }, 'both announcements withdrawn');
    for (const body of withdrawn) {
      const original = announced.find((b) => b.watchedAddress === body.watchedAddress)!;
      expect(body).toEqual({ ...original, id: body.id, dropped: true, replacedBy: DOUBLE_SPEND });
    }
    // The double spend itself is notified mined, as usual; the replacement of the first test left
    // the pool without being mined, and was not withdrawn for it.
    await waitFor(
      () => (bodies().some((b) => b.txId === DOUBLE_SPEND && b.blockNumber === 3) ? true : undefined),
      'the double spend notified mined',
    );
    expect(bodies().filter((b) => b.dropped === true)).toHaveLength(3);
  });
});
