/**
 * The follower on a real anvil chain and a real database: the head taken from newHeads, the
 * cursor kept in memory while the network's lock is held, a node whose HTTP side lags behind its
 * announcements, and a cursor another process moved.
 */
import path from 'node:path';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import pino from 'pino';
import { createPublicClient, http, numberToHex } from 'viem';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { type RpcProxy, startRpcProxy } from '../../../test/helpers/anvil.js';
import { backends, createTestEnvironment, type TestEnvironment } from '../../../test/helpers/env.js';
import { waitFor } from '../../../test/helpers/process.js';
import { readBlockActivity } from '../../chains/evm/activity.js';
import { type Anvil, startAnvil } from '../../chains/evm/anvil.js';
import { evmSource } from '../../chains/evm/source.js';
import type { EvmBlockActivity } from '../../chains/evm/types.js';
import type { Network } from '../../chains/networks.js';
import type { BlockSource } from '../../chains/source.js';
import { type Db, openStore, type Store } from '../../store/db.js';
import { createFollower, type Follower } from './follower.js';

const logger = pino({ level: 'silent' });
/** Rounds come from newHeads alone (or a lock retry): a poll never runs within a test. */
const NEVER_MS = 600_000;

interface Followed {
  follower: Follower;
  /** The source's tip() calls. */
  tips: () => number;
  /** The source's tip() calls answered. */
  tipsAnswered: () => number;
  /** The follower's reads through the database handle (select): its cursor, outside reorganisations. */
  reads: () => number;
  /** Heights of the blocks matched (each once, when committed), in order. */
  matched: number[];
  /** The most transactions of the follower in flight at once. */
  mostInFlight: () => number;
}

