import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type Hex, numberToHex, parseEther } from 'viem';
import { afterAll, describe, expect, test } from 'vitest';
import { artifact, startRpcProxy } from '../helpers/anvil.js';
import { backends, createTestEnvironment, type TestEnvironment } from '../helpers/env.js';
import { type ServiceProcess, startServiceProcess, waitFor } from '../helpers/process.js';
import { type ProcessChain, processServiceEnv, startProcessChain } from '../helpers/process-chain.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

async function devnet(): Promise<ProcessChain> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-devnet-'));
  cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
  return startProcessChain(dir, (cleanup) => cleanups.push(cleanup));
}

const serviceEnv = (
  environment: TestEnvironment,
  chain: Pick<ProcessChain, 'configFile'>,
  extra: Record<string, string> = {},
) => processServiceEnv(environment.env, chain, extra);

async function start(env: Record<string, string>): Promise<ServiceProcess> {
  const service = await startServiceProcess(env);
  cleanups.push(async () => void (await service.stop('SIGKILL')));
  return service;
}

async function subscribe(
  service: ServiceProcess,
  token: string,
  address: Hex,
  url: string,
  watchers: ServiceProcess[] = [service],
): Promise<string> {
  const res = await fetch(`${service.url}/api/v1/subscription`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'ADDRESS_TRANSACTION', attr: { address, chain: 'DEVNET', url } }),
  });
  expect(res.status).toBe(201);
  // A new network is followed from the head its follower first reads: wait for that, or on a busy
  // machine the first transfers could be mined before it (and be history, not notified). With
  // several processes only the one holding the network's lock follows it; the others stand by.
  await waitFor(async () => {
    for (const watcher of watchers) {
      const ready = (await (await fetch(`${watcher.url}/readyz`)).json()) as {
        networks?: { network: string; height: number | null; standby?: boolean }[];
      };
      if (ready.networks?.some((n) => n.network === 'DEVNET' && !n.standby && n.height !== null)) return true;
    }
    return undefined;
  }, 'the DEVNET follower to start');
  return ((await res.json()) as { id: string }).id;
}

/** Sends `count` transfers to `to`, `perBlock` of them in each mined block. */
async function transfers(chain: ProcessChain, to: Hex, count: number, perBlock: number): Promise<Hex[]> {
  const hashes: Hex[] = [];
  await chain.client.request({ method: 'evm_setAutomine' as never, params: [false] as never });
  for (let sent = 0; sent < count; sent += perBlock) {
    for (let i = 0; i < Math.min(perBlock, count - sent); i++) {
      hashes.push(
        await chain.wallet.sendTransaction({
          to,
          value: parseEther('0.001'),
          account: chain.wallet.account!,
          chain: null,
        }),
      );
    }
    await chain.client.request({ method: 'evm_mine' as never, params: [] as never });
  }
  await chain.client.request({ method: 'evm_setAutomine' as never, params: [true] as never });
  return hashes;
}

/**
 * Every transfer notified once it was mined; one notified more than once always carries the same
 * webhook-id. (A pending transfer's earlier `mempool: true` notification is another one, by design.)
 */
function expectEachOnce(receiver: Receiver, hashes: Hex[]): void {
  const idsByTx = new Map<string, Set<string>>();
  for (const r of receiver.requests) {
    const body = JSON.parse(r.body) as { txId: string; id: string; reorg?: boolean; mempool: boolean };
    expect(body.reorg).toBeUndefined();
    if (body.mempool) continue;
    const ids = idsByTx.get(body.txId) ?? new Set();
    ids.add(body.id);
    idsByTx.set(body.txId, ids);
  }
  for (const hash of hashes) expect(idsByTx.get(hash)?.size, `notifications of ${hash}`).toBe(1);
}

async function allNotified(receiver: Receiver, hashes: Hex[], timeoutMs = 60_000): Promise<void> {
  await waitFor(
    () => {
      const mined = receiver.requests.map((r) => JSON.parse(r.body) as { txId: string; mempool: boolean });
      const seen = new Set(mined.filter((b) => !b.mempool).map((b) => b.txId));
      return hashes.every((h) => seen.has(h)) ? true : undefined;
    },
    `${hashes.length} transfers notified`,
    timeoutMs,
  );
}

describe('a watcher killed with SIGKILL (embedded PGlite)', () => {
  test('between blocks and mid-block: after a restart no transfer is missed and none is notified twice', async () => {
    const chain = await devnet();
    const environment = await createTestEnvironment('pglite');
    cleanups.push(() => environment.cleanup());
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const env = serviceEnv(environment, chain);
    const watched = chain.anvil.accounts[5]!.address;

    const first = await start(env);
    const token = first.printedToken!;
    await subscribe(first, token, watched, receiver.url);
    const before = await transfers(chain, watched, 5, 1);
    await allNotified(receiver, before);

    // Between blocks: killed while idle, blocks keep coming while it is down.
    await first.stop('SIGKILL');
    const whileDown = await transfers(chain, watched, 6, 2);
    const second = await start(env);
    await allNotified(receiver, whileDown);

    // Mid-block: a block of 40 transfers, killed as soon as its first notifications arrive.
    const arrived = receiver.requests.length;
    const burst = transfers(chain, watched, 40, 40);
    await receiver.waitForRequests(arrived + 1);
    await second.stop('SIGKILL');
    const big = await burst;
    const third = await start(env);
    await allNotified(receiver, big);
    expectEachOnce(receiver, [...before, ...whileDown, ...big]);
    await third.stop();
  }, 180_000);
});

