import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { isUniqueViolation, openStore, type PgliteWorkerStore, runStatement } from './db.js';
import { isDatabaseUnavailable } from './unavailable.js';

const rowsOf = <T>(result: unknown): T[] => (result as { rows: T[] }).rows;

/** The embedded database on a worker thread: what the service relies on, and a worker that dies. */
describe('PGlite on a worker thread', () => {
  let dir: string;
  let store: PgliteWorkerStore;

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-pglite-worker-'));
    store = (await openStore({ pgliteDir: dir, pgliteWorker: true })) as PgliteWorkerStore;
    await store.migrate();
    await store.db.execute(sql`CREATE TABLE probe (id int PRIMARY KEY, at timestamptz, doc jsonb)`);
  });
  afterAll(async () => {
    await store?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('a transaction commits all of its statements, or none when it throws', async () => {
    await store.db.transaction(async (tx) => {
      await tx.execute(sql`INSERT INTO probe (id) VALUES (1)`);
      await tx.execute(sql`INSERT INTO probe (id) VALUES (2)`);
    });
    await expect(
      store.db.transaction(async (tx) => {
        await tx.execute(sql`INSERT INTO probe (id) VALUES (3)`);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    const rows = await runStatement<{ id: number }>(
      store.db,
      { name: 'probe_ids', text: 'SELECT id FROM probe ORDER BY id' },
      [],
    );
    expect(rows.map((r) => r.id)).toEqual([1, 2]);
  });

  test('values cross the thread as the driver gives them; errors keep their SQLSTATE', async () => {
    const at = new Date('2026-11-24T03:00:00.123Z');
    await runStatement(
      store.db,
      { name: 'probe_insert', text: 'INSERT INTO probe (id, at, doc) VALUES ($1, $2, $3)' },
      [10, at, JSON.stringify({ a: [1, 'x'] })],
    );
    const rows = await runStatement<{ at: Date; doc: unknown }>(
      store.db,
      { name: 'probe_get', text: 'SELECT at, doc FROM probe WHERE id = $1' },
      [10],
    );
    expect(rows).toEqual([{ at, doc: { a: [1, 'x'] } }]);
    const duplicate = await store.db.execute(sql`INSERT INTO probe (id) VALUES (10)`).catch((e) => e);
    expect(isUniqueViolation(duplicate)).toBe(true);
    expect(isDatabaseUnavailable(duplicate)).toBe(false);
  });

  test('transactions begun together run one at a time, each statement in its own, a failed one undone alone', async () => {
    // The begin is sent without waiting for it, so each statement reaches the worker while other
    // transactions are open or still waiting for the database.
    await store.db.execute(sql`INSERT INTO probe (id, doc) VALUES (100, '{"n": 0}')`);
    const bump = (i: number) =>
      store.db.transaction(async (tx) => {
        const [row] = rowsOf<{ n: number }>(
          await tx.execute(sql`SELECT (doc->>'n')::int AS n FROM probe WHERE id = 100`),
        );
        await tx.execute(
          sql`UPDATE probe SET doc = jsonb_build_object('n', ${row!.n + 1}::int) WHERE id = 100`,
        );
        await tx.execute(sql`INSERT INTO probe (id) VALUES (${200 + i})`);
        if (i % 4 === 3) throw new Error(`transaction ${i} gives up`);
      });
    const outcomes = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => bump(i)));
    expect(outcomes.map((o) => o.status)).toEqual(
      Array.from({ length: 12 }, (_, i) => (i % 4 === 3 ? 'rejected' : 'fulfilled')),
    );
    const [counter] = rowsOf<{ n: number }>(
      await store.db.execute(sql`SELECT (doc->>'n')::int AS n FROM probe WHERE id = 100`),
    );
    expect(counter!.n).toBe(9);
    const inserted = rowsOf<{ id: number }>(
      await store.db.execute(sql`SELECT id FROM probe WHERE id >= 200 ORDER BY id`),
    );
    expect(inserted.map((r) => r.id)).toEqual([200, 201, 202, 204, 205, 206, 208, 209, 210]);
  });

  test('NOTIFY reaches a listener on the service thread', async () => {
    const heard: (string | undefined)[] = [];
    const stop = await store.listen('probe_channel', (payload) => heard.push(payload));
    await store.db.execute(sql`SELECT pg_notify('probe_channel', 'hello')`);
    const deadline = Date.now() + 5_000;
    while (heard.length === 0 && Date.now() < deadline) await new Promise((r) => setImmediate(r));
    await stop();
    expect(heard).toEqual(['hello']);
  });

  test('a worker that dies fails the statement in flight and every later one as unavailable, at once', async () => {
    const inFlight = store.db.execute(sql`SELECT pg_sleep(2)`).catch((e) => e);
    await store.killWorker();
    const started = Date.now();
    const [during, after] = await Promise.all([inFlight, store.ping().catch((e) => e)]);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(isDatabaseUnavailable(during)).toBe(true);
    expect(isDatabaseUnavailable(after)).toBe(true);
  });
});
