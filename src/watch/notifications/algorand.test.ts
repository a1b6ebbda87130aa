/**
 * The Algorand matcher on the recorded round 24099447 and real recorded transactions: bodies per
 * docs/watching-chains.md, worked out by hand from the recorded fields (test/fixtures/chains/algorand).
 */
import { describe, expect, test } from 'vitest';
import { readIndexerJson, recordedAlgodBlock } from '../../../test/helpers/algorand-node.js';
import { indexWatching } from '../../../test/helpers/watching.js';
import { blockFromAlgod, blockFromIndexer } from '../../chains/algorand/blocks.js';
import { loadNetworks } from '../../chains/networks.js';
import { algorandMatcher } from './algorand.js';

const network = loadNetworks({}).find('ALGO')!;
const BFO7 = 'BFO7NQTTXGYDPUEWJYLWPFZRUFQISHY4E2SKXARM7UROMAW36YYBGPSUYY';
const RECEIVER = 'ATSGPNTPGMJ2U3GQRSEXA2OZGFPMKPO66NNPIKFD4LHETHYIYRIRIN6GJE';
const CLAWBACK = 'ATJJRFAQVMD3YVX47HZLK2GRNKZLS3YDRLJ62JJPLUCZPDJE7QPQZDTVGY';

const watching = (...addresses: string[]) => indexWatching(network, ...addresses);

const decimals = { decimals: async (id: string) => ({ '642327435': 2 })[id] ?? 0 };

describe('algorandMatcher', () => {
  test('round 24099447: each self-payment of BFO7NQTT notifies its net −0.001 ALGO; the application call nothing', async () => {
    const block = blockFromAlgod(recordedAlgodBlock());
    const match = algorandMatcher({
      network,
      index: watching(BFO7, '6DJL462RP2DWBGMJIPDQ5PJCXRJKI34Z4GRWB3MEPAGRBAPTBL7U42RDYI'),
      assets: decimals,
    });
    const matches = await match({
      height: block.round,
      hash: block.hash,
      parentHash: block.parentHash,
      activity: block.activity,
    });
    expect(matches.map((m) => m.key)).toEqual(block.activity.slice(1).map((tx) => `${tx.id}:${BFO7}:ALGO`));
    expect(matches[0]!.body('n1')).toEqual({
      address: BFO7,
      txId: 'Q5T6IHV62WN5YRGGBZ5PTTOGD4UEEJ2IJVWVVQPDSRZ5JYLNY2LQ',
      type: 'native',
      blockNumber: 24099447,
      asset: 'ALGO',
      amount: '-0.001',
      id: 'n1',
      subscriptionId: 'sub-0',
      chain: 'ALGO',
      watchedAddress: BFO7,
      confirmations: 1,
    });
  });

  test('the clawback VIXTUMAP: the receiver is credited 0.05 of asset 642327435 (2 decimals) from the revoked account; the clawback account, fee only, nothing', async () => {
    const header = readIndexerJson('blocks/indexer-block-24099447-testnet.json');
    const tx = readIndexerJson('indexer-transaction-axfer-testnet.json').transaction;
    const block = blockFromIndexer({ ...header, round: 39050091n, transactions: [tx] });
    const match = algorandMatcher({ network, index: watching(RECEIVER, CLAWBACK), assets: decimals });
    const matches = await match({
      height: block.round,
      hash: block.hash,
      parentHash: block.parentHash,
      activity: block.activity,
    });
    expect(matches).toHaveLength(1);
    expect(matches[0]!.body('n')).toMatchObject({
      address: RECEIVER,
      type: 'token',
      asset: '642327435',
      amount: '0.05',
      blockNumber: 39050091,
      counterAddress: 'AT3QNHSO7VZ2CPEZGI4BG7M3TIUG7YE5KZXNAE55Z4QHHAGBEU6K2LCJUA',
    });
  });

  test('an asset the node does not know: the amount in base units, marked decimalsUnknown', async () => {
    const header = readIndexerJson('blocks/indexer-block-24099447-testnet.json');
    const tx = readIndexerJson('indexer-transaction-axfer-testnet.json').transaction;
    const block = blockFromIndexer({ ...header, round: 39050091n, transactions: [tx] });
    const unknown = { decimals: async () => null };
    const match = algorandMatcher({ network, index: watching(RECEIVER), assets: unknown });
    const [only] = await match({
      height: block.round,
      hash: block.hash,
      parentHash: block.parentHash,
      activity: block.activity,
    });
    expect(only!.body('n')).toMatchObject({ asset: '642327435', amount: '5', decimalsUnknown: true });
    // Known decimals carry no such field.
    const known = algorandMatcher({ network, index: watching(RECEIVER), assets: decimals });
    const [body] = await known({
      height: block.round,
      hash: block.hash,
      parentHash: block.parentHash,
      activity: block.activity,
    });
    expect(body!.body('n')).not.toHaveProperty('decimalsUnknown');
  });
});