describe('a watcher killed with SIGKILL while it reads a block with internal transfers (embedded PGlite)', () => {
  test('after a restart each internal transfer is notified exactly once', async () => {
    const chain = await devnet();
    // The service reads the chain through a proxy that can hold a block's traces: the block has
    // been fetched in part, nothing of it committed, when the process dies.
    const proxy = await startRpcProxy(chain.anvil.rpcUrl);
    cleanups.push(() => proxy.close());
    const configFile = path.join(path.dirname(chain.configFile), 'through-proxy.json');
    fs.writeFileSync(
      configFile,
      JSON.stringify({
        networks: {
          DEVNET: {
            family: 'evm',
            chainId: chain.anvil.chainId,
            symbol: 'ETH',
            rpc: [proxy.url],
            traces: 'parity',
          },
        },
      }),
    );
    const environment = await createTestEnvironment('pglite');
    cleanups.push(() => environment.cleanup());
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const env = serviceEnv(environment, { ...chain, configFile });
    const deposit = chain.anvil.accounts[6]!.address;

    const first = await start(env);
    await subscribe(first, first.printedToken!, deposit, receiver.url);
    const { abi, bytecode } = artifact('BatchPayer');
    const deployed = await chain.client.waitForTransactionReceipt({
      hash: await chain.wallet.deployContract({ abi, bytecode, account: chain.wallet.account!, chain: null }),
    });
    const payer = deployed.contractAddress!;
    const next = deployed.blockNumber + 1n;
    proxy.intercept((request) =>
      request.method === 'trace_block' && request.params?.[0] === numberToHex(next)
        ? { hold: true }
        : undefined,
    );
    const hash = await chain.wallet.writeContract({
      address: payer,
      abi,
      functionName: 'pay',
      args: [
        [deposit, deposit, deposit],
        [1n, 2n, 3n],
      ],
      value: 6n,
      account: chain.wallet.account!,
      chain: null,
    });
    expect((await chain.client.waitForTransactionReceipt({ hash })).blockNumber).toBe(next);
    await waitFor(
      () => (proxy.methods.includes('trace_block') ? true : undefined),
      'the block’s traces asked for',
    );
    await first.stop('SIGKILL');
    proxy.intercept(() => undefined);

    const second = await start(env);
    const internal = () =>
      receiver.requests
        .map(
          (r) => JSON.parse(r.body) as { txId: string; id: string; traceAddress?: string; mempool: boolean },
        )
        .filter((b) => b.txId === hash && !b.mempool);
    await waitFor(() => (internal().length >= 3 ? true : undefined), 'the three internal transfers');
    // Blocks after it processed too: whatever was to be sent of the block has been.
    const later = await transfers(chain, deposit, 1, 1);
    await allNotified(receiver, later);
    const ids = new Map<string, Set<string>>();
    for (const body of internal())
      ids.set(body.traceAddress!, (ids.get(body.traceAddress!) ?? new Set()).add(body.id));
    expect([...ids.keys()].sort()).toEqual(['0', '1', '2']);
    for (const [traceAddress, seen] of ids) expect(seen.size, traceAddress).toBe(1);
    await second.stop();
  }, 120_000);
});

describe.each(backends.filter((b) => b === 'postgres'))('two watcher processes on %s', (backend) => {
  test('each block is processed once; when the holder dies the other takes over from the cursor', async () => {
    const chain = await devnet();
    const environment = await createTestEnvironment(backend);
    cleanups.push(() => environment.cleanup());
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const env = serviceEnv(environment, chain, {
      LEDGERHOOK_MASTER_KEY: crypto.randomBytes(32).toString('hex'),
    });
    const watched = chain.anvil.accounts[6]!.address;

    const a = await start(env);
    const b = await start(env);
    await subscribe(a, a.printedToken!, watched, receiver.url, [a, b]);

    // Exactly one of them follows DEVNET; the other stands by.
    const roles = async () =>
      Promise.all(
        [a, b].map(async (s) => {
          const ready = (await (await fetch(`${s.url}/readyz`)).json()) as {
            networks: { network: string; standby: boolean; height: number | null }[];
          };
          return ready.networks.find((n) => n.network === 'DEVNET');
        }),
      );
    const [ra, rb] = await waitFor(async () => {
      const r = await roles();
      return r[0] && r[1] && r[0].standby !== r[1].standby ? r : undefined;
    }, 'one follower and one standby');
    const holder = ra!.standby ? b : a;
    const other = holder === a ? b : a;
    expect(rb).toBeDefined();

    const first = await transfers(chain, watched, 6, 2);
    await allNotified(receiver, first);
    expectEachOnce(receiver, first);
    expect(
      receiver.requests.filter((r) => !(JSON.parse(r.body) as { mempool: boolean }).mempool),
    ).toHaveLength(first.length);

    await holder.stop('SIGKILL');
    const later = await transfers(chain, watched, 4, 2);
    await allNotified(receiver, later, 30_000);
    expectEachOnce(receiver, [...first, ...later]);
    const survivor = await waitFor(async () => {
      const ready = (await (await fetch(`${other.url}/readyz`)).json()) as {
        networks: { network: string; standby: boolean }[];
      };
      const devnetStatus = ready.networks.find((n) => n.network === 'DEVNET');
      return devnetStatus && !devnetStatus.standby ? devnetStatus : undefined;
    }, 'the survivor follows');
    expect(survivor.standby).toBe(false);
    await other.stop();
  }, 180_000);
});
