/**
 * Opening the configured database for the service and the commands: migrated, the data directory
 * held when it is embedded, and a failure to reach PostgreSQL said as the operator should read it.
 */
import path from 'node:path';
import type { Logger } from 'pino';
import { type Config, ConfigError } from '../config.js';
import { openStore, type Store } from '../store/db.js';
import { acquireDataDirLock, type DataDirLock } from '../store/lock.js';
import { StartupError } from './startup-error.js';

/** The embedded database's folder inside the data directory. */
export const PGLITE_SUBDIR = 'pglite';

export interface OpenedStore {
  store: Store;
  /** Releases the data directory (embedded database only). */
  lock: DataDirLock | undefined;
}

/**
 * A failure to open a PostgreSQL database, as the operator should read it: what DATABASE_URL gets
 * wrong (no such database, refused credentials), or that the server cannot be reached.
 */
function databaseError(err: unknown, databaseUrl: string): unknown {
  const e = err as { code?: string; message?: string; cause?: { code?: string } } | undefined;
  const code = e?.code ?? e?.cause?.code;
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    return err;
  }
  const server = `${url.hostname}:${url.port || '5432'}`;
  const database = decodeURIComponent(url.pathname.slice(1)) || url.username;
  switch (code) {
    case '3D000':
      return new ConfigError(
        'DATABASE_URL',
        `names database "${database}", which does not exist on ${server}; create it (createdb ${database}) or correct the URL`,
      );
    case '28P01':
    case '28000':
      return new ConfigError('DATABASE_URL', `was refused by ${server}: ${e?.message}`);
    case 'ECONNREFUSED':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
      return new StartupError(`cannot reach the database server ${server} (DATABASE_URL): ${code}`);
    default:
      return err;
  }
}

/** Opens the configured database, migrated, holding the data directory when it is embedded. */
export async function openConfiguredStore(config: Config, logger?: Logger): Promise<OpenedStore> {
  try {
    return await openMigratedStore(config, logger);
  } catch (err) {
    throw config.databaseUrl ? databaseError(err, config.databaseUrl) : err;
  }
}

async function openMigratedStore(config: Config, logger?: Logger): Promise<OpenedStore> {
  const lock = config.databaseUrl ? undefined : acquireDataDirLock(config.dataDir);
  try {
    const store = await openStore(
      config.databaseUrl
        ? {
            databaseUrl: config.databaseUrl,
            onError: (err) => logger?.warn({ err }, 'database connection lost'),
            queryTimeoutMs: config.dbQueryTimeoutMs,
            connectTimeoutMs: config.dbConnectTimeoutMs,
          }
        : {
            pgliteDir: path.join(config.dataDir, PGLITE_SUBDIR),
            pgliteWorker: config.pgliteWorker,
          },
    );
    try {
      await store.migrate();
    } catch (err) {
      await store.close();
      throw err;
    }
    return { store, lock };
  } catch (err) {
    lock?.release();
    throw err;
  }
}
