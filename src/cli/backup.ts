/**
 * `ledgerhook backup FILE` and `ledgerhook restore FILE`, for the embedded database. A backup is
 * taken through the running service's admin endpoint (a consistent snapshot while it serves), or
 * from the data directory itself when no service runs. It holds the database only: the master key
 * is kept apart, and a restore never creates one.
 */
import fs from 'node:fs';
import path from 'node:path';
import { connectAdmin } from '../accounts/admin.js';
import { PGLITE_SUBDIR } from '../app/store.js';
import { type Config, ConfigError } from '../config.js';
import { LedgerhookError } from '../errors.js';
import { BACKUP_ROUTE } from '../http/admin-backup.js';
import { masterKeyId } from '../secrets/envelope.js';
import { MASTER_KEY_FILE, readMasterKeyFile } from '../secrets/master-key.js';
import {
  BackupArchiveError,
  type BackupManifest,
  type CheckedArchive,
  checkBackupArchive,
  createArchiveReader,
  createBackupArchive,
  MAX_UNPACKED_BYTES,
  openRestoredDataDir,
  type RestoredDatabase,
  unpackDataDir,
} from '../store/backup.js';
import { openStore } from '../store/db.js';
import { acquireDataDirLock, DataDirInUseError, dataDirHolder } from '../store/lock.js';
import { UsageError } from './usage.js';

/** How long backup waits for a service that is still starting to publish its admin endpoint. */
const ADMIN_WAIT_MS = 10_000;

/** A backup or restore that could not be done; one line, exit code 1. */
class BackupFailure extends LedgerhookError {}

/** Runs `work`, printing a BackupFailure as one line with exit code 1; other errors go on to describeFailure. */
async function reported(work: () => Promise<void>): Promise<number> {
  try {
    await work();
    return 0;
  } catch (err) {
    if (!(err instanceof BackupFailure)) throw err;
    process.stderr.write(`ledgerhook: ${err.message}\n`);
    return 1;
  }
}

function refuseOnPostgres(config: Config, command: 'backup' | 'restore'): void {
  if (!config.databaseUrl) return;
  throw new UsageError(
    command === 'backup'
      ? 'backup is for the embedded database; with DATABASE_URL back PostgreSQL up with pg_dump -Fc or pg_basebackup, and keep the master key apart (docs/backups.md)'
      : 'restore is for the embedded database; with DATABASE_URL restore PostgreSQL with pg_restore (or a pg_basebackup copy), then start with the kept master key (docs/backups.md)',
  );
}

function megabytes(bytes: number): string {
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

/** FILE as given, checked before anything is read: its folder exists, and it does not unless --force. */
function backupTarget(file: string, force: boolean): string {
  const target = path.resolve(file);
  const dir = path.dirname(target);
  if (!fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory())
    throw new BackupFailure(`cannot write ${file}: the directory ${dir} does not exist`);
  const existing = fs.statSync(target, { throwIfNoEntry: false });
  if (existing?.isDirectory()) throw new BackupFailure(`cannot write ${file}: it is a directory`);
  if (existing && !force)
    throw new BackupFailure(`${file} exists already; give a new name, or --force to replace it`);
  return target;
}

/**
 * Links `tmp` as `target`, which refuses an existing target in the same step; where the
 * filesystem has no hard links, renames after a check.
 */
async function linkOrRename(tmp: string, target: string): Promise<void> {
  try {
    await fs.promises.link(tmp, target);
  } catch (err) {
    if (!['EPERM', 'ENOTSUP', 'ENOSYS', 'EOPNOTSUPP'].includes((err as NodeJS.ErrnoException).code ?? ''))
      throw err;
    if (fs.existsSync(target)) throw Object.assign(new Error(`${target} exists`), { code: 'EEXIST' });
    await fs.promises.rename(tmp, target);
  }
}

/** The new name survives a crash once its directory is synced (best effort: not every filesystem allows it). */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await fs.promises.open(dir, 'r').catch(() => undefined);
  await handle?.sync().catch(() => {});
  await handle?.close();
}

