/**
 * The Bitcoin block sources against the loopback node (test/helpers/bitcoin-node.ts) serving real
 * recorded blocks (test/fixtures/chains/bitcoin/blocks, provenance in its README). What a source
 * reads is compared with an independent computation done here with bitcoinjs-lib from the same
 * raw bytes, and with a few cases worked out by hand from the fixtures' README.
 */
import { Block, address as btcAddress, type Network, networks } from 'bitcoinjs-lib';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import {
  BLOCK_702861_HASH,
  BTCD_MAIN,
  BTCD_SIDE,
  block702861,
  btcdBlock,
  mainnetRun,
} from '../../../test/helpers/bitcoin-blocks.js';
import { type BitcoinNode, startBitcoinNode } from '../../../test/helpers/bitcoin-node.js';
import { UpstreamUnavailableError } from '../../errors.js';
import type { ChainBlock } from '../source.js';
import { addressesOf, type BitcoinActivity, type BitcoinEndpoint, netChange } from './activity.js';
import { type BitcoinBlockSource, createBitcoindSource, createEsploraSource } from './source.js';

const BTC = 100_000_000n;
const mainnet = networks.bitcoin;

// ---------------------------------------------------------------------------------------------
// The independent computation: straight from the raw blocks with bitcoinjs-lib.

const txidOf = (hash: Uint8Array) => Buffer.from(hash).reverse().toString('hex');

function addressOrNull(script: Uint8Array, network: Network): string | null {
  try {
    return btcAddress.fromOutputScript(script, network);
  } catch {
    return null;
  }
}

/**
 * Each block's transactions with the outputs their inputs spend, looked up among the earlier
 * transactions of the run. An output from before the run is the node's placeholder (no address,
 * 0 sat) when `unheld` is 'placeholder'; otherwise it must not occur.
 */
function independentActivity(raws: Buffer[], network: Network, unheld?: 'placeholder'): BitcoinActivity[] {
  const outputs = new Map<string, BitcoinEndpoint>();
  return raws.map((raw) =>
    Block.fromBuffer(raw).transactions!.map((tx) => {
      const txid = tx.getId();
      const coinbase = tx.isCoinbase();
      const inputs = coinbase
        ? []
        : tx.ins.map((input) => {
            const spent = outputs.get(`${txidOf(input.hash)}:${input.index}`);
            if (spent) return spent;
            if (unheld === 'placeholder') return { address: null, value: 0n };
            throw new Error(`the run does not hold what ${txid} spends`);
          });
      const paid = tx.outs.map((o) => ({ address: addressOrNull(o.script, network), value: o.value }));
      for (const [n, o] of paid.entries()) outputs.set(`${txid}:${n}`, o);
      const spends = coinbase ? [] : tx.ins.map((input) => `${txidOf(input.hash)}:${input.index}`);
      return { txid, coinbase, inputs, outputs: paid, spends };
    }),
  );
}

/** Per transaction, each address's outputs − inputs, summed here without netChange. */
function independentNets(activity: BitcoinActivity): Map<string, bigint>[] {
  return activity.map((tx) => {
    const nets = new Map<string, bigint>();
    const add = (e: BitcoinEndpoint, sign: bigint) => {
      if (e.address) nets.set(e.address, (nets.get(e.address) ?? 0n) + sign * e.value);
    };
    for (const e of tx.outputs) add(e, 1n);
    for (const e of tx.inputs) add(e, -1n);
    return nets;
  });
}

function netsOf(activity: BitcoinActivity): Map<string, bigint>[] {
  return activity.map((tx) => new Map(addressesOf(tx).map((a) => [a, netChange(tx, a).amount])));
}

async function readAll(
  source: BitcoinBlockSource,
  from: number,
  to: number,
): Promise<ChainBlock<BitcoinActivity>[]> {
  const blocks: ChainBlock<BitcoinActivity>[] = [];
  for (let height = from; height <= to; height++) {
    const block = await source.block(height);
    if (!block) throw new Error(`no block at ${height}`);
    blocks.push(block);
  }
  return blocks;
}

const txOf = (block: ChainBlock<BitcoinActivity> | undefined, txid: string) =>
  block?.activity.find((tx) => tx.txid.startsWith(txid));

// ---------------------------------------------------------------------------------------------

