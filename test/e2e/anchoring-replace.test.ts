/**
 * A stuck anchor transaction is replaced: same nonce, higher fees; whichever the chain takes,
 * the batch is anchored once.
 */
import { createPublicClient, type Hex, http, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import { anchoringEnv, anvilNetworksFile, type RegistryData } from '../helpers/anchoring.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import { sampleRegistryBody } from '../helpers/registry-body.js';

describe.each(backends)('a stuck anchor transaction (%s)', (backend) => {
  let anvil: Anvil;
  let t: TestApp;
  let client: PublicClient;
  let signer: Hex;

  beforeAll(async () => {
    anvil = await startAnvil();
    const key = anvil.accounts[9]!.privateKey;
    signer = privateKeyToAccount(key).address;
    client = createPublicClient({ transport: http(anvil.rpcUrl), cacheTime: 0 });
    t = await startTestApp(
      backend,
      anchoringEnv(anvilNetworksFile({ DEVNET: anvil }), key, {
        LEDGERHOOK_ANCHOR_INTERVAL: '200ms',
        LEDGERHOOK_ANCHOR_REPLACE_AFTER: '500ms',
      }),
    );
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await anvil?.stop();
  });

  test('is replaced by one with the same nonce and higher fees, which the chain then takes', async () => {
    // Nothing is mined until the test says so: the first transaction is stuck.
    await client.request({ method: 'evm_setAutomine' as never, params: [false] as never });
    const created = await t.request('POST', '/api/v1/registry/create', { body: sampleRegistryBody() });
    expect(created.status).toBe(201);
    const id = (created.body as { data: { id: string } }).data.id;

    type PoolEntry = { nonce: string; hash: string; maxFeePerGas: string; maxPriorityFeePerGas: string };
    const pooled = async () => {
      const content = (await client.request({ method: 'txpool_content' as never })) as {
        pending: Record<string, Record<string, PoolEntry>>;
      };
      const mine = Object.entries(content.pending).find(([a]) => a.toLowerCase() === signer.toLowerCase());
      return mine ? Object.values(mine[1]) : [];
    };
    const first = await waitFor(async () => (await pooled())[0], 'the anchor transaction in the pool');
    const replacement = await waitFor(async () => {
      const now = (await pooled())[0];
      return now && now.hash !== first.hash ? now : undefined;
    }, 'a replacement in the pool');
    expect(replacement.nonce).toBe(first.nonce);
    expect(BigInt(replacement.maxFeePerGas)).toBeGreaterThan(BigInt(first.maxFeePerGas));
    expect(BigInt(replacement.maxPriorityFeePerGas)).toBeGreaterThan(BigInt(first.maxPriorityFeePerGas));

    // Mined now: the chain holds one of them, and the registry names the one it holds.
    await client.request({ method: 'evm_setAutomine' as never, params: [true] as never });
    await client.request({ method: 'evm_mine' as never });
    const anchored = await waitFor(async () => {
      const r = ((await t.request('GET', `/api/v1/registry/${id}`)).body as { data: RegistryData }).data;
      return r.anchor?.status === 'anchored' ? r : undefined;
    }, 'the registry anchored');
    const receipt = await client.getTransactionReceipt({ hash: anchored.anchor!.txId as Hex });
    expect(receipt.status).toBe('success');
    expect(await client.getTransactionCount({ address: signer })).toBe(1);
  }, 60_000);
});