/**
 * Writes `target` whole or not at all: into a temporary file beside it (mode 0600), synced, then
 * renamed into place (--force) or linked, which refuses a FILE that appeared meanwhile.
 */
async function writeAtomically<T>(
  target: string,
  force: boolean,
  write: (handle: fs.promises.FileHandle) => Promise<T>,
): Promise<T> {
  const tmp = path.join(path.dirname(target), `.${path.basename(target)}.${process.pid}.tmp`);
  try {
    const handle = await fs.promises.open(tmp, 'wx', 0o600);
    let result: T;
    try {
      result = await write(handle);
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (force) await fs.promises.rename(tmp, target);
    else await linkOrRename(tmp, target);
    await syncDirectory(path.dirname(target));
    return result;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') throw new BackupFailure(`${target} was created meanwhile; nothing was replaced`);
    if (err instanceof BackupArchiveError)
      throw new BackupFailure(`the backup the service sent ${err.message}; nothing was written`);
    if (code) throw new BackupFailure(`cannot write ${target}: ${(err as Error).message}`);
    throw err;
  } finally {
    await fs.promises.rm(tmp, { force: true });
  }
}

/** Through the running service's admin endpoint: the archive is checked as it is written. */
async function backupThroughService(
  admin: NonNullable<Awaited<ReturnType<typeof connectAdmin>>>,
  pid: number,
  target: string,
  force: boolean,
): Promise<BackupManifest> {
  const response = await admin.request('GET', BACKUP_ROUTE);
  if (response.status === 404)
    throw new BackupFailure(
      `the service using this data directory (pid ${pid}) has no backup endpoint (an older version); upgrade it, or stop it and back up again`,
    );
  if (!response.ok || !response.body) {
    const { error } = (await response.json().catch(() => ({}))) as { error?: string };
    throw new BackupFailure(
      `the service (pid ${pid}) could not take the backup: ${error ?? response.status}`,
    );
  }
  const body = response.body;
  return writeAtomically(target, force, async (handle) => {
    const reader = createArchiveReader();
    try {
      for await (const chunk of body) {
        reader.push(chunk);
        await handle.write(chunk);
      }
    } catch (err) {
      if (err instanceof BackupArchiveError || (err as NodeJS.ErrnoException).code) throw err;
      // The connection was cut (the service stopping, say).
      throw new BackupFailure(
        `the service (pid ${pid}) stopped sending the backup (${(err as Error).message}); nothing was written`,
      );
    }
    return reader.finish();
  });
}

/** No service runs: the data directory is ours to open (held meanwhile, and not migrated). */
async function backupFromDataDir(config: Config, target: string, force: boolean): Promise<BackupManifest> {
  if (!fs.existsSync(path.join(config.dataDir, PGLITE_SUBDIR, 'PG_VERSION'))) {
    throw new ConfigError(
      'LEDGERHOOK_DATA_DIR',
      `${config.dataDir} holds no Ledgerhook data; point it at the data directory of your service`,
    );
  }
  const lock = acquireDataDirLock(config.dataDir);
  try {
    const store = await openStore({ pgliteDir: path.join(config.dataDir, PGLITE_SUBDIR) });
    try {
      const { manifest, header, tarball } = await createBackupArchive(store);
      return await writeAtomically(target, force, async (handle) => {
        await handle.write(header);
        await handle.write(tarball);
        return manifest;
      });
    } finally {
      await store.close();
    }
  } finally {
    lock.release();
  }
}

/** `ledgerhook backup FILE [--force]`; resolves with the exit code. */
export async function backupCommand(file: string, force: boolean, config: Config): Promise<number> {
  refuseOnPostgres(config, 'backup');
  return reported(async () => {
    const target = backupTarget(file, force);
    const holder = dataDirHolder(config.dataDir);
    const admin =
      holder === undefined ? undefined : await connectAdmin(config.dataDir, holder, ADMIN_WAIT_MS);
    // A service that stopped while we waited has left the data directory to us.
    const manifest =
      admin && holder !== undefined
        ? await backupThroughService(admin, holder, target, force)
        : await backupFromDataDir(config, target, force);
    const how = admin ? `a snapshot of the running service (pid ${holder})` : 'no service was running';
    const key = manifest.masterKeyId
      ? `its records use master key ${manifest.masterKeyId}`
      : 'it has no master key yet';
    process.stdout.write(
      `backup of ${config.dataDir} written to ${target} (${megabytes(manifest.tarballBytes)}, ${how}): the database only, not the master key (${key}); keep the key apart from the backup\n`,
    );
    if (manifest.unpackedBytes !== undefined && manifest.unpackedBytes > MAX_UNPACKED_BYTES)
      process.stderr.write(
        `ledgerhook: warning: this database unpacks to ${megabytes(manifest.unpackedBytes)}, more than ledgerhook restore accepts (${megabytes(MAX_UNPACKED_BYTES)}); unpack it by hand (tail -n +2 ${target} | tar -xz) or move to PostgreSQL\n`,
      );
  });
}

/** The folder a restore unpacks into, beside pglite/, before it moves it into place. */
const STAGING_PREFIX = '.restore-';

/**
 * The data directory a restore writes into: missing, or empty but for a master.key the operator
 * put there, and the lock file and staging folder a restore or service that died left (kill -9,
 * out of memory). Refused while a service holds it.
 */
function checkRestoreTarget(dataDir: string): void {
  const holder = dataDirHolder(dataDir);
  if (holder !== undefined) throw new DataDirInUseError(dataDir, holder);
  if (!fs.existsSync(dataDir)) return;
  const held = fs
    .readdirSync(dataDir)
    .filter(
      (name) => name !== MASTER_KEY_FILE && name !== 'ledgerhook.pid' && !name.startsWith(STAGING_PREFIX),
    );
  if (held.length > 0) {
    const shown = held.slice(0, 3).join(', ') + (held.length > 3 ? ', …' : '');
    throw new ConfigError(
      'LEDGERHOOK_DATA_DIR',
      `${dataDir} is not empty (it holds ${shown}); restore into a new or empty directory`,
    );
  }
}

/** Staging folders of restores that died: with the lock held, no live restore owns one. */
function removeStaleStaging(dataDir: string): void {
  for (const name of fs.readdirSync(dataDir))
    if (name.startsWith(STAGING_PREFIX))
      fs.rmSync(path.join(dataDir, name), { recursive: true, force: true });
}

/** The disk must hold what the archive announces it unpacks to (an archive without it is bounded by the ceiling). */
function checkRoom(file: string, dataDir: string, manifest: BackupManifest): void {
  const needed = manifest.unpackedBytes;
  if (needed === undefined) return;
  const stats = fs.statfsSync(dataDir);
  const free = stats.bavail * stats.bsize;
  if (needed > free)
    throw new BackupFailure(
      `${file} unpacks to ${megabytes(needed)} and ${dataDir} has ${megabytes(free)} free; nothing was restored`,
    );
}

/** The master key the service would start with here, by id; before the restore, so a bad master.key refuses early. */
function configuredKey(config: Config): { id: string; source: string } | undefined {
  if (config.masterKey) return { id: masterKeyId(config.masterKey), source: 'LEDGERHOOK_MASTER_KEY' };
  const file = path.join(config.dataDir, MASTER_KEY_FILE);
  if (!fs.existsSync(file)) return undefined;
  return { id: masterKeyId(readMasterKeyFile(file)), source: file };
}

/** The one line for an archive a restore refuses. */
const refusedArchive = (file: string, err: BackupArchiveError) =>
  new BackupFailure(`${file} ${err.message}; nothing was restored`);

/** Reads the archive through, checking it, before anything is written. */
async function checkedArchive(file: string): Promise<CheckedArchive> {
  try {
    return await checkBackupArchive(file);
  } catch (err) {
    if (err instanceof BackupArchiveError) throw refusedArchive(file, err);
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new BackupFailure(`cannot read ${file}: no such file`);
    if (code) throw new BackupFailure(`cannot read ${file}: ${(err as Error).message}`);
    throw err;
  }
}

/** Unpacks the archive into `pgliteDir` and opens it there; what fails, in one line. */
async function unpackAndOpen(
  file: string,
  archive: CheckedArchive,
  pgliteDir: string,
): Promise<RestoredDatabase> {
  try {
    await unpackDataDir(archive, pgliteDir);
  } catch (err) {
    if (err instanceof BackupArchiveError) throw refusedArchive(file, err);
    // A file it could not write (a full disk, say).
    if ((err as NodeJS.ErrnoException).code)
      throw new BackupFailure(`cannot restore ${file}: ${(err as Error).message}; nothing was restored`);
    throw err;
  }
  try {
    return await openRestoredDataDir(pgliteDir);
  } catch (err) {
    if (err instanceof BackupArchiveError) throw refusedArchive(file, err);
    throw new BackupFailure(
      `${file} could not be opened as a database (${(err as Error).message}); nothing was restored`,
    );
  }
}

/**
 * Unpacks the archive into a folder beside pglite/, checking each entry before it is written, opens
 * it, then moves it into place: all or nothing.
 */
async function restoreInto(
  file: string,
  dataDir: string,
): Promise<{ manifest: BackupManifest; database: RestoredDatabase }> {
  const archive = await checkedArchive(file);
  // What we create, we remove again if the restore fails: the directory is left as it was.
  const created = fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  let restored = false;
  try {
    const lock = acquireDataDirLock(dataDir);
    try {
      // Held now: whatever appeared since the first look is seen, and no live restore owns a staging folder.
      checkRestoreTarget(dataDir);
      removeStaleStaging(dataDir);
      checkRoom(file, dataDir, archive.manifest);
      const staging = fs.mkdtempSync(path.join(dataDir, STAGING_PREFIX));
      try {
        const pgliteDir = path.join(staging, PGLITE_SUBDIR);
        const database = await unpackAndOpen(file, archive, pgliteDir);
        fs.renameSync(pgliteDir, path.join(dataDir, PGLITE_SUBDIR));
        restored = true;
        return { manifest: archive.manifest, database };
      } finally {
        fs.rmSync(staging, { recursive: true, force: true });
      }
    } finally {
      lock.release();
    }
  } finally {
    if (!restored && created) fs.rmSync(created, { recursive: true, force: true });
  }
}

/** `ledgerhook restore FILE`; resolves with the exit code. */
export async function restoreCommand(file: string, config: Config): Promise<number> {
  refuseOnPostgres(config, 'restore');
  checkRestoreTarget(config.dataDir);
  const key = configuredKey(config);
  return reported(async () => {
    const { manifest, database } = await restoreInto(file, config.dataDir);
    const recorded = database.masterKeyId;
    const keyLine =
      recorded === null
        ? 'its database has no master key yet'
        : key?.id === recorded
          ? `its records use master key ${recorded}, the configured one (${key.source})`
          : `it holds no master key: start the service with the one its records use (id ${recorded}), as LEDGERHOOK_MASTER_KEY or master.key in ${config.dataDir}`;
    process.stdout.write(
      `restored ${file} (taken ${manifest.createdAt} by Ledgerhook ${manifest.ledgerhook}, ${megabytes(manifest.tarballBytes)}) into ${config.dataDir}; ${keyLine}\n`,
    );
    if (key && recorded !== null && key.id !== recorded) {
      process.stderr.write(
        `ledgerhook: warning: the configured master key (${key.source}, id ${key.id}) is not the one this database's records use (id ${recorded}); the service will refuse to start with it\n`,
      );
    }
  });
}
