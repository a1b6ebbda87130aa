/**
 * Contract event subscriptions (`CONTRACT_LOG_EVENT`) on a real anvil chain: EventZoo's events of
 * every ABI type notified with exact bodies (computed here from the values sent, and checked
 * against the node's receipts), filters on indexed arguments, any contract / one contract / a list
 * of contracts, a topic0-only (Tatum) subscription, ERC-721's Transfer against ERC-20's, overloaded
 * events, an anonymous event, confirmations, a reorganisation withdrawing an event, a backfill beside
 * the follower, and bad subscriptions refused naming the field with nothing stored.
 */
import { Webhook } from 'standardwebhooks';
import { type Hex, numberToHex, zeroAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { artifact } from '../helpers/anvil.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { comparableBody, runBackfills, type StoredBody, storedBodies } from '../helpers/backfill.js';
import {
  anonCase,
  callZoo,
  type Delivery,
  deliveredAtLeast,
  deliveries,
  deployZoo,
  type EventCase,
  expectDelivery,
  expectedBody,
  FLAGGED,
  flaggedCase,
  H1,
  INDEXED_DYNAMIC,
  indexedDynamicCase,
  inOneBlock,
  logOf,
  overloadedTextCase,
  PING,
  PING_SIGNATURE,
  pingCase,
  submitZoo,
  subscribeEvent,
  topic0,
  word,
  ZOO_GAS,
  zooCallData,
  zooCases,
  zooFragment,
} from '../helpers/contract-events.js';
import type { Body, Created, Devnet } from '../helpers/devnet.js';
import { startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { snapshotDatabase } from '../helpers/snapshot.js';

/** A log a subscription must be notified of: its transaction, and what it holds. */
type Want = { hash: Hex; c: Pick<EventCase, 'name' | 'signature' | 'topics' | 'data' | 'decoded'> };

const ERC20_TRANSFER = 'event Transfer(address indexed from, address indexed to, uint256 value)';
const ERC721_TRANSFER = 'event Transfer(address indexed from, address indexed to, uint256 indexed tokenId)';
const TRANSFER_SIGNATURE = 'Transfer(address,address,uint256)';

describe.each(backends)('contract event subscriptions on anvil (%s)', (backend) => {
  let d: Devnet;
  let alice: Hex;
  let bob: Hex;
  let carol: Hex;

  beforeAll(async () => {
    d = await startDevnet(backend, {
      env: { LEDGERHOOK_BACKFILL_RPS: '0', LEDGERHOOK_BACKFILL_BLOCKS: '100' },
    });
    [, alice, bob, carol] = d.addresses as [Hex, Hex, Hex, Hex];
    await d.processed(await d.chain.getBlockNumber());
  });

  afterAll(async () => {
    await d?.close();
  });

  /**
   * Once `block` is processed, what the outbox holds for `sub` (of the bodies `which` keeps), which
   * the receiver got exactly: each verified, each once.
   */
  async function settled(sub: Created, block: bigint, which: (b: Body) => boolean): Promise<Delivery[]> {
    await d.processed(block);
    const logged = (await d.logged(sub.id)).filter((n) => which(n.payload));
    const got = await deliveredAtLeast(d.receiver, sub, logged.length, which);
    const byId = (a: Body, b: Body) => String(a.id).localeCompare(String(b.id));
    expect(got.map((g) => g.body).sort(byId)).toEqual(logged.map((n) => n.payload).sort(byId));
    for (const n of logged)
      expect(n.eventType).toBe(n.payload.reorg === true ? 'contract.log.reorg' : 'contract.log');
    return got;
  }

  /**
   * `sub` is notified of exactly `wants` among the transactions `hashes` (one body per log, in any
   * order), each body exact: checked field by field against the log in the node's receipt too.
   */
  async function notifiedExactly(
    sub: Created,
    hashes: Hex[],
    wants: Want[],
    options: { decoded?: boolean; confirmations?: number } = {},
  ): Promise<Delivery[]> {
    const ours = new Set<unknown>(hashes);
    const which = (b: Body) => ours.has(b.txId);
    await deliveredAtLeast(d.receiver, sub, wants.length, which);
    const blocks = await Promise.all(
      hashes.map(async (hash) => (await d.chain.getTransactionReceipt({ hash })).blockNumber),
    );
    const got = await settled(
      sub,
      blocks.reduce((a, b) => (a > b ? a : b)),
      which,
    );
    expect(got.map((g) => `${g.body.txId}:${g.body.logIndex}`).sort()).toEqual(
      (await Promise.all(wants.map(async (w) => `${w.hash}:${await indexOf(w)}`))).sort(),
    );
    for (const want of wants) {
      const logIndex = await indexOf(want);
      const delivery = got.find((g) => g.body.txId === want.hash && g.body.logIndex === logIndex)!;
      const log = await logOf(d, want.hash, logIndex);
      // The contract emitted what the case says it did.
      expect(log.topics).toEqual(want.c.topics);
      expect(log.data).toEqual(want.c.data);
      expectDelivery(delivery, expectedBody(log, want.c, sub, delivery.body.id, options));
    }
    return got;
  }

  /** The index of the log of `want` in its block: the one of its transaction whose topics are the case's. */
  async function indexOf(want: Want): Promise<number> {
    const receipt = await d.chain.getTransactionReceipt({ hash: want.hash });
    const matching = receipt.logs.filter(
      (l) => JSON.stringify(l.topics) === JSON.stringify(want.c.topics) && l.data === want.c.data,
    );
    expect(matching, `one log of ${want.c.signature} in ${want.hash}`).toHaveLength(1);
    return matching[0]!.logIndex;
  }

  test('every ABI type: exact bodies from the values sent, for a human-readable signature and a JSON fragment alike', async () => {
    const zoo = await deployZoo(d);
    const cases = zooCases(d.addresses);
    // Two subscriptions per event: its human-readable signature and its compiler's ABI fragment.
    const subs = new Map<string, { readable: Created; fragment: Created }>();
    for (const c of cases) {
      if (subs.has(c.signature)) continue;
      subs.set(c.signature, {
        readable: await subscribeEvent(d, { event: c.event, contractAddress: zoo }),
        fragment: await subscribeEvent(d, { event: c.fragment, contractAddress: zoo.toLowerCase() }),
      });
    }
    const sent: Want[] = [];
    for (const c of cases) sent.push({ hash: (await callZoo(d, 0, zoo, c.fn, c.args)).hash, c });

    for (const [signature, { readable, fragment }] of subs) {
      const wants = sent.filter((w) => w.c.signature === signature);
      const hashes = sent.map((w) => w.hash);
      const a = await notifiedExactly(readable, hashes, wants);
      const b = await notifiedExactly(fragment, hashes, wants);
      // The same bodies but for the subscription and the notification's id.
      const strip = ({ id: _i, subscriptionId: _s, ...rest }: Body) => JSON.stringify(rest);
      expect(b.map((x) => strip(x.body)).sort()).toEqual(a.map((x) => strip(x.body)).sort());
      expect(new Set([...a, ...b].map((x) => x.body.id)).size).toBe(a.length + b.length);
    }
  });

  test('filters on indexed arguments: one value, several values, several arguments, an indexed string and bytes, bool/bytes32/int256', async () => {
    const zoo = await deployZoo(d);
    const key = H1;
    const subs = {
      all: await subscribeEvent(d, { event: PING, contractAddress: zoo }),
      byFrom: await subscribeEvent(d, {
        event: PING,
        contractAddress: zoo,
        filter: { from: alice.toLowerCase() },
      }),
      byNs: await subscribeEvent(d, { event: PING, contractAddress: zoo, filter: { n: ['1', '3'] } }),
      byBoth: await subscribeEvent(d, {
        event: PING,
        contractAddress: zoo,
        filter: { from: [alice, bob], n: '2' },
      }),
      byText: await subscribeEvent(d, {
        event: INDEXED_DYNAMIC,
        contractAddress: zoo,
        filter: { text: 'match me ✓' },
      }),
      byBlob: await subscribeEvent(d, {
        event: INDEXED_DYNAMIC,
        contractAddress: zoo,
        filter: { blob: ['0xc0ffee', '0xbeef'] },
      }),
      flagged: await subscribeEvent(d, {
        event: FLAGGED,
        contractAddress: zoo,
        filter: { flag: true, key, delta: '-5' },
      }),
    };
    const cases = {
      ping1a: pingCase(alice, 1n, 'a1'),
      ping1b: pingCase(bob, 1n, 'b1'),
      ping2a: pingCase(alice, 2n, 'a2'),
      ping2b: pingCase(bob, 2n, 'b2'),
      ping3c: pingCase(carol, 3n, 'c3'),
      ping4b: pingCase(bob, 4n, 'b4'),
      ping2c: pingCase(carol, 2n, 'c2'),
      textMatch: indexedDynamicCase('match me ✓', '0x01', 'p1'),
      textOther: indexedDynamicCase('match me', '0xc0ffee', 'p2'),
      flaggedMatch: flaggedCase(true, key, -5n),
      flaggedFalse: flaggedCase(false, key, -5n),
      flaggedPlus: flaggedCase(true, key, 5n),
      flaggedKey: flaggedCase(true, word('uint256', 1n), -5n),
    };
    const names = Object.keys(cases) as (keyof typeof cases)[];
    // All in one block: what a filter leaves out is beside what it lets through.
    const { hashes } = await inOneBlock(
      d,
      names.map((name, i) => () => submitZoo(d, i % 3, zoo, cases[name].fn, cases[name].args)),
    );
    const want = (...which: (keyof typeof cases)[]): Want[] =>
      which.map((name) => ({ hash: hashes[names.indexOf(name)]!, c: cases[name] }));

    await notifiedExactly(
      subs.all,
      hashes,
      want('ping1a', 'ping1b', 'ping2a', 'ping2b', 'ping3c', 'ping4b', 'ping2c'),
    );
    await notifiedExactly(subs.byFrom, hashes, want('ping1a', 'ping2a'));
    await notifiedExactly(subs.byNs, hashes, want('ping1a', 'ping1b', 'ping3c'));
    await notifiedExactly(subs.byBoth, hashes, want('ping2a', 'ping2b'));
    await notifiedExactly(subs.byText, hashes, want('textMatch'));
    await notifiedExactly(subs.byBlob, hashes, want('textOther'));
    await notifiedExactly(subs.flagged, hashes, want('flaggedMatch'));
  });

  test('any contract, one contract, a list of contracts changed through /addresses', async () => {
    const [zoo1, zoo2, zoo3] = [await deployZoo(d), await deployZoo(d), await deployZoo(d)];
    const any = await subscribeEvent(d, { event: PING });
    const one = await subscribeEvent(d, { event: PING, contractAddress: zoo1 });
    const list = await subscribeEvent(d, { event: PING, addresses: [zoo1, zoo2.toLowerCase()] });

    const emitFromEach = async (round: bigint) => {
      const cases = [zoo1, zoo2, zoo3].map((_, i) =>
        pingCase(alice, round * 10n + BigInt(i), `round ${round}`),
      );
      const { hashes, block } = await inOneBlock(
        d,
        [zoo1, zoo2, zoo3].map((zoo, i) => () => submitZoo(d, i, zoo, cases[i]!.fn, cases[i]!.args)),
      );
      return { hashes, block, wants: hashes.map((hash, i): Want => ({ hash, c: cases[i]! })) };
    };

    const first = await emitFromEach(1n);
    await notifiedExactly(any, first.hashes, first.wants);
    await notifiedExactly(one, first.hashes, first.wants.slice(0, 1));
    await notifiedExactly(list, first.hashes, first.wants.slice(0, 2));

    const changed = await d.t.request('POST', `/api/v1/subscription/${list.id}/addresses`, {
      body: { add: [zoo3], remove: [zoo2] },
    });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body).toEqual({ added: 1, removed: 1, addressCount: 2 });

    const second = await emitFromEach(2n);
    await notifiedExactly(any, second.hashes, second.wants);
    await notifiedExactly(one, second.hashes, second.wants.slice(0, 1));
    await notifiedExactly(list, second.hashes, [second.wants[0]!, second.wants[2]!]);
  });

  test('a topic0-only (Tatum) subscription: raw topics and data, no event, signature or args', async () => {
    const zoo = await deployZoo(d);
    const tatum = await subscribeEvent(d, { event: topic0(PING_SIGNATURE), contractAddress: zoo });
    const pings = [pingCase(alice, 1n, 'two in one'), pingCase(alice, 2n, 'two in one')];
    const other = overloadedTextCase(bob, 'another topic0');
    const { hashes } = await inOneBlock(d, [
      () => submitZoo(d, 0, zoo, 'emitPings', [alice, [1n, 2n], 'two in one']),
      () => submitZoo(d, 1, zoo, other.fn, other.args),
    ]);
    const got = await notifiedExactly(
      tatum,
      hashes,
      pings.map((c) => ({ hash: hashes[0]!, c })),
      { decoded: false },
    );
    // Two logs of one transaction: consecutive indexes.
    const [i, j] = got.map((g) => Number(g.body.logIndex)).sort((a, b) => a - b);
    expect(j).toBe(i! + 1);
    for (const g of got)
      for (const absent of ['event', 'signature', 'args']) expect(g.body).not.toHaveProperty(absent);
  });

  test("ERC-721's Transfer is not ERC-20's: each subscription gets its own, a topic0-only one gets both", async () => {
    const token = await d.deploy('TestToken');
    const nft = await d.deploy('TestNFT');
    const erc20 = await subscribeEvent(d, { event: ERC20_TRANSFER });
    const erc721 = await subscribeEvent(d, { event: ERC721_TRANSFER });
    const raw = await subscribeEvent(d, { event: topic0(TRANSFER_SIGNATURE) });
    /** Logs not notified because they do not fit the ABI their topic0 matched, as /metrics counts them. */
    const notFitting = async (): Promise<number> => {
      const res = await d.t.request('GET', '/metrics', { token: null });
      const line = /^ledgerhook_contract_logs_not_fitting_total\{network="DEVNET"\} (\d+)$/m.exec(res.text);
      return line ? Number(line[1]) : 0;
    };
    const before = await notFitting();
    const { hashes } = await inOneBlock(d, [
      () => d.submitCall(0, token, 'TestToken', 'mint', [alice, 5_000n], ZOO_GAS),
      () => d.submitCall(1, nft, 'TestNFT', 'mint', [bob, 77n], ZOO_GAS),
    ]);
    const fungible: Want = {
      hash: hashes[0]!,
      c: {
        name: 'Transfer',
        signature: TRANSFER_SIGNATURE,
        topics: [topic0(TRANSFER_SIGNATURE), word('address', zeroAddress), word('address', alice)],
        data: word('uint256', 5_000n),
        decoded: { from: zeroAddress, to: alice, value: '5000' },
      },
    };
    const nonFungible: Want = {
      hash: hashes[1]!,
      c: {
        name: 'Transfer',
        signature: TRANSFER_SIGNATURE,
        topics: [
          topic0(TRANSFER_SIGNATURE),
          word('address', zeroAddress),
          word('address', bob),
          word('uint256', 77n),
        ],
        data: '0x',
        decoded: { from: zeroAddress, to: bob, tokenId: '77' },
      },
    };
    await notifiedExactly(erc20, hashes, [fungible]);
    await notifiedExactly(erc721, hashes, [nonFungible]);
    await notifiedExactly(raw, hashes, [fungible, nonFungible], { decoded: false });
    // Each log against the other's ABI, at least (earlier tests' subscriptions may add more).
    expect((await notFitting()) - before).toBeGreaterThanOrEqual(2);
    // TestNFT's Transfer is ERC-721's: the token id indexed.
    expect(artifact('TestNFT').abi).toContainEqual(
      expect.objectContaining({
        type: 'event',
        name: 'Transfer',
        inputs: expect.arrayContaining([expect.objectContaining({ name: 'tokenId', indexed: true })]),
      }),
    );
  });

  test('two events with one name and other arguments: each subscription gets only its own', async () => {
    const zoo = await deployZoo(d);
    const byValue = await subscribeEvent(d, {
      event: 'event Overloaded(uint256 value)',
      contractAddress: zoo,
    });
    const byText = await subscribeEvent(d, {
      event: zooFragment('Overloaded', 2),
      contractAddress: zoo,
    });
    const value = (v: bigint): EventCase => ({
      label: `Overloaded(${v})`,
      fn: 'emitOverloadedValue',
      args: [v],
      event: 'event Overloaded(uint256 value)',
      fragment: zooFragment('Overloaded', 1),
      name: 'Overloaded',
      signature: 'Overloaded(uint256)',
      topics: [topic0('Overloaded(uint256)')],
      data: word('uint256', v),
      decoded: { value: v.toString() },
    });
    const text = overloadedTextCase(bob, 'the other one');
    const cases = [value(7n), text, value(8n)];
    const { hashes } = await inOneBlock(
      d,
      cases.map((c, i) => () => submitZoo(d, i, zoo, c.fn, c.args)),
    );
    expect(topic0('Overloaded(uint256)')).not.toBe(topic0('Overloaded(address,string)'));
    await notifiedExactly(byValue, hashes, [
      { hash: hashes[0]!, c: cases[0]! },
      { hash: hashes[2]!, c: cases[2]! },
    ]);
    await notifiedExactly(byText, hashes, [{ hash: hashes[1]!, c: text }]);
  });

  test('an anonymous event with its contract: matched by contract and topic count', async () => {
    const zoo = await deployZoo(d);
    const elsewhere = await deployZoo(d);
    const anon = await subscribeEvent(d, { event: zooFragment('Anon'), contractAddress: zoo });
    const matched = anonCase(alice, 1n, 'matched');
    const { hashes } = await inOneBlock(d, [
      () => submitZoo(d, 0, zoo, matched.fn, matched.args),
      // One topic, not two.
      () => submitZoo(d, 1, zoo, 'emitAnonOne', [2n, 'one topic']),
      // Three topics.
      () => submitZoo(d, 2, zoo, 'emitPing', [alice, 3n, 'three topics']),
      // Another contract.
      () => submitZoo(d, 3, elsewhere, matched.fn, [alice, 4n, 'another contract']),
    ]);
    expect(matched.topics).toHaveLength(2);
    await notifiedExactly(anon, hashes, [{ hash: hashes[0]!, c: matched }]);
  });

  test('confirmations: 2 notifies once the block is two deep, with confirmations: 2', async () => {
    const zoo = await deployZoo(d);
    const sub = await subscribeEvent(
      d,
      { event: PING, contractAddress: zoo },
      { confirmations: 2, mempool: false },
    );
    const c = pingCase(carol, 9n, 'two deep');
    const { hash, block } = await callZoo(d, 0, zoo, c.fn, c.args);
    await d.processed(block);
    // One block deep: nothing sent (the outbox may hold it until the second).
    expect((await d.logged(sub.id)).filter((n) => n.state !== 'held')).toEqual([]);
    expect(deliveries(d.receiver, sub)).toEqual([]);
    await d.mine();
    await notifiedExactly(sub, [hash], [{ hash, c }], { confirmations: 2 });
  });

  test('a reorganisation withdraws an event already sent (same body, new id, reorg: true) and notifies the new branch', async () => {
    const zoo = await deployZoo(d);
    const sub = await subscribeEvent(d, { event: PING, contractAddress: zoo });
    const leaves = pingCase(alice, 1n, 'leaves the chain');
    const { hash, block } = await callZoo(d, 1, zoo, leaves.fn, leaves.args);
    const [announced] = await notifiedExactly(sub, [hash], [{ hash, c: leaves }]);

    // The block is replaced by one holding another Ping, from another sender.
    const replacing = pingCase(bob, 2n, 'the new branch');
    await d.chain.request({
      method: 'anvil_reorg' as never,
      params: [
        1,
        [
          [
            {
              from: bob,
              to: zoo,
              data: zooCallData(replacing.fn, replacing.args),
              gas: numberToHex(ZOO_GAS),
            },
            0,
          ],
        ],
      ] as never,
    });
    await d.mine();

    const withdrawn = await deliveredAtLeast(d.receiver, sub, 1, (b) => b.reorg === true, 'the withdrawal');
    expect(withdrawn).toHaveLength(1);
    const withdrawal = withdrawn[0]!;
    expectDelivery(
      withdrawal,
      { ...announced!.body, id: withdrawal.body.id, reorg: true },
      'contract.log.reorg',
    );
    expect(withdrawal.body.id).not.toBe(announced!.body.id);

    const { transactions } = await d.chain.getBlock({ blockNumber: block });
    const newTx = transactions[0]!;
    expect(newTx).not.toBe(hash);
    const [fresh] = await notifiedExactly(sub, [newTx], [{ hash: newTx, c: replacing }]);
    expect(fresh!.body.blockNumber).toBe(Number(block));
    expect(fresh!.body.blockHash).not.toBe(announced!.body.blockHash);
    // In all: the announcement, its withdrawal, the new branch's event.
    const log = await d.logged(sub.id);
    expect(log.map((n) => `${n.eventType} ${n.payload.txId}`).sort()).toEqual(
      [`contract.log ${hash}`, `contract.log.reorg ${hash}`, `contract.log ${newTx}`].sort(),
    );
    expect(log[0]!.payload).toEqual(announced!.body);
  });

  test('a backfill beside the follower finds each event exactly once', async () => {
    const zoo = await deployZoo(d);
    const noise = await deployZoo(d);
    const live = await subscribeEvent(d, { event: PING, contractAddress: zoo });
    const first = (await d.chain.getBlockNumber()) + 1n;
    const ROUNDS = 6;
    for (let i = 0; i < ROUNDS; i++) {
      const n = BigInt(i * 10);
      await inOneBlock(d, [
        () => submitZoo(d, 0, zoo, 'emitPings', [alice, [n + 1n, n + 2n], 'batch']),
        () => submitZoo(d, 1, zoo, 'emitPing', [bob, n + 3n, 'single']),
        // Not a Ping, and a Ping of another contract.
        () => submitZoo(d, 2, zoo, 'emitOverloadedValue', [n]),
        () => submitZoo(d, 3, noise, 'emitPing', [alice, n + 4n, 'noise']),
      ]);
      await d.chain.request({ method: 'anvil_mine' as never, params: [numberToHex(25)] as never });
    }
    const last = await d.chain.getBlockNumber();
    await d.processed(last);
    const PER_ROUND = 3;
    const inRange = (b: StoredBody) =>
      BigInt(Number(b.blockNumber)) >= first && BigInt(Number(b.blockNumber)) <= last;
    const key = (b: StoredBody) => `${b.txId}:${b.logIndex}`;
    const bodiesOf = async (sub: Created) => storedBodies(d.t.app.store.db, [sub.id]);

    const liveBodies = (await bodiesOf(live)).filter(inRange);
    expect(liveBodies).toHaveLength(ROUNDS * PER_ROUND);
    expect(new Set(liveBodies.map(key)).size).toBe(liveBodies.length);
    await deliveredAtLeast(d.receiver, live, ROUNDS * PER_ROUND);

    // On the subscription the follower notified: nothing more.
    const [again] = await runBackfills<{ state: string; found: number }>(d.t, [live.id], {
      from: Number(first),
      to: Number(last),
    });
    expect(again).toMatchObject({ state: 'done', found: 0 });
    const liveAfter = await bodiesOf(live);
    expect(liveAfter.filter(inRange).map(key).sort()).toEqual(liveBodies.map(key).sort());
    expect(new Set(liveAfter.map(key)).size).toBe(liveAfter.length);

    // A new subscription: the backfill finds the past, the follower the events that come meanwhile.
    const fresh = await subscribeEvent(d, {
      event: PING,
      contractAddress: zoo,
      url: `${d.receiver.url}/fresh`,
    });
    const started = await d.t.request('POST', `/api/v1/subscription/${fresh.id}/backfill`, {
      body: { from: Number(first) },
    });
    expect(started.status, started.text).toBe(202);
    const meanwhile: Hex[] = [];
    for (let i = 0; i < 3; i++)
      meanwhile.push((await callZoo(d, 4, zoo, 'emitPing', [carol, BigInt(100 + i), 'meanwhile'])).hash);
    const done = await waitFor(
      async () => {
        const v = (await d.t.request('GET', `/api/v1/subscription/${fresh.id}/backfill`)).body as {
          state: string;
          found: number;
          to: number;
        };
        return v.state === 'running' ? undefined : v;
      },
      'the backfill of the new subscription',
      60_000,
    );
    expect(done.state).toBe('done');
    expect(done.to).toBeGreaterThanOrEqual(Number(last));
    const end = await d.chain.getBlockNumber();
    await d.processed(end);

    const freshBodies = await bodiesOf(fresh);
    const total = ROUNDS * PER_ROUND + meanwhile.length;
    expect(freshBodies).toHaveLength(total);
    expect(new Set(freshBodies.map(key)).size).toBe(total);
    const past = freshBodies.filter(inRange);
    expect(past.every((b) => b.backfill === true)).toBe(true);
    // What the backfill found: the past, and any event of the meanwhile it reached before the follower.
    expect(done.found).toBe(freshBodies.filter((b) => b.backfill === true).length);
    expect(done.found).toBeGreaterThanOrEqual(ROUNDS * PER_ROUND);
    expect(past.map(comparableBody).sort()).toEqual(liveBodies.map(comparableBody).sort());
    expect(freshBodies.filter((b) => meanwhile.includes(b.txId as Hex)).map((b) => b.txId)).toHaveLength(3);
    // The receiver got each once, signed for the new subscription.
    const got = await deliveredAtLeast(d.receiver, fresh, total);
    expect(got).toHaveLength(total);
    expect(new Set(got.map((g) => key(g.body))).size).toBe(total);
    for (const g of got) {
      expect(g.eventType).toBe('contract.log');
      const { backfill: _b, ...rest } = g.body;
      expect(Object.keys(rest)).toEqual([
        'chain',
        'contractAddress',
        'txId',
        'blockNumber',
        'blockHash',
        'logIndex',
        'event',
        'signature',
        'topics',
        'data',
        'args',
        'id',
        'subscriptionId',
        'confirmations',
      ]);
    }

    // A second backfill of it all finds nothing new.
    const [twice] = await runBackfills<{ state: string; found: number }>(d.t, [fresh.id], {
      from: Number(first),
      to: Number(end),
    });
    expect(twice).toMatchObject({ state: 'done', found: 0 });
    expect(await bodiesOf(fresh)).toHaveLength(total);
  }, 120_000);
});

describe.each(backends)('contract event subscriptions through the API, bad and good, on %s', (backend) => {
  let t: TestApp;
  let receiver: Receiver;

  beforeAll(async () => {
    receiver = await startReceiver();
    t = await startTestApp(backend);
  });

  afterAll(async () => {
    await t?.close();
    await receiver?.close();
  });

  const USDC = '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48';
  /** USDC's address with one letter's case changed: a checksum that does not hold. */
  const BAD_CHECKSUM = '0xa0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48';
  const listed = async () => {
    const res = await t.request('GET', '/api/v1/subscription?limit=100');
    expect(res.status, res.text).toBe(200);
    return (res.body as { data: { id: string }[] }).data.map((s) => s.id).sort();
  };
  const create = (attr: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    t.request('POST', '/api/v1/subscription', {
      body: { type: 'CONTRACT_LOG_EVENT', attr: { chain: 'ETH', url: receiver.url, ...attr }, ...extra },
    });

  test('each is a 400 problem naming the field, and nothing is stored', async () => {
    // A good one first: the refusals below are for what each changes, not for the rest.
    const good = await create({ event: ERC20_TRANSFER, contractAddress: USDC, filter: { to: USDC } });
    expect(good.status, good.text).toBe(201);
    const before = await snapshotDatabase(t.app.store);
    const listedBefore = await listed();
    expect(listedBefore).toContain((good.body as { id: string }).id);

    const cases: [string, Record<string, unknown>, Record<string, unknown>, string][] = [
      [
        'an unclosed signature',
        { event: 'event Transfer(address indexed from, address indexed to' },
        {},
        '#/attr/event',
      ],
      ['words, not a signature', { event: 'Transfer is an event' }, {}, '#/attr/event'],
      [
        'a function, not an event',
        { event: 'function transfer(address to, uint256 value)' },
        {},
        '#/attr/event',
      ],
      [
        'an unknown type',
        { event: 'event Transfer(address indexed from, uint257 value)' },
        {},
        '#/attr/event',
      ],
      ['a short topic0', { event: '0x1234' }, {}, '#/attr/event'],
      ['a topic0 that is not hex', { event: `0x${'g'.repeat(64)}` }, {}, '#/attr/event'],
      ['an empty signature', { event: '' }, {}, '#/attr/event'],
      [
        'a JSON fragment of a function',
        {
          event: {
            type: 'function',
            name: 'transfer',
            inputs: [{ name: 'to', type: 'address' }],
            outputs: [],
            stateMutability: 'nonpayable',
          },
        },
        {},
        '#/attr/event',
      ],
      [
        'a JSON fragment with an unknown type',
        {
          event: {
            type: 'event',
            name: 'E',
            anonymous: false,
            inputs: [{ name: 'x', type: 'uint257', indexed: false }],
          },
        },
        {},
        '#/attr/event',
      ],
      [
        'a filter on an unknown argument',
        { event: ERC20_TRANSFER, filter: { nobody: '1' } },
        {},
        '#/attr/filter/nobody',
      ],
      [
        'a filter on a non-indexed argument',
        { event: ERC20_TRANSFER, filter: { value: '1' } },
        {},
        '#/attr/filter/value',
      ],
      [
        'a filter value that is no address',
        { event: ERC20_TRANSFER, filter: { to: '0xnot-an-address' } },
        {},
        '#/attr/filter/to',
      ],
      [
        'one bad address among a list',
        { event: ERC20_TRANSFER, filter: { to: [USDC, '0x1234'] } },
        {},
        '#/attr/filter/to',
      ],
      [
        'an address whose checksum fails',
        { event: ERC20_TRANSFER, filter: { from: BAD_CHECKSUM } },
        {},
        '#/attr/filter/from',
      ],
      ['a uint that is not a number', { event: PING, filter: { n: 'abc' } }, {}, '#/attr/filter/n'],
      ['a negative uint', { event: PING, filter: { n: '-1' } }, {}, '#/attr/filter/n'],
      ['a uint256 too large', { event: PING, filter: { n: (2n ** 256n).toString() } }, {}, '#/attr/filter/n'],
      ['a fraction for a uint', { event: PING, filter: { n: '1.5' } }, {}, '#/attr/filter/n'],
      ['a bool that is a word', { event: FLAGGED, filter: { flag: 'yes' } }, {}, '#/attr/filter/flag'],
      ['a bytes32 of two bytes', { event: FLAGGED, filter: { key: '0x1234' } }, {}, '#/attr/filter/key'],
      [
        'an int256 too large',
        { event: FLAGGED, filter: { delta: (2n ** 255n).toString() } },
        {},
        '#/attr/filter/delta',
      ],
      ['a Bitcoin chain', { event: ERC20_TRANSFER, chain: 'BTC' }, {}, '#/attr/chain'],
      ['a Solana chain', { event: ERC20_TRANSFER, chain: 'SOL' }, {}, '#/attr/chain'],
      ['an Algorand chain', { event: ERC20_TRANSFER, chain: 'ALGO' }, {}, '#/attr/chain'],
      ['an unknown chain', { event: ERC20_TRANSFER, chain: 'NOPE' }, {}, '#/attr/chain'],
      ['an anonymous event for any contract', { event: zooFragment('Anon') }, {}, '#/attr/contractAddress'],
      [
        'a filter with a bare topic0',
        { event: topic0(TRANSFER_SIGNATURE), filter: { to: USDC } },
        {},
        '#/attr/filter',
      ],
      [
        'attr.address on an event subscription',
        { event: ERC20_TRANSFER, address: USDC },
        {},
        '#/attr/address',
      ],
      [
        'a contract address that is not one',
        { event: ERC20_TRANSFER, contractAddress: '0x1234' },
        {},
        '#/attr/contractAddress',
      ],
      [
        'a contract address whose checksum fails',
        { event: ERC20_TRANSFER, contractAddress: BAD_CHECKSUM },
        {},
        '#/attr/contractAddress',
      ],
      [
        'a bad address in the list of contracts',
        { event: ERC20_TRANSFER, addresses: [USDC, '0x1234'] },
        {},
        '#/attr/addresses',
      ],
      ['mempool: true', { event: ERC20_TRANSFER, contractAddress: USDC }, { mempool: true }, '#/mempool'],
    ];
    for (const [label, attr, extra, pointer] of cases) {
      const res = await create(attr, extra);
      expect(res.status, `${label}: ${res.text}`).toBe(400);
      expect(res.headers.get('content-type'), label).toMatch(/application\/problem\+json/);
      const errors = (res.body as { errors?: { pointer?: string }[] }).errors ?? [];
      const pointers = errors.map((e) => e.pointer);
      expect(
        pointers.some((p) => p === pointer || p?.startsWith(`${pointer}/`)),
        `${label}: ${pointer} among ${JSON.stringify(pointers)}`,
      ).toBe(true);
    }
    expect(await listed()).toEqual(listedBefore);
    expect(await snapshotDatabase(t.app.store)).toEqual(before);
  });

  /** An event subscription made, and what it answered. */
  const created = async (attr: Record<string, unknown>) => {
    const res = await t.request('POST', '/api/v1/subscription', {
      body: { type: 'CONTRACT_LOG_EVENT', attr: { chain: 'ETH', url: receiver.url, ...attr } },
    });
    expect(res.status, res.text).toBe(201);
    return res.body as Created;
  };
  const view = async (id: string) => {
    const res = await t.request('GET', `/api/v1/subscription/${id}`);
    expect(res.status, res.text).toBe(200);
    return res.body as { type: string; mempool: boolean; attr: Record<string, unknown> };
  };

  test('GET shows the event as parsed, its signature, topic0, contracts and filter as given', async () => {
    const filter = { to: [USDC.toLowerCase()] };
    const one = await created({ event: ERC20_TRANSFER, contractAddress: USDC.toLowerCase(), filter });
    expect(await view(one.id)).toMatchObject({
      type: 'CONTRACT_LOG_EVENT',
      mempool: false,
      attr: {
        chain: 'ETH',
        url: receiver.url,
        event: {
          type: 'event',
          name: 'Transfer',
          inputs: [
            { type: 'address', name: 'from', indexed: true },
            { type: 'address', name: 'to', indexed: true },
            { type: 'uint256', name: 'value' },
          ],
        },
        signature: TRANSFER_SIGNATURE,
        topic0: topic0(TRANSFER_SIGNATURE),
        contractAddress: USDC,
        filter,
      },
    });
    const any = await created({ event: topic0(TRANSFER_SIGNATURE).toUpperCase().replace('0X', '0x') });
    const anyView = await view(any.id);
    expect(anyView.attr).toEqual({
      chain: 'ETH',
      url: receiver.url,
      event: topic0(TRANSFER_SIGNATURE),
      topic0: topic0(TRANSFER_SIGNATURE),
      anyContract: true,
    });
    // Any contract has no list to change.
    const change = await t.request('POST', `/api/v1/subscription/${any.id}/addresses`, {
      body: { add: [USDC] },
    });
    expect(change.status, change.text).toBe(409);
    // Listed by type: both, among this app's other event subscriptions, and nothing of another type.
    const address = await t.request('POST', '/api/v1/subscription', {
      body: { type: 'ADDRESS_TRANSACTION', attr: { chain: 'ETH', url: receiver.url, address: USDC } },
    });
    expect(address.status, address.text).toBe(201);
    const listed = await t.request('GET', '/api/v1/subscription?type=CONTRACT_LOG_EVENT&limit=100');
    const data = (listed.body as { data: { id: string; type: string }[] }).data;
    expect(data.map((s) => s.id)).toEqual(expect.arrayContaining([one.id, any.id]));
    expect(data.map((s) => s.id)).not.toContain((address.body as Created).id);
    expect(new Set(data.map((s) => s.type))).toEqual(new Set(['CONTRACT_LOG_EVENT']));
  });

  test('a test notification is shaped as the event: every argument zero, decoded, signed', async () => {
    const sub = await created({ event: ERC20_TRANSFER, contractAddress: USDC });
    const sent = await t.request('POST', `/api/v1/subscription/${sub.id}/test`);
    expect(sent.status, sent.text).toBe(202);
    const { notificationId } = sent.body as { notificationId: string };
    const request = await waitFor(
      () => receiver.requests.find((r) => r.headers['webhook-id'] === notificationId),
      'the test notification',
    );
    expect(request.headers['ledgerhook-event-type']).toBe('test');
    // The receiver verifies nothing itself: the signature is checked here, as a receiver would.
    const secret = new Webhook(sub.secret);
    expect(() => secret.verify(request.body, request.headers as Record<string, string>)).not.toThrow();
    const zero = word('uint256', 0n);
    expect(JSON.parse(request.body)).toEqual({
      chain: 'ETH',
      contractAddress: USDC,
      txId: `0x${'ab'.repeat(32)}`,
      blockNumber: 1,
      blockHash: `0x${'cd'.repeat(32)}`,
      logIndex: 0,
      event: 'Transfer',
      signature: TRANSFER_SIGNATURE,
      topics: [topic0(TRANSFER_SIGNATURE), zero, zero],
      data: zero,
      args: { from: zeroAddress, to: zeroAddress, value: '0' },
      id: notificationId,
      subscriptionId: sub.id,
      confirmations: 1,
      test: true,
    });
  });
});