let node: BitcoinNode;
let esplora: BitcoinBlockSource;
let bitcoind: BitcoinBlockSource;
const sources = () =>
  [
    ['Esplora', esplora],
    ['bitcoind', bitcoind],
  ] as const;

beforeAll(async () => {
  node = await startBitcoinNode();
  esplora = createEsploraSource({ url: node.url, network: mainnet, timeoutMs: 5000 });
  bitcoind = createBitcoindSource({ url: node.url, network: mainnet, timeoutMs: 5000 });
});
afterAll(() => node.close());
beforeEach(() => {
  node.configure({ verbosity3: true, txindex: true, unheldPrevouts: 'omit' });
  node.requests.length = 0;
});

describe('mainnet blocks 0–255', () => {
  const raws = mainnetRun();
  const expected = independentActivity(raws, mainnet);
  beforeEach(() => node.setChain(raws));

  test('both sources read every block as computed independently, and agree', async () => {
    const fromEsplora = await readAll(esplora, 0, 255);
    const fromBitcoind = await readAll(bitcoind, 0, 255);
    expect(fromEsplora.map((b) => b.activity)).toEqual(expected);
    expect(fromBitcoind).toEqual(fromEsplora);
    expect(fromEsplora[0]!.parentHash).toBe('0'.repeat(64));
    fromEsplora.forEach((block, i) => {
      expect(block.height).toBe(i);
      expect(block.hash).toBe(Block.fromBuffer(raws[i]!).getId());
      if (i > 0) expect(block.parentHash).toBe(fromEsplora[i - 1]!.hash);
    });
    // Every output in the run is pay-to-pubkey: no address, so nothing to net.
    expect(fromEsplora.flatMap((b) => b.activity.flatMap(addressesOf))).toEqual([]);
    // The seven spends the README lists, each with its spent output's value.
    const spends = fromEsplora.filter((b) => b.activity.some((tx) => !tx.coinbase)).map((b) => b.height);
    expect(spends).toEqual([170, 181, 182, 183, 187, 221, 248]);
  });

  test("block 170: Satoshi's 50 BTC output pays Hal Finney 10 and returns 40 (worked by hand)", async () => {
    for (const [, source] of sources()) {
      const hal = txOf(await source.block(170), 'f4184fc5');
      // In: block 9's coinbase output, 50 BTC to pubkey 0411db93…; out: 10 BTC to Hal's key
      // 04ae1a62…, 40 BTC back to 0411db93…. All pay-to-pubkey, so no address is named (the
      // P2PKH addresses 12cbQL…/1Q2TWH… of those keys never held these coins).
      expect(hal).toEqual({
        txid: 'f4184fc596403b9d638783cf57adfe4c75c605f6356fbc91338530e9831e9e16',
        coinbase: false,
        inputs: [{ address: null, value: 50n * BTC }],
        outputs: [
          { address: null, value: 10n * BTC },
          { address: null, value: 40n * BTC },
        ],
        spends: ['0437cd7f8525ceed2324359c2d0ba26006d92d856a9c20fa0241106ee5a597c9:0'],
      });
    }
  });

  test('reads prevouts with getrawtransaction from a node without getblock verbosity 3', async () => {
    node.configure({ verbosity3: false });
    const old = await readAll(bitcoind, 160, 255);
    expect(old.map((b) => b.activity)).toEqual(expected.slice(160, 256));
    const fetched = node.requests.flatMap((r) => r.rpc).filter((m) => m === 'getrawtransaction');
    expect(fetched.length).toBeGreaterThanOrEqual(7); // one per spent transaction, 7 spends
  });

  test('names txindex when an old node cannot find a spent transaction', async () => {
    node.configure({ verbosity3: false, txindex: false });
    await expect(bitcoind.block(170)).rejects.toThrow(/txindex=1/);
    // A block that spends nothing needs no getrawtransaction.
    expect((await bitcoind.block(169))?.activity).toEqual(expected[169]);
  });

  test('says a block beyond the tip is not there', async () => {
    for (const [, source] of sources()) {
      expect(await source.tip()).toEqual({ height: 255, hash: Block.fromBuffer(raws[255]!).getId() });
      expect(await source.block(256)).toBeUndefined();
      expect(await source.hashAt(256)).toBeUndefined();
      expect(await source.hashAt(170)).toBe(
        '00000000d1145790a8694403d4063f323d499e655c83426834d4ce2f8dd4a2ee',
      );
    }
  });
});

