import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import pg from 'pg';
import * as tables from './tables.js';

export type Tables = typeof tables;
/** The typed database handle; a transaction has the same type, so operations accept either. */
export type Db = PgDatabase<PgQueryResultHKT, Tables>;

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
  close(): Promise<void>;
}

export interface HeldLock {
  /** Resolves if the lock is lost without release() (its connection dropped). */
  lost: Promise<void>;
  release(): Promise<void>;
}

export type StoreOptions = { databaseUrl: string; onError?: (err: Error) => void } | { pgliteDir: string };

export const migrationsFolder = fileURLToPath(new URL('../../drizzle', import.meta.url));

// The first half of two-key advisory locks taken by name (tryLock), apart from other users' locks.
const NAMED_LOCK_SPACE = 7_461_003;
// Serialises concurrent `migrate` calls from several processes sharing one PostgreSQL.
const MIGRATION_LOCK_KEY = 7_461_001;

export async function openStore(options: StoreOptions): Promise<Store> {
  if ('databaseUrl' in options) return openPostgres(options.databaseUrl, options.onError);
  return openPglite(options.pgliteDir);
}

async function openPglite(dir: string): Promise<Store> {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const client = await PGlite.create(dir);
  const db = drizzlePglite(client, { schema: tables }) as unknown as Db;
  return {
    kind: 'pglite',
    db,
    async ping() {
      await client.query('SELECT 1');
    },
    async migrate() {
      await migratePglite(drizzlePglite(client), { migrationsFolder });
    },
    async listen(channel, onNotify) {
      const unlisten = await client.listen(channel, (payload) => onNotify(payload));
      return async () => {
        if (!client.closed) await unlisten();
      };
    },
    async tryLock() {
      return { lost: new Promise<void>(() => {}), release: async () => {} };
    },
    async close() {
      if (!client.closed) await client.close();
    },
  };
}

async function openPostgres(connectionString: string, onError?: (err: Error) => void): Promise<Store> {
  const pool = new pg.Pool({ connectionString, max: 10, connectionTimeoutMillis: 5_000 });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', (err) => onError?.(err));
  const db = drizzlePg(pool, { schema: tables }) as unknown as Db;
  let closed = false;
  return {
    kind: 'postgres',
    db,
    async ping() {
      await pool.query('SELECT 1');
    },
    async migrate() {
      const lockClient = await pool.connect();
      try {
        await lockClient.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
        await migratePg(drizzlePg(pool), { migrationsFolder });
      } finally {
        await lockClient.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => {});
        lockClient.release();
      }
    },
    async listen(channel, onNotify) {
      // LISTEN needs a connection of its own, kept open and re-opened when it drops.
      let client: pg.Client | undefined;
      let stopped = false;
      const connect = async (): Promise<void> => {
        if (stopped || closed) return;
        const c = new pg.Client({ connectionString, connectionTimeoutMillis: 5_000 });
        c.on('notification', (message) => {
          if (message.channel === channel) onNotify(message.payload);
        });
        c.on('error', (err) => {
          onError?.(err);
          c.end().catch(() => {});
          if (client === c) client = undefined;
          setTimeout(() => void connect().catch(() => {}), 1_000).unref();
        });
        await c.connect();
        await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
        client = c;
        onNotify(); // anything sent while we were not listening is picked up now
      };
      await connect();
      return async () => {
        stopped = true;
        await client?.end().catch(() => {});
      };
    },
    async tryLock(name) {
      const client = new pg.Client({ connectionString, connectionTimeoutMillis: 5_000 });
      let signalLost: () => void = () => {};
      const lost = new Promise<void>((resolve) => {
        signalLost = resolve;
      });
      let released = false;
      client.on('error', (err) => {
        onError?.(err);
        if (!released) signalLost();
      });
      client.on('end', () => {
        if (!released) signalLost();
      });
      await client.connect();
      const { rows } = await client.query<{ ok: boolean }>(
        'SELECT pg_try_advisory_lock($1::int, hashtext($2)) AS ok',
        [NAMED_LOCK_SPACE, name],
      );
      if (!rows[0]?.ok) {
        released = true;
        await client.end().catch(() => {});
        return undefined;
      }
      return {
        lost,
        async release() {
          released = true;
          await client.end().catch(() => {});
        },
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      await pool.end();
    },
  };
}

/** True when `err` (or the driver error drizzle wrapped) is a unique-constraint violation. */
export function isUniqueViolation(err: unknown): boolean {
  let current: unknown = err;
  for (let depth = 0; current && depth < 4; depth++) {
    if ((current as { code?: unknown }).code === '23505') return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
