/**
 * What a round does, on real recorded transactions (test/fixtures/chains/algorand, provenance in
 * its README), each expected value worked out by hand from the recorded fields; CONSTRUCTED cases
 * only where nothing real was recorded, and labelled so.
 */
import { describe, expect, test } from 'vitest';
import { readIndexerJson, recordedAlgodBlock } from '../../../test/helpers/algorand-node.js';
import {
  ALGO,
  type AlgorandTopTransaction,
  balanceChanges,
  counterparty,
  formatAlgorandAmount,
  movedChanges,
} from './activity.js';
import { blockFromAlgod, blockFromIndexer } from './blocks.js';

type Json = Record<string, unknown>;

/** One recorded indexer transaction as activity, through the indexer's block parsing. */
function fromIndexer(tx: Json): AlgorandTopTransaction {
  const header = readIndexerJson('blocks/indexer-block-24099447-testnet.json');
  return blockFromIndexer({ ...header, transactions: [tx] }).activity[0]!;
}

const find = (file: string, id: string): Json => {
  const body = readIndexerJson(file);
  const txs = (body.transactions as Json[] | undefined) ?? [body.transaction as Json];
  const tx = txs.find((t) => String(t.id).startsWith(id));
  if (!tx) throw new Error(`no ${id} in ${file}`);
  return tx;
};

const BFO7 = 'BFO7NQTTXGYDPUEWJYLWPFZRUFQISHY4E2SKXARM7UROMAW36YYBGPSUYY';

describe('round 24099447 (testnet, recorded algod block)', () => {
  const block = blockFromAlgod(recordedAlgodBlock());

  test('the application call W6SAFSKT (no inner transactions) only costs its sender the fee: nothing moved', () => {
    const appl = block.activity[0]!;
    expect(appl.id).toBe('W6SAFSKT3V4SMLQXG3YDLI4TOBEGPPVQ5PQNJ7BCQ6K7WEDVDFEQ');
    expect(balanceChanges(appl)).toEqual([
      {
        address: '6DJL462RP2DWBGMJIPDQ5PJCXRJKI34Z4GRWB3MEPAGRBAPTBL7U42RDYI',
        asset: ALGO,
        amount: -1000n,
        moved: false,
      },
    ]);
    expect(movedChanges(appl)).toEqual([]);
  });

  test('each of the four 1 µAlgo self-payments moves value and nets its 1000 µAlgo fee, with no counterparty', () => {
    for (const pay of block.activity.slice(1)) {
      const changes = movedChanges(pay);
      // +1 received − 1 sent − 1000 fee, all BFO7NQTT…
      expect(changes).toEqual([{ address: BFO7, asset: ALGO, amount: -1000n, moved: true }]);
      expect(counterparty(changes, changes[0]!)).toBeUndefined();
      expect(formatAlgorandAmount(changes[0]!.amount, 6)).toBe('-0.001');
    }
  });
});

