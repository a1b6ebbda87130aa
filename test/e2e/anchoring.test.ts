/**
 * Registry anchoring end to end on a real anvil chain: registries become a few anchor
 * transactions, every receipt verifies through the API and through `ledgerhook verify` against the
 * anvil RPC alone, tampering fails, and a reorganisation that removes the anchor is repaired.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { createPublicClient, type Hex, http, type PublicClient } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import {
  allRegistries,
  anchoringEnv,
  anvilNetworksFile,
  independentLeaf,
  independentRoot,
  type RegistryData,
  waitAllAnchored,
} from '../helpers/anchoring.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { backends } from '../helpers/env.js';
import { meaningfulLines, runCli, waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { sampleRegistryBody } from '../helpers/registry-body.js';

type Receipt = {
  registryId: string;
  targetHash: string;
  salt: string;
  proof: ({ left: string } | { right: string })[];
  merkleRoot: string;
  anchors: {
    type: string;
    network: string;
    chain: string;
    sourceId: string;
    blockNumber: number;
    payload: string;
  }[];
};

const REGISTRIES = 1000;

async function inBatches<T>(
  count: number,
  concurrency: number,
  make: (i: number) => Promise<T>,
): Promise<T[]> {
  const results: T[] = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        results[i] = await make(i);
      }
    }),
  );
  return results;
}

describe.each(backends)('registry anchoring on anvil (%s)', (backend) => {
  let anvil: Anvil;
  let other: Anvil;
  let t: TestApp;
  let receiver: Receiver;
  let client: PublicClient;
  let signer: Hex;
  let configFile: string;
  const secrets = new Map<string, { secret: string; subscriptionId: string }>();

  beforeAll(async () => {
    [anvil, other] = await Promise.all([startAnvil(), startAnvil({ chainId: 31338 })]);
    receiver = await startReceiver();
    configFile = anvilNetworksFile({
      DEVNET: anvil,
      OTHERNET: other,
      // A node that is not there: port 9 (discard) has no listener here.
      DOWNNET: { rpcUrl: 'http://127.0.0.1:9', chainId: 999 },
    });
    const key = anvil.accounts[9]!.privateKey;
    signer = privateKeyToAccount(key).address;
    t = await startTestApp(backend, anchoringEnv(configFile, key, { LEDGERHOOK_ANCHOR_INTERVAL: '1s' }));
    client = createPublicClient({ transport: http(anvil.rpcUrl), cacheTime: 0 });
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
    await Promise.all([anvil?.stop(), other?.stop()]);
  });

  test(`${REGISTRIES} registries (both templates, some encrypted, some with callbacks) become a few anchor transactions; every receipt verifies through the API and through ledgerhook verify`, async () => {
    const created = await inBatches(REGISTRIES, 16, async (i) => {
      const body = sampleRegistryBody({
        title: `Record ${i}`,
        folder_id: `folder-${i % 7}`,
        template: i % 2 === 0 ? 'STORAGE' : 'PASS',
        data_encrypted: i % 3 === 0,
        ...(i % 50 === 0 ? { callback_url: `${receiver.url}/registry-events` } : {}),
        metadata: [{ type: 'NUMBER', key: 'n', value: String(i) }],
      });
      const response = await t.request('POST', '/api/v1/registry/create', { body });
      expect(response.status).toBe(201);
      const data = (response.body as { data: { id: string; secret?: string; subscription_id?: string } })
        .data;
      if (data.secret) secrets.set(data.id, { secret: data.secret, subscriptionId: data.subscription_id! });
      return data.id;
    });
    expect(new Set(created).size).toBe(REGISTRIES);

    const registries = await waitAllAnchored(t, REGISTRIES, 90_000);
    const txIds = new Set(registries.map((r) => r.anchor!.txId!));
    // A batch per interval while they were being created: a few transactions, not a thousand.
    expect(txIds.size).toBeGreaterThanOrEqual(1);
    expect(txIds.size).toBeLessThanOrEqual(20);

    // Each anchor transaction, read by viem: from the anchor key to itself, no value, LHK1 + root.
    const roots = new Map<string, string>();
    for (const txId of txIds) {
      const tx = await client.getTransaction({ hash: txId as Hex });
      expect(tx.from.toLowerCase()).toBe(signer.toLowerCase());
      expect(tx.to?.toLowerCase()).toBe(signer.toLowerCase());
      expect(tx.value).toBe(0n);
      expect(tx.input.slice(0, 10)).toBe('0x4c484b31');
      roots.set(txId, tx.input.slice(10));
      // And as transaction lookup shows it: the root in its note.
      const lookedUp = await t.request('GET', `/api/v1/transaction/DEVNET/${txId}`);
      expect(lookedUp.status).toBe(200);
      const note = Buffer.from((lookedUp.body as { note: string }).note, 'base64');
      expect(note.subarray(0, 4).toString('ascii')).toBe('LHK1');
      expect(note.subarray(4).toString('hex')).toBe(roots.get(txId));
    }
    for (const r of registries) expect(r.anchor!.root).toBe(roots.get(r.anchor!.txId!));

    // Every receipt: the leaf and root recomputed independently, and verified by the API.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-receipts-'));
    const byId = new Map(registries.map((r) => [r.id, r]));
    await inBatches(registries.length, 16, async (i) => {
      const registry = registries[i]!;
      const proof = await t.request('GET', `/api/v1/registry/${registry.id}/proof`);
      expect(proof.status).toBe(200);
      const receipt = (proof.body as { data: Receipt }).data;
      expect(receipt.anchors[0]!.sourceId).toBe(registry.anchor!.txId);
      expect(independentLeaf(registry, receipt.salt)).toBe(receipt.targetHash);
      expect(independentRoot(receipt.targetHash, receipt.proof)).toBe(receipt.merkleRoot);
      const verified = await t.request('POST', '/api/v1/registry/verify', {
        body: { receipt, content: registry },
      });
      expect(verified.status).toBe(200);
      expect((verified.body as { data: unknown }).data).toMatchObject({
        verified: true,
        checks: { content: true, path: true, transaction: true },
        blockNumber: registry.anchor!.blockNumber,
        problems: [],
      });
      fs.writeFileSync(path.join(dir, `${registry.id}.json`), proof.text);
    });

    // ledgerhook verify: the anvil RPC alone, no service, no database.
    const files = fs.readdirSync(dir).map((f) => path.join(dir, f));
    const cli = await runCli(['verify', '--rpc', anvil.rpcUrl, ...files], {});
    expect(meaningfulLines(cli.stderr)).toEqual([]);
    expect(cli.code).toBe(0);
    const lines = cli.stdout.trim().split('\n');
    expect(lines).toHaveLength(REGISTRIES);
    for (const line of lines)
      expect(line).toMatch(
        /^verified {2}[0-9a-f-]{36}: root in DEVNET transaction 0x[0-9a-f]{64}, block \d+, \d+ confirmations$/,
      );
    // With the content, for an encrypted one and a plain one.
    for (const registry of [
      registries.find((r) => r.data_encrypted)!,
      registries.find((r) => !r.data_encrypted)!,
    ]) {
      const content = path.join(dir, `content-${registry.id}.json`);
      fs.writeFileSync(content, JSON.stringify({ data: byId.get(registry.id) }));
      const one = await runCli(
        ['verify', '--rpc', anvil.rpcUrl, '--content', content, path.join(dir, `${registry.id}.json`)],
        {},
      );
      expect(one.code).toBe(0);
      expect(one.stdout).toMatch(/content matches/);
    }

    // registry.anchored reached each callback, signed, naming the transaction and the receipt.
    const events = await receiver.waitForRequests(secrets.size * 2, 30_000);
    // At least once: a delivery repeated (the same webhook-id) is the same event; each registry
    // has exactly one event, as it was anchored by one transaction.
    const anchoredEvents = [
      ...new Map(
        events
          .filter((e) => JSON.parse(e.body).type === 'registry.anchored')
          .map((e) => [e.headers['webhook-id'], e]),
      ).values(),
    ];
    expect(anchoredEvents.map((e) => JSON.parse(e.body).registry.id).sort()).toEqual(
      [...secrets.keys()].sort(),
    );
    for (const event of anchoredEvents) {
      const body = JSON.parse(event.body) as {
        registry: { id: string };
        subscriptionId: string;
        anchor: { network: string; txId: string; root: string; blockNumber: number };
        receipt_url: string;
      };
      const { secret, subscriptionId } = secrets.get(body.registry.id)!;
      expect(body.subscriptionId).toBe(subscriptionId);
      new Webhook(secret).verify(event.body, event.headers as Record<string, string>);
      expect(event.headers['ledgerhook-event-type']).toBe('registry.anchored');
      const registry = byId.get(body.registry.id)!;
      expect(body.anchor).toMatchObject({
        network: 'DEVNET',
        txId: registry.anchor!.txId,
        root: registry.anchor!.root,
      });
      const viaUrl = await fetch(body.receipt_url, { headers: { authorization: `Bearer ${t.token}` } });
      expect(viaUrl.status).toBe(200);
    }

    // /metrics: nothing waits, the batches are anchored, this process's anchorer is healthy.
    const metrics = (await t.request('GET', '/metrics')).text;
    expect(metrics).toMatch(/^ledgerhook_anchor_leaves_waiting 0$/m);
    const anchoredBatches = Number(
      /^ledgerhook_anchor_batches\{state="anchored"\} (\d+)$/m.exec(metrics)?.[1],
    );
    expect(anchoredBatches).toBe(txIds.size);
    expect(metrics).toMatch(/^ledgerhook_anchorer_healthy\{network="DEVNET"\} 1$/m);
  }, 240_000);

  test('tampering fails verification: content, salt, sibling, a root in no transaction, another network', async () => {
    const created = await t.request('POST', '/api/v1/registry/create', {
      body: sampleRegistryBody({ title: 'To tamper with' }),
    });
    expect(created.status).toBe(201);
    const id = (created.body as { data: { id: string } }).data.id;
    const registry = await waitFor(async () => {
      const r = ((await t.request('GET', `/api/v1/registry/${id}`)).body as { data: RegistryData }).data;
      return r.anchor?.status === 'anchored' ? r : undefined;
    }, 'the registry anchored');
    const receipt = (
      (await t.request('GET', `/api/v1/registry/${registry!.id}/proof`)).body as { data: Receipt }
    ).data;
    const verify = async (r: Receipt, content?: unknown) => {
      const answer = await t.request('POST', '/api/v1/registry/verify', { body: { receipt: r, content } });
      expect(answer.status).toBe(200);
      return (
        answer.body as {
          data: { verified: boolean; checks: Record<string, boolean | null>; problems: string[] };
        }
      ).data;
    };
    expect((await verify(receipt, registry)).verified).toBe(true);

    const metadata = structuredClone(registry!.metadata) as { value?: string }[];
    metadata[0]!.value = `${metadata[0]!.value}1`;
    const changed = await verify(receipt, { ...registry, metadata });
    expect(changed).toMatchObject({
      verified: false,
      checks: { content: false, path: true, transaction: true },
    });

    const flip = (hex: string) => `${hex.slice(0, -1)}${hex.at(-1) === '0' ? '1' : '0'}`;
    const salted = await verify({ ...receipt, salt: flip(receipt.salt) }, registry);
    expect(salted).toMatchObject({ verified: false, checks: { content: false } });

    // A sibling changed, or (alone in its batch, the leaf is the root) one made up.
    const sibling =
      receipt.proof.length === 0
        ? [{ left: 'cd'.repeat(32) }]
        : receipt.proof.map((s, i) =>
            i === 0 ? ('left' in s ? { left: flip(s.left) } : { right: flip(s.right) }) : s,
          );
    expect(await verify({ ...receipt, proof: sibling })).toMatchObject({
      verified: false,
      checks: { path: false },
    });

    // A root no transaction carries, with a path that does lead to it: a tree of our own.
    const forged = independentRoot(receipt.targetHash, [{ right: 'ab'.repeat(32) }]);
    const rootless = await verify({
      ...receipt,
      proof: [{ right: 'ab'.repeat(32) }],
      merkleRoot: forged,
      anchors: [{ ...receipt.anchors[0]!, payload: `4c484b31${forged}` }],
    });
    expect(rootless).toMatchObject({ verified: false, checks: { path: true, transaction: false } });

    // The receipt moved to another network: that chain has no such transaction.
    const elsewhere = await verify({
      ...receipt,
      anchors: [{ ...receipt.anchors[0]!, network: 'OTHERNET' }],
    });
    expect(elsewhere).toMatchObject({ verified: false, checks: { transaction: false } });
    // And a node of another chain, given to the CLI, is told apart by its chain id.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-tamper-'));
    const file = path.join(dir, 'receipt.json');
    fs.writeFileSync(file, JSON.stringify(receipt));
    const cli = await runCli(['verify', '--rpc', other.rpcUrl, file], {});
    expect(cli.code).toBe(1);
    expect(cli.stdout).toMatch(/^FAILED/);

    // A network whose node does not answer: 503 naming the network, not the node's address.
    const down = await t.request('POST', '/api/v1/registry/verify', {
      body: { receipt: { ...receipt, anchors: [{ ...receipt.anchors[0]!, network: 'DOWNNET' }] } },
    });
    expect(down.status).toBe(503);
    expect(down.text).toMatch(/DOWNNET/);
    expect(down.text).not.toMatch(/127\.0\.0\.1:9/);
  });

  test('a malformed receipt is a 400 naming the field, never a 500', async () => {
    const answer = await t.request('POST', '/api/v1/registry/verify', {
      body: { receipt: { type: 'LedgerhookReceipt/1', registryId: 'x', targetHash: 'zz' } },
    });
    expect(answer.status).toBe(400);
    expect(answer.text).toMatch(/receipt/);
  });

  test('anvil_reorg removing the anchor transaction: the batch is anchored again in a new transaction, and told again', async () => {
    const body = sampleRegistryBody({ title: 'Reorged', callback_url: `${receiver.url}/reorg` });
    const created = await t.request('POST', '/api/v1/registry/create', { body });
    expect(created.status).toBe(201);
    const { id, secret } = (created.body as { data: { id: string; secret: string } }).data;
    const get = async () =>
      ((await t.request('GET', `/api/v1/registry/${id}`)).body as { data: RegistryData }).data;
    const first = await waitFor(async () => {
      const r = await get();
      return r.anchor?.status === 'anchored' ? r : undefined;
    }, 'the registry anchored');
    const oldTx = first.anchor!.txId!;
    const oldReceipt = ((await t.request('GET', `/api/v1/registry/${id}/proof`)).body as { data: Receipt })
      .data;

    // Replace the blocks from the anchor's on with empty ones.
    const tip = Number(await client.getBlockNumber());
    const depth = tip - first.anchor!.blockNumber! + 1;
    await client.request({ method: 'anvil_reorg' as never, params: [depth, []] as never });
    await expect(client.getTransactionReceipt({ hash: oldTx as Hex })).rejects.toThrow();

    const second = await waitFor(
      async () => {
        const r = await get();
        return r.anchor?.status === 'anchored' && r.anchor.txId !== oldTx ? r : undefined;
      },
      'the registry anchored in a new transaction',
      30_000,
    );
    const newTx = second.anchor!.txId!;
    const included = await client.getTransactionReceipt({ hash: newTx as Hex });
    expect(included.status).toBe('success');
    // No registry points at the orphaned transaction.
    expect((await allRegistries(t)).filter((r) => r.anchor?.txId === oldTx)).toEqual([]);

    const receipt = ((await t.request('GET', `/api/v1/registry/${id}/proof`)).body as { data: Receipt }).data;
    expect(receipt.anchors[0]!.sourceId).toBe(newTx);
    const verify = async (r: Receipt) =>
      (
        (await t.request('POST', '/api/v1/registry/verify', { body: { receipt: r, content: second } }))
          .body as {
          data: { verified: boolean };
        }
      ).data.verified;
    expect(await verify(receipt)).toBe(true);
    expect(await verify(oldReceipt)).toBe(false);

    // Two registry.anchored events: the orphaned transaction's, then the new one's.
    const events = await waitFor(() => {
      const mine = receiver.requests.filter(
        (e) => e.path.endsWith('/reorg') && JSON.parse(e.body).type === 'registry.anchored',
      );
      return mine.length >= 2 ? mine : undefined;
    }, 'two registry.anchored events');
    const txs = events.map((e) => {
      new Webhook(secret).verify(e.body, e.headers as Record<string, string>);
      return (JSON.parse(e.body) as { anchor: { txId: string } }).anchor.txId;
    });
    expect(txs).toEqual([oldTx, newTx]);
  }, 60_000);
});
