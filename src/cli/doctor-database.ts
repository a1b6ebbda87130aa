/**
 * `ledgerhook doctor`'s database check. PostgreSQL is asked directly, with short timeouts. The
 * embedded database admits one process: while a service holds it, it is read through that
 * service's admin endpoint (GET /admin/doctor); otherwise doctor opens it itself, holding the data
 * directory meanwhile, and never creates one where there is none.
 */
import fs from 'node:fs';
import path from 'node:path';
import { connectAdmin, ServiceStartingError } from '../accounts/admin.js';
import { PGLITE_SUBDIR } from '../app/store.js';
import type { Config } from '../config.js';
import { DOCTOR_ROUTE, type ServiceHealth, serviceHealth } from '../http/admin-doctor.js';
import { openStore, type Store } from '../store/db.js';
import type { DatabaseHealth } from '../store/health.js';
import { acquireDataDirLock, DataDirInUseError, dataDirHolder } from '../store/lock.js';
import { type Check, describeUnreachable, errorCode, withDeadline } from './doctor-report.js';

export interface DatabaseCheck {
  check: Check;
  /** What was read, when the database could be read. */
  health: ServiceHealth | undefined;
}

/** Opening an embedded database replays its log first: it may take longer than a server's answer. */
const PGLITE_OPEN_MS = 30_000;

const FIX_MIGRATE = 'run `ledgerhook migrate` (serve applies them too)';

/** A list of migration tags, shortened in the middle when long. */
function tags(list: string[]): string {
  return list.length <= 3 ? list.join(', ') : `${list[0]}, … ${list.at(-1)}`;
}

/** The line for a database that answered: its role and its migrations. */
function databaseLine(database: DatabaseHealth, label: string): Check {
  const { migrations } = database;
  const subject = 'database';
  if (database.standby)
    return {
      outcome: 'FAIL',
      subject,
      detail: `${label} is a read-only standby`,
      fix: 'point DATABASE_URL at the primary',
    };
  const role = database.kind === 'postgres' ? ', primary' : '';
  if (migrations.unknown > 0)
    return {
      outcome: 'FAIL',
      subject,
      detail: `${label}${role}, holds ${migrations.unknown} migration(s) this release does not know: a newer Ledgerhook migrated it`,
      fix: 'run the Ledgerhook release that migrated it (or a newer one)',
    };
  if (migrations.pending.length > 0)
    return {
      outcome: 'FAIL',
      subject,
      detail: `${label}${role}, ${migrations.pending.length} of ${migrations.known.length} migrations not applied (${tags(migrations.pending)})`,
      fix: FIX_MIGRATE,
    };
  const latest = migrations.known.at(-1)?.split('_')[0] ?? 'none';
  return { outcome: 'ok', subject, detail: `${label}${role}, migrations up to date (${latest})` };
}

/** "15.20" of "15.20 (Debian 15.20-0+deb12u1)". */
const serverVersion = (database: DatabaseHealth) => database.version.split(' ')[0];

/** host:port/database of a DATABASE_URL: no user, no password. */
export function databaseLocation(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  const database = decodeURIComponent(url.pathname.slice(1)) || decodeURIComponent(url.username);
  return `${url.hostname}:${url.port || '5432'}/${database}`;
}

/** A PostgreSQL server that could not be used, as the operator should read it. */
function postgresFailure(err: unknown, where: string, timeoutMs: number): Check {
  const code = errorCode(err);
  const database = where.slice(where.indexOf('/') + 1);
  if (code === '3D000')
    return {
      outcome: 'FAIL',
      subject: 'database',
      detail: `database "${database}" does not exist on ${where.slice(0, where.indexOf('/'))}`,
      fix: `create it (createdb ${database}) or correct DATABASE_URL`,
    };
  if (code === '28P01' || code === '28000')
    return {
      outcome: 'FAIL',
      subject: 'database',
      detail: `PostgreSQL at ${where} refused the credentials (${describeUnreachable(err, timeoutMs)})`,
      fix: 'correct the user or password in DATABASE_URL',
    };
  return {
    outcome: 'FAIL',
    subject: 'database',
    detail: `PostgreSQL at ${where} ${describeUnreachable(err, timeoutMs)}`,
    fix: 'check DATABASE_URL and that the server runs and accepts connections from here',
  };
}

async function checkPostgres(databaseUrl: string, timeoutMs: number): Promise<DatabaseCheck> {
  const where = databaseLocation(databaseUrl);
  let store: Store | undefined;
  try {
    store = await openStore({
      databaseUrl,
      connectTimeoutMs: timeoutMs,
      queryTimeoutMs: timeoutMs,
      onError: () => {},
    });
    // A few queries, each within the timeout; the whole within a few of them.
    const health = await withDeadline(serviceHealth(store), 4 * timeoutMs);
    return {
      check: databaseLine(health.database, `PostgreSQL ${serverVersion(health.database)} at ${where}`),
      health,
    };
  } catch (err) {
    return { check: postgresFailure(err, where, timeoutMs), health: undefined };
  } finally {
    await withDeadline(store?.close() ?? Promise.resolve(), timeoutMs).catch(() => {});
  }
}

