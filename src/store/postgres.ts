/**
 * PostgreSQL, which several processes may share: pools whose queries have a deadline, migrations
 * under an advisory lock, and LISTEN and named locks on connections of their own. A server that goes
 * away fails queries by their deadline; it neither ends the process nor keeps a pooled connection.
 */
import type { Duplex } from 'node:stream';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { type Db, type HeldLock, migrationsFolder, type Store } from './backend.js';
import { QueryTimeoutError } from './unavailable.js';

export interface PostgresOptions {
  /** Errors of connections nobody is waiting on (dropped while idle, a listener's connection). */
  onError?: (err: Error) => void;
  /**
   * A query without an answer within this fails with QueryTimeoutError and its connection is
   * closed (the server stops the statement at the same deadline). 10 s by default.
   */
  queryTimeoutMs?: number;
  /** Connecting, or waiting for a free pooled connection, fails after this. 5 s by default. */
  connectTimeoutMs?: number;
}

// The first half of two-key advisory locks taken by name (tryLock), apart from other users' locks.
const NAMED_LOCK_SPACE = 7_461_003;
// Serialises concurrent `migrate` calls from several processes sharing one PostgreSQL.
const MIGRATION_LOCK_KEY = 7_461_001;

/** Pipelined connections of a PostgreSQL store (runInTransaction), by the pool drizzle uses. */
export const pipelinedPools = new WeakMap<pg.Pool, pg.Pool>();
/** At most this many runInTransaction calls hold a connection at once; others wait for one. */
const PIPELINED_CONNECTIONS = 2;

// A server that vanished without closing (host down, cable cut, NAT entry dropped) is noticed by
// TCP keepalive after this much silence plus about ten unanswered probes, instead of the system's
// two hours, even on a connection that only listens or holds a lock.
const KEEPALIVE_DELAY_MS = 10_000;
// The server ends a transaction left idle this long (its client partitioned away mid-transaction),
// so its locks do not outlive the client. Our transactions never wait on anything but the database.
const IDLE_IN_TRANSACTION_MS = 60_000;
/** How long a listener waits between reconnection attempts, at most. */
const MAX_LISTEN_RETRY_MS = 5_000;

type Querier = { query: (...args: unknown[]) => unknown };

/** The socket under a node-postgres client (not part of pg's typed API). */
export function socketOf(client: pg.Client): Duplex | undefined {
  return (client as unknown as { connection?: { stream?: Duplex } }).connection?.stream;
}

/**
 * Gives every query of `client` a deadline. A query that outlives it closes the connection: its
 * queries fail with QueryTimeoutError at once, and a pool never hands the connection out again
 * (an abandoned query left on a live connection could still commit later, or leave a transaction
 * open for the next borrower).
 */
function withQueryDeadline(client: pg.Client, timeoutMs: number): pg.Client {
  const querier = client as unknown as Querier;
  const query = querier.query.bind(client);
  const abandon = () => socketOf(client)?.destroy(new QueryTimeoutError(timeoutMs));
  querier.query = (...args: unknown[]) => {
    const timer = setTimeout(abandon, timeoutMs);
    const done = () => clearTimeout(timer);
    const last = args.at(-1);
    try {
      if (typeof last === 'function') {
        // Callback style (pg-pool's own queries).
        args[args.length - 1] = (...results: unknown[]) => {
          done();
          (last as (...r: unknown[]) => void)(...results);
        };
        return query(...args);
      }
      const result = query(...args) as Promise<unknown>;
      result.then(done, done);
      return result;
    } catch (err) {
      done();
      throw err;
    }
  };
  return client;
}

/**
 * A borrowed connection that breaks goes back to the pool at once, to be discarded, and a second
 * release is ignored. drizzle's transaction() sends BEGIN before its try/finally, so a BEGIN that
 * fails (the database away) would otherwise never give its connection back: a few outages would
 * use up the pool for good, and closing the pool would wait forever.
 */
function returnLostConnections(pool: pg.Pool): void {
  const connect = pool.connect.bind(pool) as (callback?: unknown) => Promise<pg.PoolClient> | undefined;
  const guarded = (client: pg.PoolClient): pg.PoolClient => {
    const release = client.release;
    let released = false;
    const onError = (err: Error) => client.release(err);
    client.release = (err?: Error | boolean) => {
      if (released) return;
      released = true;
      client.removeListener('error', onError);
      release(err);
    };
    client.on('error', onError);
    return client;
  };
  // Callers with a callback (pg-pool's own query()) release on error themselves.
  pool.connect = ((callback?: unknown) =>
    callback ? connect(callback) : connect()!.then(guarded)) as typeof pool.connect;
}

/** How a PostgreSQL store connects. */
interface PostgresSettings {
  /** Every connection's: where, within what time, with TCP keepalive. */
  connection: pg.ClientConfig;
  /** `connection` with the server's deadlines: a statement's, a transaction's left idle. */
  limited: pg.ClientConfig;
  queryTimeoutMs: number;
}

function postgresSettings(connectionString: string, options: PostgresOptions): PostgresSettings {
  const queryTimeoutMs = options.queryTimeoutMs ?? 10_000;
  const connectTimeoutMs = options.connectTimeoutMs ?? 5_000;
  const connection = {
    connectionString,
    connectionTimeoutMillis: connectTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
  } satisfies pg.ClientConfig;
  const limited = {
    ...connection,
    statement_timeout: queryTimeoutMs,
    idle_in_transaction_session_timeout: Math.max(IDLE_IN_TRANSACTION_MS, 2 * queryTimeoutMs),
  } satisfies pg.ClientConfig;
  return { connection, limited, queryTimeoutMs };
}

