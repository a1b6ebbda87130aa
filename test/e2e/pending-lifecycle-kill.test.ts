/**
 * SIGKILL between a pending announcement and its withdrawal (docs/mempool.md): the withdrawal
 * still comes, once. The service runs as a real process following a real anvil chain (DEVNET,
 * mining paused); alice is watched with `mempool: true`. A transfer from her is announced as
 * pending, then replaced (same nonce, higher fees, another recipient) and mined. Whether the
 * process died before the replacement even existed (the announcement is read back from
 * pending_announcements after the restart) or just as the replacement's block was being delivered,
 * the receiver ends with exactly one `dropped: true` notification naming the replacement.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { getAddress, type Hex, type PublicClient, parseEther, parseGwei } from 'viem';
import { afterEach, describe, expect, test } from 'vitest';
import { startAnvil } from '../../src/chains/evm/anvil.js';
import {
  anvilClients,
  type DevWallet,
  type RpcProxy,
  startRpcProxy,
  writeDevnetConfig,
} from '../helpers/anvil.js';
import { TEST_SERVICE_ENV } from '../helpers/app.js';
import { backends, createTestEnvironment } from '../helpers/env.js';
import { type ServiceProcess, startServiceProcess, waitFor } from '../helpers/process.js';
import { ACK, type Receiver, startReceiver } from '../helpers/receiver.js';

const FEES = { maxFeePerGas: parseGwei('20'), maxPriorityFeePerGas: parseGwei('1') };
/** Enough above FEES for anvil's pool to take the replacement (it wants at least 10% more). */
const HIGHER_FEES = { maxFeePerGas: parseGwei('40'), maxPriorityFeePerGas: parseGwei('2') };

/** What the mempool watcher asks the node (and the follower does not). */
const MEMPOOL_METHODS = new Set([
  'eth_newPendingTransactionFilter',
  'eth_getFilterChanges',
  'eth_uninstallFilter',
  'eth_getTransactionByHash',
]);

type Body = Record<string, unknown>;

/** A request the receiver got, its signature verified. */
interface Delivered {
  webhookId: string;
  body: Body;
}

