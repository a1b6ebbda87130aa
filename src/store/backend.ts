/**
 * What every backend (PGlite in process or on a worker thread, PostgreSQL) hands the service. A file
 * of its own so that the backends and db.ts, which picks one of them, all import it without a cycle.
 */
import path from 'node:path';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { packageRoot } from '../shared/package-root.js';

/**
 * The database handle; a transaction has the same type, so operations accept either. It knows no
 * table: each domain's statements name their own (the table list is assembled in src/tables.ts,
 * for drizzle-kit), so the store depends on no domain.
 */
export type Db = PgDatabase<PgQueryResultHKT>;

export interface Store {
  readonly kind: 'pglite' | 'postgres';
  readonly db: Db;
  /** Round-trips to the database; rejects when it cannot be reached. */
  ping(): Promise<void>;
  /** Applies pending migrations; safe to call from several processes at once. */
  migrate(): Promise<void>;
  /**
   * Calls `onNotify` for every NOTIFY on `channel` (from any process on the same database).
   * Delivery is best effort: listeners also poll, so a notification lost during a reconnect only
   * delays work. `payload` is the NOTIFY payload; it is undefined after a reconnect, when
   * notifications may have been missed. Resolves to a function that stops listening.
   */
  listen(channel: string, onNotify: (payload?: string) => void): Promise<() => Promise<void>>;
  /**
   * Takes a session-level advisory lock named `name` on a connection of its own, if no other
   * process holds it. The lock lasts until `release()` or until that connection is lost
   * (`lost` resolves), e.g. when the process dies. The embedded database has one process, so
   * there it is always granted.
   */
  tryLock(name: string): Promise<HeldLock | undefined>;
  /**
   * The embedded database only: a consistent copy of its data directory while it runs (PGlite's
   * gzipped tarball; see pglite-snapshot.ts). PostgreSQL has pg_dump and pg_basebackup instead.
   */
  snapshotDataDir?(): Promise<Uint8Array>;
  close(): Promise<void>;
}

export interface HeldLock {
  /** Resolves if the lock is lost without release() (its connection dropped). */
  lost: Promise<void>;
  release(): Promise<void>;
}

export const migrationsFolder = path.join(packageRoot, 'drizzle');
