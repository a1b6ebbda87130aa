/**
 * The end-to-end setting of the chain-watching tests: a real anvil chain (optionally behind a
 * JSON-RPC proxy), the real service following it as network DEVNET, a real receiver on loopback,
 * dev wallets, and helpers to move value and read what the receiver got (signatures verified).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { Webhook } from 'standardwebhooks';
import {
  createPublicClient,
  createWalletClient,
  getAddress,
  type Hex,
  http,
  type PublicClient,
  type WalletClient,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { expect } from 'vitest';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import { artifact, type ContractName, type RpcProxy, startRpcProxy, WALLET_TIMEOUT_MS } from './anvil.js';
import { startTestApp, type TestApp } from './app.js';
import type { Backend } from './env.js';
import { waitFor } from './process.js';
import { type Receiver, startReceiver } from './receiver.js';

export interface Created {
  id: string;
  secret: string;
  callbackToken: string;
}

export type Body = Record<string, unknown>;

/** A notification as the delivery log lists it. */
export interface LoggedNotification {
  id: string;
  eventType: string;
  state: string;
  payload: Body;
}

export interface DevnetOptions {
  /** The service reaches anvil through a JSON-RPC proxy (to play a node that lacks or loses something). */
  proxy?: boolean;
  /** Give the service anvil's WebSocket endpoint too (newHeads). */
  websocket?: boolean;
  /** LEDGERHOOK_WATCH_POLL_INTERVAL (50ms by default). */
  pollInterval?: string;
  /** More service settings. */
  env?: Record<string, string>;
  /** The service's logger (silent by default), e.g. to read what it logs. */
  logger?: Logger;
  /**
   * The DEVNET network's `traces` setting: parity by default, as `--devnet` does (anvil's
   * debug_traceBlockByNumber can hang while blocks are mined).
   */
  traces?: string;
  /** Traces read from anvil directly, as a network's tracing node (tracesRpc), past the proxy. */
  tracingNode?: boolean;
}

export interface Devnet {
  anvil: Anvil;
  /** Set with `proxy: true`: between the service and anvil (the tests' own clients talk to anvil). */
  proxy: RpcProxy | undefined;
  t: TestApp;
  receiver: Receiver;
  /** Polls every 50 ms: waiting for a receipt takes milliseconds. */
  chain: PublicClient;
  /** The first five dev accounts. */
  wallets: WalletClient[];
  addresses: Hex[];
  /** The subscriptions whose notifications `received` verifies, by watched address. */
  subs: Map<Hex, Created>;
  /** Every notification received so far for `txHash`, verified with its subscription's secret. */
  received(txHash: Hex): Body[];
  receivedAtLeast(txHash: Hex, count: number): Promise<Body[]>;
  /** Resolves once the follower has processed `height`. */
  processed(height: bigint): Promise<void>;
  /** Sends native value; returns at once, without waiting for a block. */
  submit(from: number, to: Hex, value: bigint): Promise<Hex>;
  /** Sends native value and waits until it is mined. */
  send(from: number, to: Hex, value: bigint): Promise<{ hash: Hex; block: bigint }>;
  deploy(name: ContractName, args?: unknown[]): Promise<Hex>;
  /** Calls a test contract (sending `value` with it); returns at once, without waiting for a block. */
  submitCall(
    from: number,
    address: Hex,
    name: ContractName,
    fn: string,
    args: unknown[],
    gas?: bigint,
    value?: bigint,
  ): Promise<Hex>;
  /** Calls a test contract (sending `value` with it) and waits until the call is mined. */
  call(
    from: number,
    address: Hex,
    name: ContractName,
    fn: string,
    args: unknown[],
    gas?: bigint,
    value?: bigint,
  ): Promise<{ hash: Hex; block: bigint; status: 'success' | 'reverted' }>;
  /** Subscribes `address` (or, given a list, those addresses); `attr` adds to the request's attr. */
  subscribe(
    address: Hex | Hex[],
    extra?: Record<string, unknown>,
    attr?: Record<string, unknown>,
  ): Promise<Created>;
  /** The delivery log of a subscription (what the outbox holds, delivered or not), oldest first. */
  logged(subscriptionId: string): Promise<LoggedNotification[]>;
  /** Mines one block now. */
  mine(): Promise<void>;
  /** Automatic mining of each transaction on or off (off: transactions wait in the mempool). */
  setAutomine(on: boolean): Promise<void>;
  close(): Promise<void>;
}