describe('the btcd chain and its reorganisation', () => {
  const hashOf = (name: Parameters<typeof btcdBlock>[0]) => Block.fromBuffer(btcdBlock(name)).getId();

  test('block 2: 29c25cf0 spends a 50 BTC coinbase, paying 10 and 40 (worked by hand)', async () => {
    node.setChain(BTCD_MAIN.map(btcdBlock));
    for (const [, source] of sources()) {
      const blocks = await readAll(source, 0, 4);
      const pay = txOf(blocks[2], '29c25cf0')!;
      // Spends 7a085547…:0, block 1's P2PK coinbase (50 BTC, no address).
      expect(pay.inputs).toEqual([{ address: null, value: 50n * BTC }]);
      expect(pay.outputs).toEqual([
        { address: '1KXFNhNtrRMfgbdiQeuJqnfD7dR4PhniyJ', value: 10n * BTC },
        { address: '1NiEGXeURREqqMjCvjCeZn6SwEBZ9AdVet', value: 40n * BTC },
      ]);
      // The payer has no address, so neither payee has a named counterparty.
      expect(netChange(pay, '1KXFNhNtrRMfgbdiQeuJqnfD7dR4PhniyJ')).toEqual({ amount: 10n * BTC });
      // Block 3: d75b0bc6 sends 1NiEGX's 40 BTC to 1JyMKv…: −40 and +40, each the other's counterparty.
      const onward = txOf(blocks[3], 'd75b0bc6')!;
      expect(netChange(onward, '1NiEGXeURREqqMjCvjCeZn6SwEBZ9AdVet')).toEqual({
        amount: -40n * BTC,
        counterAddress: '1JyMKvPHkrCQd8jQrqTR1rBsAd1VpRhTiE',
      });
      expect(netChange(onward, '1JyMKvPHkrCQd8jQrqTR1rBsAd1VpRhTiE')).toEqual({
        amount: 40n * BTC,
        counterAddress: '1NiEGXeURREqqMjCvjCeZn6SwEBZ9AdVet',
      });
      expect(blocks.map((b) => b.activity)).toEqual(independentActivity(BTCD_MAIN.map(btcdBlock), mainnet));
    }
  });

  test('shows the side branch once the node switches to it: new hashes at 3 and 4, a block at 5', async () => {
    node.setChain(BTCD_MAIN.map(btcdBlock));
    for (const [, source] of sources()) {
      expect(await source.tip()).toEqual({ height: 4, hash: hashOf('4') });
      expect(await source.block(5)).toBeUndefined();
    }
    node.setChain(BTCD_SIDE.map(btcdBlock));
    const side = independentActivity(BTCD_SIDE.map(btcdBlock), mainnet);
    for (const [, source] of sources()) {
      expect(await source.tip()).toEqual({ height: 5, hash: hashOf('5A') });
      expect(await source.hashAt(2)).toBe(hashOf('2'));
      expect(await source.hashAt(3)).toBe(hashOf('3A'));
      expect(await source.hashAt(4)).toBe(hashOf('4A'));
      const [b3, b4, b5] = await readAll(source, 3, 5);
      expect(b3!.parentHash).toBe(hashOf('2'));
      expect(b4!.parentHash).toBe(hashOf('3A'));
      expect(b5).toMatchObject({ height: 5, hash: hashOf('5A'), parentHash: hashOf('4A') });
      expect([b3, b4, b5].map((b) => b!.activity)).toEqual(side.slice(3));
      // d75b0bc6 is in both branches; c4d85354 double-spends 509866fa's output, to 1NiEGX….
      expect(txOf(b3, 'd75b0bc6')).toBeDefined();
      expect(txOf(b3, '509866fa')).toBeUndefined();
      expect(txOf(b3, 'c4d85354')?.outputs).toEqual([
        { address: '1NiEGXeURREqqMjCvjCeZn6SwEBZ9AdVet', value: 10n * BTC },
      ]);
      expect(txOf(b5, '94dfb6d6')).toBeDefined();
    }
  });
});

