import fs from 'node:fs';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { Worker } from 'node:worker_threads';
import { PGlite, type QueryOptions, type Transaction } from '@electric-sql/pglite';
import { type SQL, sql } from 'drizzle-orm';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import pg from 'pg';
import { packageRoot, runningFromSources } from '../shared/package-root.js';
import { createPlanCache, type PgliteTarget } from './pglite-plans.js';
import { snapshotPglite } from './pglite-snapshot.js';
import { keepTextTypes, type TextTypes } from './pglite-types.js';
import type { PgliteReply, PgliteRequest } from './pglite-worker.js';
import { QueryTimeoutError } from './unavailable.js';

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

export type StoreOptions =
  | (PostgresOptions & { databaseUrl: string })
  | {
      pgliteDir: string;
      /** Runs the embedded database on a worker thread instead of the service's event loop. */
      pgliteWorker?: boolean;
    };

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

export const migrationsFolder = path.join(packageRoot, 'drizzle');

/**
 * A row limit written into the statement's text instead of bound as a parameter. With LIMIT bound,
 * PostgreSQL makes a custom plan at every execution even of a prepared statement (the generic
 * plan's estimate for an unknown LIMIT loses), which on PGlite was 0.7-1.1 ms per dispatcher claim;
 * written in, the statement keeps one plan (bench/README.md, bench:delivery, "Fifth pass").
 */
export function limitOf(rows: number): SQL {
  if (!Number.isSafeInteger(rows) || rows < 0) throw new RangeError(`not a row limit: ${rows}`);
  return sql.raw(`LIMIT ${rows}`);
}

// The first half of two-key advisory locks taken by name (tryLock), apart from other users' locks.
const NAMED_LOCK_SPACE = 7_461_003;
// Serialises concurrent `migrate` calls from several processes sharing one PostgreSQL.
const MIGRATION_LOCK_KEY = 7_461_001;

export async function openStore(options: StoreOptions): Promise<Store> {
  if ('databaseUrl' in options) return openPostgres(options.databaseUrl, options);
  return options.pgliteWorker ? openPgliteWorker(options.pgliteDir) : openPglite(options.pgliteDir);
}

async function openPglite(dir: string): Promise<Store> {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const client = await PGlite.create(dir);
  const db = drizzlePglite(withPlanCache(client, keepTextTypes(client))) as unknown as Db;
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
    snapshotDataDir: () => snapshotPglite(client),
    async close() {
      if (!client.closed) await client.close();
    },
  };
}

/**
 * The client drizzle talks to in this thread: PGlite whose queries, and its transactions' queries,
 * go through the plan cache (pglite-plans.ts), as they do on the worker thread.
 */
function withPlanCache(client: PGlite, textTypes: TextTypes): PGlite {
  const plans = createPlanCache({
    serializers: client.serializers,
  });
  const noTextTypes: ReadonlySet<number> = new Set();
  const keptAsText = (options: QueryOptions) =>
    options.parsers ? new Set(Object.keys(options.parsers).map(Number)) : noTextTypes;
  const through = <T extends PgliteTarget>(target: T, inTransaction: boolean): T =>
    new Proxy(target, {
      get(object, key, receiver) {
        // Parsers passed with a statement keep their types as text (drizzle's, readRows'), as
        // they do through the worker (PgliteWorkerClient sends their types).
        if (key === 'query')
          return async (text: string, params: unknown[] = [], options: QueryOptions = {}) => {
            const asText = keptAsText(options);
            const run = textTypes.options(options.rowMode ?? 'object', asText);
            return textTypes.finish(await plans.query(object, text, params, run, inTransaction), asText);
          };
        if (key === 'exec')
          return async (text: string, options: QueryOptions = {}) =>
            (await object.exec(text, options)).map((r) => textTypes.finish(r, keptAsText(options)));
        if (key === 'transaction' && !inTransaction)
          return <R>(run: (tx: Transaction) => Promise<R>) =>
            client.transaction((tx) => run(through(tx, true)));
        const value = Reflect.get(object, key, receiver);
        return typeof value === 'function' ? value.bind(object) : value;
      },
    });
  return through(client, false);
}

