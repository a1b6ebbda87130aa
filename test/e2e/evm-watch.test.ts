import { type Hex, parseEther } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
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
  const received = (txHash: Hex) => d.received(txHash);
  const receivedAtLeast = (txHash: Hex, count: number) => d.receivedAtLeast(txHash, count);
  const processed = (height: bigint) => d.processed(height);
  const send = (from: number, to: Hex, value: bigint) => d.send(from, to, value);
  const deploy = (name: Parameters<Devnet['deploy']>[0]) => d.deploy(name);
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
          return b.amount === '-3' && b.txId !== first.hash && b.reorg === undefined;
        })
          ? true
          : undefined,
      'the new branch notified',
    );
  });
});
