/**
 * The embedded database on a thread of its own (see `openPgliteWorker` in pglite-worker-client.ts):
 * PGlite's WebAssembly runs here, so the service's event loop parses requests and writes responses
 * on the other core meanwhile. Messages are the small protocol of `PgliteRequest`; every request is
 * answered once, with a result or the database's error as plain fields.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite, type Transaction } from '@electric-sql/pglite';
import { createPlanCache } from './pglite-plans.js';
import { snapshotPglite } from './pglite-snapshot.js';
import { keepTextTypes } from './pglite-types.js';

export type PgliteRequest = { id: number } & (
  | {
      op: 'query';
      text: string;
      params?: unknown[];
      rowMode?: 'array' | 'object';
      /** Type OIDs whose values stay as the text PostgreSQL sent (drizzle parses dates itself). */
      textTypes?: number[];
      /** The caller reads only the rows: `fields` is left out of the reply. */
      withoutFields?: boolean;
      tx?: number;
    }
  | { op: 'exec'; text: string; tx?: number }
  /**
   * Opens transaction `tx` (numbered by the caller). Sent without waiting for its answer: the
   * transaction's statements that follow wait for it here, so a transaction costs a trip less.
   */
  | { op: 'begin'; tx: number }
  | { op: 'end'; tx: number; commit: boolean }
  | { op: 'listen'; channel: string }
  | { op: 'unlisten'; channel: string }
  | { op: 'snapshot' }
  | { op: 'close' }
);

export type PgliteReply =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: Record<string, unknown> }
  | { notify: string; payload: string };

/** The fields of a database error that callers read (SQLSTATE, constraint), cloneable. */
function plain(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: String(err) };
  const out: Record<string, unknown> = { name: err.name, message: err.message };
  for (const key of ['code', 'detail', 'constraint', 'table', 'column', 'schema', 'severity', 'hint']) {
    const value = (err as unknown as Record<string, unknown>)[key];
    if (typeof value === 'string') out[key] = value;
  }
  return out;
}

const ROLLBACK = Symbol('rollback');

async function serve(): Promise<void> {
  const port = parentPort;
  if (!port) throw new Error('pglite-worker runs as a worker thread');
  const db = await PGlite.create(workerData.dir as string);
  const textTypes = keepTextTypes(db);
  const noTextTypes: ReadonlySet<number> = new Set();
  const plans = createPlanCache({
    serializers: db.serializers,
  });
  const open = new Map<number, { tx: Transaction; finish: (commit: boolean) => void; done: Promise<void> }>();
  /** Each transaction's begin, until its end: rejected with why it could not begin. */
  const beginning = new Map<number, Promise<void>>();
  const unlisten = new Map<string, () => Promise<void>>();

  async function target(tx: number | undefined) {
    if (tx === undefined) return db;
    await beginning.get(tx);
    const entry = open.get(tx);
    if (!entry) throw new Error(`transaction ${tx} is not open`);
    return entry.tx;
  }

  /** PGlite runs a transaction inside a callback; it is held open until `end` decides. */
  function begin(id: number): Promise<void> {
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => {
      entered = resolve;
    });
    let finish!: (commit: boolean) => void;
    const decided = new Promise<boolean>((resolve) => {
      finish = resolve;
    });
    const done = db
      .transaction(async (tx) => {
        open.set(id, { tx, finish, done });
        entered();
        if (!(await decided)) throw ROLLBACK;
      })
      .catch((err) => {
        if (err !== ROLLBACK) throw err;
      });
    return Promise.race([inside, done]).then(() => {
      if (!open.has(id)) throw new Error('the transaction could not begin');
    });
  }

  async function handle(request: PgliteRequest): Promise<unknown> {
    switch (request.op) {
      case 'query': {
        const asText = request.textTypes ? new Set(request.textTypes) : noTextTypes;
        const result = textTypes.finish(
          await plans.query(
            await target(request.tx),
            request.text,
            request.params ?? [],
            textTypes.options(request.rowMode ?? 'object', asText),
            request.tx !== undefined,
          ),
          asText,
        );
        if (request.withoutFields) return { rows: result.rows, affectedRows: result.affectedRows };
        return { rows: result.rows, fields: result.fields, affectedRows: result.affectedRows };
      }
      case 'exec':
        return (await (await target(request.tx)).exec(request.text)).map((r) => {
          const { rows, fields, affectedRows } = textTypes.finish(r, noTextTypes);
          return { rows, fields, affectedRows };
        });
      case 'begin': {
        // Registered before anything is awaited: the next message may be this transaction's.
        const begun = begin(request.tx);
        beginning.set(request.tx, begun);
        await begun;
        return null;
      }
      case 'end': {
        const begun = beginning.get(request.tx);
        beginning.delete(request.tx);
        // A rollback of a transaction that never began has nothing to undo.
        const began = await begun?.then(
          () => true,
          () => false,
        );
        const entry = open.get(request.tx);
        if (!entry) {
          if (began === false && !request.commit) return null;
          throw new Error(`transaction ${request.tx} is not open`);
        }
        entry.finish(request.commit);
        try {
          await entry.done;
        } finally {
          open.delete(request.tx);
        }
        return null;
      }
      case 'listen': {
        if (!unlisten.has(request.channel)) {
          const stop = await db.listen(request.channel, (payload) =>
            port?.postMessage({ notify: request.channel, payload } satisfies PgliteReply),
          );
          unlisten.set(request.channel, stop);
        }
        return null;
      }
      case 'unlisten': {
        await unlisten.get(request.channel)?.();
        unlisten.delete(request.channel);
        return null;
      }
      case 'snapshot':
        return snapshotPglite(db);
      case 'close':
        if (!db.closed) await db.close();
        return null;
    }
  }

  port.on('message', (request: PgliteRequest) => {
    handle(request).then(
      // A snapshot's bytes are handed over, not copied (a database may be hundreds of MB), when
      // they fill their buffer alone (a small Buffer may share Node's pool with others).
      (value) =>
        port.postMessage(
          { id: request.id, ok: true, value } satisfies PgliteReply,
          value instanceof Uint8Array && value.byteLength === value.buffer.byteLength
            ? [value.buffer as ArrayBuffer]
            : [],
        ),
      (err) => port.postMessage({ id: request.id, ok: false, error: plain(err) } satisfies PgliteReply),
    );
  });
  port.postMessage({ id: 0, ok: true, value: 'ready' } satisfies PgliteReply);
}

serve().catch((err) => {
  parentPort?.postMessage({ id: 0, ok: false, error: plain(err) } satisfies PgliteReply);
});
