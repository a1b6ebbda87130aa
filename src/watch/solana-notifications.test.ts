/**
 * The Solana matcher on the recorded mainnet block 110360000: bodies per DESIGN §6 for named
 * accounts, worked out by hand from the recorded balances (the arithmetic is in
 * src/chains/solana/activity.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { recordedBlock } from '../../test/helpers/solana-blocks.js';
import { loadNetworks } from '../chains/networks.js';
import { solanaActivityFromBlock } from '../chains/solana/source.js';
import { createAddressIndex } from './address-index.js';
import { solanaMatcher } from './solana-notifications.js';

const network = loadNetworks({}).find('SOL')!;
const R = 110360000;
const SOL_TRANSFER =
  '5kQSE8yKLY9eNNXrxLpFTWgEaXnb9yNBNhCa7m3ZnVa27UmaSAoociV3873bXndVRSt2nF9cnySvhvUCvWVrKbcq';
const KIN_TRANSFER =
  '2P7vbmZhjPoyPN51q37T2w8vkKaFTbiS3tAPVE1hjkpc6bp5f7iJp9ssps61WYEJgUTTXR2P3wtzUEN2tXqvVjVY';
const KIN = 'kinXdEcpDQeHPEuQnqmUgtYykqKGVFq6CeVX5iAHJq6';
const SENDER = '9ud9oY4WLP3jb9LkJ7CqR7an7GQoenAUgLigYCFNfHP6';
const RECEIVER = 'GJ7sYR315wBMmFkSbvAbZai216sA8Mpf58JBmRHZP4eL';
/** The KIN sender's token account, watched by its own address. */
const KIN_TOKEN_ACCOUNT = '68pjdf2E4JvhQymcaFi7ZGgm5Tnrnt6Aa2c2r13sgV6s';
/** The fee payer of the block's KIN transfers, which pays only fees. */
const KIN_FEE_PAYER = 'agsWhfJ5PPGjmzMieWY8BR5o1XRVszUBQ5uFz4CtDiJ';

function watching(...addresses: string[]) {
  const index = createAddressIndex(() => 'solana');
  for (const [i, address] of addresses.entries())
    index.apply({
      type: 'upsert',
      subscription: {
        id: `sub-${i}`,
        accountId: 'a',
        network: 'SOL',
        address,
        confirmations: 1,
        mempool: false,
      },
    });
  return index;
}

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
  it('a SOL transfer: the sender −0.050005 (the fee included), the receiver +0.05, each the other’s counterparty', async () => {
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

  it('a token account watched by its own address: −1 KIN, the mint as asset, the other token account as counterparty', async () => {
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
        counterAddress: '5WuYxq75GcEv7YUwWrUR7HayZgqgDyjsrVNz5LJuEG1d',
        ...common('n', 'sub-0', KIN_TOKEN_ACCOUNT),
      },
    ]);
  });

  it('a fee payer that pays only fees is never notified; a failed transaction notifies nobody', async () => {
    expect(await matchRecorded(KIN_FEE_PAYER)).toEqual([]);
    // 5MB1Qy… failed: its payer paid 5000 lamports and nothing else happened.
    const FAILED_PAYER = (
      recordedBlock(R).transactions as { transaction: { message: { accountKeys: { pubkey: string }[] } } }[]
    )[5]!.transaction.message.accountKeys[0]!.pubkey;
    const matches = await matchRecorded(FAILED_PAYER);
    expect(
      matches.filter((m) =>
        m.key.startsWith(
          '5MB1QyhmxNbQf5J1aPCLdS8c9cPwCNKezxj6HhqymXd5unmUMzASp76igP1fJhQdqYHdjvozsjbwvoZetQ7zYGee',
        ),
      ),
    ).toEqual([]);
  });
});
