/**
 * The embedded database in the calling thread, when it runs without its worker thread (as `doctor`
 * does). Its queries go through the same plan cache and keep the same types as text as on the
 * worker thread, so both backends read alike.
 */
import fs from 'node:fs';
import { PGlite, type QueryOptions, type Transaction } from '@electric-sql/pglite';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import { type Db, migrationsFolder, type Store } from './backend.js';
import { createPlanCache, type PgliteTarget } from './pglite-plans.js';
import { snapshotPglite } from './pglite-snapshot.js';
import { keepTextTypes, type TextTypes } from './pglite-types.js';

export async function openPglite(dir: string): Promise<Store> {
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
