/**
 * The Solana matcher on the recorded mainnet block 110360000: bodies per docs/watching-chains.md for named
 * accounts, worked out by hand from the recorded balances (the arithmetic is in
 * src/chains/solana/activity.test.ts).
 */
import { describe, expect, test } from 'vitest';
import {
  FAILED_PAYER,
  KIN,
  KIN_ACCOUNT,
  KIN_FEE_PAYER,
  KIN_RECEIVER,
  RECEIVER,
  recordedBlock,
  SENDER,
  SLOT,
  TX,
} from '../../../test/helpers/solana-blocks.js';
import { indexWatching } from '../../../test/helpers/watching.js';
import { loadNetworks } from '../../chains/networks.js';
import { solanaActivityFromBlock } from '../../chains/solana/source.js';
import { solanaMatcher } from './solana.js';

const network = loadNetworks({}).find('SOL')!;
const R = SLOT;
const SOL_TRANSFER = TX.sol;
const KIN_TRANSFER = TX.kin;
const KIN_TOKEN_ACCOUNT = KIN_ACCOUNT;

const watching = (...addresses: string[]) => indexWatching(network, ...addresses);

async function matchRecorded(...addresses: string[]) {
  const result = recordedBlock(R);
  const match = solanaMatcher({ network, index: watching(...addresses) });
  return match({
    height: R,
    hash: result.blockhash as string,
    parentHash: result.previousBlockhash as string,
    activity: solanaActivityFromBlock(result),
  });
}

const common = (id: string, subscriptionId: string, address: string) => ({
  id,
  subscriptionId,
  chain: 'SOL',
  watchedAddress: address,
  confirmations: 1,
});

describe('solanaMatcher', () => {
  test('a SOL transfer: the sender −0.050005 (the fee included), the receiver +0.05, each the other’s counterparty', async () => {
    const matches = await matchRecorded(SENDER, RECEIVER);
    const ofTransfer = matches.filter((m) => m.key.startsWith(SOL_TRANSFER));
    expect(ofTransfer.map((m) => m.key)).toEqual([
      `${SOL_TRANSFER}:${SENDER}:SOL`,
      `${SOL_TRANSFER}:${RECEIVER}:SOL`,
    ]);
    expect(ofTransfer[0]!.body('n1')).toEqual({
      address: SENDER,
      txId: SOL_TRANSFER,
      type: 'native',
      blockNumber: R,
      asset: 'SOL',
      amount: '-0.050005',
      counterAddress: RECEIVER,
      ...common('n1', 'sub-0', SENDER),
    });
    expect(ofTransfer[1]!.body('n2')).toEqual({
      address: RECEIVER,
      txId: SOL_TRANSFER,
      type: 'native',
      blockNumber: R,
      asset: 'SOL',
      amount: '0.05',
      counterAddress: SENDER,
      ...common('n2', 'sub-1', RECEIVER),
    });
    // The seam for addressesRiskRatio: whom the address dealt with.
    expect(ofTransfer[0]!.counterparties).toEqual([RECEIVER]);
  });

  test('a token account watched by its own address: −1 KIN, the mint as asset, the other token account as counterparty', async () => {
    const matches = await matchRecorded(KIN_TOKEN_ACCOUNT);
    const ofTransfer = matches.filter((m) => m.key.startsWith(KIN_TRANSFER));
    expect(ofTransfer.map((m) => m.body('n'))).toEqual([
      {
        address: KIN_TOKEN_ACCOUNT,
        txId: KIN_TRANSFER,
        type: 'token',
        blockNumber: R,
        asset: KIN,
        amount: '-1',
        counterAddress: KIN_RECEIVER,
        ...common('n', 'sub-0', KIN_TOKEN_ACCOUNT),
      },
    ]);
  });

  test('a fee payer that pays only fees is never notified; a failed transaction notifies nobody', async () => {
    expect(await matchRecorded(KIN_FEE_PAYER)).toEqual([]);
    // 5MB1Qy… failed: its payer paid 5000 lamports and nothing else happened.
    const matches = await matchRecorded(FAILED_PAYER);
    expect(matches.filter((m) => m.key.startsWith(TX.failed))).toEqual([]);
  });
});