/** What the worker answers when it is gone: the database is unavailable (503), never a hang. */
const WORKER_GONE = 'PGlite is closed';

interface WorkerQueryOptions {
  rowMode?: 'array' | 'object';
  parsers?: Record<number, unknown>;
  /** The caller reads only `rows`: the reply leaves out `fields` (one object per column to copy). */
  withoutFields?: boolean;
}

/**
 * PGlite on a worker thread (src/store/pglite-worker.ts) behind the part of PGlite's client
 * that drizzle and this store use: query, exec, transaction, listen, close. A worker that dies
 * fails every waiting and later call at once with WORKER_GONE.
 */
class PgliteWorkerClient {
  closed = false;
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  private readonly listeners = new Map<string, Set<(payload: string) => void>>();
  private nextId = 1;
  private nextTx = 1;
  readonly ready: Promise<void>;

  constructor(private readonly worker: Worker) {
    this.ready = new Promise((resolve, reject) => {
      this.pending.set(0, { resolve: () => resolve(), reject });
    });
    worker.on('message', (reply: PgliteReply) => {
      if ('notify' in reply) {
        for (const listener of this.listeners.get(reply.notify) ?? []) listener(reply.payload);
        return;
      }
      const waiting = this.pending.get(reply.id);
      if (!waiting) return;
      this.pending.delete(reply.id);
      if (reply.ok) waiting.resolve(reply.value);
      else waiting.reject(Object.assign(new Error(String(reply.error.message)), reply.error));
    });
    const gone = (cause?: unknown) => {
      this.closed = true;
      const err = new Error(WORKER_GONE, cause === undefined ? undefined : { cause });
      for (const waiting of this.pending.values()) waiting.reject(err);
      this.pending.clear();
    };
    worker.on('error', gone);
    worker.on('exit', () => gone());
  }

