/**
 * The store's entry: openStore opens the backend its options name. The backends (pglite-in-process,
 * pglite-worker-client, postgres) and the statement helpers (statements) live in files of their own,
 * their public names re-exported here so the rest of the service imports db.ts alone.
 */
import type { Store } from './backend.js';
import { openPglite } from './pglite-in-process.js';
import { openPgliteWorker } from './pglite-worker-client.js';
import { openPostgres, type PostgresOptions } from './postgres.js';

export { type Db, type HeldLock, migrationsFolder, type Store } from './backend.js';
export type { PgliteWorkerStore } from './pglite-worker-client.js';
export type { PostgresOptions } from './postgres.js';
export {
  isUniqueViolation,
  limitOf,
  readRows,
  runInTransaction,
  runStatement,
  type Statement,
} from './statements.js';

export type StoreOptions =
  | (PostgresOptions & { databaseUrl: string })
  | {
      pgliteDir: string;
      /** Runs the embedded database on a worker thread instead of the service's event loop. */
      pgliteWorker?: boolean;
    };

export async function openStore(options: StoreOptions): Promise<Store> {
  if ('databaseUrl' in options) return openPostgres(options.databaseUrl, options);
  return options.pgliteWorker ? openPgliteWorker(options.pgliteDir) : openPglite(options.pgliteDir);
}