interface LoggedNotification {
  id: string;
  eventType: string;
  state: string;
  payload: Body;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

interface Scene {
  /** Between the service and anvil (the test's own clients talk to anvil). */
  proxy: RpcProxy;
  chain: PublicClient;
  alice: DevWallet;
  carol: Hex;
  dave: Hex;
  receiver: Receiver;
  /** The running service (replaced on each restart). */
  service: ServiceProcess;
  /** Starts the service again on the same database. */
  restart(): Promise<ServiceProcess>;
  /** What the receiver got for `txHash`, in order of arrival (signatures checked). */
  received(txHash: Hex): Delivered[];
  /** Signs a native transfer from alice with a fixed nonce and fees, and broadcasts it. */
  broadcast(fields: { to: Hex; value: bigint; nonce: number; fees: typeof FEES }): Promise<Hex>;
  /** Alice's next nonce, counting what waits in the pool. */
  nextNonce(): Promise<number>;
  mine(): Promise<void>;
  /** The subscription's delivery log, once every notification in it has been delivered. */
  allDelivered(): Promise<LoggedNotification[]>;
}

/** Anvil, a receiver, the service as a process on `backend`, alice subscribed with `mempool: true`. */
async function scene(backend: (typeof backends)[number]): Promise<Scene> {
  const anvil = await startAnvil();
  cleanups.push(() => anvil.stop());
  const { publicClient: chain, wallets } = anvilClients(anvil);
  const alice = wallets[1]!;
  const carol = getAddress(anvil.accounts[3]!.address);
  const dave = getAddress(anvil.accounts[4]!.address);

  const proxy = await startRpcProxy(anvil.rpcUrl);
  cleanups.push(() => proxy.close());

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-devnet-'));
  cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
  const configFile = writeDevnetConfig(path.join(dir, 'ledgerhook.json'), anvil.chainId, proxy.url);
  const environment = await createTestEnvironment(backend);
  cleanups.push(() => environment.cleanup());
  const receiver = await startReceiver();
  cleanups.push(() => receiver.close());

  const { PORT: _port, LOG_LEVEL: _level, ...delivery } = TEST_SERVICE_ENV;
  const env = {
    ...environment.env,
    ...delivery,
    LOG_LEVEL: 'info',
    LEDGERHOOK_CONFIG: configFile,
    LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms',
    LEDGERHOOK_ROLES: 'all',
    // On PostgreSQL a notification claimed by a killed process is sent again once its claim's lease
    // runs out (60 s by default; PGlite releases every claim at start): the shortest lease allowed.
    LEDGERHOOK_CONNECT_TIMEOUT: '1s',
    LEDGERHOOK_DISPATCH_LEASE: '5s',
  };
  const start = async () => {
    const started = await startServiceProcess(env);
    cleanups.push(async () => void (await started.stop('SIGKILL')));
    return started;
  };

  const service = await start();
  const token = service.printedToken!;
  const res = await fetch(`${service.url}/api/v1/subscription`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      type: 'ADDRESS_TRANSACTION',
      attr: { address: alice.account.address, chain: 'DEVNET', url: receiver.url },
      mempool: true,
    }),
  });
  const created = (await res.json()) as { id: string; secret: string; callbackToken: string };
  expect(res.status, JSON.stringify(created)).toBe(201);
  const webhook = new Webhook(created.secret);

  const s: Scene = {
    proxy,
    chain,
    alice,
    carol,
    dave,
    receiver,
    service,
    async restart() {
      s.service = await start();
      return s.service;
    },
    received(txHash) {
      return receiver.requests
        .map((r) => ({ r, body: JSON.parse(r.body) as Body }))
        .filter(({ body }) => body.txId === txHash)
        .map(({ r, body }) => {
          const webhookId = r.headers['webhook-id'] as string;
          expect(r.headers.authorization).toBe(`Bearer ${created.callbackToken}`);
          webhook.verify(r.body, {
            'webhook-id': webhookId,
            'webhook-timestamp': r.headers['webhook-timestamp'] as string,
            'webhook-signature': r.headers['webhook-signature'] as string,
          });
          expect(body.id).toBe(webhookId);
          expect(body.subscriptionId).toBe(created.id);
          return { webhookId, body };
        });
    },
    async broadcast({ to, value, nonce, fees }) {
      const raw = await alice.account.signTransaction!({
        chainId: anvil.chainId,
        type: 'eip1559',
        to,
        value,
        nonce,
        gas: 21_000n,
        ...fees,
      });
      return (await chain.request({ method: 'eth_sendRawTransaction', params: [raw] })) as Hex;
    },
    nextNonce: () => chain.getTransactionCount({ address: alice.account.address, blockTag: 'pending' }),
    async mine() {
      await chain.request({ method: 'evm_mine' as never, params: [] as never });
    },
    allDelivered: () =>
      waitFor(async () => {
        const log = await fetch(
          `${s.service.url}/api/v1/subscription/${created.id}/notifications?limit=100`,
          {
            headers: { authorization: `Bearer ${token}` },
          },
        );
        expect(log.status).toBe(200);
        const { data } = (await log.json()) as { data: LoggedNotification[] };
        return data.every((n) => n.state === 'delivered') ? data : undefined;
      }, 'every notification of the subscription delivered'),
  };

  // A new network is followed from the head its follower first reads: wait for that before moving
  // value, or the first block could be history rather than notified.
  await waitFor(async () => {
    const ready = (await (await fetch(`${service.url}/readyz`)).json()) as {
      networks?: { network: string; height: number | null; standby?: boolean }[];
    };
    return ready.networks?.some((n) => n.network === 'DEVNET' && !n.standby && n.height !== null)
      ? true
      : undefined;
  }, 'the DEVNET follower to start');
  await chain.request({ method: 'evm_setAutomine' as never, params: [false] as never });
  return s;
}

/** Resolves with the first notification of `txHash` that `match` picks, within the deadline. */
function arrival(s: Scene, txHash: Hex, what: string, match: (b: Body) => boolean): Promise<Delivered> {
  return waitFor(() => s.received(txHash).find((d) => match(d.body)), what, 30_000);
}

/** Announces a pending transfer of 1 ether from alice to carol; its hash, nonce and pending body. */
async function announced(s: Scene): Promise<{ hash: Hex; nonce: number; pending: Body }> {
  const nonce = await s.nextNonce();
  const hash = await s.broadcast({ to: s.carol, value: parseEther('1'), nonce, fees: FEES });
  const { body: pending } = await arrival(s, hash, 'the pending notification', (b) => b.mempool === true);
  expect(pending).toMatchObject({ mempool: true, txId: hash, amount: '-1', counterAddress: s.carol });
  expect(pending).not.toHaveProperty('blockNumber');
  return { hash, nonce, pending };
}

/**
 * The service has gone past the replacement's block: a later transfer from alice (the next nonce)
 * is mined in the next block and notified; then the delivery log holds nothing left to send.
 */
async function movedPast(s: Scene, nonce: number): Promise<LoggedNotification[]> {
  const later = await s.broadcast({ to: s.carol, value: parseEther('0.1'), nonce: nonce + 1, fees: FEES });
  await s.mine();
  await arrival(s, later, 'the later transfer notified mined', (b) => b.mempool === false);
  return s.allDelivered();
}

/**
 * The withdrawal of `hash` came once: every `dropped` request the receiver got carries one webhook-id
 * and one body, the pending body with a new id, `dropped` and `replacedBy`; the outbox holds that one.
 */