  private call<T>(request: DistributiveOmit<PgliteRequest, 'id'>): Promise<T> {
    if (this.closed) return Promise.reject(new Error(WORKER_GONE));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.worker.postMessage({ ...request, id });
    });
  }

  private querier(tx?: number) {
    return {
      query: (text: string, params?: unknown[], options?: WorkerQueryOptions) =>
        this.call<{ rows: unknown[]; fields: unknown[]; affectedRows?: number }>({
          op: 'query',
          text,
          params,
          rowMode: options?.rowMode,
          textTypes: options?.parsers ? Object.keys(options.parsers).map(Number) : undefined,
          ...(options?.withoutFields ? { withoutFields: true } : {}),
          tx,
        }),
      exec: (text: string) => this.call<unknown[]>({ op: 'exec', text, tx }),
    };
  }

  query(text: string, params?: unknown[], options?: WorkerQueryOptions) {
    return this.querier().query(text, params, options);
  }

  exec(text: string) {
    return this.querier().exec(text);
  }

  async transaction<T>(run: (tx: ReturnType<PgliteWorkerClient['querier']>) => Promise<T>): Promise<T> {
    // Not waited for: the worker holds this transaction's statements until it has begun, and
    // fails them with its error if it could not (a trip less per transaction; a thread woken
    // from idle answers its first message in ~0.25 ms).
    const tx = this.nextTx++;
    const begun = this.call({ op: 'begin', tx });
    begun.catch(() => {});
    let result: T;
    try {
      result = await run(this.querier(tx));
      await begun;
    } catch (err) {
      await this.call({ op: 'end', tx, commit: false }).catch(() => {});
      throw err;
    }
    await this.call({ op: 'end', tx, commit: true });
    return result;
  }

  async listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>> {
    let set = this.listeners.get(channel);
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
      await this.call({ op: 'listen', channel });
    }
    set.add(onNotify);
    return async () => {
      set.delete(onNotify);
      if (set.size === 0 && this.listeners.get(channel) === set) {
        this.listeners.delete(channel);
        await this.call({ op: 'unlisten', channel }).catch(() => {});
      }
    };
  }

  /** The worker's database, copied while it runs (see pglite-snapshot.ts). */
  snapshotDataDir(): Promise<Uint8Array> {
    return this.call<Uint8Array>({ op: 'snapshot' });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.call({ op: 'close' }).catch(() => {});
    this.closed = true;
    await this.worker.terminate();
  }

  /** Ends the worker as a crash would (tests). */
  async kill(): Promise<void> {
    await this.worker.terminate();
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/**
 * The worker: the script built beside the bundle, or (tests, running the TypeScript sources) the
 * source imported through tsx, which a worker thread does not inherit.
 */
function startPgliteWorker(dir: string): Worker {
  if (!runningFromSources) {
    return new Worker(path.join(packageRoot, 'dist', 'store', 'pglite-worker.js'), { workerData: { dir } });
  }
  const source = new URL('./pglite-worker.ts', import.meta.url).href;
  const boot = `import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(source)}); })`;
  return new Worker(boot, { eval: true, workerData: { dir } });
}

export type PgliteWorkerStore = Store & {
  /** Ends the worker as a crash would (tests). */ killWorker(): Promise<void>;
};

async function openPgliteWorker(dir: string): Promise<PgliteWorkerStore> {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const client = new PgliteWorkerClient(startPgliteWorker(dir));
  try {
    await client.ready;
  } catch (err) {
    await client.kill();
    throw err;
  }
  const asPglite = client as unknown as PGlite;
  const db = drizzlePglite({ client: asPglite }) as unknown as Db;
  return {
    kind: 'pglite',
    db,
    async ping() {
      await client.query('SELECT 1');
    },
    async migrate() {
      await migratePglite(drizzlePglite({ client: asPglite }), { migrationsFolder });
    },
    async listen(channel, onNotify) {
      return client.listen(channel, (payload) => onNotify(payload));
    },
    async tryLock() {
      return { lost: new Promise<void>(() => {}), release: async () => {} };
    },
    snapshotDataDir: () => client.snapshotDataDir(),
    close: () => client.close(),
    killWorker: () => client.kill(),
  };
}

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
function socketOf(client: pg.Client): Duplex | undefined {
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

async function openPostgres(connectionString: string, options: PostgresOptions): Promise<Store> {
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

/**
 * A hot statement written once: its SQL text, and the name it is prepared under on each
 * PostgreSQL connection (parsed and planned once per connection, then only bound and executed).
 */
export interface Statement {
  readonly name: string;
  readonly text: string;
}

type PgliteQuerier = {
  query(text: string, params: unknown[], options?: WorkerQueryOptions): Promise<{ rows: unknown[] }>;
};

/**
 * Runs `statement` on the driver under `db` (a database or a transaction of it) in one round
 * trip, without drizzle building its SQL per call. Rows come as the driver parses them (jsonb
 * parsed, timestamptz as Date); jsonb parameters must be passed as JSON text. Errors are the
 * driver's own, which `isDatabaseUnavailable` and `isUniqueViolation` read as they read drizzle's.
 */
export async function runStatement<R>(db: Db, statement: Statement, values: unknown[]): Promise<R[]> {
  // drizzle keeps the driver's client (a pool, a pooled connection, PGlite or its transaction)
  // on the session of the database or transaction.
  const client = (db as unknown as { session?: { client?: unknown } }).session?.client;
  if (client instanceof pg.Pool || client instanceof pg.Client) {
    const result = await client.query({ name: statement.name, text: statement.text, values });
    return result.rows as R[];
  }
  if (typeof (client as PgliteQuerier | undefined)?.query === 'function') {
    const result = await (client as PgliteQuerier).query(statement.text, values);
    return result.rows as R[];
  }
  throw new Error(`runStatement(${statement.name}): not a node-postgres or PGlite database`);
}

/** node-postgres's type parsers, but the values of `textTypes` kept as the text PostgreSQL sent. */
const textTypeParsers = new Map<string, { getTypeParser: typeof pg.types.getTypeParser }>();
function pgTypesKeeping(textTypes: readonly number[]) {
  const key = textTypes.join(',');
  let types = textTypeParsers.get(key);
  if (!types) {
    const asText = new Set(textTypes);
    const keep = (value: string) => value;
    types = {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        asText.has(oid) ? keep : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
    };
    textTypeParsers.set(key, types);
  }
  return types;
}

/**
 * Runs `statement` as {@link runStatement} does, for a hot read that maps its own rows: each row an
 * array of the values in the statement's column order, values of the types in `textTypes` (OIDs)
 * kept as text, the others parsed by the driver. Cheaper per row than objects: no column names, and
 * from PGlite's worker thread no field descriptions to copy between threads.
 */
export async function readRows(
  db: Db,
  statement: Statement,
  values: unknown[],
  textTypes: readonly number[],
): Promise<unknown[][]> {
  const client = (db as unknown as { session?: { client?: unknown } }).session?.client;
  if (client instanceof pg.Pool || client instanceof pg.Client) {
    const result = await client.query({
      name: statement.name,
      text: statement.text,
      values,
      rowMode: 'array',
      types: pgTypesKeeping(textTypes),
    });
    return result.rows as unknown[][];
  }
  if (typeof (client as PgliteQuerier | undefined)?.query === 'function') {
    const keep = (value: string) => value;
    const parsers = Object.fromEntries(textTypes.map((oid) => [oid, keep]));
    const options = { rowMode: 'array', parsers, withoutFields: true } satisfies WorkerQueryOptions;
    const result = await (client as PgliteQuerier).query(statement.text, values, options);
    return result.rows as unknown[][];
  }
  throw new Error(`readRows(${statement.name}): not a node-postgres or PGlite database`);
}

/** Pipelined connections of a PostgreSQL store (runInTransaction), by the pool drizzle uses. */
const pipelinedPools = new WeakMap<pg.Pool, pg.Pool>();
/** At most this many runInTransaction calls hold a connection at once; others wait for one. */
const PIPELINED_CONNECTIONS = 2;

/**
 * Runs `statement` in a transaction of its own, committed only once the statement succeeded, so a
 * statement we gave up on (a timeout answered 503) is never committed however late it arrives. On
 * PostgreSQL the BEGIN goes out with the statement on a pipelined connection, so the transaction
 * costs two round trips rather than three; under load each round trip also waits for the event
 * loop to come back to its answer. Any failure closes that connection, which rolls back.
 */
export async function runInTransaction<R>(db: Db, statement: Statement, values: unknown[]): Promise<R[]> {
  const client = (db as unknown as { session?: { client?: unknown } }).session?.client;
  const pipelined = client instanceof pg.Pool ? pipelinedPools.get(client) : undefined;
  if (!pipelined) return db.transaction((tx) => runStatement<R>(tx, statement, values));
  const connection = await pipelined.connect();
  try {
    // Corked, the two go out in one write (one wake-up of the server) instead of two. Each has its
    // own Sync, so BEGIN failing would leave the statement to commit alone; on an idle connection
    // BEGIN fails only when the connection does, and then so does the statement.
    const stream = socketOf(connection);
    stream?.cork();
    let sent: [Promise<unknown>, Promise<pg.QueryResult>];
    try {
      sent = [
        connection.query('BEGIN'),
        connection.query({ name: statement.name, text: statement.text, values }),
      ];
    } finally {
      stream?.uncork();
    }
    const [, result] = await Promise.all(sent);
    await connection.query('COMMIT');
    connection.release();
    return result.rows as R[];
  } catch (err) {
    connection.release(err instanceof Error ? err : new Error(String(err)));
    throw err;
  }
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
