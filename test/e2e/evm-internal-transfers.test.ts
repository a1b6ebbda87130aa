/**
 * Internal transfers end to end: native value moved by contract calls on a real anvil chain, found
 * in its traces and notified to watched deposit addresses that no top-level transfer touches. Every
 * body is checked field by field against values the test works out itself (what it sent, contract
 * addresses from viem), and every signature with `standardwebhooks` (test/helpers/devnet.ts).
 */
import {
  encodeDeployData,
  formatEther,
  getAddress,
  getContractAddress,
  type Hex,
  keccak256,
  parseEther,
  toHex,
} from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { artifact } from '../helpers/anvil.js';
import { type Body, type Devnet, startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';

/** A fresh address no dev account or contract has touched: a deposit address of a wallet user. */
const freshAddress = (): Hex => getAddress(privateKeyToAddress(generatePrivateKey()));

interface Expected {
  from: Hex;
  to: Hex;
  value: bigint;
  traceAddress: string;
  watched: Hex;
}

describe.each(backends)('internal transfers on anvil, on %s', (backend) => {
  let d: Devnet;
  /** Pending announcements aside: anvil mines at once, and these tests are about blocks. */
  const mined = (txHash: Hex) => d.received(txHash).filter((b) => b.mempool !== true);
  const minedAtLeast = (txHash: Hex, count: number) =>
    waitFor(() => {
      const bodies = mined(txHash);
      return bodies.length >= count ? bodies : undefined;
    }, `${count} notifications of ${txHash}`);

  /** Subscribes the addresses as one list, mempool off; its notifications are verified by `received`. */
  const watch = async (...addresses: Hex[]) => {
    const created = await d.subscribe(addresses, { mempool: false });
    for (const address of addresses) d.subs.set(address, created);
    return created;
  };

  /** The body docs/watching-chains.md gives an internal transfer, for the subscription watching `watched`. */
  const internalBody = (txId: Hex, block: bigint, e: Expected, id: unknown): Body => ({
    address: e.from,
    txId,
    type: 'native',
    blockNumber: Number(block),
    asset: 'ETH',
    amount: `-${formatEther(e.value)}`,
    mempool: false,
    counterAddress: e.to,
    internal: true,
    traceAddress: e.traceAddress,
    id,
    subscriptionId: d.subs.get(e.watched)!.id,
    chain: 'DEVNET',
    watchedAddress: e.watched,
    confirmations: 1,
  });

  /** Exactly these internal transfers notified for `txId` (and no other notification of it). */
  async function expectNotified(txId: Hex, block: bigint, expected: Expected[]): Promise<void> {
    const bodies = await minedAtLeast(txId, expected.length);
    // Whatever else the block might have notified is there by the time its last block is processed.
    await d.processed(block);
    const all = mined(txId);
    expect(all).toHaveLength(expected.length);
    for (const e of expected) {
      const body = bodies.find((b) => b.watchedAddress === e.watched && b.traceAddress === e.traceAddress);
      expect(body, `${e.traceAddress} to ${e.watched}`).toBeDefined();
      expect(body).toEqual(internalBody(txId, block, e, body!.id));
    }
  }

  beforeAll(async () => {
    // Through a JSON-RPC proxy, which passes everything on unless a test makes it lie.
    d = await startDevnet(backend, { proxy: true });
  });
  afterAll(async () => {
    await d?.close();
  });

  test('a forwarder pays a watched deposit address: one internal transfer, traceAddress 0', async () => {
    const forwarder = await d.deploy('Forwarder');
    const deposit = freshAddress();
    await watch(deposit);
    const value = parseEther('0.7');
    const sent = await d.call(0, forwarder, 'Forwarder', 'forward', [deposit], undefined, value);
    await expectNotified(sent.hash, sent.block, [
      { from: forwarder, to: deposit, value, traceAddress: '0', watched: deposit },
    ]);
    expect(await d.chain.getBalance({ address: deposit })).toBe(value);
  });

  test('a batch payout to three recipients: three notifications, 0, 1 and 2; a reverted batch pays none', async () => {
    const payer = await d.deploy('BatchPayer');
    const recipients = [freshAddress(), freshAddress(), freshAddress()];
    await watch(...recipients);
    const amounts = [parseEther('0.1'), parseEther('0.2'), 3n];
    const total = amounts.reduce((a, b) => a + b);
    const paid = await d.call(0, payer, 'BatchPayer', 'pay', [recipients, amounts], undefined, total);
    await expectNotified(
      paid.hash,
      paid.block,
      recipients.map((to, i) => ({
        from: payer,
        to,
        value: amounts[i]!,
        traceAddress: String(i),
        watched: to,
      })),
    );
    // The same calls in a transaction that reverts at its end ("wrong total"): nothing moved.
    const reverted = await d.call(0, payer, 'BatchPayer', 'pay', [recipients, amounts], 500_000n, total + 1n);
    expect(reverted.status).toBe('reverted');
    await d.processed(reverted.block);
    const after = await d.send(0, recipients[0]!, 1n);
    await minedAtLeast(after.hash, 1);
    expect(mined(reverted.hash)).toEqual([]);
  });

  test('three levels of nesting: the payout at 0.0.0, and a watched relay sees what came in and went out', async () => {
    const [a, b, c] = [await d.deploy('RelayA'), await d.deploy('RelayB'), await d.deploy('RelayC')];
    const deposit = freshAddress();
    await watch(deposit);
    await watch(b);
    const value = parseEther('1.25');
    const sent = await d.call(0, a, 'RelayA', 'relay', [b, c, deposit], undefined, value);
    await expectNotified(sent.hash, sent.block, [
      { from: a, to: b, value, traceAddress: '0', watched: b },
      { from: b, to: c, value, traceAddress: '0.0', watched: b },
      { from: c, to: deposit, value, traceAddress: '0.0.0', watched: deposit },
    ]);
  });

  test('a reverted inner call inside a successful transaction moves nothing; positions count the static call', async () => {
    const reverter = await d.deploy('Reverter');
    const swallower = await d.deploy('Swallower');
    const good = freshAddress();
    await watch(good);
    await watch(reverter);
    const value = parseEther('0.5');
    // Frames: 0 STATICCALL stake(), 1 takeAndRevert (reverted, with its refund 1.0 below it), 2 the payment.
    const sent = await d.call(0, swallower, 'Swallower', 'payAndSwallow', [good, reverter], undefined, value);
    expect(sent.status).toBe('success');
    await expectNotified(sent.hash, sent.block, [
      { from: swallower, to: good, value, traceAddress: '2', watched: good },
    ]);
  });

  test('CREATE and CREATE2 with value from a factory: the created contracts are the recipients', async () => {
    const factory = await d.deploy('ChildFactory');
    const salt = keccak256(toHex('internal transfers'));
    const created = getContractAddress({ from: factory, nonce: 1n });
    const created2 = getContractAddress({
      opcode: 'CREATE2',
      from: factory,
      salt,
      bytecode: encodeDeployData({
        abi: artifact('ValueChild').abi,
        bytecode: artifact('ValueChild').bytecode,
      }),
    });
    await watch(created, created2);
    const [first, second] = [parseEther('0.3'), parseEther('0.4')];
    const sent = await d.call(
      0,
      factory,
      'ChildFactory',
      'createBoth',
      [first, salt],
      undefined,
      first + second,
    );
    await expectNotified(sent.hash, sent.block, [
      { from: factory, to: created, value: first, traceAddress: '0', watched: created },
      { from: factory, to: created2, value: second, traceAddress: '1', watched: created2 },
    ]);
    expect(await d.chain.getBalance({ address: created2 })).toBe(second);
  });

  test('a contract that self-destructs in its creating transaction: its balance goes to the beneficiary', async () => {
    const factory = await d.deploy('DoomedFactory');
    const doomed = getContractAddress({ from: factory, nonce: 1n });
    const beneficiary = freshAddress();
    // Two subscriptions: one list watching both would be told once of the transfer between them.
    await watch(beneficiary);
    await watch(doomed);
    const value = 900n;
    const sent = await d.call(0, factory, 'DoomedFactory', 'createDoomed', [beneficiary], undefined, value);
    await expectNotified(sent.hash, sent.block, [
      { from: factory, to: doomed, value, traceAddress: '0', watched: doomed },
      { from: doomed, to: beneficiary, value, traceAddress: '0.0', watched: doomed },
      { from: doomed, to: beneficiary, value, traceAddress: '0.0', watched: beneficiary },
    ]);
    expect(await d.chain.getBalance({ address: beneficiary })).toBe(value);
  });

  test('DELEGATECALL and CALLCODE with value move nothing: only the top-level transfer is notified', async () => {
    const impl = await d.deploy('DelegateImpl');
    const keeper = await d.deploy('DelegateKeeper');
    await watch(impl, keeper);
    const value = 330n;
    const sent = await d.call(0, keeper, 'DelegateKeeper', 'keep', [impl], undefined, value);
    const [body] = await minedAtLeast(sent.hash, 1);
    await d.processed(sent.block);
    expect(mined(sent.hash)).toHaveLength(1);
    expect(body).toMatchObject({
      address: d.addresses[0],
      counterAddress: keeper,
      amount: '-0.00000000000000033',
    });
    expect(body!.internal).toBeUndefined();
    expect(body!.traceAddress).toBeUndefined();
  });

  test('a smart account pays out through an entry point: the payment at 0.0, from the account', async () => {
    const entryPoint = await d.deploy('MiniEntryPoint');
    const account = await d.deploy('MiniAccount', [entryPoint]);
    await d.send(0, account, parseEther('2'));
    const deposit = freshAddress();
    await watch(deposit);
    const value = parseEther('1.5');
    const sent = await d.call(1, entryPoint, 'MiniEntryPoint', 'handleOp', [account, deposit, value, '0x']);
    await expectNotified(sent.hash, sent.block, [
      { from: account, to: deposit, value, traceAddress: '0.0', watched: deposit },
    ]);
  });

  test('calls that failed without reverting (insufficient balance, out of gas) move nothing', async () => {
    const busy = await d.deploy('DelegateImpl');
    const misfirer = await d.deploy('Misfirer');
    const to = freshAddress();
    await watch(to, busy);
    const value = 77n;
    const sent = await d.call(0, misfirer, 'Misfirer', 'misfire', [busy, to], undefined, value);
    expect(sent.status).toBe('success');
    await expectNotified(sent.hash, sent.block, [
      { from: misfirer, to, value, traceAddress: '2', watched: to },
    ]);
  });

  test('/readyz says internal transfers are read, and the metric is 1', async () => {
    const ready = await d.t.request('GET', '/readyz', { token: null });
    const devnet = (ready.body as { networks: Record<string, unknown>[] }).networks.find(
      (n) => n.network === 'DEVNET',
    );
    expect(devnet).toMatchObject({ internalTransfers: true, internalTransfersReason: null });
    const metrics = await d.t.request('GET', '/metrics', { token: null });
    expect(metrics.text).toMatch(/^ledgerhook_internal_transfers_available\{network="DEVNET"\} 1$/m);
  });

  test('traces that do not match their block fail its read, shown in /readyz; nothing of the block is half-applied', async () => {
    const forwarder = await d.deploy('Forwarder');
    const deposit = freshAddress();
    const receiver = freshAddress();
    await watch(deposit, receiver);
    await d.setAutomine(false);
    const next = (await d.chain.getBlockNumber({ cacheTime: 0 })) + 1n;
    // Both trace methods answer for the block as if it held no transaction.
    d.proxy!.intercept((request) =>
      (request.method === 'debug_traceBlockByNumber' || request.method === 'trace_block') &&
      request.params?.[0] === toHex(next)
        ? { result: [] }
        : undefined,
    );
    try {
      const forwarded = await d.submitCall(0, forwarder, 'Forwarder', 'forward', [deposit], undefined, 21n);
      const plain = await d.submit(1, receiver, 22n);
      await d.mine();
      const lastError = await waitFor(async () => {
        const ready = await d.t.request('GET', '/readyz', { token: null });
        const devnet = (
          ready.body as { networks: { network: string; lastError: string | null }[] }
        ).networks.find((n) => n.network === 'DEVNET');
        return devnet?.lastError ?? undefined;
      }, 'the failed read in /readyz');
      expect(lastError).toMatch(/transaction/);
      // Neither the block's top-level transfer nor its internal one went out without the other.
      expect(mined(forwarded)).toEqual([]);
      expect(mined(plain)).toEqual([]);
      d.proxy!.intercept(() => undefined);
      await d.setAutomine(true);
      await expectNotified(forwarded, next, [
        { from: forwarder, to: deposit, value: 21n, traceAddress: '0', watched: deposit },
      ]);
      await minedAtLeast(plain, 1);
    } finally {
      d.proxy!.intercept(() => undefined);
      await d.setAutomine(true);
    }
  });

  test('a reorganisation withdraws exactly the internal transfers that left; those on both branches stay', async () => {
    const payer = await d.deploy('BatchPayer');
    const forwarder = await d.deploy('Forwarder');
    const recipients = [freshAddress(), freshAddress(), freshAddress()];
    const lost = freshAddress();
    await watch(...recipients, lost);
    const amounts = [11n, 12n, 13n];
    const stays = await d.call(0, payer, 'BatchPayer', 'pay', [recipients, amounts], undefined, 36n);
    const leaves = await d.call(0, forwarder, 'Forwarder', 'forward', [lost], undefined, 14n);
    expect(leaves.block).toBe(stays.block + 1n);
    await minedAtLeast(stays.hash, 3);
    const [announced] = await minedAtLeast(leaves.hash, 1);

    // Both blocks replaced: the batch payout again at its height, and a plain transfer to `lost`
    // where the forwarder's payment was.
    const raw = (await d.chain.request({
      method: 'eth_getRawTransactionByHash' as never,
      params: [stays.hash] as never,
    })) as Hex;
    const replacement = 15n;
    await d.chain.request({
      method: 'anvil_reorg' as never,
      params: [
        2,
        [
          [raw, 0],
          [{ from: d.addresses[2], to: lost, value: toHex(replacement) }, 1],
        ],
      ] as never,
    });
    const withdrawals = (await minedAtLeast(leaves.hash, 2)).filter((b) => b.reorg === true);
    expect(withdrawals).toEqual([{ ...announced, id: withdrawals[0]!.id, reorg: true }]);
    const plain = await waitFor(
      () =>
        d.receiver.requests
          .map((r) => JSON.parse(r.body) as Body)
          .find((b) => b.watchedAddress === lost && b.amount === `-${formatEther(replacement)}` && !b.reorg),
      'the replacement transfer notified',
    );
    expect(plain.internal).toBeUndefined();
    // The payout on both branches: neither withdrawn nor notified again.
    const log = await d.logged(d.subs.get(lost)!.id);
    const ofStays = log.filter((n) => n.payload.txId === stays.hash);
    expect(ofStays.map((n) => n.payload.traceAddress).sort()).toEqual(['0', '1', '2']);
    for (const n of ofStays) expect(n.payload.reorg).toBeUndefined();
    expect(mined(stays.hash)).toHaveLength(3);
  });
});
