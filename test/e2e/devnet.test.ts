import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Webhook } from 'standardwebhooks';
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  type Hex,
  http,
  parseEther,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, describe, expect, test } from 'vitest';
import { createTestEnvironment, type TestEnvironment } from '../helpers/env.js';
import { type ServiceProcess, startServiceProcess, waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

const environments: TestEnvironment[] = [];
const services: ServiceProcess[] = [];
const receivers: Receiver[] = [];
afterAll(async () => {
  for (const s of services) await s.stop('SIGKILL');
  for (const r of receivers) await r.close();
  for (const e of environments) await e.cleanup();
});

async function rpc(url: string, method: string, params: unknown[] = []): Promise<unknown> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    signal: AbortSignal.timeout(2_000),
  });
  return ((await response.json()) as { result: unknown }).result;
}

async function answers(url: string): Promise<boolean> {
  try {
    await rpc(url, 'eth_chainId');
    return true;
  } catch {
    return false;
  }
}

describe('ledgerhook serve --devnet (a real process, its anvil and a receiver on loopback)', () => {
  test('prints a working RPC and funded keys; loopback callbacks are allowed; a native transfer is notified, signed; SIGTERM stops the service and its anvil', async () => {
    const environment = await createTestEnvironment('pglite');
    environments.push(environment);
    const service = await startServiceProcess(environment.env, { args: ['serve', '--devnet'] });
    services.push(service);
    const token = service.printedToken!;
    expect(token).toMatch(/^lh_/);

    // What --devnet prints: the RPC URL and funded keys.
    const out = service.stdout();
    const rpcUrl = /RPC (http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1];
    expect(rpcUrl, out).toBeDefined();
    expect(await rpc(rpcUrl!, 'eth_chainId')).toBe('0x7a69'); // 31337
    const printed = [...out.matchAll(/\((\d+)\) (0x[0-9a-fA-F]{40}) {2}private key (0x[0-9a-f]{64})/g)].map(
      (m) => ({ address: m[2] as Hex, key: m[3] as Hex }),
    );
    expect(printed.length).toBeGreaterThanOrEqual(3);
    const chain = defineChain({
      id: 31337,
      name: 'devnet',
      nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
      rpcUrls: { default: { http: [rpcUrl!] } },
    });
    const publicClient = createPublicClient({
      chain,
      transport: http(rpcUrl),
      pollingInterval: 50,
      cacheTime: 0,
    });
    for (const { address, key } of printed) {
      expect(privateKeyToAccount(key).address).toBe(address);
      expect(await publicClient.getBalance({ address })).toBe(parseEther('10000'));
    }

    // A loopback callback is accepted although LEDGERHOOK_ALLOW_CIDRS is not set.
    const receiver = await startReceiver();
    receivers.push(receiver);
    const sender = getAddress(printed[0]!.address);
    const watched = getAddress(printed[1]!.address);
    const response = await fetch(`${service.url}/api/v1/subscription`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        type: 'ADDRESS_TRANSACTION',
        attr: { address: watched, chain: 'DEVNET', url: receiver.url },
      }),
    });
    expect(response.status).toBe(201);
    const subscription = (await response.json()) as { id: string; secret: string; callbackToken: string };

    // The devnet is followed from the start (shown in /readyz); wait until it has reached the head.
    const head = Number(await publicClient.getBlockNumber());
    await waitFor(async () => {
      const ready = (await (await fetch(`${service.url}/readyz`)).json()) as {
        networks: { network: string; height: number | null }[];
      };
      const devnet = ready.networks.find((n) => n.network === 'DEVNET');
      return devnet?.height != null && devnet.height >= head ? true : undefined;
    }, 'the DEVNET follower at the head');

    // A native transfer to the watched address: one signed notification at the receiver.
    const wallet = createWalletClient({
      account: privateKeyToAccount(printed[0]!.key),
      chain,
      transport: http(rpcUrl),
    });
    const txId = await wallet.sendTransaction({ to: watched, value: parseEther('1.25') });
    const receipt = await publicClient.waitForTransactionReceipt({ hash: txId });
    const request = await waitFor(
      () =>
        receiver.requests.find((r) => {
          const body = JSON.parse(r.body) as Record<string, unknown>;
          return body.txId === txId && body.mempool !== true;
        }),
      'the notification of the transfer',
      20_000,
    );
    expect(request.headers.authorization).toBe(`Bearer ${subscription.callbackToken}`);
    const verified = new Webhook(subscription.secret).verify(request.body, {
      'webhook-id': request.headers['webhook-id'] as string,
      'webhook-timestamp': request.headers['webhook-timestamp'] as string,
      'webhook-signature': request.headers['webhook-signature'] as string,
    });
    const body = JSON.parse(request.body) as Record<string, unknown>;
    expect(verified).toEqual(body);
    expect(body).toMatchObject({
      id: request.headers['webhook-id'],
      subscriptionId: subscription.id,
      chain: 'DEVNET',
      type: 'native',
      asset: 'ETH',
      amount: '-1.25',
      address: sender,
      counterAddress: watched,
      watchedAddress: watched,
      txId,
      blockNumber: Number(receipt.blockNumber),
      confirmations: 1,
    });
    expect(body.mempool ?? false).toBe(false);

    // Registries are anchored on the devnet without any configuration, by the account printed.
    const anchorer = /anchored on DEVNET every 2s by (0x[0-9a-fA-F]{40})/.exec(out)?.[1];
    expect(anchorer, out).toBeDefined();
    const created = await fetch(`${service.url}/api/v1/registry/create`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        title: 'Devnet record',
        metadata: [],
        folder_id: 'devnet',
        template: 'STORAGE',
      }),
    });
    expect(created.status).toBe(201);
    const registryId = ((await created.json()) as { data: { id: string } }).data.id;
    const anchor = await waitFor(
      async () => {
        const got = await fetch(`${service.url}/api/v1/registry/${registryId}`, {
          headers: { authorization: `Bearer ${token}` },
        });
        const data = ((await got.json()) as { data: { anchor: { status: string; txId: string } | null } })
          .data;
        return data.anchor?.status === 'anchored' ? data.anchor : undefined;
      },
      'the registry anchored on the devnet',
      20_000,
    );
    const anchorTx = await publicClient.getTransaction({ hash: anchor.txId as Hex });
    expect(getAddress(anchorTx.from)).toBe(getAddress(anchorer!));
    expect(anchorTx.input.slice(0, 10)).toBe('0x4c484b31');

    // SIGTERM stops the service gracefully, and its anvil with it.
    expect(await service.stop('SIGTERM')).toBe(0);
    expect(await answers(rpcUrl!)).toBe(false);
  }, 60_000);
});

