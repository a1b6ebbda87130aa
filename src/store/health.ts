/**
 * What `ledgerhook doctor` asks of a database, on either backend: which server it is, whether it
 * can be written (a streaming standby cannot), which of this release's migrations it lacks, and
 * which master key its encrypted records are bound to. Reads only.
 */
import fs from 'node:fs';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import { migrationsFolder, type Store } from './db.js';

export interface MigrationStatus {
  /** Migrations of this release, by tag (0016_derived_notification_ids), in order. */
  known: string[];
  /** Those the database has not applied yet (what `ledgerhook migrate` would apply). */
  pending: string[];
  /** Migrations the database holds that this release does not know: a newer release migrated it. */
  unknown: number;
}

export interface DatabaseHealth {
  kind: Store['kind'];
  /** The server's version (`SHOW server_version`): PGlite reports the PostgreSQL it embeds. */
  version: string;
  /** `pg_is_in_recovery()`: a standby, which refuses every write. */
  standby: boolean;
  migrations: MigrationStatus;
  /** The master key id the database's encrypted records use; undefined before a service first ran. */
  masterKeyId: string | undefined;
}

interface JournalEntry {
  tag: string;
  when: number;
}

/** This release's migrations, as drizzle's migrator reads them (meta/_journal.json). */
function journal(): JournalEntry[] {
  const file = path.join(migrationsFolder, 'meta', '_journal.json');
  const parsed = JSON.parse(fs.readFileSync(file, 'utf8')) as { entries: JournalEntry[] };
  return parsed.entries;
}

type Row = Record<string, unknown>;

async function rows(store: Store, query: ReturnType<typeof sql>): Promise<Row[]> {
  const result = (await store.db.execute(query)) as unknown as { rows?: Row[] } | Row[];
  return Array.isArray(result) ? result : (result.rows ?? []);
}

/**
 * Drizzle's migrator applies every migration of the journal newer than the newest one recorded
 * (`created_at` is the journal's `when`), so the pending ones are exactly those.
 */
async function migrationStatus(store: Store): Promise<MigrationStatus> {
  const entries = journal();
  const [exists] = await rows(store, sql`SELECT to_regclass('drizzle.__drizzle_migrations') AS name`);
  const applied = exists?.name
    ? (await rows(store, sql`SELECT created_at FROM drizzle.__drizzle_migrations`)).map((r) =>
        Number(r.created_at),
      )
    : [];
  const newest = applied.length > 0 ? Math.max(...applied) : -1;
  const knownTimes = new Set(entries.map((e) => e.when));
  return {
    known: entries.map((e) => e.tag),
    pending: entries.filter((e) => e.when > newest).map((e) => e.tag),
    unknown: applied.filter((when) => !knownTimes.has(when)).length,
  };
}

export async function databaseHealth(store: Store): Promise<DatabaseHealth> {
  const [server] = await rows(
    store,
    sql`SELECT current_setting('server_version') AS version, pg_is_in_recovery() AS standby`,
  );
  const migrations = await migrationStatus(store);
  const [settingsTable] = await rows(store, sql`SELECT to_regclass('public.settings') AS name`);
  const [key] = settingsTable?.name
    ? await rows(store, sql`SELECT value FROM settings WHERE key = 'master_key_id'`)
    : [];
  return {
    kind: store.kind,
    version: String(server?.version ?? 'unknown'),
    standby: server?.standby === true || server?.standby === 't',
    migrations,
    masterKeyId: typeof key?.value === 'string' ? key.value : undefined,
  };
}
