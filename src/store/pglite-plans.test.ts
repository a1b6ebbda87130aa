import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createPlanCache } from './pglite-plans.js';

describe('PGlite statements planned once (pglite-plans)', () => {
  let db: PGlite;
  const cacheFor = (maxStatements?: number) =>
    createPlanCache({
      serializers: db.serializers,
      maxStatements,
    });

  beforeAll(async () => {
    db = await PGlite.create();
    await db.exec(`CREATE TABLE t (
      id uuid PRIMARY KEY, label text NOT NULL, at timestamptz, doc jsonb, tags text[], n bigint, ok boolean)`);
  });
  afterAll(async () => {
    await db?.close();
  });

  const INSERT = `INSERT INTO t (id, label, at, doc, tags, n, ok) VALUES ($1, $2, $3, $4, $5, $6, $7)
    RETURNING id, label, at, doc, tags, n, ok`;
  const READ = 'SELECT id, label, at, doc, tags, n, ok FROM t WHERE id = ANY($1::uuid[]) ORDER BY label';

  test('answers what PGlite answers, for every parameter type, once prepared', async () => {
    const plans = cacheFor();
    const awkward = [
      "it's a 'quote'",
      'back\\slash \\x00 and $1 and ?',
      'emoji 😀 and ünïcödé',
      '',
      "'); DROP TABLE t; --",
    ];
    const ids: string[] = [];
    for (const [i, label] of awkward.entries()) {
      const id = `00000000-0000-4000-8000-00000000000${i}`;
      ids.push(id);
      const params = [
        id,
        label,
        new Date(Date.UTC(2026, 0, 1, 0, 0, i, 123)),
        { label, nested: [1, 'two', null], quote: "'" },
        [label, 'x,y', '{braces}', 'with "double"'],
        i === 0 ? null : 9_007_199_254_740_993n,
        i % 2 === 0,
      ];
      const result = await plans.query(db, INSERT, params, { rowMode: 'object' }, false);
      expect(result.rows[0]).toMatchObject({ id, label, doc: { label }, tags: params[4], ok: i % 2 === 0 });
    }
    // Prepared from its second use on: each insert after the first ran as EXECUTE.
    expect(plans.preparedCount()).toBe(1);
    for (const rowMode of ['object', 'array'] as const) {
      const plain = await db.query(READ, [ids], { rowMode });
      for (let round = 0; round < 3; round++) {
        const planned = await plans.query(db, READ, [ids], { rowMode }, false);
        expect(planned.rows).toEqual(plain.rows);
        expect(planned.fields).toEqual(plain.fields);
      }
    }
    expect(plans.preparedCount()).toBe(2);
  });

  test('errors are the same: a duplicate key names its constraint; a NUL is refused as PGlite refuses it', async () => {
    const plans = cacheFor();
    const id = '10000000-0000-4000-8000-000000000000';
    const row = (label: string) => [id, label, null, null, null, null, null];
    await plans.query(db, INSERT, row('first'), {}, false);
    const direct = await db.query(INSERT, row('again')).catch((err) => err);
    for (let i = 0; i < 3; i++) {
      const planned = await plans.query(db, INSERT, row('again'), {}, false).catch((err) => err);
      expect(planned).toMatchObject({ code: '23505', constraint: 't_pkey', message: direct.message });
    }
    const nul = [`20000000-0000-4000-8000-000000000000`, 'a\u0000b', null, null, null, null, null];
    const plainNul = await db.query(INSERT, nul).catch((err) => err);
    const plannedNul = await plans.query(db, INSERT, nul, {}, false).catch((err) => err);
    expect(plannedNul).toBeInstanceOf(Error);
    expect(plannedNul.code).toBe(plainNul.code);
    expect((await db.query('SELECT 1 FROM t WHERE id = $1', [nul[0]])).rows).toHaveLength(0);
  });

  test('inside a transaction: prepared statements roll back with it, and one PREPARE refuses leaves it usable', async () => {
    const plans = cacheFor();
    const id = '30000000-0000-4000-8000-000000000000';
    // PostgreSQL cannot type $1 here, so PREPARE fails, as the statement itself does.
    const untyped = 'SELECT 1 AS one WHERE $1 IS NULL';
    const plainError = await db.query(untyped, [null]).catch((err) => err);
    expect(plainError.code).toBe('42P18');
    await db
      .transaction(async (tx) => {
        for (let i = 0; i < 3; i++)
          await plans.query(
            tx,
            INSERT,
            [id.replace('3', String(4 + i)), `tx ${i}`, null, null, null, null, null],
            {},
            true,
          );
        await plans.query(tx, untyped, [null], {}, true).catch((err) => expect(err.code).toBe('42P18'));
        await tx.rollback();
      })
      .catch(() => {});
    expect((await db.query("SELECT 1 FROM t WHERE label LIKE 'tx %'")).rows).toHaveLength(0);
    await db.transaction(async (tx) => {
      // Used twice more in a transaction: the second PREPARE attempt is under a savepoint, and the
      // insert after it commits.
      // Ending in a comment, which must not hide what follows the PREPARE.
      const commented = 'SELECT $1::int + 1 AS x -- the answer';
      await plans.query(tx, commented, [1], {}, true);
      expect((await plans.query<{ x: number }>(tx, commented, [41], {}, true)).rows).toEqual([{ x: 42 }]);
      await plans.query(tx, INSERT, [id, 'kept', null, null, null, null, null], {}, true);
    });
    expect((await db.query('SELECT label FROM t WHERE id = $1', [id])).rows).toEqual([{ label: 'kept' }]);
  });

  test('beyond its size the least recently used statement is let go, and prepared again when needed', async () => {
    const plans = cacheFor(2);
    const statements = [1, 2, 3].map((k) => `SELECT $1::int * ${k} AS v`);
    for (const text of [...statements, statements[0]!, ...statements, statements[0]!])
      for (let i = 0; i < 2; i++) {
        const k = statements.indexOf(text) + 1;
        expect((await plans.query<{ v: number }>(db, text, [7], {}, false)).rows).toEqual([{ v: 7 * k }]);
      }
    expect(plans.preparedCount()).toBeLessThanOrEqual(2);
    const left = (
      await db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement LIKE 'PREPARE lh_plan_% AS SELECT $1::int *%'",
      )
    ).rows[0]!.n;
    expect(left).toBeLessThanOrEqual(3);
  });
});
