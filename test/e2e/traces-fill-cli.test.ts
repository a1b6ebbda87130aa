/**
 * `ledgerhook traces fill`: trace gaps filled on demand, through the running service's
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
  type CliProcess,
  type CliResult,
  meaningfulLines,
  runCli,
  type ServiceProcess,
  startCli,
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
  let subscriptionId: string;
  /** The API token the first start printed. */
  let token: string;
  let forward: (value: string) => Promise<{ hash: Hex; block: bigint }>;
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
    token = service.printedToken!;
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
    subscriptionId = ((await created.json()) as { id: string }).id;
    forward = async (value) => {
      const receipt = await mined(
        publicClient,
        wallets[1]!.writeContract({
          address: forwarder,
          abi: artifact('Forwarder').abi,
          functionName: 'forward',
          args: [deposit],
          value: parseEther(value),
        }),
      );
      return { hash: receipt.transactionHash, block: receipt.blockNumber };
    };
    // The follower is at its head before the transfer: its block is followed, not skipped.
    await waitFor(async () => {
      const ready = (await (await fetch(`${service!.url}/readyz`)).json()) as {
        networks: { height: number | null }[];
      };
      return ready.networks[0]?.height !== null && ready.networks.length > 0 ? true : undefined;
    }, 'the DEVNET follower');
    ({ hash: forwardHash, block: gapBlock } = await forward('1'));
    await untilGapAt(gapBlock);
  }, 90_000);

  /** Resolves once the service has recorded the gap of the block at `height`. */
  const untilGapAt = (height: bigint) =>
    waitFor(async () => {
      const ready = (await (await fetch(`${service!.url}/readyz`)).json()) as {
        networks: { traceGaps?: { count: number; last: number | null } }[];
      };
      return ready.networks[0]?.traceGaps?.last === Number(height) ? true : undefined;
    }, 'the untraceable block recorded as a gap');

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

  test('a fill killed midway (SIGKILL) loses and doubles nothing: the next one finishes, one notification a transfer', async () => {
    proxy.intercept((request) => (TRACE_METHODS.includes(request.method) ? { error: PRUNED } : undefined));
    const sent: { hash: Hex; block: bigint }[] = [];
    for (const value of ['2', '3', '4', '5', '6']) sent.push(await forward(value));
    await untilGapAt(sent[4]!.block);
    const { url } = service!;
    expect(await service!.stop('SIGTERM')).toBe(0);

    // The archive node is the proxy again, tracing; the fill is killed as its third trace is asked.
    let traced = 0;
    let run: CliProcess | undefined;
    proxy.intercept((request) => {
      if (TRACE_METHODS.includes(request.method) && ++traced === 3) run?.child.kill('SIGKILL');
      return undefined;
    });
    run = startCli(['traces', 'fill', '--network', 'DEVNET', '--rpc', proxy.url], env);
    expect(await run.exited).toBeNull();
    expect(traced).toBeGreaterThanOrEqual(3);
    const rest = await fill(['--network', 'DEVNET', '--rpc', proxy.url]);
    expect(rest.code, rest.stderr).toBe(0);
    expect(meaningfulLines(rest.stdout)[0]).toMatch(
      /^DEVNET: trace gaps [2-5] filled \([2-5] notifications\), 0 still open/,
    );

    // Every transfer in the outbox once, and delivered once.
    service = await startServiceProcess(env);
    expect(service.url).not.toBe(url);
    const logged = await waitFor(async () => {
      const res = await fetch(
        `${service!.url}/api/v1/subscription/${subscriptionId}/notifications?limit=100`,
        {
          headers: { authorization: `Bearer ${token}` },
        },
      );
      const { data } = (await res.json()) as { data: { state: string; payload: { txId: string } }[] };
      return data.filter((n) => n.state === 'delivered').length === 1 + sent.length ? data : undefined;
    }, 'every filled notification delivered');
    const txIds = logged.map((n) => n.payload.txId).sort();
    expect(txIds).toEqual([forwardHash, ...sent.map((t) => t.hash)].sort());
    for (const { hash } of sent)
      expect(receiver.requests.filter((r) => r.body.includes(hash))).toHaveLength(1);
  });
});
