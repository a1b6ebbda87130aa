/**
 * The non-EVM history sources ask the node nothing without the backfill throttle's leave, so
 * LEDGERHOOK_BACKFILL_RPS bounds them as the README says: per request on the address-history
 * paths, per block (whatever pages it takes) on the block scans.
 */
import { networks } from 'bitcoinjs-lib';
import { afterAll, describe, expect, test } from 'vitest';
import {
  assembleRun,
  RECORDED_HASH,
  RECORDED_ROUND,
  recordedAlgodBlock,
  recordedIndexerBlock,
  startAlgorandNode,
  TESTNET,
} from '../../test/helpers/algorand-node.js';
import { BTCD_MAIN, btcdBlock } from '../../test/helpers/bitcoin-blocks.js';
import { startBitcoinNode } from '../../test/helpers/bitcoin-node.js';
import { SLOT, SLOT_HASH, TX } from '../../test/helpers/solana-blocks.js';
import {
  assembleBlock,
  recordedSlot,
  recordedTransactions,
  startSolanaNode,
} from '../../test/helpers/solana-node.js';
import type { Throttle } from '../shared/throttle.js';
import { algorandHistory } from './algorand/history.js';
import { bitcoinHistory } from './bitcoin/history.js';
import { solanaHistory } from './solana/history.js';
import type { WatchedAddresses } from './source.js';

/** A throttle that never waits and counts its takes. */
function countingThrottle(): Throttle & { takes: number } {
  const t = {
    perSecond: 7,
    takes: 0,
    take: async () => {
      t.takes++;
    },
  };
  return t;
}

const watching = (addresses: string[]): WatchedAddresses => ({
  count: addresses.length,
  async *pages() {
    yield addresses;
  },
  async among(candidates) {
    return candidates.filter((c) => addresses.includes(c));
  },
});

const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const close of closers) await close();
});

describe('history sources take the throttle', () => {
  test('Bitcoin: a request each through Esplora, a block each through Core', async () => {
    const node = await startBitcoinNode();
    closers.push(() => node.close());
    node.setChain(BTCD_MAIN.map(btcdBlock));
    const watched = watching(['1JyMKvPHkrCQd8jQrqTR1rBsAd1VpRhTiE', '1KXFNhNtrRMfgbdiQeuJqnfD7dR4PhniyJ']);

    const esploraThrottle = countingThrottle();
    const esplora = bitcoinHistory({
      url: node.url,
      network: networks.bitcoin,
      throttle: esploraThrottle,
      chunk: 4,
    });
    let before = node.requests.length;
    const found = await esplora.scan(1, 4, watched);
    expect(found.blocks.map((b) => b.height)).toEqual([2, 3, 4]);
    expect(esploraThrottle.takes).toBe(node.requests.length - before);
    expect(esplora.describe).toContain('7 requests/s');

    const coreThrottle = countingThrottle();
    const core = bitcoinHistory({
      url: node.url,
      api: 'bitcoind',
      network: networks.bitcoin,
      throttle: coreThrottle,
      chunk: 4,
    });
    before = node.requests.length;
    const scanned = await core.scan(1, 4, watched);
    // The same blocks, and each of them whole: a transaction of each as the follower reads it.
    expect(scanned.blocks.map((b) => [b.height, b.hash])).toEqual(
      found.blocks.map((b) => [b.height, b.hash]),
    );
    expect(coreThrottle.takes).toBe(4);
    expect(node.requests.length - before).toBeGreaterThanOrEqual(4);
  });

  test('Algorand: a request each through the indexer', async () => {
    const node = await startAlgorandNode();
    closers.push(() => node.close());
    node.setRounds([
      { algod: recordedAlgodBlock(), indexer: recordedIndexerBlock() },
      ...assembleRun(RECORDED_ROUND + 1, 2, RECORDED_HASH),
    ]);
    const throttle = countingThrottle();
    const history = algorandHistory({
      indexerUrl: node.url,
      algodUrl: node.url,
      ...TESTNET,
      throttle,
      chunk: 2,
    });
    const before = node.requests.length;
    const found = await history.scan(
      RECORDED_ROUND + 1,
      RECORDED_ROUND + 2,
      watching(['BFO7NQTTXGYDPUEWJYLWPFZRUFQISHY4E2SKXARM7UROMAW36YYBGPSUYY']),
    );
    expect(found.blocks.map((b) => b.activity.length)).toEqual([4, 4]);
    // But for the indexer's genesis, read once (its tip and that header) before the first header.
    expect(throttle.takes).toBe(node.requests.length - before - 2);
  });

  test('Solana: a request each through the signature index', async () => {
    const node = await startSolanaNode();
    closers.push(() => node.close());
    node.setSlots([
      recordedSlot(SLOT),
      assembleBlock({
        slot: SLOT + 1,
        parentSlot: SLOT,
        previousBlockhash: SLOT_HASH,
        transactions: recordedTransactions(SLOT, [TX.sol]),
      }),
    ]);
    const throttle = countingThrottle();
    const history = solanaHistory({ url: node.url, throttle, chunk: 2 });
    const before = node.requests.length;
    const found = await history.scan(
      SLOT + 1,
      SLOT + 1,
      watching(['GJ7sYR315wBMmFkSbvAbZai216sA8Mpf58JBmRHZP4eL']),
    );
    expect(found.blocks.map((b) => b.height)).toEqual([SLOT + 1]);
    expect(throttle.takes).toBe(node.requests.length - before);
  });
});