/**
 * The running service's view of its database, through its admin endpoint; undefined when the
 * service stopped meanwhile (the database is free to open then).
 */
async function throughService(
  dataDir: string,
  holder: number,
  timeoutMs: number,
): Promise<DatabaseCheck | undefined> {
  const dir = path.join(dataDir, PGLITE_SUBDIR);
  const inUse = `the embedded database in ${dir} is in use by pid ${holder}`;
  try {
    const admin = await connectAdmin(dataDir, holder, timeoutMs);
    if (!admin) return undefined;
    const response = await withDeadline(admin.request('GET', DOCTOR_ROUTE), timeoutMs);
    if (response.status === 404)
      return {
        check: {
          outcome: 'FAIL',
          subject: 'database',
          detail: `${inUse}, a service that cannot be asked about it (an older release)`,
          fix: 'restart the service with this release, or stop it and run doctor again',
        },
        health: undefined,
      };
    if (!response.ok) throw new Error(`its admin endpoint answered ${response.status}`);
    const health = (await withDeadline(response.json(), timeoutMs)) as ServiceHealth;
    const label = `PGlite (PostgreSQL ${serverVersion(health.database)}) in ${dir}, in use by the running service (pid ${holder}), read through its admin endpoint`;
    return { check: databaseLine(health.database, label), health };
  } catch (err) {
    const starting = err instanceof ServiceStartingError;
    return {
      check: {
        outcome: 'FAIL',
        subject: 'database',
        detail: starting
          ? `${inUse}, which has not published its admin endpoint yet (still starting?)`
          : `${inUse}, whose admin endpoint ${describeUnreachable(err, timeoutMs)}`,
        fix: starting ? 'run doctor again once the service serves' : 'check the service (its log, /readyz)',
      },
      health: undefined,
    };
  }
}

/** The embedded database opened by doctor itself (no service runs), holding the data directory meanwhile. */
async function openedHere(dataDir: string): Promise<DatabaseCheck> {
  const dir = path.join(dataDir, PGLITE_SUBDIR);
  const lock = acquireDataDirLock(dataDir);
  let store: Store | undefined;
  try {
    const read = (async () => {
      store = await openStore({ pgliteDir: dir, pgliteWorker: false });
      return serviceHealth(store);
    })();
    const health = await withDeadline(read, PGLITE_OPEN_MS);
    const label = `PGlite (PostgreSQL ${serverVersion(health.database)}) in ${dir}, no service running`;
    return { check: databaseLine(health.database, label), health };
  } catch (err) {
    return {
      check: {
        outcome: 'FAIL',
        subject: 'database',
        detail: `the embedded database in ${dir} could not be opened: ${(err as Error).message.split('\n')[0]}`,
        fix: 'restore the data directory from a backup (ledgerhook restore) if it is damaged',
      },
      health: undefined,
    };
  } finally {
    await withDeadline(store?.close() ?? Promise.resolve(), PGLITE_OPEN_MS).catch(() => {});
    lock.release();
  }
}

async function checkPglite(dataDir: string, timeoutMs: number): Promise<DatabaseCheck> {
  const holder = dataDirHolder(dataDir);
  if (holder !== undefined) {
    const viaService = await throughService(dataDir, holder, timeoutMs);
    if (viaService) return viaService;
  }
  if (!fs.existsSync(path.join(dataDir, PGLITE_SUBDIR, 'PG_VERSION'))) {
    return {
      check: {
        outcome: 'FAIL',
        subject: 'database',
        detail: `${dataDir} holds no Ledgerhook data (no ${PGLITE_SUBDIR}/ database there)`,
        fix: "point LEDGERHOOK_DATA_DIR at your service's data directory, or start the service there once (ledgerhook serve)",
      },
      health: undefined,
    };
  }
  try {
    return await openedHere(dataDir);
  } catch (err) {
    if (!(err instanceof DataDirInUseError)) throw err;
    // A service started between the two looks: ask it instead.
    return (
      (await throughService(dataDir, err.pid, timeoutMs)) ?? {
        check: {
          outcome: 'FAIL',
          subject: 'database',
          detail: `a service started and stopped on ${dataDir} while doctor looked`,
          fix: 'run doctor again',
        },
        health: undefined,
      }
    );
  }
}

export function checkDatabase(config: Config, timeoutMs: number): Promise<DatabaseCheck> {
  return config.databaseUrl
    ? checkPostgres(config.databaseUrl, timeoutMs)
    : checkPglite(config.dataDir, timeoutMs);
}
