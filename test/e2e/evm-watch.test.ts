import { concat, type Hex, numberToHex, pad, parseEther } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { TRANSFER_TOPIC } from '../../src/chains/evm/activity.js';
import { artifact } from '../helpers/anvil.js';
import { type Body, type Devnet, startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';

describe.each(backends)('watching an EVM chain (anvil) on %s', (backend) => {
  let d: Devnet;
  let addresses: Hex[];
  let receiver: Devnet['receiver'];
  let chain: Devnet['chain'];
  let subs: Devnet['subs'];
  // Subscriptions here take the EVM default, mempool on, so a transfer may also be announced
  // while pending, or not, as the race with anvil's instant mining goes. What these tests assert
  // is what blocks notify (and withdraw), so the pending announcements are left out.
  const received = (txHash: Hex) => d.received(txHash).filter((b) => b.mempool !== true);
  const receivedAtLeast = (txHash: Hex, count: number) =>
    waitFor(() => {
      const bodies = received(txHash);
      return bodies.length >= count ? bodies : undefined;
    }, `${count} notifications from blocks for ${txHash}`);
  const processed = (height: bigint) => d.processed(height);
  const send = (from: number, to: Hex, value: bigint) => d.send(from, to, value);
  const deploy = (...args: Parameters<Devnet['deploy']>) => d.deploy(...args);
  const call = (...args: Parameters<Devnet['call']>) => d.call(...args);
  const subscribe = (address: Hex, extra?: Record<string, unknown>) => d.subscribe(address, extra);

  beforeAll(async () => {
    d = await startDevnet(backend);
    ({ addresses, receiver, chain, subs } = d);
    // alice (1) and bob (2) are watched, each by a subscription of its own; carol (3) is not.
    subs.set(addresses[1]!, await subscribe(addresses[1]!));
    subs.set(addresses[2]!, await subscribe(addresses[2]!));
    await processed(await chain.getBlockNumber());
  });

  afterAll(async () => {
    await d?.close();
  });

  test('a native transfer between two watched addresses: one notification per subscription, exact bodies', async () => {
    const [alice, bob] = [addresses[1]!, addresses[2]!];
    const { hash, block } = await send(1, bob, parseEther('1.5'));
    const bodies = await receivedAtLeast(hash, 2);
    const base = {
      address: alice,
      txId: hash,
      type: 'native',
      blockNumber: Number(block),
      asset: 'ETH',
      amount: '-1.5',
      mempool: false,
      counterAddress: bob,
      chain: 'DEVNET',
      confirmations: 1,
    };
    const byWatched = new Map(bodies.map((b) => [b.watchedAddress, b]));
    for (const watched of [alice, bob]) {
      const body = byWatched.get(watched)!;
      expect(body).toEqual({
        ...base,
        id: body.id,
        subscriptionId: subs.get(watched)!.id,
        watchedAddress: watched,
      });
    }
    expect(bodies).toHaveLength(2);
  });

  test('ERC-20: decimals applied, the token contract as asset; an unwatched recipient gets nothing', async () => {
    const token = await deploy('TestToken');
    const minted = await call(0, token, 'TestToken', 'mint', [addresses[1]!, 50_000_000n]);
    const [mint] = await receivedAtLeast(minted.hash, 1);
    expect(mint).toMatchObject({
      address: '0x0000000000000000000000000000000000000000',
      type: 'token',
      asset: token,
      amount: '-50',
      counterAddress: addresses[1],
      watchedAddress: addresses[1],
    });

    const sent = await call(1, token, 'TestToken', 'transfer', [addresses[3]!, 12_500_000n]);
    const [body] = await receivedAtLeast(sent.hash, 1);
    expect(body).toEqual({
      address: addresses[1],
      txId: sent.hash,
      type: 'token',
      blockNumber: Number(sent.block),
      asset: token,
      amount: '-12.5',
      mempool: false,
      counterAddress: addresses[3],
      id: body!.id,
      subscriptionId: subs.get(addresses[1]!)!.id,
      chain: 'DEVNET',
      watchedAddress: addresses[1],
      confirmations: 1,
    });
  });

  test('ERC-721 and ERC-1155 (single and batch): token ids, counts, one notification per id', async () => {
    const nft = await deploy('TestNFT');
    await call(0, nft, 'TestNFT', 'mint', [addresses[1]!, 7n]);
    const moved = await call(1, nft, 'TestNFT', 'transferFrom', [addresses[1]!, addresses[2]!, 7n]);
    const nftBodies = await receivedAtLeast(moved.hash, 2);
    for (const body of nftBodies) {
      expect(body).toMatchObject({
        type: 'token',
        asset: nft,
        tokenId: '7',
        amount: '-1',
        address: addresses[1],
      });
    }

    const multi = await deploy('TestMulti');
    const abi = artifact('TestMulti').abi;
    const fns = abi.filter((f) => f.type === 'function').map((f) => (f as { name: string }).name);
    expect(fns).toEqual(expect.arrayContaining(['mint', 'safeTransferFrom', 'safeBatchTransferFrom']));
    await call(0, multi, 'TestMulti', 'mint', [addresses[1]!, 1n, 100n]);
    await call(0, multi, 'TestMulti', 'mint', [addresses[1]!, 2n, 100n]);
    await call(0, multi, 'TestMulti', 'mint', [addresses[1]!, 3n, 100n]);
    const single = await call(1, multi, 'TestMulti', 'safeTransferFrom', [
      addresses[1]!,
      addresses[3]!,
      1n,
      5n,
      '0x',
    ]);
    const [one] = await receivedAtLeast(single.hash, 1);
    expect(one).toMatchObject({ asset: multi, tokenId: '1', amount: '-5', counterAddress: addresses[3] });

    const batch = await call(1, multi, 'TestMulti', 'safeBatchTransferFrom', [
      addresses[1]!,
      addresses[2]!,
      [1n, 2n, 3n],
      [10n, 20n, 30n],
      '0x',
    ]);
    const bodies = await receivedAtLeast(batch.hash, 6);
    expect(bodies).toHaveLength(6);
    for (const watched of [addresses[1], addresses[2]]) {
      const mine = bodies.filter((b) => b.watchedAddress === watched);
      expect(mine.map((b) => [b.tokenId, b.amount]).sort()).toEqual([
        ['1', '-10'],
        ['2', '-20'],
        ['3', '-30'],
      ]);
      expect(new Set(mine.map((b) => b.id)).size).toBe(3);
    }
  });

  test('an ERC-20 Transfer whose data carries extra words: notified with its standard amount', async () => {
    const alice = addresses[1]!;
    // RawLogs emits the log as given and has 6 decimals, like a token that appends data to Transfer.
    const raw = await deploy('RawLogs');
    const topics = [TRANSFER_TOPIC, pad(alice), pad(addresses[3]!)];
    const data = concat([numberToHex(2_500_000n, { size: 32 }), numberToHex(0xdeadn, { size: 32 })]);
    const sent = await call(0, raw, 'RawLogs', 'emitLog', [topics, data]);
    const [body] = await receivedAtLeast(sent.hash, 1);
    expect(body).toEqual({
      address: alice,
      txId: sent.hash,
      type: 'token',
      blockNumber: Number(sent.block),
      asset: raw,
      amount: '-2.5',
      mempool: false,
      counterAddress: addresses[3],
      id: body!.id,
      subscriptionId: subs.get(alice)!.id,
      chain: 'DEVNET',
      watchedAddress: alice,
      confirmations: 1,
    });
  });

  test('a token whose decimals() answers nonsense: raw units, marked decimalsUnknown', async () => {
    const alice = addresses[1]!;
    // Mode 2: decimals() answers 300, which no uint8 holds.
    const odd = await deploy('OddToken', [2n]);
    const minted = await call(0, odd, 'OddToken', 'mint', [alice, 1_234_567n]);
    const [body] = await receivedAtLeast(minted.hash, 1);
    expect(body).toEqual({
      address: '0x0000000000000000000000000000000000000000',
      txId: minted.hash,
      type: 'token',
      blockNumber: Number(minted.block),
      asset: odd,
      amount: '-1234567',
      decimalsUnknown: true,
      mempool: false,
      counterAddress: alice,
      id: body!.id,
      subscriptionId: subs.get(alice)!.id,
      chain: 'DEVNET',
      watchedAddress: alice,
      confirmations: 1,
    });
  });

  test('a reverted transaction notifies nothing', async () => {
    const token = await deploy('TestToken');
    await call(0, token, 'TestToken', 'mint', [addresses[1]!, 1_000_000n]);
    const reverted = await call(
      1,
      token,
      'TestToken',
      'transferThenRevert',
      [addresses[2]!, 1_000n],
      200_000n,
    );
    expect(reverted.status).toBe('reverted');
    // A later transfer's notification arriving shows the reverted block was processed.
    const later = await send(1, addresses[2]!, 1n);
    await receivedAtLeast(later.hash, 2);
    expect(received(reverted.hash)).toEqual([]);
  });

  test('confirmations: 3 notifies only once the block is three deep', async () => {
    const dave = addresses[4]!;
    subs.set(dave, await subscribe(dave, { confirmations: 3 }));
    const { hash, block } = await send(0, dave, parseEther('0.25'));
    await processed(block);
    await chain.request({ method: 'evm_mine' as never, params: [] as never });
    await processed(block + 1n);
    expect(received(hash)).toEqual([]);
    await chain.request({ method: 'evm_mine' as never, params: [] as never });
    const [body] = await receivedAtLeast(hash, 1);
    expect(body).toMatchObject({
      blockNumber: Number(block),
      confirmations: 3,
      watchedAddress: dave,
      amount: '-0.25',
    });
  });

  test('a reorg withdraws what the orphaned block announced and notifies the new branch', async () => {
    const [alice, bob] = [addresses[1]!, addresses[2]!];
    const first = await send(1, bob, parseEther('2'));
    const announced = await receivedAtLeast(first.hash, 2);

    // Replace the last block: the transfer is gone, another one takes its place.
    await chain.request({
      method: 'anvil_reorg' as never,
      params: [1, [[{ from: alice, to: bob, value: `0x${parseEther('3').toString(16)}` }, 0]]] as never,
    });
    await chain.request({ method: 'evm_mine' as never, params: [] as never });

    const withdrawn = await receivedAtLeast(first.hash, 4);
    const reorgs = withdrawn.filter((b) => b.reorg === true);
    expect(reorgs).toHaveLength(2);
    for (const original of announced) {
      const withdrawal = reorgs.find((b) => b.subscriptionId === original.subscriptionId)!;
      expect(withdrawal).toEqual({ ...original, id: withdrawal.id, reorg: true });
      expect(withdrawal.id).not.toBe(original.id);
    }
    // The new branch's transfer is notified as usual.
    await waitFor(
      () =>
        receiver.requests.some((r) => {
          const b = JSON.parse(r.body) as Body;
          return b.amount === '-3' && b.txId !== first.hash && b.reorg === undefined && b.mempool === false;
        })
          ? true
          : undefined,
      'the new branch notified',
    );
  });
  test('a reorg that replaces the tip at the same height is noticed at once, without a taller block', async () => {
    const [alice, bob] = [addresses[1]!, addresses[2]!];
    const first = await send(1, bob, parseEther('4'));
    const second = await send(2, alice, parseEther('5'));
    const announced = [...(await receivedAtLeast(first.hash, 2)), ...(await receivedAtLeast(second.hash, 2))];
    const height = await chain.getBlockNumber({ cacheTime: 0 });
    expect(second.block).toBe(height);
    expect(first.block).toBe(height - 1n);
    const tip = await chain.getBlock({ blockNumber: height });

    // Replace both blocks by two others, the first carrying another transfer; no block follows.
    await chain.request({
      method: 'anvil_reorg' as never,
      params: [2, [[{ from: alice, to: bob, value: `0x${parseEther('6').toString(16)}` }, 0]]] as never,
    });
    expect(await chain.getBlockNumber({ cacheTime: 0 })).toBe(height);
    expect((await chain.getBlock({ blockNumber: height })).hash).not.toBe(tip.hash);

    const withdrawals = [
      ...(await receivedAtLeast(first.hash, 4)),
      ...(await receivedAtLeast(second.hash, 4)),
    ].filter((b) => b.reorg === true);
    expect(withdrawals).toHaveLength(4);
    for (const original of announced) {
      const withdrawal = withdrawals.find(
        (b) => b.txId === original.txId && b.subscriptionId === original.subscriptionId,
      )!;
      expect(withdrawal).toEqual({ ...original, id: withdrawal.id, reorg: true });
    }
    // The new branch's transfer is notified, in its block at the same heights.
    const replacement = await waitFor(() => {
      const bodies = receiver.requests
        .map((r) => JSON.parse(r.body) as Body)
        .filter((b) => b.amount === '-6' && b.reorg === undefined && b.mempool === false);
      return bodies.length >= 2 ? bodies : undefined;
    }, 'the new branch notified');
    const { transactions } = await chain.getBlock({ blockNumber: height - 1n });
    for (const body of replacement) {
      expect(body).toMatchObject({
        address: alice,
        counterAddress: bob,
        blockNumber: Number(height - 1n),
        txId: transactions[0],
      });
    }
    // Still no taller block: the follower walked back on seeing another hash at the same height.
    expect(await chain.getBlockNumber({ cacheTime: 0 })).toBe(height);
  });
  test('a reorg keeps a transfer that is on both branches at the same height: neither withdrawn nor notified again', async () => {
    const [alice, bob] = [addresses[1]!, addresses[2]!];
    const stays = await send(1, bob, parseEther('10'));
    const leaves = await send(2, alice, parseEther('11'));
    expect(leaves.block).toBe(stays.block + 1n);
    await receivedAtLeast(stays.hash, 2);
    await receivedAtLeast(leaves.hash, 2);
    const raw = (await chain.request({
      method: 'eth_getRawTransactionByHash' as never,
      params: [stays.hash] as never,
    })) as Hex;

    // Both blocks replaced: the first carries the same signed transaction again, the second
    // another transfer by bob with the nonce of the one that leaves the chain (a double spend).
    await chain.request({
      method: 'anvil_reorg' as never,
      params: [
        2,
        [
          [raw, 0],
          [{ from: bob, to: alice, value: `0x${parseEther('12').toString(16)}` }, 1],
        ],
      ] as never,
    });
    expect((await chain.getTransactionReceipt({ hash: stays.hash })).blockNumber).toBe(stays.block);
    expect(await chain.getBlockNumber({ cacheTime: 0 })).toBe(leaves.block);

    const withdrawals = (await receivedAtLeast(leaves.hash, 4)).filter((b) => b.reorg === true);
    expect(withdrawals).toHaveLength(2);
    const replacement = await waitFor(() => {
      const bodies = receiver.requests
        .map((r) => JSON.parse(r.body) as Body)
        .filter((b) => b.amount === '-12' && b.reorg === undefined && b.mempool === false);
      return bodies.length >= 2 ? bodies : undefined;
    }, 'the double spend notified');
    for (const body of replacement) {
      expect(body).toMatchObject({ address: bob, counterAddress: alice, blockNumber: Number(leaves.block) });
    }
    // The withdrawals and the double spend were written in the reorganisation's transaction: had
    // the transfer on both branches been withdrawn or notified again, the log would show it now.
    for (const watched of [alice, bob]) {
      const log = await d.logged(subs.get(watched)!.id);
      // Pending announcements are left out, as everywhere in this file (the mempool race).
      const ofStays = log.filter((n) => n.payload.txId === stays.hash && n.payload.mempool !== true);
      expect(ofStays).toHaveLength(1);
      expect(ofStays[0]!.payload.reorg).toBeUndefined();
      expect(ofStays[0]!.payload.blockNumber).toBe(Number(stays.block));
      expect(log.filter((n) => n.payload.txId === leaves.hash && n.payload.reorg === true)).toHaveLength(1);
    }
    expect(received(stays.hash)).toHaveLength(2);
  });
  test('a reorg to a lower head with another hash: the node has no block at our height, we walk back at once', async () => {
    const [alice, bob] = [addresses[1]!, addresses[2]!];
    const first = await send(1, bob, parseEther('7'));
    const second = await send(1, bob, parseEther('8'));
    const announced = [...(await receivedAtLeast(first.hash, 2)), ...(await receivedAtLeast(second.hash, 2))];
    await processed(second.block);

    // The node drops both blocks and builds one other in their place: its head is below our cursor.
    await chain.request({ method: 'anvil_rollback' as never, params: [2] as never });
    const replacement = await send(2, alice, parseEther('9'));
    expect(replacement.block).toBe(first.block);
    expect(await chain.getBlockNumber({ cacheTime: 0 })).toBe(second.block - 1n);

    const withdrawals = [
      ...(await receivedAtLeast(first.hash, 4)),
      ...(await receivedAtLeast(second.hash, 4)),
    ].filter((b) => b.reorg === true);
    expect(withdrawals).toHaveLength(4);
    for (const original of announced) {
      const withdrawal = withdrawals.find(
        (b) => b.txId === original.txId && b.subscriptionId === original.subscriptionId,
      )!;
      expect(withdrawal).toEqual({ ...original, id: withdrawal.id, reorg: true });
    }
    const bodies = await receivedAtLeast(replacement.hash, 2);
    for (const body of bodies) {
      expect(body).toMatchObject({
        address: bob,
        counterAddress: alice,
        amount: '-9',
        blockNumber: Number(first.block),
      });
    }
    expect(await chain.getBlockNumber({ cacheTime: 0 })).toBe(second.block - 1n);
  });
});
