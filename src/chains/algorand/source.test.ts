/**
 * The Algorand block sources against the loopback node (test/helpers/algorand-node.ts) serving
 * the recorded testnet round 24099447 and rounds assembled from it. What a source reads is
 * compared with the recorded answers (algod's /hash and /txids, the indexer's ids) and with an
 * independent decoding done here with algosdk alone.
 */
import fs from 'node:fs';
import algosdk from 'algosdk';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import {
  type AlgorandNode,
  assembleRound,
  assembleRun,
  MAINNET,
  RECORDED_HASH,
  RECORDED_ROUND,
  readIndexerJson,
  recordedAlgodBlock,
  recordedIndexerBlock,
  startAlgorandNode,
  TESTNET,
} from '../../../test/helpers/algorand-node.js';
import { fixturePath } from '../../../test/helpers/fixture-node.js';
import { UpstreamUnavailableError } from '../../errors.js';
import {
  type AlgorandBlockSource,
  createAlgodSource,
  createAssetInfoCache,
  createIndexerSource,
} from './source.js';

let node: AlgorandNode;
let algod: AlgorandBlockSource;
let indexer: AlgorandBlockSource;
const sources = () =>
  [
    ['algod', algod],
    ['indexer', indexer],
  ] as const;

const recorded = () => ({ algod: recordedAlgodBlock(), indexer: recordedIndexerBlock() });

beforeAll(async () => {
  node = await startAlgorandNode();
  algod = createAlgodSource({ url: node.url, timeoutMs: 2000, ...TESTNET });
  indexer = createIndexerSource({ url: node.url, api: 'indexer', timeoutMs: 2000, ...TESTNET });
});
afterAll(() => node.close());
beforeEach(() => {
  node.setRounds([recorded()]);
  node.setGenesis(TESTNET);
  node.failNext(0);
  node.requests.length = 0;
});

/** Independently: the recorded block's transactions with algosdk only (ids from the recorded /txids). */
function independentPayments() {
  const block = algosdk.decodeMsgpack(recordedAlgodBlock(), algosdk.modelsv2.BlockResponse).block;
  return block.payset.map((stib) => {
    const { txn } = stib.signedTxn.signedTxn;
    return { type: txn.type, sender: txn.sender.toString(), fee: txn.fee, amount: txn.payment?.amount };
  });
}

describe(`round ${RECORDED_ROUND}`, () => {
  test('both APIs give the same block: the recorded hash, previous hash and transaction ids', async () => {
    const fromAlgod = await algod.block(RECORDED_ROUND);
    const fromIndexer = await indexer.block(RECORDED_ROUND);
    expect(fromIndexer).toEqual(fromAlgod);
    const txids = JSON.parse(
      fs.readFileSync(
        fixturePath('chains/algorand/blocks', 'algod-block-24099447-txids-testnet.json'),
        'utf8',
      ),
    ).blockTxids;
    expect(fromAlgod!.activity.map((tx) => tx.id)).toEqual(txids);
    expect(fromAlgod!.hash).toBe(RECORDED_HASH);
    // The indexer's previous-block-hash ("hOHRimJm…", base64) in base32: algosdk's address
    // encoding is base32 of the same 32 bytes followed by a checksum, so the first 51 characters agree.
    const prev = algosdk.base64ToBytes(String(recordedIndexerBlock()['previous-block-hash']));
    expect(fromAlgod!.parentHash.slice(0, 51)).toBe(algosdk.encodeAddress(prev).slice(0, 51));
    expect(
      fromAlgod!.activity.map((tx) => ({
        type: tx.type,
        sender: tx.sender,
        fee: tx.fee,
        amount: tx.payment?.amount,
      })),
    ).toEqual(independentPayments());
  });

  test('tip and hashAt agree across the APIs and with the recorded /hash answer', async () => {
    for (const [, source] of sources()) {
      expect(await source.tip()).toEqual({ height: RECORDED_ROUND, hash: RECORDED_HASH });
      expect(await source.hashAt(RECORDED_ROUND)).toBe(RECORDED_HASH);
      expect(await source.hashAt(RECORDED_ROUND + 1)).toBeUndefined();
      expect(await source.block(RECORDED_ROUND + 1)).toBeUndefined();
    }
  });
});

describe('assembled rounds', () => {
  test('a run links by hash through both APIs', async () => {
    const run = assembleRun(1000, 4);
    node.setRounds(run);
    for (const [, source] of sources()) {
      let parent: string | undefined;
      for (let round = 1000; round < 1004; round++) {
        const block = (await source.block(round))!;
        if (parent) expect(block.parentHash).toBe(parent);
        expect(await source.hashAt(round)).toBe(block.hash);
        parent = block.hash;
      }
    }
  });

  test('a round whose previous hash does not link is served as is: the follower sees the mismatch', async () => {
    const [first] = assembleRun(2000, 1);
    const stray = assembleRound({ round: 2001, parentHash: 'A'.repeat(52) });
    node.setRounds([first!, stray]);
    const parent = await algod.block(2000);
    const child = await indexer.block(2001);
    expect(child!.parentHash).not.toBe(parent!.hash);
  });

  test('real indexer transactions assembled into a round are read by the indexer source', async () => {
    const clawback = readIndexerJson('indexer-transaction-axfer-testnet.json').transaction as Record<
      string,
      unknown
    >;
    node.setRounds([
      assembleRound({ round: 3000, parentHash: RECORDED_HASH, indexerTransactions: [clawback] }),
    ]);
    const block = await indexer.block(3000);
    expect(block!.activity[0]!.assetTransfer).toMatchObject({ assetId: '642327435', amount: 5n });
    // algod cannot serve it: it was never recorded as msgpack.
    await expect(algod.block(3000)).rejects.toThrow(UpstreamUnavailableError);
  });
});