describe('mainnet block 702861', () => {
  const raw = block702861();
  const expected = independentActivity([raw], mainnet, 'placeholder')[0]!;
  beforeEach(() => {
    node.setChain([raw], 702861);
    // Its inputs spend blocks the node does not hold: each spends the node's 0-sat placeholder.
    node.configure({ unheldPrevouts: 'placeholder' });
  });

  test('both sources read all 2,500 transactions, nets exact to the satoshi for every (tx, address)', async () => {
    const fromEsplora = await esplora.block(702861);
    const pages = node.requests.filter((r) => r.path.startsWith(`/block/${BLOCK_702861_HASH}/txs/`));
    expect(pages).toHaveLength(100); // 2,500 / 25
    const fromBitcoind = await bitcoind.block(702861);
    expect(fromEsplora).toMatchObject({ height: 702861, hash: BLOCK_702861_HASH });
    expect(fromEsplora!.parentHash).toBe('00000000000000000009c3deb8b5e706d7be57a427f4f03f01c49d5219213b5f');
    expect(fromEsplora!.activity).toEqual(expected);
    expect(fromBitcoind).toEqual(fromEsplora);
    expect(netsOf(fromEsplora!.activity)).toEqual(independentNets(expected));

    // Every output type of the block, counted as its summary does (P2WPKH and P2WSH by length).
    const outputs = fromEsplora!.activity.flatMap((tx) => tx.outputs);
    const count = (test: (a: string | null) => boolean) => outputs.filter((o) => test(o.address)).length;
    expect(count((a) => a?.startsWith('1') === true)).toBe(1660); // P2PKH
    expect(count((a) => a?.startsWith('3') === true)).toBe(1816); // P2SH
    expect(count((a) => a?.startsWith('bc1q') === true && a.length === 42)).toBe(2383); // P2WPKH
    expect(count((a) => a?.startsWith('bc1q') === true && a.length === 62)).toBe(133); // P2WSH
    expect(count((a) => a === null)).toBe(23); // OP_RETURN
    // Inputs spending outputs of the same block carry those outputs' real addresses and values.
    const inBlock = fromEsplora!.activity.flatMap((tx) => tx.inputs).filter((i) => i.address !== null);
    expect(inBlock.length).toBeGreaterThan(0);
  });

  test('refuses a block whose inputs come without their spent outputs', async () => {
    node.configure({ unheldPrevouts: 'omit' });
    await expect(esplora.block(702861)).rejects.toThrow(/without its prevout/);
  });
});

describe('faults: a block is read whole or not at all', () => {
  beforeEach(() => node.setChain(BTCD_MAIN.map(btcdBlock)));

  test('throws on a 5xx, then reads the block once the node answers again', async () => {
    for (const [, source] of sources()) {
      node.failNext(1, 500);
      await expect(source.block(3)).rejects.toBeInstanceOf(UpstreamUnavailableError);
      node.failNext(1, 503);
      await expect(source.tip()).rejects.toBeInstanceOf(UpstreamUnavailableError);
      expect((await source.block(3))?.activity).toHaveLength(3);
    }
  });

  test('throws on a truncated page of /txs', async () => {
    node.truncateNextPage();
    await expect(esplora.block(3)).rejects.toThrow(/2 transactions .* not 3/);
    expect((await esplora.block(3))?.activity).toHaveLength(3);
  });

  test('throws while the node is unreachable, and reads again once it is back', async () => {
    await node.stop();
    try {
      for (const [, source] of sources()) {
        await expect(source.block(2)).rejects.toThrow(/could not be reached/);
        await expect(source.hashAt(2)).rejects.toThrow(/could not be reached/);
      }
    } finally {
      await node.start();
    }
    for (const [, source] of sources())
      expect((await source.block(2))?.hash).toBe(Block.fromBuffer(btcdBlock('2')).getId());
  });

  test('sends the credentials in the URL as Basic auth', async () => {
    const url = new URL(node.url);
    url.username = 'rpcuser';
    url.password = 'p@ss';
    const withAuth = createBitcoindSource({ url: url.toString(), network: mainnet });
    await withAuth.tip();
    expect(node.requests.at(-1)?.authorization).toBe(
      `Basic ${Buffer.from('rpcuser:p@ss').toString('base64')}`,
    );
  });
});
