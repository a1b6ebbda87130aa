import { sql } from 'drizzle-orm';
import type { Store } from '../../src/store/db.js';

/**
 * A digest of every row of every table, to show that a rejected request changed nothing. A token's
 * `last_used_at` is left out: authenticating a request may record it, and that is not a change.
 */
export async function snapshotDatabase(store: Store): Promise<Record<string, string>> {
  const tables = (await store.db.execute(
    sql`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`,
  )) as unknown as { rows: { table_name: string }[] };
  const digest: Record<string, string> = {};
  for (const { table_name } of tables.rows) {
    const result = (await store.db.execute(
      sql.raw(
        `SELECT count(*)::int AS n, md5(coalesce(string_agg((to_jsonb(t) - 'last_used_at')::text, '|' ORDER BY (to_jsonb(t) - 'last_used_at')::text), '')) AS h FROM "${table_name}" t`,
      ),
    )) as unknown as { rows: { n: number; h: string }[] };
    const row = result.rows[0]!;
    digest[table_name] = `${row.n}:${row.h}`;
  }
  return digest;
}
