/**
 * The service's side of the embedded database on a worker thread (pglite-worker.ts is the other
 * side): PGlite's client as far as drizzle and the store use it, spoken as messages, so PGlite's
 * WebAssembly leaves the event loop free for requests.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { PGlite } from '@electric-sql/pglite';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import { packageRoot, runningFromSources } from '../shared/package-root.js';
import { type Db, migrationsFolder, type Store } from './backend.js';
import type { PgliteReply, PgliteRequest } from './pglite-worker.js';

/** What the worker answers when it is gone: the database is unavailable (503), never a hang. */
const WORKER_GONE = 'PGlite is closed';

export interface WorkerQueryOptions {
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
    // fails them with its error if it could not (a round trip to the thread less per transaction).
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

export async function openPgliteWorker(dir: string): Promise<PgliteWorkerStore> {
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