describe('the genesis check', () => {
  test('a node on another genesis: every call throws, naming both', async () => {
    node.setGenesis(MAINNET);
    const misled = createAlgodSource({ url: node.url, timeoutMs: 2000, ...TESTNET });
    for (let i = 0; i < 2; i++) {
      await expect(misled.tip()).rejects.toThrow(/mainnet-v1\.0.*testnet-v1\.0/);
      await expect(misled.block(RECORDED_ROUND)).rejects.toThrow(/mainnet-v1\.0.*testnet-v1\.0/);
    }
    const wrongIndexer = createIndexerSource({ url: node.url, api: 'indexer', timeoutMs: 2000, ...MAINNET });
    await expect(wrongIndexer.tip()).rejects.toThrow(/testnet-v1\.0.*mainnet-v1\.0/);
    await expect(wrongIndexer.block(RECORDED_ROUND)).rejects.toThrow(/testnet-v1\.0.*mainnet-v1\.0/);
  });

  test('a block from another genesis after the check passed throws too', async () => {
    const source = createIndexerSource({ url: node.url, api: 'indexer', timeoutMs: 2000, ...TESTNET });
    await source.tip();
    node.setRounds([
      recorded(),
      assembleRound({ round: RECORDED_ROUND + 1, parentHash: RECORDED_HASH, genesis: MAINNET }),
    ]);
    await expect(source.block(RECORDED_ROUND + 1)).rejects.toThrow(/mainnet-v1\.0/);
  });
});

describe('failures throw, never a partial block', () => {
  test('a 5xx, then the node unreachable', async () => {
    for (const [, source] of sources()) {
      node.failNext(1, 503);
      await expect(source.block(RECORDED_ROUND)).rejects.toThrow(UpstreamUnavailableError);
    }
    await node.stop();
    try {
      for (const [, source] of sources())
        await expect(source.tip()).rejects.toThrow(UpstreamUnavailableError);
    } finally {
      await node.start();
    }
    expect(await algod.tip()).toEqual({ height: RECORDED_ROUND, hash: RECORDED_HASH });
  });

  test('a garbled msgpack block', async () => {
    const bytes = recordedAlgodBlock().slice(0, 2000);
    node.setRounds([{ algod: bytes, indexer: recordedIndexerBlock() }]);
    await expect(algod.block(RECORDED_ROUND)).rejects.toThrow(/msgpack/);
  });
});

describe('waitForBlockAfter', () => {
  test('answers as soon as a later round is added, and at once when one exists', async () => {
    const run = assembleRun(5000, 2);
    node.setRounds([run[0]!]);
    node.setWaitTimeout(5000);
    const waiting = algod.waitForBlockAfter!(5000);
    const deadline = Date.now() + 2000;
    while (!node.requests.some((r) => r.path.startsWith('/v2/status/wait-for-block-after/5000'))) {
      if (Date.now() > deadline) throw new Error('the long poll never reached the node');
      await new Promise((resolve) => setImmediate(resolve));
    }
    node.addRound(run[1]!);
    expect(await waiting).toBe(5001);
    expect(await algod.waitForBlockAfter!(5000)).toBe(5001);
    expect(indexer.waitForBlockAfter).toBeUndefined();
  });

  test('an aborted wait rejects', async () => {
    node.setWaitTimeout(5000);
    const controller = new AbortController();
    const waiting = algod.waitForBlockAfter!(RECORDED_ROUND, controller.signal);
    controller.abort(new Error('no longer needed'));
    await expect(waiting).rejects.toThrow('no longer needed');
  });
});

describe('API tokens and ASA decimals', () => {
  test('a token in the URL is sent as X-Algo-API-Token and not in the URL', async () => {
    const withToken = createAlgodSource({ url: node.url.replace('http://', 'http://:s3cret@') });
    await withToken.tip();
    expect(node.requests.at(-1)!.headers['x-algo-api-token']).toBe('s3cret');
    expect(node.requests.at(-1)!.headers.authorization).toBeUndefined();
  });

  test('decimals are read once per asset, from algod or the indexer', async () => {
    node.setAsset('705457144', { creator: 'X', decimals: 0n, total: 1n });
    node.setAsset('163650', { creator: 'Y', decimals: 6n, total: 1n });
    for (const api of ['algod', 'indexer'] as const) {
      const cache = createAssetInfoCache({ url: node.url, api });
      node.requests.length = 0;
      expect(await cache.decimals('705457144')).toBe(0);
      expect(await cache.decimals('705457144')).toBe(0);
      expect(await cache.decimals('163650')).toBe(6);
      expect(node.requests.map((r) => r.path)).toEqual(['/v2/assets/705457144', '/v2/assets/163650']);
      // An asset the node does not know (algod forgets destroyed ones): decimals unknown, not
      // an error that would hold the follower on its round for ever.
      expect(await cache.decimals('1')).toBeNull();
      node.failNext(1, 503);
      await expect(cache.decimals('2')).rejects.toThrow(/503/);
    }
  });
});