describe('npm run demo', () => {
  test('runs the whole loop to completion and prints the three notifications', async () => {
    const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
      (resolve, reject) => {
        const child = spawn('npm', ['run', '--silent', 'demo'], {
          cwd: repoRoot,
          env: process.env,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => {
          stdout += c.toString();
        });
        child.stderr.on('data', (c: Buffer) => {
          stderr += c.toString();
        });
        child.on('error', reject);
        child.on('exit', (code) => resolve({ code, stdout, stderr }));
      },
    );
    const output = `${result.stdout}\n${result.stderr}`;
    expect(result.code, output).toBe(0);

    const { stdout } = result;
    // Three transfers notified (more notifications if the mempool saw them pending), each verified
    // and shown with its body.
    const shown = stdout.match(/◀ notification #\d+/g) ?? [];
    expect(shown.length).toBeGreaterThanOrEqual(3);
    expect(stdout.match(/signature ok/g)).toHaveLength(shown.length);
    expect(stdout).not.toContain('INVALID');
    expect(stdout).toMatch(/"type": +"native"[\s\S]*"asset": +"ETH"[\s\S]*"amount": +"-1\.5"/);
    expect(stdout).toMatch(/"type": +"token"[\s\S]*"amount": +"-25"/);
    expect(stdout).toMatch(/"amount": +"-1",\n +"tokenId": +"1"/);
    expect(stdout).toMatch(/✓ native transfer/);
    expect(stdout).toMatch(/✓ ERC-20 transfer/);
    expect(stdout).toMatch(/✓ NFT transfer/);
    expect(stdout).toContain(`${shown.length} notifications received`);
    expect(stdout).toContain('every signature verified');
    // No JSON log lines from the service.
    expect(stdout).not.toMatch(/"level":\d+/);
    // Everything stopped and removed.
    expect(stdout).toContain('service stopped on SIGTERM (exit 0); devnet stopped');
    const dataDir = /removed (\S+ledgerhook-demo-\S+)/.exec(stdout)?.[1];
    expect(dataDir).toBeDefined();
    expect(fs.existsSync(dataDir!)).toBe(false);
    // Longer than the demo's own deadlines (a minute to start, 20 s a step), so a demo that gets
    // stuck fails with its own message rather than this test's timeout.
  }, 180_000);
});
