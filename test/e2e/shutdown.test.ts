/**
 * Stopping the service as operators do: Ctrl-C in a terminal (SIGINT to the whole process group),
 * SIGTERM from a supervisor while a chain node dies, SIGTERM while deliveries are due. Every case
 * must end, within a deadline, with the data released and nothing sent after the signal.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, describe, expect, test } from 'vitest';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import { openStore } from '../../src/store/db.js';
import { backends, createTestEnvironment, type TestEnvironment } from '../helpers/env.js';
import { type ServiceProcess, startServiceProcess, waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';

const environments: TestEnvironment[] = [];
const services: ServiceProcess[] = [];
const receivers: Receiver[] = [];
const nodes: Anvil[] = [];
const cleanups: (() => void)[] = [];
afterAll(async () => {
  for (const s of services) {
    // A test that failed may leave its service (and the service's anvil) running.
    if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL');
  }
  for (const cleanup of cleanups) cleanup();
  for (const n of nodes) await n.stop();
  for (const r of receivers) await r.close();
  for (const e of environments) await e.cleanup();
});

/** The exit code, or 'still running' if the process has not exited by `ms` from now. */
async function exitWithin(service: ServiceProcess, ms: number): Promise<number | null | 'still running'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still running'>((resolve) => {
    timer = setTimeout(() => resolve('still running'), ms);
  });
  const result = await Promise.race([service.exited, late]);
  clearTimeout(timer);
  return result;
}

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

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

