import { type Db, runInTransaction, runStatement, type Statement } from '../store/db.js';

/**
 * The values of one create without a callback_url, in the order of the statement's columns: id,
 * account, folder, title, template, description, metadata (JSON text), data_encrypted,
 * ciphertext, wrapped key, key id, created_at, leaf, salt.
 */
export type CreateRow = readonly unknown[];

const COLUMNS = 14;
/** Creates written by one statement at most (14 parameters each, far below PostgreSQL's 65,535). */
export const MAX_BATCH = 64;

/**
 * Batches being written at once at most. One: with BEGIN sent beside the statement
 * (runInTransaction) a batch holds two short round trips, and the creates arriving meanwhile make
 * the next batch larger. Two in flight wrote as many creates a second on PostgreSQL for 12% more
 * of the server's CPU per create, and fewer on PGlite (bench/README.md, bench:api, "Sixth pass").
 */
const MAX_IN_FLIGHT = 1;

/**
 * Folders (if new: clients that only know create still work), registries and their leaves (as
 * `recordLeaf` writes them, anchored with the next batch) of `rows` creates, in one statement.
 * The foreign key from registry to folder is
 * checked at the end of the statement, when the folder is there; a folder named twice in the
 * batch is inserted once (ON CONFLICT DO NOTHING skips the second).
 */
function createStatement(rows: number): Statement {
  const values = (columns: number[]) =>
    Array.from(
      { length: rows },
      (_, r) => `(${columns.map((c) => (c === 0 ? 'NULL' : `$${r * COLUMNS + c}`)).join(', ')})`,
    ).join(',\n  ');
  return {
    name: `registry_create_${rows}`,
    text: `WITH folder AS (
  INSERT INTO folders (account_id, folder_id, created_at) VALUES ${values([2, 3, 12])}
  ON CONFLICT DO NOTHING
), registry AS (
  INSERT INTO registries (id, account_id, folder_id, title, template, description, metadata,
    callback_url, data_encrypted, ciphertext, wrapped_key, key_id, created_at)
  VALUES ${values([1, 2, 3, 4, 5, 6, 7, 0, 8, 9, 10, 11, 12])}
)
INSERT INTO anchor_leaves (registry_id, account_id, leaf, salt, subscription_id, batch_id, position, created_at)
VALUES ${values([1, 2, 13, 14, 0, 0, 0, 12])}`,
  };
}

/**
 * Group commit of registry creates: a create finding fewer than MAX_IN_FLIGHT statements in flight is
 * written at once; those arriving meanwhile wait and are then written together, in one statement. Each
 * create's promise settles with its statement: all of a batch are written, or none.
 */
export function createBatches(db: Db) {
  const statements = new Map<number, Statement>();
  const statementFor = (rows: number) => {
    let found = statements.get(rows);
    if (!found) {
      found = createStatement(rows);
      statements.set(rows, found);
    }
    return found;
  };
  let waiting: Array<{ row: CreateRow; resolve(): void; reject(err: unknown): void }> = [];
  let inFlight = 0;

  async function flush(): Promise<void> {
    inFlight++;
    while (waiting.length > 0) {
      const batch = waiting.slice(0, MAX_BATCH);
      waiting = waiting.slice(batch.length);
      try {
        // In a transaction although the statement is atomic alone: a statement sent on its own
        // commits when it reaches the server, even after we gave up on it (a network that held
        // it and delivers it late), so a create answered 503 could still appear. In one, it is
        // committed only by a COMMIT we send once it succeeded. Per batch, the round trips are
        // shared by all its creates.
        await runInTransaction(
          db,
          statementFor(batch.length),
          batch.flatMap((w) => w.row),
        );
        for (const w of batch) w.resolve();
      } catch (err) {
        for (const w of batch) w.reject(err);
      }
    }
    inFlight--;
  }

  return {
    /** Writes one create, with whatever others wait beside it. */
    write(row: CreateRow): Promise<void> {
      if (row.length !== COLUMNS) throw new RangeError(`a create has ${COLUMNS} values, not ${row.length}`);
      return new Promise<void>((resolve, reject) => {
        waiting.push({ row, resolve, reject });
        if (inFlight < MAX_IN_FLIGHT) void flush();
      });
    },
    /** A create inside the caller's transaction (with an Idempotency-Key): written alone, in it. */
    async writeIn(tx: Db, row: CreateRow): Promise<void> {
      await runStatement(tx, statementFor(1), [...row]);
    },
  };
}
