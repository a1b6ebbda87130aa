/**
 * SIGKILL while a batch is being anchored, at each step (signed but not sent, sent but not
 * mined, mined but not yet deep enough): after a restart every registry ends anchored, and every
 * batch's root is on chain exactly once.
 */
import { createPublicClient, type Hex, http, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import { anchoringEnv, anvilNetworksFile } from '../helpers/anchoring.js';
import { type RpcProxy, startRpcProxy } from '../helpers/anvil.js';
import { backends, createTestEnvironment, type TestEnvironment } from '../helpers/env.js';
import { type ServiceProcess, startServiceProcess, waitFor } from '../helpers/process.js';
import { sampleRegistryBody } from '../helpers/registry-body.js';

const PER_PHASE = 20;

/** What the test reads of an answer: a created registry's id, or a registry's anchor. */
type Answer = { data: { id: string; anchor: { status: string; txId: string } | null } };

describe.each(backends)('anchoring survives SIGKILL at every step (%s)', (backend) => {
  let anvil: Anvil;
  let proxy: RpcProxy;
  let environment: TestEnvironment;
  let env: Record<string, string>;
  let client: PublicClient;
  let signer: Hex;
  let service: ServiceProcess | undefined;
  let token = '';
  const created: string[] = [];

  beforeAll(async () => {
    anvil = await startAnvil();
    proxy = await startRpcProxy(anvil.rpcUrl);
    environment = await createTestEnvironment(backend);
    const key = anvil.accounts[9]!.privateKey;
    signer = privateKeyToAccount(key).address;
    env = {
      ...environment.env,
      LOG_LEVEL: 'info',
      ...anchoringEnv(anvilNetworksFile({ DEVNET: { rpcUrl: proxy.url, chainId: anvil.chainId } }), key, {
        LEDGERHOOK_ANCHOR_INTERVAL: '300ms',
        LEDGERHOOK_ANCHOR_CONFIRMATIONS: '3',
        // Never replaced here: a replacement is not what these kills are about.
        LEDGERHOOK_ANCHOR_REPLACE_AFTER: '1h',
      }),
    };
    client = createPublicClient({ transport: http(anvil.rpcUrl), cacheTime: 0 });
  }, 60_000);
  afterAll(async () => {
    await service?.stop('SIGKILL');
    await proxy?.close();
    await anvil?.stop();
    await environment?.cleanup();
  });

  async function start(): Promise<void> {
    service = await startServiceProcess(env);
    token ||= service.printedToken!;
  }
  async function kill(): Promise<void> {
    await service!.stop('SIGKILL');
    service = undefined;
  }
  async function api(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: Answer }> {
    const response = await fetch(`${service!.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: response.status, body: (await response.json()) as Answer };
  }
  async function createSome(label: string): Promise<void> {
    for (let i = 0; i < PER_PHASE; i++) {
      const answer = await api(
        'POST',
        '/api/v1/registry/create',
        sampleRegistryBody({ title: `${label} ${i}`, data_encrypted: i % 2 === 0 }),
      );
      expect(answer.status).toBe(201);
      created.push(answer.body.data.id);
    }
  }
  const sentRaw = () => proxy.methods.filter((m) => m === 'eth_sendRawTransaction').length;
  const mine = (blocks = 1) =>
    client.request({ method: 'anvil_mine' as never, params: [`0x${blocks.toString(16)}`] as never });
  /** Every registry created so far anchored, blocks mined meanwhile for the confirmations. */
  async function allAnchored(): Promise<Map<string, string>> {
    return waitFor(
      async () => {
        await mine();
        const anchors = new Map<string, string>();
        for (const id of created) {
          const { body } = await api('GET', `/api/v1/registry/${id}`);
          if (body.data.anchor?.status !== 'anchored') return undefined;
          anchors.set(id, body.data.anchor!.txId);
        }
        return anchors;
      },
      'every registry anchored',
      60_000,
    );
  }

  test('killed after signing (the node refused to take it), after sending (not mined), and before confirmation: each registry anchored exactly once', async () => {
    await start();

    // 1. Signed and recorded, never sent: the node refuses every transaction until the restart.
    proxy.intercept((r) => (r.method === 'eth_sendRawTransaction' ? { httpStatus: 503 } : undefined));
    await createSome('signed');
    await waitFor(() => (sentRaw() > 0 ? true : undefined), 'a transaction offered to the node');
    await kill();
    expect(await client.getTransactionCount({ address: signer })).toBe(0);
    proxy.intercept(() => undefined);
    await start();
    await allAnchored();

    // 2. Sent, in the mempool, not mined when the process dies.
    await client.request({ method: 'evm_setAutomine' as never, params: [false] as never });
    const before = sentRaw();
    await createSome('sent');
    await waitFor(async () => {
      const pending = await client.getTransactionCount({ address: signer, blockTag: 'pending' });
      const latest = await client.getTransactionCount({ address: signer });
      return sentRaw() > before && pending > latest ? true : undefined;
    }, 'a transaction in the mempool');
    await kill();
    await start();
    await client.request({ method: 'evm_setAutomine' as never, params: [true] as never });
    await allAnchored();

    // 3. Mined, but not yet 3 deep when the process dies.
    const mined = await client.getTransactionCount({ address: signer });
    await createSome('mined');
    await waitFor(
      async () => ((await client.getTransactionCount({ address: signer })) > mined ? true : undefined),
      'the anchor transaction mined',
    );
    await kill();
    await start();
    const anchors = await allAnchored();

    // Exactly once: every anchor transaction on chain carries a different root, and every
    // registry points at one of them.
    const tip = Number(await client.getBlockNumber());
    const roots = new Map<string, string>();
    for (let n = 1; n <= tip; n++) {
      const block = await client.getBlock({ blockNumber: BigInt(n), includeTransactions: true });
      for (const tx of block.transactions) {
        if (tx.from.toLowerCase() !== signer.toLowerCase()) continue;
        expect(tx.input.slice(0, 10)).toBe('0x4c484b31');
        const root = tx.input.slice(10);
        expect([...roots.values()]).not.toContain(root);
        roots.set(tx.hash, root);
      }
    }
    expect(new Set(anchors.values())).toEqual(new Set(roots.keys()));
    expect(anchors.size).toBe(3 * PER_PHASE);
  }, 240_000);
});
