import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import {
  type Abi,
  createPublicClient,
  createWalletClient,
  getAddress,
  type Hex,
  http,
  type PublicClient,
  parseEther,
  type WalletClient,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

const artifacts = JSON.parse(
  fs.readFileSync(new URL('../fixtures/contracts/artifacts.json', import.meta.url), 'utf8'),
) as Record<string, { abi: Abi; bytecode: Hex }>;

interface Created {
  id: string;
  secret: string;
  callbackToken: string;
}

type Body = Record<string, unknown>;

describe.each(backends)('watching an EVM chain (anvil) on %s', (backend) => {
  let anvil: Anvil;
  let t: TestApp;
  let receiver: Receiver;
  let chain: PublicClient;
  let configDir: string;
  const wallets: WalletClient[] = [];
  const addresses: Hex[] = [];
  const subs = new Map<Hex, Created>();

  /** Every notification received so far for `txHash`, verified with its subscription's secret. */
  function received(txHash: Hex): Body[] {
    return receiver.requests
      .map((r) => ({ r, body: JSON.parse(r.body) as Body }))
      .filter(({ body }) => body.txId === txHash)
      .map(({ r, body }) => {
        const sub = [...subs.values()].find((s) => s.id === body.subscriptionId);
        expect(sub, `a subscription for ${String(body.subscriptionId)}`).toBeDefined();
        expect(r.headers.authorization).toBe(`Bearer ${sub!.callbackToken}`);
        new Webhook(sub!.secret).verify(r.body, {
          'webhook-id': r.headers['webhook-id'] as string,
          'webhook-timestamp': r.headers['webhook-timestamp'] as string,
          'webhook-signature': r.headers['webhook-signature'] as string,
        });
        expect(body.id).toBe(r.headers['webhook-id']);
        return body;
      });
  }

  async function receivedAtLeast(txHash: Hex, count: number): Promise<Body[]> {
    return waitFor(() => {
      const bodies = received(txHash);
      return bodies.length >= count ? bodies : undefined;
    }, `${count} notifications for ${txHash}`);
  }

  /** Resolves once the follower has processed `height`. */
  async function processed(height: bigint): Promise<void> {
    await waitFor(async () => {
      const ready = await t.request('GET', '/readyz', { token: null });
      const devnet = (ready.body as { networks: { network: string; height: number | null }[] }).networks.find(
        (n) => n.network === 'DEVNET',
      );
      return devnet?.height !== undefined && devnet.height !== null && devnet.height >= Number(height)
        ? true
        : undefined;
    }, `block ${height} processed`);
  }

  async function send(from: number, to: Hex, value: bigint): Promise<{ hash: Hex; block: bigint }> {
    const hash = await wallets[from]!.sendTransaction({
      to,
      value,
      account: wallets[from]!.account!,
      chain: null,
    });
    const receipt = await chain.waitForTransactionReceipt({ hash });
    return { hash, block: receipt.blockNumber };
  }

  async function deploy(name: string): Promise<Hex> {
    const { abi, bytecode } = artifacts[name]!;
    const hash = await wallets[0]!.deployContract({
      abi,
      bytecode,
      account: wallets[0]!.account!,
      chain: null,
    });
    return getAddress((await chain.waitForTransactionReceipt({ hash })).contractAddress!);
  }

  async function call(from: number, address: Hex, name: string, fn: string, args: unknown[], gas?: bigint) {
    const hash = await wallets[from]!.writeContract({
      address,
      abi: artifacts[name]!.abi,
      functionName: fn,
      args,
      account: wallets[from]!.account!,
      chain: null,
      ...(gas ? { gas } : {}),
    });
    const receipt = await chain.waitForTransactionReceipt({ hash });
    return { hash, block: receipt.blockNumber, status: receipt.status };
  }

  async function subscribe(address: Hex, extra: Record<string, unknown> = {}): Promise<Created> {
    const res = await t.request('POST', '/api/v1/subscription', {
      body: { type: 'ADDRESS_TRANSACTION', attr: { address, chain: 'DEVNET', url: receiver.url }, ...extra },
    });
    expect(res.status, res.text).toBe(201);
    return res.body as Created;
  }

  beforeAll(async () => {
    anvil = await startAnvil();
    configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-devnet-'));
    const configFile = path.join(configDir, 'ledgerhook.json');
    fs.writeFileSync(
      configFile,
      JSON.stringify({
        networks: { DEVNET: { family: 'evm', chainId: anvil.chainId, symbol: 'ETH', rpc: [anvil.rpcUrl] } },
      }),
    );
    receiver = await startReceiver();
    t = await startTestApp(
      backend,
      { LEDGERHOOK_CONFIG: configFile, LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms' },
      { alwaysFollow: ['DEVNET'] },
    );
    // viem polls for receipts every 4 s by default; anvil mines at once.
    chain = createPublicClient({ transport: http(anvil.rpcUrl), pollingInterval: 50 });
    for (const account of anvil.accounts.slice(0, 5)) {
      wallets.push(
        createWalletClient({
          account: privateKeyToAccount(account.privateKey),
          transport: http(anvil.rpcUrl),
        }),
      );
      addresses.push(getAddress(account.address));
    }
    // alice (1) and bob (2) are watched, each by a subscription of its own; carol (3) is not.
    subs.set(addresses[1]!, await subscribe(addresses[1]!));
    subs.set(addresses[2]!, await subscribe(addresses[2]!));
    await processed(await chain.getBlockNumber());
  });

  afterAll(async () => {
    await t?.close();
    await receiver?.close();
    await anvil?.stop();
    if (configDir) fs.rmSync(configDir, { recursive: true, force: true });
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
    const abi = artifacts.TestMulti!.abi;
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