function expectOneWithdrawal(
  s: Scene,
  hash: Hex,
  pending: Body,
  replacement: Hex,
  log: LoggedNotification[],
) {
  const drops = s.received(hash).filter((d) => d.body.dropped !== undefined);
  expect(drops.length).toBeGreaterThanOrEqual(1);
  expect(new Set(drops.map((d) => d.webhookId)).size).toBe(1);
  const [dropped] = drops;
  for (const d of drops) expect(d.body).toEqual(dropped!.body);
  expect(dropped!.body).toEqual({
    ...pending,
    id: dropped!.webhookId,
    dropped: true,
    replacedBy: replacement,
  });
  expect(dropped!.webhookId).not.toBe(pending.id);
  // The outbox holds that one withdrawal, delivered, and the replaced transfer was never notified mined.
  const withdrawals = log.filter((n) => n.eventType === 'address.transaction.dropped');
  expect(withdrawals.map((n) => [n.id, n.payload.txId])).toEqual([[dropped!.webhookId, hash]]);
  expect(s.received(hash).filter((d) => d.body.mempool === false && d.body.dropped === undefined)).toEqual(
    [],
  );
}

describe.each(backends)('a pending announcement withdrawn across SIGKILL (%s)', (backend) => {
  test('killed after the announcement, replaced and mined while down: after the restart the withdrawal comes, once', async () => {
    const s = await scene(backend);
    const first = await announced(s);
    // Its delivery recorded too, so that nothing but the withdrawal is left to send after the kill.
    await s.allDelivered();

    await s.service.stop('SIGKILL');
    const replacement = await s.broadcast({
      to: s.dave,
      value: parseEther('0.9'),
      nonce: first.nonce,
      fees: HIGHER_FEES,
    });
    await s.mine();
    const receipt = await s.chain.getTransactionReceipt({ hash: replacement });
    expect(receipt.status).toBe('success');
    await expect(s.chain.getTransactionReceipt({ hash: first.hash })).rejects.toThrow();

    // After the restart the node fails the mempool watcher's requests until the withdrawal has come,
    // so that the follower, committing the replacement's block, is the first to read the
    // announcements back (as it may be whenever blocks were mined while the service was down).
    s.proxy.intercept((request) =>
      MEMPOOL_METHODS.has(request.method) || request.params?.[0] === 'pending'
        ? { httpStatus: 503 }
        : undefined,
    );
    await s.restart();
    const dropped = await arrival(s, first.hash, 'the withdrawal', (b) => b.dropped === true);
    s.proxy.intercept(() => undefined);
    expect(dropped.body).toEqual({
      ...first.pending,
      id: dropped.webhookId,
      dropped: true,
      replacedBy: replacement,
    });
    // The replacement, mined while the service was down, is notified mined (never pending).
    const minedReplacement = await arrival(
      s,
      replacement,
      'the replacement notified mined',
      (b) => !b.mempool,
    );
    expect(minedReplacement.body).toMatchObject({
      mempool: false,
      amount: '-0.9',
      counterAddress: s.dave,
      blockNumber: Number(receipt.blockNumber),
    });

    const log = await movedPast(s, first.nonce);
    expectOneWithdrawal(s, first.hash, first.pending, replacement, log);
    // Nothing was redelivered here: the announcement and its withdrawal, one request each.
    expect(s.received(first.hash).map((d) => d.body.id)).toEqual([first.pending.id, dropped.webhookId]);
    expect(s.received(replacement).map((d) => d.body.mempool)).toEqual([false]);
    await s.service.stop();
  }, 120_000);

  test('killed as the replacement’s block is being delivered: the withdrawal is delivered once in total', async () => {
    const s = await scene(backend);
    const first = await announced(s);
    const replacement = await s.broadcast({
      to: s.dave,
      value: parseEther('0.9'),
      nonce: first.nonce,
      fees: HIGHER_FEES,
    });
    // Announced as pending too (alice sends it): two announcements hold her nonce.
    await arrival(s, replacement, 'the replacement announced', (b) => b.mempool === true);

    // Killed the moment the replacement's mined notification reaches the receiver, before it is
    // even answered: the withdrawal, enqueued in the same commit, may or may not have arrived yet.
    let killed = false;
    const victim = s.service;
    s.receiver.respond((r) => {
      const body = JSON.parse(r.body) as Body;
      if (!killed && body.txId === replacement && body.mempool === false) {
        killed = true;
        victim.child.kill('SIGKILL');
      }
      return ACK;
    });
    await s.mine();
    await waitFor(() => killed || undefined, 'the replacement’s block delivered', 30_000);
    await victim.exited;

    await s.restart();
    await arrival(s, first.hash, 'the withdrawal', (b) => b.dropped === true);
    const log = await movedPast(s, first.nonce);
    expectOneWithdrawal(s, first.hash, first.pending, replacement, log);
    // The replacement is notified mined once too (maybe delivered twice, under one webhook-id).
    const minedReplacement = s.received(replacement).filter((d) => d.body.mempool === false);
    expect(new Set(minedReplacement.map((d) => d.webhookId)).size).toBe(1);
    await s.service.stop();
  }, 120_000);
});
