/**
 * The pool readers against the loopback node (test/helpers/bitcoin-node.ts) serving real
 * transactions from its mempool: btcd's double-spent 509866fa…, block 702861's transactions, and
 * the RBF pair assembled from that block (test/fixtures/chains/bitcoin/README.md). What a reader
 * returns is compared with an independent computation here with bitcoinjs-lib from the raw bytes;
 * what it asks the node is read from the node's request log.
 */
import fs from 'node:fs';
import { Block, address as btcAddress, networks, Transaction } from 'bitcoinjs-lib';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { BTCD_MAIN, block702861, btcdBlock } from '../../../test/helpers/bitcoin-blocks.js';
import { type BitcoinNode, startBitcoinNode } from '../../../test/helpers/bitcoin-node.js';
import { fixturePath, startFixtureNode } from '../../../test/helpers/fixture-node.js';
import { UpstreamUnavailableError } from '../../errors.js';
import type { BitcoinEndpoint, BitcoinTransaction } from './activity.js';
import { type BitcoinMempoolOptions, createBitcoinMempoolReader } from './mempool.js';

const mainnet = networks.bitcoin;
const BTC = 100_000_000n;

// ---------------------------------------------------------------------------------------------
// The independent computation: straight from the raw transactions with bitcoinjs-lib.

const txidOf = (hash: Uint8Array) => Buffer.from(hash).reverse().toString('hex');

function addressOrNull(script: Uint8Array): string | null {
  try {
    return btcAddress.fromOutputScript(script, mainnet);
  } catch {
    return null;
  }
}

/** Every output of these transactions (blocks' and pool's), by outpoint. */
function outputsOf(txs: Transaction[]): Map<string, BitcoinEndpoint> {
  const outputs = new Map<string, BitcoinEndpoint>();
  for (const tx of txs) {
    tx.outs.forEach((o, n) => {
      outputs.set(`${tx.getId()}:${n}`, { address: addressOrNull(o.script), value: o.value });
    });
  }
  return outputs;
}

/** The transaction as a reader must return it; an outpoint not in `known` is the node's 0-sat stand-in. */
function expected(tx: Transaction, known: Map<string, BitcoinEndpoint>): BitcoinTransaction {
  const spends = tx.ins.map((input) => `${txidOf(input.hash)}:${input.index}`);
  return {
    txid: tx.getId(),
    coinbase: false,
    inputs: spends.map((o) => known.get(o) ?? { address: null, value: 0n }),
    outputs: tx.outs.map((o) => ({ address: addressOrNull(o.script), value: o.value })),
    spends,
  };
}

const fixture = (name: 'parent' | 'original' | 'replacement') =>
  Transaction.fromHex(
    fs.readFileSync(fixturePath('chains/bitcoin/constructed', `rbf-702861-${name}.hex`), 'utf8'),
  );
const txIn = (block: Buffer, prefix: string) =>
  Block.fromBuffer(block).transactions!.find((t) => t.getId().startsWith(prefix))!;

const chain = BTCD_MAIN.slice(0, 3).map(btcdBlock); // blocks 0–2: the outputs 509866fa… spends
const parent = fixture('parent');
const original = fixture('original');
const replacement = fixture('replacement');
const pending = txIn(btcdBlock('3'), '509866fa');
const known = outputsOf([...chain.flatMap((b) => Block.fromBuffer(b).transactions!), parent, original]);

// ---------------------------------------------------------------------------------------------

let node: BitcoinNode;
beforeAll(async () => {
  node = await startBitcoinNode();
});
afterAll(() => node.close());
beforeEach(() => {
  node.configure({ verbosity3: true, txindex: true, unheldPrevouts: 'placeholder', mempoolSequence: true });
  node.setChain(chain);
  node.setMempool([]);
  node.requests.length = 0;
});

const apis = [
  ['Esplora', undefined],
  ['bitcoind', 'bitcoind'],
] as const;

const reader = (api: string | undefined, options: Partial<BitcoinMempoolOptions> = {}) =>
  // Forgets at once what left the pool (by default only once there is enough of it to sweep).
  createBitcoinMempoolReader({
    url: node.url,
    network: mainnet,
    timeoutMs: 5000,
    api,
    sweepAfter: 0,
    ...options,
  });

/** What the node was asked to read transactions with, since the log was last cleared. */
function reads(): string[] {
  return node.requests.flatMap((r) => {
    if (r.path.startsWith('/tx/')) return [r.path];
    return r.rpc.filter((m) => m === 'getrawtransaction' || m === 'gettxout');
  });
}
const calls = () => node.requests.flatMap((r) => (r.method === 'POST' ? r.rpc : [r.path]));

