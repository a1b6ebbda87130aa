/**
 * `ledgerhook traces fill` (issue 44): trace gaps filled on demand, through the running service's
 * admin endpoint while it holds the embedded database, and on the data directory itself once it
 * has stopped; from the network's node or another one (`--rpc`, an archive node). A gap the node
 * still cannot trace is listed with why (exit 1); bad input is exit 2 naming it.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type Hex, parseEther } from 'viem';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import {
  anvilClients,
  artifact,
  deploy,
  mined,
  type RpcProxy,
  startRpcProxy,
  writeDevnetConfig,
} from '../helpers/anvil.js';
import { createTestEnvironment, type TestEnvironment } from '../helpers/env.js';
import {
  type CliResult,
  meaningfulLines,
  runCli,
  type ServiceProcess,
  startServiceProcess,
  waitFor,
} from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

const TRACE_METHODS = ['debug_traceBlockByNumber', 'trace_block'];
const PRUNED = { code: -32000, message: 'required historical state unavailable (reexec=128)' };

describe('ledgerhook traces fill', () => {
  let anvil: Anvil;
  let proxy: RpcProxy;
  let receiver: Receiver;
  let environment: TestEnvironment;
  let env: Record<string, string>;
  let service: ServiceProcess | undefined;
  let gapBlock: bigint;
  let forwardHash: Hex;
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-traces-fill-'));

  const fill = (args: string[]): Promise<CliResult> => runCli(['traces', 'fill', ...args], env);

  beforeAll(async () => {
    anvil = await startAnvil();
    proxy = await startRpcProxy(anvil.rpcUrl);
    proxy.intercept((request) => (TRACE_METHODS.includes(request.method) ? { error: PRUNED } : undefined));
    receiver = await startReceiver();
    environment = await createTestEnvironment('pglite');
    env = {
      ...environment.env,
      LEDGERHOOK_CONFIG: writeDevnetConfig(path.join(scratch, 'config.json'), anvil.chainId, proxy.url, {
        traces: 'parity',
      }),
      LEDGERHOOK_ALLOW_CIDRS: '127.0.0.0/8',
      LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms',
      LEDGERHOOK_RETRY_SCHEDULE: '100ms,200ms',
    };
    service = await startServiceProcess(env);
    const { publicClient, wallets } = anvilClients(anvil);
    const forwarder = (await deploy(publicClient, wallets[0]!, 'Forwarder')).address;
    const deposit = privateKeyToAddress(generatePrivateKey());
    const created = await fetch(`${service.url}/api/v1/subscription`, {
      method: 'POST',
      headers: { authorization: `Bearer ${service.printedToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        type: 'ADDRESS_TRANSACTION',
        attr: { address: deposit, chain: 'DEVNET', url: receiver.url },
        mempool: false,
      }),
    });
    expect(created.status).toBe(201);
    // The follower is at its head before the transfer: its block is followed, not skipped.
    await waitFor(async () => {
      const ready = (await (await fetch(`${service!.url}/readyz`)).json()) as {
        networks: { height: number | null }[];
      };
      return ready.networks[0]?.height !== null && ready.networks.length > 0 ? true : undefined;
    }, 'the DEVNET follower');
    const receipt = await mined(
      publicClient,
      wallets[1]!.writeContract({
        address: forwarder,
        abi: artifact('Forwarder').abi,
        functionName: 'forward',
        args: [deposit],
        value: parseEther('1'),
      }),
    );
    gapBlock = receipt.blockNumber;
    forwardHash = receipt.transactionHash;
    await waitFor(async () => {
      const ready = (await (await fetch(`${service!.url}/readyz`)).json()) as {
        networks: { traceGaps?: { count: number; last: number | null } }[];
      };
      return ready.networks[0]?.traceGaps?.last === Number(gapBlock) ? true : undefined;
    }, 'the untraceable block recorded as a gap');
  }, 90_000);

  afterAll(async () => {
    await service?.stop('SIGKILL');
    await proxy?.close();
    await receiver?.close();
    await anvil?.stop();
    await environment?.cleanup();
    fs.rmSync(scratch, { recursive: true, force: true });
  });

  test('bad input is exit 2 naming it, before anything is asked', async () => {
    for (const [args, message] of [
      [['--network', 'NOPE'], /--network NOPE is not a configured network/],
      [['--network', 'BTC'], /--network BTC is a bitcoin network/],
      [['--network', 'DEVNET', '--rpc', 'ftp://archive'], /--rpc must be an http\(s\) JSON-RPC URL/],
      [['--rpc', 'http://archive:8545'], /--rpc names a node of one network: give --network too/],
      [['--network', 'DEVNET', '--from', '9', '--to', '3'], /--from 9 is after --to 3/],
      [['--network', 'DEVNET', '--from', 'soon'], /--from must be a block number/],
    ] as const) {
      const result = await fill([...args]);
      expect(result.code, result.stderr).toBe(2);
      expect(meaningfulLines(result.stderr)).toEqual([expect.stringMatching(message)]);
    }
    const bare = await runCli(['traces'], env);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toMatch(/traces needs a command: traces fill/);
  });

  test('through the running service: a node that still cannot trace leaves the gap open, listed with why (exit 1)', async () => {
    const result = await fill(['--network', 'DEVNET']);
    expect(result.code, result.stderr).toBe(1);
    expect(meaningfulLines(result.stdout)).toEqual([
      `DEVNET: trace gaps 0 filled (0 notifications), 1 still open; traces from ${new URL(proxy.url).host}`,
      expect.stringMatching(
        new RegExp(
          `^ {2}block ${gapBlock} \\(0x[0-9a-f]{64}\\): the node no longer has this block's state \\(.*required historical state unavailable`,
        ),
      ),
    ]);
    expect(receiver.requests.filter((r) => r.body.includes(forwardHash))).toEqual([]);
  });

  test('with the service stopped, from an archive node (--rpc): the missed internal transfer is notified once', async () => {
    expect(await service!.stop('SIGTERM')).toBe(0);
    const result = await fill(['--network', 'devnet', '--rpc', anvil.rpcUrl, '--from', String(gapBlock)]);
    expect(result.code, result.stderr).toBe(0);
    expect(meaningfulLines(result.stdout)).toEqual([
      `DEVNET: trace gaps 1 filled (1 notification), 0 still open; traces from ${new URL(anvil.rpcUrl).host}`,
    ]);
    const again = await fill(['--network', 'DEVNET']);
    expect(again.code).toBe(0);
    expect(meaningfulLines(again.stdout)).toEqual(['no open trace gaps on DEVNET']);
    // Delivered once the service is back: the outbox kept it.
    service = await startServiceProcess(env);
    const delivered = await waitFor(() => {
      const found = receiver.requests.filter((r) => r.body.includes(forwardHash));
      return found.length > 0 ? found : undefined;
    }, 'the filled notification');
    expect(delivered).toHaveLength(1);
    expect(JSON.parse(delivered[0]!.body)).toMatchObject({
      internal: true,
      traceAddress: '0',
      amount: '-1',
      blockNumber: Number(gapBlock),
    });
  });
});
