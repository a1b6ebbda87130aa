/**
 * Anchoring in tests: a service anchoring on a real anvil chain (network DEVNET), and what a
 * third party would do to check a receipt by itself, with its own few lines of hashing.
 */

/**
 * Anchoring in tests: a service anchoring on a real anvil chain (network DEVNET), and what a
 * third party would do to check a receipt by itself, with its own few lines of hashing.
 */
import crypto, { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import canonicalize from 'canonicalize';
import { eq } from 'drizzle-orm';
import { anchorBatches, anchorLeaves } from '../../src/anchor/schema.js';
import type { Anvil } from '../../src/chains/evm/anvil.js';
import type { Db } from '../../src/store/db.js';
import type { TestApp } from './app.js';
import { waitFor } from './process.js';

/** A config file naming the anvil chains as networks (DEVNET first). */
export function anvilNetworksFile(
  chains: Record<string, Anvil | { rpcUrl: string; chainId: number }>,
): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-anchor-'));
  const file = path.join(dir, 'ledgerhook.json');
  const networks: Record<string, unknown> = {};
  for (const [name, chain] of Object.entries(chains)) {
    networks[name] = { family: 'evm', chainId: chain.chainId, symbol: 'ETH', rpc: [chain.rpcUrl] };
  }
  fs.writeFileSync(file, JSON.stringify({ networks }));
  return file;
}

/** The environment of a service that anchors on DEVNET with `key`. */
export function anchoringEnv(
  configFile: string,
  key: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    LEDGERHOOK_CONFIG: configFile,
    LEDGERHOOK_ROLES: 'api,dispatcher,watcher',
    LEDGERHOOK_ANCHOR_NETWORK: 'DEVNET',
    LEDGERHOOK_ANCHOR_KEY: key,
    LEDGERHOOK_ANCHOR_INTERVAL: '500ms',
    // The tests create a thousand registries and poll their list, faster than the account limit
    // allows now that requests are cheap; the limit has tests of its own.
    LEDGERHOOK_RATE_LIMIT: 'off',
    // Registries read by id are kept for a minute: every anchoring change a test waits to see must
    // reach the reads by its NOTIFY.
    LEDGERHOOK_REGISTRY_CACHE_TTL: '1m',
    ...extra,
  };
}

export interface RegistryData {
  id: string;
  anchor: { status: string; txId: string | null; root: string | null; blockNumber: number | null } | null;
  [field: string]: unknown;
}

/** Every registry of the account, through the list endpoint. */
export async function allRegistries(t: TestApp, token?: string): Promise<RegistryData[]> {
  const all: RegistryData[] = [];
  let cursor: string | null = null;
  do {
    const query: string = cursor ? `?limit=100&cursor=${cursor}` : '?limit=100';
    const page = await t.request('GET', `/api/v1/registry${query}`, { token });
    if (page.status !== 200) throw new Error(`list answered ${page.status}: ${page.text}`);
    const body = page.body as { data: RegistryData[]; next_cursor: string | null };
    all.push(...body.data);
    cursor = body.next_cursor;
  } while (cursor !== null);
  return all;
}

/** Resolves when every listed registry is anchored (each in a transaction `accept` likes). */
export async function waitAllAnchored(
  t: TestApp,
  count: number,
  timeoutMs = 60_000,
  accept: (r: RegistryData) => boolean = () => true,
): Promise<RegistryData[]> {
  return waitFor(
    async () => {
      const all = await allRegistries(t);
      return all.length === count && all.every((r) => r.anchor?.status === 'anchored' && accept(r))
        ? all
        : undefined;
    },
    `${count} registries anchored`,
    timeoutMs,
  );
}

const sha256 = (...parts: Buffer[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};

/** The leaf, as a third party computes it from the registry and the salt (canonicalize, node:crypto). */
export function independentLeaf(registry: Record<string, unknown>, saltHex: string): string {
  const fields = [
    'id',
    'created_at',
    'title',
    'description',
    'folder_id',
    'template',
    'metadata',
    'callback_url',
    'data_encrypted',
  ];
  const document = Object.fromEntries(fields.map((f) => [f, registry[f]]));
  return sha256(Buffer.from(saltHex, 'hex'), Buffer.from(canonicalize(document)!, 'utf8')).toString('hex');
}

/** The root a receipt's path leads to, folded as its documentation says. */
export function independentRoot(leafHex: string, proof: ({ left: string } | { right: string })[]): string {
  let node = Buffer.from(leafHex, 'hex');
  for (const step of proof) {
    node =
      'left' in step
        ? sha256(Buffer.from(step.left, 'hex'), node)
        : sha256(node, Buffer.from(step.right, 'hex'));
  }
  return node.toString('hex');
}

export interface TestBatch {
  state: 'pending' | 'anchored' | 'final';
  network: string;
  txId?: string;
  blockNumber?: number;
  anchoredAt?: Date;
}

/**
 * Puts a registry's leaf into a batch of its own, as the anchoring worker does, so that tests of
 * what a registry shows of its anchoring need no chain. Returns the batch's root.
 */
export async function putLeafInBatch(db: Db, registryId: string, batch: TestBatch): Promise<string> {
  const id = crypto.randomUUID();
  const root = crypto.randomBytes(32).toString('hex');
  await db.insert(anchorBatches).values({
    id,
    network: batch.network,
    chain: 'eip155:31337',
    root,
    leafCount: 1,
    state: batch.state,
    txId: batch.txId ?? null,
    blockNumber: batch.blockNumber ?? null,
    blockHash: batch.txId ? `0x${crypto.randomBytes(32).toString('hex')}` : null,
    anchoredAt: batch.anchoredAt ?? null,
    createdAt: new Date(),
  });
  const updated = await db
    .update(anchorLeaves)
    .set({ batchId: id, position: 0 })
    .where(eq(anchorLeaves.registryId, registryId))
    .returning({ registryId: anchorLeaves.registryId });
  if (updated.length !== 1) throw new Error(`registry ${registryId} has no leaf`);
  return root;
}