describe.each(apis)('%s', (_name, api) => {
  test('reads the pool whole on the first poll, and fetches nothing more while it stands still', async () => {
    node.setMempool([parent.toHex(), original.toHex(), pending.toHex()]);
    const pool = reader(api);
    const first = await pool.poll();
    expect(first.size).toBe(3);
    expect(first.entered).toEqual([parent, original, pending].map((t) => expected(t, known)));
    // Worked by hand: the original spends the parent's output 0, 186,259 sat to bc1q6v9j….
    expect(first.entered[1]!.inputs).toEqual([
      { address: 'bc1q6v9jmpf2t5dhcs7ld6jyzpdcnaulzwphhsqkh5', value: 186_259n },
    ]);
    // 509866fa… spends block 2's 29c25cf0…:0, 10 BTC to 1KXFNh….
    expect(first.entered[2]!.inputs).toEqual([
      { address: '1KXFNhNtrRMfgbdiQeuJqnfD7dR4PhniyJ', value: 10n * BTC },
    ]);
    expect(pool.tracked()).toBe(3);

    node.requests.length = 0;
    expect(await pool.poll()).toEqual({ entered: [], size: 3, waiting: 0 });
    expect(reads()).toEqual([]);
  });

  test('reads a new transaction once, and forgets the ones that left', async () => {
    node.setMempool([parent.toHex(), original.toHex()]);
    const pool = reader(api);
    await pool.poll();
    expect(pool.tracked()).toBe(2);

    // Replace-by-fee: the replacement takes the original's place, spending the same outpoint.
    node.setMempool([parent.toHex(), replacement.toHex()]);
    node.requests.length = 0;
    const changes = await pool.poll();
    expect(changes).toEqual({ entered: [expected(replacement, known)], size: 2, waiting: 0 });
    expect(changes.entered[0]!.spends).toEqual([`${parent.getId()}:0`]);
    expect(changes.entered[0]!.outputs[1]).toEqual({
      address: '1KhQjp9BsJEumZNFJxDeJXBvaRUzxrSXRa',
      value: 117_500n,
    });
    // Only the replacement is read; its parent's outputs are known from the last poll.
    expect(reads()).toEqual(api ? ['getrawtransaction'] : [`/tx/${replacement.getId()}`]);
    expect(pool.tracked()).toBe(2);

    node.setMempool([replacement.toHex()]);
    expect(await pool.poll()).toEqual({ entered: [], size: 1, waiting: 0 });
    expect(pool.tracked()).toBe(1);
    node.setMempool([]);
    expect(await pool.poll()).toEqual({ entered: [], size: 0, waiting: 0 });
    expect(pool.tracked()).toBe(0);
  });

  test('skips a transaction whose prevouts cannot be read, and reads it once they can', async () => {
    // The parent spends a block the node does not hold: with 'omit' nobody can say what it spends.
    node.configure({ unheldPrevouts: 'omit' });
    node.setMempool([parent.toHex(), original.toHex()]);
    const pool = reader(api);
    expect((await pool.poll()).entered).toEqual([expected(original, known)]);
    expect(pool.tracked()).toBe(1);
    expect((await pool.poll()).entered).toEqual([]);
    node.configure({ unheldPrevouts: 'placeholder' });
    node.requests.length = 0;
    expect((await pool.poll()).entered).toEqual([expected(parent, known)]);
    expect(pool.tracked()).toBe(2);
  });

  test('spreads a large pool over polls with maxNewPerPoll, in the node’s order', async () => {
    // Block 702861's 2,499 transactions as a pool: the ones spending earlier ones of the block get
    // their real prevouts from the pool, the rest the node's stand-in.
    const txs = Block.fromBuffer(block702861()).transactions!.slice(1);
    const outputs = outputsOf(txs);
    node.setMempool(txs.map((t) => t.toBuffer()));
    const pool = reader(api, { maxNewPerPoll: 1000 });
    const sizes: number[] = [];
    const waiting: number[] = [];
    const entered: BitcoinTransaction[] = [];
    for (let i = 0; i < 4; i++) {
      const changes = await pool.poll();
      expect(changes.size).toBe(2499);
      sizes.push(changes.entered.length);
      waiting.push(changes.waiting);
      entered.push(...changes.entered);
    }
    expect(sizes).toEqual([1000, 1000, 499, 0]);
    // What is left for the next polls, so the watcher polls again at once rather than an interval later.
    expect(waiting).toEqual([1499, 499, 0, 0]);
    expect(entered).toEqual(txs.map((t) => expected(t, outputs)));
    expect(pool.tracked()).toBe(2499);
    expect(entered.some((t) => t.inputs.some((i) => i.address !== null))).toBe(true);
  });

  test('throws while the node fails, and the next poll reads what it missed', async () => {
    node.setMempool([original.toHex(), parent.toHex()]);
    const pool = reader(api);
    node.failNext(1, 503);
    await expect(pool.poll()).rejects.toBeInstanceOf(UpstreamUnavailableError);
    await node.stop();
    try {
      await expect(pool.poll()).rejects.toThrow(/could not be reached/);
    } finally {
      await node.start();
    }
    expect(pool.tracked()).toBe(0);
    expect((await pool.poll()).entered).toEqual([original, parent].map((t) => expected(t, known)));
  });

  test('reads the whole pool anew after reset()', async () => {
    node.setMempool([pending.toHex()]);
    const pool = reader(api);
    await pool.poll();
    pool.reset();
    expect(pool.tracked()).toBe(0);
    expect((await pool.poll()).entered).toEqual([expected(pending, known)]);
  });

  test('skips a transaction mined or gone since the list, without error', async () => {
    node.setMempool([pending.toHex(), parent.toHex()]);
    const pool = reader(api);
    // Between the list and the reads, block 3 mines 509866fa… and the parent leaves the pool.
    const list = api ? 'getrawmempool' : '/mempool/txids';
    node.afterRequest((request) => {
      if (request.path !== list && !request.rpc.includes(list)) return;
      node.afterRequest(undefined);
      node.setChain(BTCD_MAIN.map(btcdBlock));
      node.setMempool([]);
    });
    try {
      expect(await pool.poll()).toEqual({ entered: [], size: 2, waiting: 0 });
    } finally {
      node.afterRequest(undefined);
    }
    expect(await pool.poll()).toEqual({ entered: [], size: 0, waiting: 0 });
  });
});