async function api(service: ServiceProcess, method: string, route: string, body?: unknown) {
  const response = await fetch(`${service.url}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${service.printedToken}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** The height a network's follower has processed, from /readyz (null before its first round). */
async function followedHeight(service: ServiceProcess, network: string): Promise<number | null | undefined> {
  const ready = (await (await fetch(`${service.url}/readyz`)).json()) as {
    networks: { network: string; height: number | null }[];
  };
  return ready.networks.find((n) => n.network === network)?.height;
}

describe('stopping', () => {
  test('Ctrl-C on serve --devnet (SIGINT to the process group, anvil included) exits 0 within 10 s, releases the data directory and leaves no anvil', async () => {
    const environment = await createTestEnvironment('pglite');
    environments.push(environment);
    const service = await startServiceProcess(environment.env, {
      args: ['serve', '--devnet'],
      detached: true,
    });
    services.push(service);
    const rpcUrl = /RPC (http:\/\/127\.0\.0\.1:\d+)/.exec(service.stdout())?.[1];
    expect(rpcUrl, service.stdout()).toBeDefined();
    // The devnet is followed from the start, by polling and by newHeads over its WebSocket.
    await waitFor(
      async () => ((await followedHeight(service, 'DEVNET')) != null ? true : undefined),
      'the DEVNET follower to start',
    );

    const signalled = Date.now();
    service.signalGroup('SIGINT');
    const code = await exitWithin(service, 10_000);
    expect(code, service.stdout() + service.stderr()).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(10_000);
    expect(service.stdout()).toContain('shutting down');

    expect(fs.existsSync(path.join(environment.dataDir, 'ledgerhook.pid'))).toBe(false);
    expect(fs.existsSync(path.join(environment.dataDir, 'admin.json'))).toBe(false);
    expect(await answers(rpcUrl!)).toBe(false);
    await waitFor(
      () => (groupAlive(service.child.pid!) ? undefined : true),
      'every process of the group to be gone',
      5_000,
    );
  });

  test('SIGTERM while the node of a network followed by WebSocket dies exits 0 within 10 s', async () => {
    const environment = await createTestEnvironment('pglite');
    environments.push(environment);
    const anvil = await startAnvil();
    nodes.push(anvil);
    const configFile = path.join(environment.dataDir, 'networks.json');
    fs.writeFileSync(
      configFile,
      JSON.stringify({
        networks: {
          LOCAL: {
            family: 'evm',
            chainId: anvil.chainId,
            symbol: 'ETH',
            rpc: [anvil.rpcUrl],
            ws: [anvil.wsUrl],
          },
        },
      }),
    );
    const receiver = await startReceiver();
    receivers.push(receiver);
    const service = await startServiceProcess({
      ...environment.env,
      LEDGERHOOK_CONFIG: configFile,
      LEDGERHOOK_ALLOW_CIDRS: '127.0.0.0/8',
      // Polling every 10 minutes: a block processed at once proves the newHeads subscription is live.
      LEDGERHOOK_WATCH_POLL_INTERVAL: '600s',
    });
    services.push(service);
    const created = await api(service, 'POST', '/api/v1/subscription', {
      type: 'ADDRESS_TRANSACTION',
      attr: { address: anvil.accounts[1]!.address, chain: 'LOCAL', url: receiver.url },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await waitFor(
      async () => ((await followedHeight(service, 'LOCAL')) != null ? true : undefined),
      'the LOCAL follower to start',
    );
    await rpc(anvil.rpcUrl, 'evm_mine');
    const head = Number(await rpc(anvil.rpcUrl, 'eth_blockNumber'));
    await waitFor(
      async () => (((await followedHeight(service, 'LOCAL')) ?? -1) >= head ? true : undefined),
      'the mined block to arrive by newHeads',
    );

    // The node stops answering as the signal arrives, then dies: whatever shutdown asks it over
    // the WebSocket gets no answer, and then the socket closes under it.
    process.kill(anvil.pid, 'SIGSTOP');
    cleanups.push(() => {
      try {
        process.kill(anvil.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    });
    const signalled = Date.now();
    service.child.kill('SIGTERM');
    await waitFor(() => (service.stdout().includes('shutting down') ? true : undefined), 'shutting down');
    process.kill(anvil.pid, 'SIGKILL');

    const code = await exitWithin(service, 10_000);
    expect(code, service.stdout() + service.stderr()).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(10_000);
    expect(fs.existsSync(path.join(environment.dataDir, 'ledgerhook.pid'))).toBe(false);
  });

  describe.each(backends)('on %s', (backend) => {
    test('once shutdown begins nothing is claimed or sent; due notifications stay pending and unclaimed for the next start', async () => {
      const environment = await createTestEnvironment(backend);
      environments.push(environment);
      // Each attempt takes 100 ms and fails; one at a time: the dispatcher is busy whenever the signal comes.
      const receiver = await startReceiver(() => ({ status: 500, body: 'down', delayMs: 100 }));
      receivers.push(receiver);
      const service = await startServiceProcess({
        ...environment.env,
        LEDGERHOOK_ROLES: 'api,dispatcher',
        LEDGERHOOK_ALLOW_CIDRS: '127.0.0.0/8',
        LEDGERHOOK_DISPATCH_CONCURRENCY: '1',
        LEDGERHOOK_POLL_INTERVAL: '50ms',
        // A failed notification waits an hour: every request the receiver sees is another notification.
        LEDGERHOOK_RETRY_SCHEDULE: '1h',
        LEDGERHOOK_SHUTDOWN_TIMEOUT: '4s',
        // 60 test notifications in a row: at the per-account limit on them, which is not the point here.
        LEDGERHOOK_TEST_RATE_LIMIT: 'off',
      });
      services.push(service);
      const created = await api(service, 'POST', '/api/v1/subscription', {
        type: 'ADDRESS_TRANSACTION',
        attr: { address: '0x742d35Cc6634C0532925a3b844Bc454e4438f44e', chain: 'ETH', url: receiver.url },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const total = 60;
      for (let i = 0; i < total; i++) {
        const sent = await api(service, 'POST', `/api/v1/subscription/${created.body.id}/test`);
        expect(sent.status).toBe(202);
      }
      await receiver.waitForRequests(3);

      // A client in the middle of sending a request body: the HTTP server cannot close at once.
      const slow = net.connect(Number(new URL(service.url).port), '127.0.0.1');
      cleanups.push(() => slow.destroy());
      slow.on('error', () => {});
      await new Promise<void>((resolve) => slow.once('connect', () => resolve()));
      slow.write(
        `POST /api/v1/registry/create HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${service.printedToken}\r\n` +
          'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"ti',
      );
      await waitFor(
        () => (service.stdout().includes('"url":"/api/v1/registry/create"') ? true : undefined),
        'the service to be reading the slow request',
      );

      service.child.kill('SIGTERM');
      // The request in flight when the signal came may still reach the receiver; no other may.
      const seenAtSignal = receiver.requests.length;
      const code = await exitWithin(service, 10_000);
      const sentAfterSignal = receiver.requests.length - seenAtSignal;
      expect(sentAfterSignal, 'requests sent after the signal').toBeLessThanOrEqual(1);
      expect(code, service.stdout() + service.stderr()).toBe(0);

      // What was not attempted is still pending, claimed by nobody: the next start sends it at once.
      const attempted = new Set(receiver.requests.map((r) => r.headers['webhook-id']));
      const store = await openStore(
        environment.databaseUrl
          ? { databaseUrl: environment.databaseUrl }
          : { pgliteDir: path.join(environment.dataDir, 'pglite') },
      );
      try {
        const rows = (
          (await store.db.execute(
            sql`SELECT id, state, attempts, locked_by FROM notifications ORDER BY id`,
          )) as unknown as {
            rows: { id: string; state: string; attempts: number; locked_by: string | null }[];
          }
        ).rows;
        expect(rows).toHaveLength(total);
        expect(rows.filter((r) => r.locked_by !== null)).toEqual([]);
        expect(rows.filter((r) => r.state !== 'pending')).toEqual([]);
        const untouched = rows.filter((r) => !attempted.has(r.id));
        expect(untouched.length).toBeGreaterThan(0);
        expect(untouched.every((r) => Number(r.attempts) === 0)).toBe(true);
      } finally {
        await store.close();
      }
    });
  });
});
