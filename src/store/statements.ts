/**
 * Hot statements run straight on the driver under drizzle, on any backend: SQL text written once,
 * prepared per connection on PostgreSQL, without drizzle building it at every call. Also what reads
 * the driver's errors and a row limit that keeps one plan.
 */
import { type SQL, sql } from 'drizzle-orm';
import pg from 'pg';
import type { Db } from './backend.js';
import type { WorkerQueryOptions } from './pglite-worker-client.js';
import { pipelinedPools, socketOf } from './postgres.js';

/**
 * A row limit written into the statement's text instead of bound as a parameter. With LIMIT bound,
 * PostgreSQL makes a custom plan at every execution even of a prepared statement (the generic
 * plan's estimate for an unknown LIMIT loses); written in, the statement keeps one plan.
 */
export function limitOf(rows: number): SQL {
  if (!Number.isSafeInteger(rows) || rows < 0) throw new RangeError(`not a row limit: ${rows}`);
  return sql.raw(`LIMIT ${rows}`);
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