export async function startDevnet(backend: Backend, options: DevnetOptions = {}): Promise<Devnet> {
  const anvil = await startAnvil();
  const cleanups: (() => Promise<void> | void)[] = [() => anvil.stop()];
  const close = async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  };
  try {
    const proxy = options.proxy ? await startRpcProxy(anvil.rpcUrl) : undefined;
    if (proxy) cleanups.push(() => proxy.close());
    const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-devnet-'));
    cleanups.push(() => fs.rmSync(configDir, { recursive: true, force: true }));
    const configFile = path.join(configDir, 'ledgerhook.json');
    fs.writeFileSync(
      configFile,
      JSON.stringify({
        networks: {
          DEVNET: {
            family: 'evm',
            chainId: anvil.chainId,
            symbol: 'ETH',
            rpc: [proxy?.url ?? anvil.rpcUrl],
            ...(options.websocket ? { ws: [anvil.wsUrl] } : {}),
            traces: options.traces ?? 'parity',
            ...(options.tracingNode ? { tracesRpc: [anvil.rpcUrl] } : {}),
          },
        },
      }),
    );
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const t = await startTestApp(
      backend,
      {
        LEDGERHOOK_CONFIG: configFile,
        LEDGERHOOK_WATCH_POLL_INTERVAL: options.pollInterval ?? '50ms',
        LEDGERHOOK_ROLES: 'all',
        ...options.env,
      },
      { alwaysFollow: ['DEVNET'], ...(options.logger ? { logger: options.logger } : {}) },
    );
    cleanups.push(() => t.close());
    // viem polls for receipts every 4 s by default; anvil mines at once. Without cacheTime 0 viem
    // answers getBlockNumber from a cache as old as the polling interval, so a test reading the head
    // just after a block was mined could see the one before (evm-event-backfill failed 1 run in 4).
    const chain = createPublicClient({ transport: http(anvil.rpcUrl), pollingInterval: 50, cacheTime: 0 });
    const wallets = anvil.accounts.slice(0, 5).map((account) =>
      createWalletClient({
        account: privateKeyToAccount(account.privateKey),
        transport: http(anvil.rpcUrl, { timeout: WALLET_TIMEOUT_MS }),
      }),
    );
    const addresses = anvil.accounts.slice(0, 5).map((account) => getAddress(account.address));
    const subs = new Map<Hex, Created>();

    const received = (txHash: Hex): Body[] =>
      receiver.requests
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

    const submitCall = (
      from: number,
      address: Hex,
      name: ContractName,
      fn: string,
      args: unknown[],
      gas?: bigint,
      value?: bigint,
    ) =>
      wallets[from]!.writeContract({
        address,
        abi: artifact(name).abi,
        functionName: fn,
        args,
        account: wallets[from]!.account!,
        chain: null,
        ...(gas ? { gas } : {}),
        ...(value ? { value } : {}),
      });

    const submit = (from: number, to: Hex, value: bigint) =>
      wallets[from]!.sendTransaction({ to, value, account: wallets[from]!.account!, chain: null });

    const devnet: Devnet = {
      anvil,
      proxy,
      t,
      receiver,
      chain,
      wallets,
      addresses,
      subs,
      received,
      receivedAtLeast: (txHash, count) =>
        waitFor(() => {
          const bodies = received(txHash);
          return bodies.length >= count ? bodies : undefined;
        }, `${count} notifications for ${txHash}`),
      async processed(height) {
        await waitFor(async () => {
          const ready = await t.request('GET', '/readyz', { token: null });
          const devnet = (
            ready.body as { networks: { network: string; height: number | null }[] }
          ).networks.find((n) => n.network === 'DEVNET');
          return devnet?.height !== undefined && devnet.height !== null && devnet.height >= Number(height)
            ? true
            : undefined;
        }, `block ${height} processed`);
      },
      submit,
      async send(from, to, value) {
        const hash = await submit(from, to, value);
        const receipt = await chain.waitForTransactionReceipt({ hash });
        return { hash, block: receipt.blockNumber };
      },
      async deploy(name, args) {
        const { abi, bytecode } = artifact(name);
        const hash = await wallets[0]!.deployContract({
          abi,
          bytecode,
          args,
          account: wallets[0]!.account!,
          chain: null,
        });
        return getAddress((await chain.waitForTransactionReceipt({ hash })).contractAddress!);
      },
      submitCall,
      async call(from, address, name, fn, args, gas, value) {
        const hash = await submitCall(from, address, name, fn, args, gas, value);
        const receipt = await chain.waitForTransactionReceipt({ hash });
        return { hash, block: receipt.blockNumber, status: receipt.status };
      },
      async subscribe(address, extra = {}, attr = {}) {
        const watching = Array.isArray(address) ? { addresses: address } : { address };
        const res = await t.request('POST', '/api/v1/subscription', {
          body: {
            type: 'ADDRESS_TRANSACTION',
            attr: { ...watching, chain: 'DEVNET', url: receiver.url, ...attr },
            ...extra,
          },
        });
        expect(res.status, res.text).toBe(201);
        return res.body as Created;
      },
      async logged(subscriptionId) {
        const res = await t.request('GET', `/api/v1/subscription/${subscriptionId}/notifications?limit=100`);
        expect(res.status, res.text).toBe(200);
        return [...(res.body as { data: LoggedNotification[] }).data].reverse();
      },
      async mine() {
        await chain.request({ method: 'evm_mine' as never, params: [] as never });
      },
      async setAutomine(on) {
        await chain.request({ method: 'evm_setAutomine' as never, params: [on] as never });
      },
      close,
    };
    return devnet;
  } catch (err) {
    await close();
    throw err;
  }
}