describe('bitcoind', () => {
  test('answers an unchanged mempool_sequence with one call', async () => {
    node.setMempool([pending.toHex(), parent.toHex(), original.toHex()]);
    const pool = reader('bitcoind');
    await pool.poll();
    node.requests.length = 0;
    expect(await pool.poll()).toEqual({ entered: [], size: 3, waiting: 0 });
    expect(calls()).toEqual(['getrawmempool']);
  });

  test('trusts mempool_sequence: while it stands still the list is not even diffed', async () => {
    // A proxy that freezes mempool_sequence, which no real node does, shows the list is not read.
    let frozen = true;
    const proxy = await startFixtureNode({
      'POST /': async (request) => {
        const res = await fetch(node.url, { method: 'POST', body: request.body });
        const body = await res.text();
        return {
          status: res.status,
          body: frozen ? body.replace(/"mempool_sequence":\d+/, '"mempool_sequence":7') : body,
        };
      },
    });
    try {
      node.setMempool([pending.toHex()]);
      const pool = createBitcoinMempoolReader({ url: proxy.url, network: mainnet, api: 'bitcoind' });
      expect((await pool.poll()).entered).toEqual([expected(pending, known)]);
      node.setMempool([parent.toHex()]); // as many transactions, other ones
      node.requests.length = 0;
      expect(await pool.poll()).toEqual({ entered: [], size: 1, waiting: 0 });
      expect(calls()).toEqual(['getrawmempool']);
      frozen = false;
      expect((await pool.poll()).entered).toEqual([expected(parent, known)]);
    } finally {
      await proxy.close();
    }
  });

  test('without txindex, reads a confirmed parent’s output with gettxout', async () => {
    node.configure({ txindex: false });
    node.setMempool([pending.toHex()]);
    const pool = reader('bitcoind');
    expect((await pool.poll()).entered).toEqual([expected(pending, known)]);
    expect(node.requests.flatMap((r) => r.rpc)).toEqual(['getrawmempool', 'getrawtransaction', 'gettxout']);
  });

  test('reads a pool parent with getrawtransaction when its outputs are not cached', async () => {
    // The child first in the node's order, one a poll: its parent is listed but not read yet.
    node.setMempool([original.toHex(), parent.toHex()]);
    const pool = reader('bitcoind', { maxNewPerPoll: 1 });
    expect((await pool.poll()).entered).toEqual([expected(original, known)]);
    expect(node.requests.flatMap((r) => r.rpc)).toEqual([
      'getrawmempool',
      'getrawtransaction', // the child
      'getrawtransaction', // its parent, from the pool: no txindex needed
    ]);
  });

  test('lists with one argument on a Core before 21, diffing the full list each poll', async () => {
    node.configure({ mempoolSequence: false });
    node.setMempool([pending.toHex()]);
    const pool = reader('bitcoind');
    expect((await pool.poll()).entered).toEqual([expected(pending, known)]);
    node.requests.length = 0;
    node.setMempool([pending.toHex(), parent.toHex()]);
    expect((await pool.poll()).entered).toEqual([expected(parent, known)]);
    node.requests.length = 0;
    expect(await pool.poll()).toEqual({ entered: [], size: 2, waiting: 0 });
    // The refusal was remembered: one call, the old form.
    expect(calls()).toEqual(['getrawmempool']);
    expect(node.requests).toHaveLength(1);
  });
});
