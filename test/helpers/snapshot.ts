import { sql } from 'drizzle-orm';
import type { Store } from '../../src/store/db.js';

/** Per store, the one statement that digests every table (tables do not change once migrated). */
const statements = new WeakMap<Store, Promise<string>>();

async function digestStatement(store: Store): Promise<string> {
  const tables = (await store.db.execute(
    sql`SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = 'public' ORDER BY tablename`,
  )) as unknown as { rows: { tablename: string }[] };
  return tables.rows
    .map(
      ({ tablename }) =>
        `SELECT '${tablename}' AS t, count(*)::int AS n, md5(coalesce(string_agg((to_jsonb(x) - 'last_used_at')::text, '|' ORDER BY (to_jsonb(x) - 'last_used_at')::text), '')) AS h FROM "${tablename}" x`,
    )
    .join(' UNION ALL ');
}

/**
 * A digest of every row of every table, to show that a rejected request changed nothing. A token's
 * `last_used_at` is left out: authenticating a request may record it, and that is not a change.
 * One statement for all tables: on PGlite a statement per table (and the catalog's lookup each
 * time) cost 40 ms a snapshot, and bad-input tests take two per case.
 */
export async function snapshotDatabase(store: Store): Promise<Record<string, string>> {
  let statement = statements.get(store);
  if (!statement) {
    statement = digestStatement(store);
    statements.set(store, statement);
  }
  const result = (await store.db.execute(sql.raw(await statement))) as unknown as {
    rows: { t: string; n: number; h: string }[];
  };
  const digest: Record<string, string> = {};
  for (const row of result.rows) digest[row.t] = `${row.n}:${row.h}`;
  return digest;
}
