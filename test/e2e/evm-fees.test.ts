/**
 * `attr.fees`: a subscription also hears of the fee its address paid for every mined transaction it
 * sent, `failed: true` when the transaction reverted; a blob transaction's fee includes its blob
 * gas. Amounts exact to the wei, from the receipts as viem reads them.
 */
import { formatEther, type Hex, parseEther, parseGwei, type TransactionReceipt } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Body, type Created, type Devnet, startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';
import { ZERO_BLOB, zeroBlobKzg } from '../helpers/kzg.js';

describe.each(backends)('fee notifications (attr.fees) on %s', (backend) => {
  let d: Devnet;
  let payer: Hex;
  let withFees: Created;
  let without: Created;

  /** Every notification of `txHash` for `sub`, once at least `count` arrived and its block is processed. */
  async function notified(sub: Created, txHash: Hex, count: number): Promise<Body[]> {
    const receipt = await d.chain.getTransactionReceipt({ hash: txHash });
    await d.receivedAtLeast(txHash, count);
    await d.processed(receipt.blockNumber);
    return d.received(txHash).filter((b) => b.subscriptionId === sub.id && b.mempool !== true);
  }

  const feeBody = (receipt: TransactionReceipt, fee: bigint, id: unknown, failed?: boolean): Body => ({
    address: payer,
    txId: receipt.transactionHash,
    type: 'fee',
    blockNumber: Number(receipt.blockNumber),
    asset: 'ETH',
    amount: `-${formatEther(fee)}`,
    mempool: false,
    ...(failed ? { failed: true } : {}),
    id,
    subscriptionId: withFees.id,
    chain: 'DEVNET',
    watchedAddress: payer,
    confirmations: 1,
  });

  beforeAll(async () => {
    d = await startDevnet(backend);
    payer = d.addresses[1]!;
    withFees = await d.subscribe(payer, { mempool: false }, { fees: true });
    // The same address without the flag, on another URL path: it hears of value, never of fees.
    without = await d.subscribe(payer, { mempool: false }, { url: `${d.receiver.url}/plain` });
    d.subs.set(payer, withFees);
    d.subs.set('0x0000000000000000000000000000000000000001', without);
  });
  afterAll(async () => {
    await d?.close();
  });

  test('a successful transfer: the value, then the fee gasUsed × effectiveGasPrice', async () => {
    const sent = await d.send(1, d.addresses[3]!, parseEther('1'));
    const receipt = await d.chain.getTransactionReceipt({ hash: sent.hash });
    const bodies = await notified(withFees, sent.hash, 3);
    const fee = bodies.find((b) => b.type === 'fee')!;
    expect(fee).toEqual(feeBody(receipt, receipt.gasUsed * receipt.effectiveGasPrice, fee.id));
    expect(bodies.filter((b) => b.type === 'native').map((b) => b.amount)).toEqual(['-1']);
    expect(bodies).toHaveLength(2);
    // The subscription without the flag: the transfer only.
    expect((await notified(without, sent.hash, 3)).map((b) => b.type)).toEqual(['native']);
  });

  test('a reverted transaction: only its fee, with failed: true', async () => {
    const batch = await d.deploy('BatchPayer');
    const reverted = await d.call(1, batch, 'BatchPayer', 'pay', [[d.addresses[4]!], [5n]], 200_000n, 6n);
    expect(reverted.status).toBe('reverted');
    const receipt = await d.chain.getTransactionReceipt({ hash: reverted.hash });
    const [fee, ...rest] = await notified(withFees, reverted.hash, 1);
    expect(rest).toEqual([]);
    expect(fee).toEqual(feeBody(receipt, receipt.gasUsed * receipt.effectiveGasPrice, fee!.id, true));
    expect(await notified(without, reverted.hash, 1)).toEqual([]);
  });

  test('a blob transaction: the fee includes blobGasUsed × blobGasPrice', async () => {
    const wallet = d.wallets[1]!;
    const hash = await wallet.sendTransaction({
      account: wallet.account!,
      chain: null,
      to: d.addresses[4]!,
      value: 1234n,
      blobs: [ZERO_BLOB],
      kzg: zeroBlobKzg,
      maxFeePerBlobGas: parseGwei('30'),
      maxFeePerGas: parseGwei('20'),
      maxPriorityFeePerGas: parseGwei('1'),
    });
    const receipt = await d.chain.waitForTransactionReceipt({ hash });
    expect(receipt.type).toBe('eip4844');
    expect(receipt.blobGasUsed).toBe(131_072n);
    const bodies = await notified(withFees, hash, 3);
    const fee = bodies.find((b) => b.type === 'fee')!;
    const paid = receipt.gasUsed * receipt.effectiveGasPrice + receipt.blobGasUsed! * receipt.blobGasPrice!;
    expect(fee).toEqual(feeBody(receipt, paid, fee.id));
    // The sender's balance fell by exactly the value and that fee.
    const before = await d.chain.getBalance({ address: payer, blockNumber: receipt.blockNumber - 1n });
    const after = await d.chain.getBalance({ address: payer, blockNumber: receipt.blockNumber });
    expect(before - after).toBe(1234n + paid);
  });
});