describe.each(backends)('follower (%s)', (backend) => {
  let environment: TestEnvironment;
  let store: Store;
  let anvil: Anvil;
  let proxy: RpcProxy;
  let networks = 0;
  const running: Follower[] = [];

  beforeAll(async () => {
    environment = await createTestEnvironment(backend);
    // The embedded database where the service keeps it (app/store.ts), on a worker thread as it runs it.
    store = await openStore(
      environment.databaseUrl
        ? { databaseUrl: environment.databaseUrl }
        : { pgliteDir: path.join(environment.dataDir, 'pglite'), pgliteWorker: true },
    );
    anvil = await startAnvil({ noMining: true });
    proxy = await startRpcProxy(anvil.rpcUrl);
  });
  afterEach(async () => {
    proxy.intercept(() => undefined);
    await Promise.all(running.splice(0).map((f) => f.stop()));
  });
  afterAll(async () => {
    await proxy?.close();
    await anvil?.stop();
    await store?.close();
    await environment?.cleanup();
  });

  const node = () => createPublicClient({ transport: http(anvil.rpcUrl) });
  const mine = async (): Promise<number> => {
    await node().request({ method: 'evm_mine' as never, params: [] as never });
    return Number(await node().getBlockNumber({ cacheTime: 0 }));
  };

  function network(): Network {
    return {
      name: `DEVNET${++networks}`,
      aliases: [],
      family: 'evm',
      chainId: anvil.chainId,
      symbol: 'ETH',
      decimals: 18,
      rpcUrls: [proxy.url],
      wsUrls: [anvil.wsUrl],
      indexerUrls: [],
      addressFormat: '0x…',
      defaultConfirmations: 1,
    };
  }

  /** A follower of `on` reading blocks through the proxy and heads from anvil's WebSocket. */
  function follow(
    on: Network,
    options: {
      pollIntervalMs?: number;
      lockRetryMs?: number;
      failTransaction?: () => boolean;
      /** Awaited before the network's lock is asked for (a first round slow to get going). */
      beforeLock?: Promise<void>;
    } = {},
  ): Followed {
    let tips = 0;
    let tipsAnswered = 0;
    let reads = 0;
    let inFlight = 0;
    let mostInFlight = 0;
    const matched: number[] = [];
    const source = evmSource(createPublicClient({ transport: http(proxy.url) }), readBlockActivity, {
      wsUrl: anvil.wsUrl,
      logger,
    });
    const counted: BlockSource<EvmBlockActivity> = {
      ...source,
      tip: async () => {
        tips++;
        const tip = await source.tip();
        tipsAnswered++;
        return tip;
      },
    };
    const db = new Proxy(store.db, {
      get(target, property, receiver) {
        if (property === 'select') reads++;
        if (property === 'transaction') {
          return async (...args: Parameters<Db['transaction']>) => {
            mostInFlight = Math.max(mostInFlight, ++inFlight);
            try {
              if (options.failTransaction?.()) throw new Error('the database failed (test)');
              return await target.transaction(...args);
            } finally {
              inFlight--;
            }
          };
        }
        return Reflect.get(target, property, receiver);
      },
    }) as Db;
    const follower = createFollower({
      db,
      network: on,
      source: counted,
      match: async (block) => {
        matched.push(block.height);
        return [];
      },
      logger,
      pollIntervalMs: options.pollIntervalMs ?? NEVER_MS,
      lockRetryMs: options.lockRetryMs ?? 50,
      acquireLock: async () => {
        await options.beforeLock;
        return store.tryLock(`follower:${on.name}`);
      },
    });
    running.push(follower);
    follower.start();
    return {
      follower,
      tips: () => tips,
      tipsAnswered: () => tipsAnswered,
      reads: () => reads,
      matched,
      mostInFlight: () => mostInFlight,
    };
  }

  const reached = (f: Followed, height: number) =>
    waitFor(() => ((f.follower.status().height ?? -1) >= height ? true : undefined), `block ${height}`);

  /** Started and following by newHeads: the subscription is up once a mined block is processed. */
  async function started(f: Followed): Promise<number> {
    await waitFor(() => (f.follower.status().height !== null ? true : undefined), 'the first round').catch(
      (err: Error) => {
        throw new Error(`${err.message} (${f.follower.status().lastError})`);
      },
    );
    // The subscription's own wake-up (blocks mined while subscribing) asks for the tip: the start's,
    // the first round's and its round's.
    await waitFor(() => (f.tips() >= 3 ? true : undefined), 'the subscription to wake the follower');
    const height = await mine();
    await reached(f, height);
    return height;
  }

  /** Whether a node request asks for the block at `height` (hex) or its receipts. */
  const asksForBlock = (request: { method: string; params?: unknown }, height: string) =>
    (request.method === 'eth_getBlockByNumber' || request.method === 'eth_getBlockReceipts') &&
    (request.params as unknown[])[0] === height;

  const consecutive = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

  test('rounds after a newHeads announcement read neither the node’s tip nor the stored cursor', async () => {
    const f = follow(network());
    const from = await started(f);
    const tips = f.tips();
    const reads = f.reads();
    let height = from;
    for (let i = 0; i < 5; i++) {
      height = await mine();
      await reached(f, height);
    }
    expect(f.tips() - tips).toBe(0);
    expect(f.reads() - reads).toBe(0);
    expect(f.follower.status().head).toBe(height);
    expect(f.matched.filter((h) => h > from)).toEqual(consecutive(from + 1, height));
  });

  test('a network new to the database begins at the head of when its follower started: a block mined before its first round got going is followed', async () => {
    let letGo!: () => void;
    const beforeLock = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    const f = follow(network(), { beforeLock });
    // The follower has started and its node has told it the head; its first round waits for the lock.
    await waitFor(() => (f.tipsAnswered() >= 1 ? true : undefined), 'the head at the start');
    const mined = await mine();
    expect(f.follower.status().height).toBeNull();
    letGo();
    await reached(f, mined);
    expect(f.matched).toEqual([mined]);
  });

  test('a failed round forgets the cursor: the next reads it, and no block is missed', async () => {
    const f = follow(network());
    const from = await started(f);
    const reads = f.reads();
    const failing = numberToHex(from + 1);
    proxy.intercept((request) =>
      request.method === 'eth_getBlockByNumber' && (request.params as unknown[])[0] === failing
        ? { error: { code: -32000, message: 'block unavailable (test)' } }
        : undefined,
    );
    await mine();
    await waitFor(() => (f.follower.status().errors > 0 ? true : undefined), 'the round to fail');
    proxy.intercept(() => undefined);
    const height = await mine(); // its announcement cuts the retry's pause short
    await reached(f, height);
    expect(f.reads() - reads).toBe(1);
    expect(f.matched.filter((h) => h > from)).toEqual(consecutive(from + 1, height));
  });

  test('a transaction failing in the middle of a catch-up loses no block: the next round goes on from the stored cursor', async () => {
    let transactions = 0;
    let failAt = Number.POSITIVE_INFINITY;
    const on = network();
    const f = follow(on, { failTransaction: () => ++transactions === failAt });
    const from = await started(f);
    // The second transaction of the catch-up below fails, with blocks read ahead of it.
    failAt = transactions + 2;
    await node().request({ method: 'anvil_mine' as never, params: ['0x28'] as never });
    await waitFor(() => (f.follower.status().errors > 0 ? true : undefined), 'the transaction to fail');
    const height = await mine(); // its announcement cuts the retry's pause short
    await reached(f, height);
    expect(transactions).toBeGreaterThan(failAt);
    expect(f.follower.status()).toMatchObject({ height, errors: 1 });
    expect(f.mostInFlight()).toBe(1);
    // Every block matched, in order; those of the failed transaction (and any matched after it in
    // that round) again, from the stored cursor.
    const after = f.matched.filter((h) => h > from);
    expect([...new Set(after)].sort((a, b) => a - b)).toEqual(consecutive(from + 1, height));
    const again = after.findIndex((h, i) => i > 0 && h <= after[i - 1]!);
    expect(again).toBeGreaterThan(0);
    expect(after.slice(0, again)).toEqual(consecutive(from + 1, after[again - 1]!));
    expect(after.slice(again)).toEqual(consecutive(after[again]!, height));
    const stored = (
      (await store.db.execute(
        sql`SELECT height FROM chain_cursors WHERE network = ${on.name}`,
      )) as unknown as {
        rows: { height: number | string }[];
      }
    ).rows;
    expect(Number(stored[0]!.height)).toBe(height);
  });

  test('an announced block the HTTP node does not serve yet is not skipped: polling fetches it', async () => {
    const f = follow(network(), { pollIntervalMs: 200 });
    const from = await started(f);
    // Until let go, the HTTP node is one block behind the WebSocket: its latest is `from`, and the
    // announced block is not there.
    const behind = await node().request({
      method: 'eth_getBlockByNumber',
      params: [numberToHex(from), false],
    });
    const lagging = numberToHex(from + 1);
    let hidden = 0;
    let staleTips = 0;
    proxy.intercept((request) => {
      const [at] = request.params as unknown[];
      if (request.method === 'eth_getBlockByNumber' && at === 'latest') {
        if (hidden > 0) staleTips++;
        return { result: behind };
      }
      if (asksForBlock(request, lagging)) {
        hidden++;
        return { result: null };
      }
      return undefined;
    });
    const announced = await mine();
    // The announced round asked for the block and ended below it; polling rounds see the old tip.
    await waitFor(() => (hidden > 0 ? true : undefined), 'the announced block asked for');
    await waitFor(() => (staleTips >= 3 ? true : undefined), 'polling rounds after it');
    expect(f.follower.status()).toMatchObject({ height: from, healthy: true, errors: 0 });
    proxy.intercept(() => undefined);
    await reached(f, announced);
    const height = await mine();
    await reached(f, height);
    expect(f.matched.filter((h) => h > from)).toEqual(consecutive(from + 1, height));
    expect(f.follower.status().errors).toBe(0);
  });

  test('a cursor another writer moved is never written over: the round fails, and the next reads it', async () => {
    const on = network();
    const f = follow(on);
    const from = await started(f);
    // The next block is not served for a while: its round ends below it, the cursor kept in memory.
    const next = numberToHex(from + 1);
    let hidden = 0;
    proxy.intercept((request) => {
      if (asksForBlock(request, next)) {
        hidden++;
        return { result: null };
      }
      return undefined;
    });
    const moved = await mine();
    // The block and its receipts are asked for at once; both answered empty, the round ends below it.
    await waitFor(() => (hidden >= 2 ? true : undefined), 'the block and its receipts asked for');
    expect(f.follower.status()).toMatchObject({ height: from, errors: 0 });
    // Meanwhile a process that took the network over unnoticed processes that block.
    const block = await node().getBlock({ blockNumber: BigInt(moved) });
    await store.db.execute(sql`
      INSERT INTO chain_headers (network, height, hash, parent_hash)
      VALUES (${on.name}, ${moved}, ${block.hash}, ${block.parentHash})`);
    await store.db.execute(
      sql`UPDATE chain_cursors SET height = ${moved}, hash = ${block.hash} WHERE network = ${on.name}`,
    );
    proxy.intercept(() => undefined);
    await mine();
    await waitFor(() => (f.follower.status().errors > 0 ? true : undefined), 'the round to fail');
    expect(f.follower.status().lastError).toMatch(/another process moved it/);
    const height = await mine(); // its announcement cuts the retry's pause short
    await reached(f, height);
    expect(f.follower.status()).toMatchObject({ healthy: true, errors: 1 });
    const [cursor] = (
      (await store.db.execute(
        sql`SELECT height FROM chain_cursors WHERE network = ${on.name}`,
      )) as unknown as {
        rows: { height: number | string }[];
      }
    ).rows;
    expect(Number(cursor!.height)).toBe(height);
  });

  // Only PostgreSQL has a lock another process can take (PGlite admits one process).
  if (backend === 'postgres')
    test('a follower that lost the lock and takes it again reads the cursor the other process left', async () => {
      const on = network();
      const a = follow(on);
      const from = await started(a);
      const b = follow(on);
      await waitFor(
        () => (b.follower.status().standby ? true : undefined),
        'the second follower to stand by',
      );
      // A's lock connection dies (the server ends it): A notices, B takes over.
      const admin = new pg.Client({ connectionString: environment.databaseUrl });
      await admin.connect();
      try {
        await admin.query(
          `SELECT pg_terminate_backend(pid, 5000) FROM pg_locks
           WHERE locktype = 'advisory' AND granted AND classid = 7461003
             AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        );
      } finally {
        await admin.end();
      }
      await waitFor(() => (a.follower.status().standby ? true : undefined), 'A to notice');
      await waitFor(() => (b.follower.status().standby ? undefined : true), 'B to take over');
      const first = await mine();
      const last = await mine();
      await reached(b, last);
      // B steps down; A takes the lock again and goes on from where B left the cursor.
      await b.follower.stop();
      await waitFor(() => (a.follower.status().standby ? undefined : true), 'A to take the lock again');
      const height = await mine();
      await reached(a, height);
      expect(b.matched).toEqual(consecutive(first, last));
      expect(a.matched.filter((h) => h > from)).toEqual([height]);
      expect(a.follower.status().errors).toBe(0);
    });
});
