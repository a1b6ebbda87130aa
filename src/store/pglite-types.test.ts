import { PGlite, type QueryOptions, types } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/pglite';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { keepTextTypes, type TextTypes } from './pglite-types.js';

/**
 * What drizzle's PGlite session keeps as text, read from what it passes with a statement (to a
 * client that only records), so the list here is drizzle's and not a copy of ours.
 */
async function drizzleTextTypes(): Promise<number[]> {
  let passed: QueryOptions | undefined;
  const recorder = {
    query: async (_text: string, _params: unknown[], options: QueryOptions) => {
      passed = options;
      return { rows: [], fields: [], affectedRows: 0 };
    },
  };
  await drizzle({ client: recorder as unknown as PGlite }).execute(sql`SELECT 1`);
  return Object.keys(passed?.parsers ?? {}).map(Number);
}

const keepAll = (oids: readonly number[]) => Object.fromEntries(oids.map((oid) => [oid, (v: string) => v]));

/**
 * The database keeps drizzle's types (and json) as text itself, so statements pass no parsers;
 * every answer must still be what PGlite gives with the statement's own parsers.
 */
describe('PGlite keeping text types (pglite-types)', () => {
  let db: PGlite;

  const STATEMENTS = [
    `SELECT id, ts, tstz, iv, d, nums, tss, tstzs, ivs, ds, j, js, jb, label FROM kinds ORDER BY id`,
    // Two columns of one name: an object row holds the last.
    `SELECT tstz AS x, label AS x, j AS y, id AS y, label AS z, ts AS z FROM kinds ORDER BY id`,
    `SELECT '2026-11-28 08:00:00.123456+00'::timestamptz AS at, '{"a":[1,"x"]}'::json AS doc`,
    `INSERT INTO kinds (id) VALUES (99) RETURNING id, tstz`,
    `SELECT * FROM kinds WHERE false`,
  ];
  let DRIZZLE: number[] = [];
  const cases = (): { rowMode: 'object' | 'array'; asText: number[] }[] => [
    { rowMode: 'object', asText: DRIZZLE },
    { rowMode: 'array', asText: DRIZZLE },
    { rowMode: 'array', asText: [types.JSON] },
    { rowMode: 'object', asText: [] },
    { rowMode: 'array', asText: [types.TIMESTAMPTZ, types.JSONB] },
  ];

  async function answers(
    run: (text: string, options: QueryOptions, asText: Set<number>) => Promise<unknown>,
  ) {
    const out: unknown[] = [];
    for (const { rowMode, asText } of cases()) {
      for (const text of STATEMENTS) {
        await db.exec('BEGIN');
        out.push(await run(text, { rowMode }, new Set(asText)));
        await db.exec('ROLLBACK');
      }
    }
    return out;
  }

  let before: unknown[];
  let textTypes: TextTypes;

  beforeAll(async () => {
    DRIZZLE = await drizzleTextTypes();
    db = await PGlite.create();
    await db.exec(`CREATE TABLE kinds (
      id int PRIMARY KEY, ts timestamp, tstz timestamptz, iv interval, d date, nums numeric[],
      tss timestamp[], tstzs timestamptz[], ivs interval[], ds date[], j json, js json[], jb jsonb,
      label text)`);
    await db.exec(`INSERT INTO kinds VALUES
      (1, '2026-11-28 08:00:00.5', '2026-11-28 08:00:00.123456+02', '1 day 02:03:04', '2026-11-28',
       '{1.5,NULL,2}', '{"2026-01-01 00:00:00",NULL}', '{"2026-01-01 00:00:00+00"}', '{"1 hour"}',
       '{2026-01-02,NULL}', '{"a":{"b":[1,2]}}', ARRAY['{"k":1}'::json, NULL], '{"z":true}', 'one'),
      (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)`);
    // What PGlite answers with each statement's own parsers, before the database keeps any type.
    before = await answers((text, options, asText) =>
      db.query(text, [], asText.size > 0 ? { ...options, parsers: keepAll([...asText]) } : options),
    );
    textTypes = keepTextTypes(db);
  });
  afterAll(async () => {
    await db?.close();
  });

  test('answers what PGlite answers with per-statement parsers: values, nulls, arrays, duplicate names', async () => {
    const after = await answers(async (text, options, asText) =>
      textTypes.finish(await db.query(text, [], textTypes.options(options.rowMode, asText)), asText),
    );
    expect(after).toEqual(before);
    // The comparison saw parsed values and kept text alike.
    const [drizzleRow] = (before[0] as { rows: Record<string, unknown>[] }).rows;
    const [plainRow] = (before[STATEMENTS.length * 3] as { rows: Record<string, unknown>[] }).rows;
    expect(typeof drizzleRow!.tstz).toBe('string');
    expect(plainRow!.tstz).toBeInstanceOf(Date);
    expect(plainRow!.j).toEqual({ a: { b: [1, 2] } });
    expect(plainRow!.js).toEqual([{ k: 1 }, null]);
    expect((plainRow!.tstzs as unknown[])[0]).toBeInstanceOf(Date);
  });

  test("a statement keeping drizzle's types or json passes no parsers; another type still does", () => {
    expect(DRIZZLE).toContain(types.TIMESTAMPTZ);
    expect(textTypes.options('array', new Set(DRIZZLE))).toEqual({ rowMode: 'array' });
    expect(textTypes.options('array', new Set([types.JSON]))).toEqual({ rowMode: 'array' });
    const jsonb = textTypes.options('object', new Set([types.TIMESTAMPTZ, types.JSONB]));
    expect(Object.keys(jsonb.parsers ?? {})).toEqual([String(types.JSONB)]);
  });
});
