import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { backends, createTestEnvironment, type TestEnvironment } from '../../test/helpers/env.js';
import { type FaultProxy, startFaultProxy } from '../../test/helpers/fault-proxy.js';
import { isUniqueViolation, openStore, runInTransaction, type Statement, type Store } from './db.js';

const insert = (ids: number[]): Statement => ({
  name: `tx_probe_insert_${ids.length}`,
  text: `INSERT INTO tx_probe (id) VALUES ${ids.map((_, i) => `($${i + 1})`).join(', ')} RETURNING id`,
});

async function idsIn(store: Store): Promise<number[]> {
  const result = (await store.db.execute('SELECT id FROM tx_probe ORDER BY id')) as unknown as {
    rows: { id: number }[];
  };
  return result.rows.map((r) => r.id);
}

describe.each(backends)('runInTransaction (%s)', (backend) => {
  let environment: TestEnvironment;
  let store: Store;

  beforeAll(async () => {
    environment = await createTestEnvironment(backend);
    store = await openStore(
      environment.databaseUrl ? { databaseUrl: environment.databaseUrl } : { pgliteDir: environment.dataDir },
    );
    await store.db.execute('CREATE TABLE tx_probe (id int PRIMARY KEY)');
  });
  afterAll(async () => {
    await store?.close();
    await environment?.cleanup();
  });

  test('a statement that fails writes none of its rows, and the store goes on working', async () => {
    await store.db.execute('TRUNCATE tx_probe');
    expect(await runInTransaction(store.db, insert([1, 2]), [1, 2])).toEqual([{ id: 1 }, { id: 2 }]);
    // More failures than there are connections: none is left inside a failed transaction.
    for (let round = 0; round < 5; round++) {
      const failed = await runInTransaction(store.db, insert([3, 1]), [3, 1]).catch((err: unknown) => err);
      expect(isUniqueViolation(failed)).toBe(true);
    }
    expect(await idsIn(store)).toEqual([1, 2]);
    await runInTransaction(store.db, insert([3]), [3]);
    expect(await idsIn(store)).toEqual([1, 2, 3]);
  });

  test('calls at once, more than the connections, each commit their rows', async () => {
    await store.db.execute('TRUNCATE tx_probe');
    const ids = Array.from({ length: 40 }, (_, i) => 100 + i);
    await Promise.all(ids.map((id) => runInTransaction(store.db, insert([id]), [id])));
    expect(await idsIn(store)).toEqual(ids);
  });
});

describe.runIf(backends.includes('postgres'))('runInTransaction when the answers are lost (postgres)', () => {
  let environment: TestEnvironment;
  let store: Store;
  let admin: pg.Client;
  let proxy: FaultProxy;
  const QUERY_TIMEOUT_MS = 3_000;

  beforeAll(async () => {
    environment = await createTestEnvironment('postgres');
    const target = new URL(environment.databaseUrl!);
    proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port || 5432) });
    store = await openStore({
      databaseUrl: proxy.through(environment.databaseUrl!),
      queryTimeoutMs: QUERY_TIMEOUT_MS,
    });
    admin = new pg.Client({ connectionString: environment.databaseUrl });
    await admin.connect();
    await admin.query('CREATE TABLE tx_probe (id int PRIMARY KEY)');
  });
  afterAll(async () => {
    await store?.close();
    await admin?.end();
    await proxy?.close();
    await environment?.cleanup();
  });

  test('a statement that ran but whose answer never came back is not committed', async () => {
    await runInTransaction(store.db, insert([1]), [1]); // connections open while answers flow
    await proxy.setMode('mute');
    const started = Date.now();
    const outcome = runInTransaction(store.db, insert([42]), [42]).then(
      () => 'committed',
      (err: Error) => err.name,
    );
    // The statement reached PostgreSQL and ran there: its session is past it, waiting for more.
    const database = new URL(environment.databaseUrl!).pathname.slice(1);
    const deadline = Date.now() + QUERY_TIMEOUT_MS - 500;
    for (;;) {
      const { rows } = await admin.query(
        `SELECT state FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'INSERT INTO tx_probe%' AND state <> 'active'
           AND query_start > now() - interval '2 seconds' AND pid <> pg_backend_pid()`,
        [database],
      );
      if (rows.length > 0) break;
      if (Date.now() > deadline) throw new Error('the statement did not reach PostgreSQL in time');
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(await outcome).toBe('QueryTimeoutError');
    expect(Date.now() - started).toBeLessThan(QUERY_TIMEOUT_MS + 2_000);
    await proxy.setMode('pass');
    // Once its connection is gone, nothing of the abandoned statement stays.
    const gone = Date.now() + 5_000;
    const open = `SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND state = 'idle in transaction'`;
    while ((await admin.query(open, [database])).rowCount) {
      if (Date.now() > gone) throw new Error('the abandoned transaction is still open');
      await new Promise((r) => setTimeout(r, 20));
    }
    expect((await admin.query('SELECT id FROM tx_probe ORDER BY id')).rows).toEqual([{ id: 1 }]);
    // And the store answers again on a connection of its own.
    await runInTransaction(store.db, insert([2]), [2]);
    expect((await admin.query('SELECT id FROM tx_probe ORDER BY id')).rows).toEqual([{ id: 1 }, { id: 2 }]);
  });
});
