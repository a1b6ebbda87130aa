import net from 'node:net';
import { createPublicClient, createTestClient, http, parseEther, webSocket } from 'viem';
import { afterEach, describe, expect, test } from 'vitest';
import { anvilChain, anvilClients, mined } from '../../../test/helpers/anvil.js';
import { waitFor } from '../../../test/helpers/process.js';
import { type Anvil, devAccounts, resolveAnvilBinary, startAnvil } from './anvil.js';

const started: Anvil[] = [];
async function start(options?: Parameters<typeof startAnvil>[0]): Promise<Anvil> {
  const anvil = await startAnvil(options);
  started.push(anvil);
  return anvil;
}

afterEach(async () => {
  await Promise.all(started.splice(0).map((anvil) => anvil.stop()));
});

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function answers(url: string): Promise<boolean> {
  try {
    await fetch(url, { method: 'POST', body: '{}', signal: AbortSignal.timeout(1_000) });
    return true;
  } catch {
    return false;
  }
}

describe('startAnvil', () => {
  test('finds the binary of the platform package', () => {
    expect(resolveAnvilBinary()).toMatch(/@foundry-rs\/anvil-linux-amd64\/bin\/anvil$/);
  });

  test('derives the well-known dev keys from the test mnemonic', () => {
    expect(devAccounts(3)).toEqual([
      {
        address: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
        privateKey: '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
      },
      {
        address: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
        privateKey: '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
      },
      {
        address: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
        privateKey: '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a',
      },
    ]);
  });

  test('runs two chains at once on ports of their own, and stops each for good', async () => {
    const [one, two] = await Promise.all([start(), start()]);
    expect(one.rpcUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(one.rpcUrl).not.toBe(two.rpcUrl);
    expect(one.wsUrl).toBe(one.rpcUrl.replace('http:', 'ws:'));
    await one.stop();
    expect(await answers(one.rpcUrl)).toBe(false);
    expect(await answers(two.rpcUrl)).toBe(true);
    await one.stop(); // again: nothing to do
  });

  test('listens on the port asked for, with the chain id asked for', async () => {
    const port = await freePort();
    const anvil = await start({ port, chainId: 1337 });
    expect(anvil.rpcUrl).toBe(`http://127.0.0.1:${port}`);
    expect(anvil.chainId).toBe(1337);
    const client = createPublicClient({ transport: http(anvil.rpcUrl) });
    expect(await client.getChainId()).toBe(1337);
  });

  test('says why when anvil cannot start', async () => {
    const first = await start();
    const port = Number(new URL(first.rpcUrl).port);
    await expect(startAnvil({ port })).rejects.toThrow(/exited before serving/);
    await expect(startAnvil({ noMining: true, blockTime: 1 })).rejects.toThrow(/cannot be combined/);
  });

  test('mines only on demand with noMining', async () => {
    const anvil = await start({ noMining: true });
    const { chain, publicClient, wallets } = anvilClients(anvil);
    const hash = await wallets[0]!.sendTransaction({
      to: anvil.accounts[1]!.address,
      value: parseEther('1'),
    });
    expect(await publicClient.getBlockNumber()).toBe(0n);
    await createTestClient({ mode: 'anvil', chain, transport: http(anvil.rpcUrl) }).mine({ blocks: 1 });
    expect((await mined(publicClient, hash)).blockNumber).toBe(1n);
  });

  test('mines on an interval with blockTime, and announces heads over WebSocket', async () => {
    const anvil = await start({ blockTime: 1 });
    const client = createPublicClient({ chain: anvilChain(anvil), transport: webSocket(anvil.wsUrl) });
    const heads: bigint[] = [];
    const unwatch = client.watchBlockNumber({ onBlockNumber: (n) => heads.push(n), emitOnBegin: false });
    try {
      await waitFor(() => (heads.length >= 2 ? heads : undefined), 'two new heads', 10_000);
      expect(heads[1]).toBe(heads[0]! + 1n);
    } finally {
      unwatch();
      await client.transport.getRpcClient().then((rpc) => rpc.close());
    }
  });
});
