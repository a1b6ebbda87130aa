import { getAddress, getContractAddress, type Hex, parseEther } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { artifact } from '../helpers/anvil.js';
import { type Devnet, startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';

/**
 * Mempool notifications against a real anvil chain with mining paused: a pending transfer is
 * notified with `mempool: true` and no block, then again (another id) once mined.
 */
describe.each(backends)('the EVM mempool (anvil, mining paused) on %s', (backend) => {
  let d: Devnet;
  let token: Hex;
  let nft: Hex;
  // 0 deploys and funds; alice (1), bob (2) are watched with mempool notifications, dave (4)
  // without them; carol (3) is not watched.
  const who = () => {
    const [, alice, bob, carol, dave] = d.addresses as [Hex, Hex, Hex, Hex, Hex];
    return { alice, bob, carol, dave };
  };

  /** The block a transaction was mined in. */
  async function blockOf(hash: Hex): Promise<number> {
    return Number((await d.chain.getTransactionReceipt({ hash })).blockNumber);
  }

  async function stillPending(hash: Hex): Promise<void> {
    expect((await d.chain.getTransaction({ hash })).blockNumber).toBeNull();
  }

  /** What the delivery log of `who`'s subscription holds for `txHash` (sent or not). */
  async function logged(address: Hex, txHash: Hex) {
    const log = await d.logged(d.subs.get(address)!.id);
    return log.filter((n) => n.payload.txId === txHash);
  }

  beforeAll(async () => {
    d = await startDevnet(backend, { proxy: true });
    const { alice, bob, carol, dave } = who();
    d.subs.set(alice, await d.subscribe(alice));
    d.subs.set(bob, await d.subscribe(bob, { mempool: true }));
    d.subs.set(dave, await d.subscribe(dave, { mempool: false }));
    // Set up with mining on: 100 TST (6 decimals) and NFT #7 for alice; carol may spend 10 TST of hers.
    token = await d.deploy('TestToken');
    await d.call(0, token, 'TestToken', 'mint', [alice, 100_000_000n]);
    await d.call(1, token, 'TestToken', 'approve', [carol, 10_000_000n]);
    nft = await d.deploy('TestNFT');
    await d.call(0, nft, 'TestNFT', 'mint', [alice, 7n]);
    await d.setAutomine(false);
  });

  afterAll(async () => {
    await d?.close();
  });

  test('a native transfer: mempool: true without a block, then mined: mempool: false with it, another id', async () => {
    const { alice, carol } = who();
    const hash = await d.submit(1, carol, parseEther('1.5'));
    const [pending] = await d.receivedAtLeast(hash, 1);
    await stillPending(hash);
    expect(pending).toEqual({
      address: alice,
      txId: hash,
      type: 'native',
      asset: 'ETH',
      amount: '-1.5',
      mempool: true,
      counterAddress: carol,
      id: pending!.id,
      subscriptionId: d.subs.get(alice)!.id,
      chain: 'DEVNET',
      watchedAddress: alice,
      confirmations: 0,
    });
    expect(Object.keys(pending!)).not.toContain('blockNumber');

    await d.mine();
    const bodies = await d.receivedAtLeast(hash, 2);
    expect(bodies).toHaveLength(2);
    const mined = bodies.find((b) => b.mempool === false)!;
    expect(mined).toEqual({
      ...pending,
      id: mined.id,
      blockNumber: await blockOf(hash),
      mempool: false,
      confirmations: 1,
    });
    expect(mined.id).not.toBe(pending!.id);
    expect((await logged(alice, hash)).map((n) => n.eventType)).toEqual([
      'address.transaction.pending',
      'address.transaction',
    ]);
  });

  test('ERC-20 transfer calldata: decimals applied, the token as asset, then mined', async () => {
    const { alice, carol } = who();
    const hash = await d.submitCall(1, token, 'TestToken', 'transfer', [carol, 12_500_000n]);
    const [pending] = await d.receivedAtLeast(hash, 1);
    await stillPending(hash);
    expect(pending).toEqual({
      address: alice,
      txId: hash,
      type: 'token',
      asset: token,
      amount: '-12.5',
      mempool: true,
      counterAddress: carol,
      id: pending!.id,
      subscriptionId: d.subs.get(alice)!.id,
      chain: 'DEVNET',
      watchedAddress: alice,
      confirmations: 0,
    });
    expect(Object.keys(pending!)).not.toContain('blockNumber');

    await d.mine();
    const bodies = await d.receivedAtLeast(hash, 2);
    expect(bodies).toHaveLength(2);
    const mined = bodies.find((b) => b.mempool === false)!;
    expect(mined).toEqual({
      ...pending,
      id: mined.id,
      blockNumber: await blockOf(hash),
      mempool: false,
      confirmations: 1,
    });
    expect(mined.id).not.toBe(pending!.id);
  });

  test('ERC-20 transferFrom by a spender: from the owner to the recipient, one per subscription, then mined', async () => {
    const { alice, bob } = who();
    // carol spends alice's allowance: the transfer is alice's, not carol's.
    const hash = await d.submitCall(3, token, 'TestToken', 'transferFrom', [alice, bob, 2_250_000n]);
    const pending = await d.receivedAtLeast(hash, 2);
    await stillPending(hash);
    expect(pending).toHaveLength(2);
    for (const watched of [alice, bob]) {
      const body = pending.find((b) => b.watchedAddress === watched)!;
      expect(body).toEqual({
        address: alice,
        txId: hash,
        type: 'token',
        asset: token,
        amount: '-2.25',
        mempool: true,
        counterAddress: bob,
        id: body.id,
        subscriptionId: d.subs.get(watched)!.id,
        chain: 'DEVNET',
        watchedAddress: watched,
        confirmations: 0,
      });
    }

    await d.mine();
    const bodies = await d.receivedAtLeast(hash, 4);
    expect(bodies).toHaveLength(4);
    const block = await blockOf(hash);
    for (const before of pending) {
      const after = bodies.find((b) => b.mempool === false && b.watchedAddress === before.watchedAddress)!;
      expect(after).toEqual({
        ...before,
        id: after.id,
        blockNumber: block,
        mempool: false,
        confirmations: 1,
      });
    }
    expect(new Set(bodies.map((b) => b.id)).size).toBe(4);
  });

  test('a subscription with mempool: false gets only the mined notification', async () => {
    const { alice, dave } = who();
    const hash = await d.submit(1, dave, parseEther('0.5'));
    // alice's mempool notification shows the pending transaction was matched (in one write for both).
    const [pending] = await d.receivedAtLeast(hash, 1);
    expect(pending).toMatchObject({ watchedAddress: alice, mempool: true });
    await stillPending(hash);
    expect(await logged(dave, hash)).toEqual([]);

    await d.mine();
    const bodies = await d.receivedAtLeast(hash, 3);
    expect(bodies).toHaveLength(3);
    const daves = bodies.filter((b) => b.watchedAddress === dave);
    expect(daves).toEqual([
      {
        address: alice,
        txId: hash,
        type: 'native',
        blockNumber: await blockOf(hash),
        asset: 'ETH',
        amount: '-0.5',
        mempool: false,
        counterAddress: dave,
        id: daves[0]!.id,
        subscriptionId: d.subs.get(dave)!.id,
        chain: 'DEVNET',
        watchedAddress: dave,
        confirmations: 1,
      },
    ]);
    expect((await logged(dave, hash)).map((n) => n.eventType)).toEqual(['address.transaction']);
  });

  test("an ERC-721 transferFrom (ERC-20's selector) is not taken for a token amount while pending", async () => {
    const { alice, bob } = who();
    const moved = await d.submitCall(1, nft, 'TestNFT', 'transferFrom', [alice, bob, 7n]);
    // A later pending transfer notified shows the NFT transfer was seen and matched before it.
    const later = await d.submit(0, alice, parseEther('0.1'));
    await d.receivedAtLeast(later, 1);
    await stillPending(moved);
    expect(await logged(alice, moved)).toEqual([]);
    expect(await logged(bob, moved)).toEqual([]);

    await d.mine();
    const bodies = await d.receivedAtLeast(moved, 2);
    for (const body of bodies) {
      expect(body).toMatchObject({ type: 'token', asset: nft, tokenId: '7', amount: '-1', mempool: false });
    }
    expect((await logged(alice, moved)).map((n) => n.eventType)).toEqual(['address.transaction']);
    expect((await d.receivedAtLeast(later, 2)).map((b) => b.mempool)).toEqual([true, false]);
  });

  test('a node without pending-transaction filters: the pending block is polled, each transaction notified once', async () => {
    const { alice, carol } = who();
    const proxy = d.proxy!;
    let refused = 0;
    let pendingPolls = 0;
    proxy.intercept((request) => {
      if (request.method === 'eth_getBlockByNumber' && request.params?.[0] === 'pending') pendingPolls++;
      if (request.method === 'eth_getFilterChanges')
        return { error: { code: -32000, message: 'filter not found' } };
      if (request.method === 'eth_newPendingTransactionFilter') {
        refused++;
        return {
          error: { code: -32601, message: 'the method eth_newPendingTransactionFilter does not exist' },
        };
      }
      return undefined;
    });
    await waitFor(() => (refused > 0 ? true : undefined), 'the filter refused');

    const hash = await d.submit(1, carol, parseEther('0.75'));
    const [pending] = await d.receivedAtLeast(hash, 1);
    expect(pending).toMatchObject({
      address: alice,
      txId: hash,
      amount: '-0.75',
      mempool: true,
      confirmations: 0,
    });
    expect(Object.keys(pending!)).not.toContain('blockNumber');
    // The same pending transaction in later polls of the pending block inserts nothing.
    const polls = pendingPolls;
    await waitFor(
      () => (pendingPolls >= polls + 3 ? true : undefined),
      'three more polls of the pending block',
    );
    await stillPending(hash);
    expect((await logged(alice, hash)).map((n) => n.eventType)).toEqual(['address.transaction.pending']);
    expect(refused).toBe(1);

    await d.mine();
    const bodies = await d.receivedAtLeast(hash, 2);
    expect(bodies.map((b) => b.mempool)).toEqual([true, false]);
    proxy.intercept(() => undefined);
  });
  test('a token whose decimals() reverts: raw units marked decimalsUnknown, pending and mined alike', async () => {
    const { alice, carol } = who();
    await d.setAutomine(true);
    let odd: Hex;
    try {
      // Mode 0: decimals() reverts.
      odd = await d.deploy('OddToken', [0n]);
      await d.call(0, odd, 'OddToken', 'mint', [alice, 5_000_000n]);
    } finally {
      await d.setAutomine(false);
    }
    const hash = await d.submitCall(1, odd, 'OddToken', 'transfer', [carol, 1_250_000n]);
    const [pending] = await d.receivedAtLeast(hash, 1);
    await stillPending(hash);
    expect(pending).toEqual({
      address: alice,
      txId: hash,
      type: 'token',
      asset: odd,
      amount: '-1250000',
      decimalsUnknown: true,
      mempool: true,
      counterAddress: carol,
      id: pending!.id,
      subscriptionId: d.subs.get(alice)!.id,
      chain: 'DEVNET',
      watchedAddress: alice,
      confirmations: 0,
    });

    await d.mine();
    const bodies = await d.receivedAtLeast(hash, 2);
    const mined = bodies.find((b) => b.mempool === false)!;
    expect(mined).toEqual({
      ...pending,
      id: mined.id,
      blockNumber: await blockOf(hash),
      mempool: false,
      confirmations: 1,
    });
  });

  test('a contract creation carrying value: the would-be contract as recipient, the same once mined', async () => {
    const { alice } = who();
    const { abi, bytecode } = artifact('Sink');
    const nonce = await d.chain.getTransactionCount({ address: alice, blockTag: 'pending' });
    const hash = await d.wallets[1]!.deployContract({
      abi,
      bytecode,
      value: parseEther('0.5'),
      account: d.wallets[1]!.account!,
      chain: null,
    });
    // CREATE: the address follows from the sender and its nonce alone.
    const contract = getContractAddress({ from: alice, nonce: BigInt(nonce) });
    const [pending] = await d.receivedAtLeast(hash, 1);
    await stillPending(hash);
    expect(pending).toEqual({
      address: alice,
      txId: hash,
      type: 'native',
      asset: 'ETH',
      amount: '-0.5',
      mempool: true,
      counterAddress: contract,
      id: pending!.id,
      subscriptionId: d.subs.get(alice)!.id,
      chain: 'DEVNET',
      watchedAddress: alice,
      confirmations: 0,
    });

    await d.mine();
    const receipt = await d.chain.getTransactionReceipt({ hash });
    expect(receipt.contractAddress && getAddress(receipt.contractAddress)).toBe(contract);
    const bodies = await d.receivedAtLeast(hash, 2);
    expect(bodies).toHaveLength(2);
    const mined = bodies.find((b) => b.mempool === false)!;
    expect(mined).toEqual({
      ...pending,
      id: mined.id,
      blockNumber: Number(receipt.blockNumber),
      mempool: false,
      confirmations: 1,
    });
  });
});