describe('recorded transactions of each kind', () => {
  test('the clawback VIXTUMAP takes 5 of asset 642327435 from the revoked asset-sender, the clawback account pays only the fee', () => {
    const tx = fromIndexer(find('indexer-transaction-axfer-testnet.json', 'VIXTUMAP'));
    const revoked = 'AT3QNHSO7VZ2CPEZGI4BG7M3TIUG7YE5KZXNAE55Z4QHHAGBEU6K2LCJUA';
    const receiver = 'ATSGPNTPGMJ2U3GQRSEXA2OZGFPMKPO66NNPIKFD4LHETHYIYRIRIN6GJE';
    const clawback = 'ATJJRFAQVMD3YVX47HZLK2GRNKZLS3YDRLJ62JJPLUCZPDJE7QPQZDTVGY';
    const changes = balanceChanges(tx);
    expect(changes).toEqual([
      { address: clawback, asset: ALGO, amount: -1000n, moved: false },
      { address: revoked, asset: '642327435', amount: -5n, moved: true },
      { address: receiver, asset: '642327435', amount: 5n, moved: true },
    ]);
    expect(counterparty(changes, changes[1]!)).toBe(receiver);
    expect(counterparty(changes, changes[2]!)).toBe(revoked);
  });

  test('the asset close-out Z4NRS7IR (mainnet, close amount 0) moves nothing: its sender rewards and fee are not a transfer', () => {
    const tx = fromIndexer(find('indexer-asset-transactions-mainnet.json', 'Z4NRS7IR'));
    // sender-rewards 31196 − fee 1000.
    expect(balanceChanges(tx)).toEqual([
      {
        address: 'LV5LKD5A57TXVC3OBGEFQOAGJKDA6O24FFYSG35KTJ4SMS7MFLGBPT65MQ',
        asset: ALGO,
        amount: 30196n,
        moved: false,
      },
    ]);
    expect(movedChanges(tx)).toEqual([]);
  });

  test('PFU4TFA3 (mainnet) moves 19389366932220000 base units of asset 163650, above 2^53, exactly', () => {
    const tx = fromIndexer(find('indexer-asset-transactions-mainnet.json', 'PFU4TFA3'));
    const moved = movedChanges(tx);
    expect(moved.map((c) => c.amount)).toEqual([-19389366932220000n, 19389366932220000n]);
    expect(19389366932220000n > 2n ** 53n).toBe(true);
    // Asset 163650's decimals are 6 (its creation PX3P7C2R in the same file).
    expect(formatAlgorandAmount(moved[1]!.amount, 6)).toBe('19389366932.22');
  });

  test('rewards count in the ALGO net: OXOKV5V6 (mainnet opt-in) nets +4888077834 − 1000 µAlgo, yet moves nothing', () => {
    const tx = fromIndexer(find('indexer-asset-transactions-mainnet.json', 'OXOKV5V6'));
    expect(balanceChanges(tx)).toEqual([
      {
        address: 'VYSOEGKVZJLADHD3NP3S7VHUWFSSJMKH65UG6C6BA4LJAMMOPNSMYR2S6M',
        asset: ALGO,
        amount: 4888076834n,
        moved: false,
      },
    ]);
    expect(movedChanges(tx)).toEqual([]);
  });

  test('5JZDTA4H moves 1 unit of asset 705457144, whose creation WJWQV5CN set 0 decimals', () => {
    const tx = fromIndexer(find('indexer-account-transactions-testnet.json', '5JZDTA4H'));
    const [debit, credit] = movedChanges(tx);
    expect(debit).toMatchObject({ asset: '705457144', amount: -1n });
    expect(credit).toMatchObject({
      address: '5VLJQQVCC2FARS5OKXWDPPYKJLJNEP7SKFHXD76DRN4WCV7SGI6W2IB5ME',
      amount: 1n,
    });
    expect(formatAlgorandAmount(credit!.amount, 0)).toBe('1');
  });

  test('the application call QY4K4IC2 with a 0-amount inner axfer (an opt-in by the app account) notifies nothing', () => {
    const tx = fromIndexer(find('indexer-account-transactions-testnet.json', 'QY4K4IC2'));
    expect(tx.inner).toHaveLength(1);
    expect(movedChanges(tx)).toEqual([]);
  });

  test('the acfg WJWQV5CN and the 0 ALGO payments of the account notify nothing', () => {
    const file = 'indexer-account-transactions-testnet.json';
    const txs = (readIndexerJson(file).transactions as Json[]).map(fromIndexer);
    const quiet = txs.filter((tx) => tx.type === 'acfg' || (tx.type === 'pay' && tx.payment?.amount === 0n));
    expect(quiet.length).toBeGreaterThanOrEqual(5);
    for (const tx of quiet) expect(movedChanges(tx)).toEqual([]);
  });
});

describe('CONSTRUCTED (no such transaction was recorded)', () => {
  const A = 'GD64YIY3TWGDMCNPP553DZPPR6LDUSFQOIJVFDPPXWEG3FVOJCCDBBHU5A';
  const B = '25M5BT2DMMED3V6CWDEYKSNEFGPXX4QBIINCOICLXXRU3UGTSGRMF3MTOE';
  const APP = '5VLJQQVCC2FARS5OKXWDPPYKJLJNEP7SKFHXD76DRN4WCV7SGI6W2IB5ME';
  const base = { senderRewards: 0n, receiverRewards: 0n, closeRewards: 0n, inner: [] };

  test('an application call whose inner payment moves 2^53 + 1 µAlgo from the app account: exact, the outer id', () => {
    const big = 2n ** 53n + 1n;
    const tx: AlgorandTopTransaction = {
      ...base,
      id: 'CONSTRUCTED',
      type: 'appl',
      sender: A,
      fee: 2000n,
      inner: [
        {
          ...base,
          type: 'pay',
          sender: APP,
          fee: 0n,
          payment: { receiver: A, amount: big, closingAmount: 0n },
        },
      ],
    };
    const changes = movedChanges(tx);
    expect(changes).toEqual([
      { address: A, asset: ALGO, amount: big - 2000n, moved: true },
      { address: APP, asset: ALGO, amount: -big, moved: true },
    ]);
    expect(formatAlgorandAmount(changes[0]!.amount, 6)).toBe('9007199254.738993');
    expect(counterparty(changes, changes[0]!)).toBe(APP);
  });

  test('a payment closing the account: the receiver gets the amount, close-to the remainder and close rewards', () => {
    const tx: AlgorandTopTransaction = {
      ...base,
      id: 'CONSTRUCTED',
      type: 'pay',
      sender: A,
      fee: 1000n,
      senderRewards: 7n,
      closeRewards: 3n,
      payment: { receiver: B, amount: 500n, closeTo: APP, closingAmount: 123_456n },
    };
    const changes = movedChanges(tx);
    expect(changes).toEqual([
      { address: A, asset: ALGO, amount: 7n - 1000n - 500n - 123_456n, moved: true },
      { address: B, asset: ALGO, amount: 500n, moved: true },
      { address: APP, asset: ALGO, amount: 123_459n, moved: true },
    ]);
    // Two addresses were credited: the sender has no single counterparty; each receiver has A.
    expect(counterparty(changes, changes[0]!)).toBeUndefined();
    expect(counterparty(changes, changes[2]!)).toBe(A);
  });
});