/**
 * The pool drizzle uses and the pipelined one (runInTransaction), registered in pipelinedPools;
 * their connections have the query deadline.
 */
function openPools(
  { limited, queryTimeoutMs }: PostgresSettings,
  onError: ((err: Error) => void) | undefined,
): { pool: pg.Pool; pipelined: pg.Pool } {
  const Client = class extends pg.Client {
    constructor(config?: pg.ClientConfig) {
      super(config);
      withQueryDeadline(this, queryTimeoutMs);
      // A connection lost while borrowed (between a transaction's queries) would otherwise be an
      // 'error' without a listener, which ends the process; its queries fail on their own.
      this.on('error', () => {});
    }
  };
  const pool = new pg.Pool({ ...limited, max: 10, Client });
  // Connections that send a query without waiting for the answer to the one before
  // (runInTransaction), apart from the pool drizzle uses so nothing else runs in that mode.
  const pipelined = new pg.Pool({ ...limited, max: PIPELINED_CONNECTIONS, pipeline: true, Client });
  for (const p of [pool, pipelined]) {
    // An idle client losing its connection must not crash the process; the next query reconnects.
    p.on('error', (err) => onError?.(err));
    returnLostConnections(p);
  }
  pipelinedPools.set(pool, pipelined);
  return { pool, pipelined };
}

async function migratePostgres(
  connection: pg.ClientConfig,
  onError: ((err: Error) => void) | undefined,
): Promise<void> {
  // A connection of its own without the query deadline: a migration may rebuild a big table,
  // and waits here while another process migrates. Ending the session releases the lock.
  const client = new pg.Client(connection);
  client.on('error', (err) => onError?.(err));
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    await migratePg(drizzlePg(client), { migrationsFolder });
  } finally {
    await client.end().catch(() => {});
  }
}

/** What a store's connections of their own (a listener's, a lock's) are opened with. */
interface DedicatedConnections {
  /** A connection of its own, with the query deadline, for listening or holding a lock. */
  client(): pg.Client;
  onError: ((err: Error) => void) | undefined;
  /** Whether the store was closed. */
  closed(): boolean;
}

async function listenPostgres(
  { client: dedicatedClient, onError, closed }: DedicatedConnections,
  channel: string,
  onNotify: (payload?: string) => void,
): Promise<() => Promise<void>> {
  // LISTEN needs a connection of its own, kept open and re-opened whenever it drops, for as
  // long as the database stays away.
  let client: pg.Client | undefined;
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;
  let retryMs = 1_000;
  const reconnectLater = () => {
    if (stopped || closed() || retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      connect().catch(() => reconnectLater());
    }, retryMs);
    retry.unref();
    retryMs = Math.min(MAX_LISTEN_RETRY_MS, retryMs * 2);
  };
  const connect = async (): Promise<void> => {
    if (stopped || closed()) return;
    const c = dedicatedClient();
    c.on('notification', (message) => {
      if (message.channel === channel) onNotify(message.payload);
    });
    c.on('error', (err) => {
      onError?.(err);
      c.end().catch(() => {});
      if (client !== c) return; // still connecting: connect() rejects and is retried
      client = undefined;
      reconnectLater();
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    } catch (err) {
      await c.end().catch(() => {});
      throw err;
    }
    if (stopped || closed()) {
      await c.end().catch(() => {});
      return;
    }
    client = c;
    retryMs = 1_000;
    onNotify(); // anything sent while we were not listening is picked up now
  };
  await connect();
  return async () => {
    stopped = true;
    if (retry) clearTimeout(retry);
    await client?.end().catch(() => {});
  };
}

async function tryLockPostgres(
  { client: dedicatedClient, onError }: DedicatedConnections,
  name: string,
): Promise<HeldLock | undefined> {
  const client = dedicatedClient();
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
  let granted: boolean | undefined;
  try {
    await client.connect();
    const { rows } = await client.query<{ ok: boolean }>(
      'SELECT pg_try_advisory_lock($1::int, hashtext($2)) AS ok',
      [NAMED_LOCK_SPACE, name],
    );
    granted = rows[0]?.ok;
  } finally {
    if (!granted) {
      // Not ours, or not known: closing the session drops whatever it may have been granted.
      released = true;
      await client.end().catch(() => {});
    }
  }
  if (!granted) return undefined;
  return {
    lost,
    async release() {
      released = true;
      await client.end().catch(() => {});
    },
  };
}

export async function openPostgres(connectionString: string, options: PostgresOptions): Promise<Store> {
  const { onError } = options;
  const settings = postgresSettings(connectionString, options);
  const { limited, queryTimeoutMs } = settings;
  /** A connection of its own, with the query deadline, for listening or holding a lock. */
  const dedicatedClient = () => withQueryDeadline(new pg.Client(limited), queryTimeoutMs);

  const { pool, pipelined } = openPools(settings, onError);
  const db = drizzlePg(pool) as unknown as Db;
  let closed = false;
  const dedicated: DedicatedConnections = { client: dedicatedClient, onError, closed: () => closed };
  return {
    kind: 'postgres',
    db,
    async ping() {
      await pool.query('SELECT 1');
    },
    migrate: () => migratePostgres(settings.connection, onError),
    listen: (channel, onNotify) => listenPostgres(dedicated, channel, onNotify),
    tryLock: (name) => tryLockPostgres(dedicated, name),
    async close() {
      if (closed) return;
      closed = true;
      await Promise.all([pool.end(), pipelined.end()]);
    },
  };
}
