/**
 * Backups of the embedded database: the archive `ledgerhook backup` writes and `ledgerhook restore`
 * reads. An archive is one line of JSON (the manifest) followed by PGlite's gzipped tarball of its
 * data directory, so `tail -n +2 FILE | tar -tz` lists it with ordinary tools. The manifest names
 * the master key the records are sealed under by its id only: the key itself is kept apart.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import zlib from 'node:zlib';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { packageVersion } from '../version.js';
import type { Store } from './db.js';

export const BACKUP_FORMAT = 'ledgerhook-backup/1';

export interface BackupManifest {
  format: typeof BACKUP_FORMAT;
  createdAt: string;
  /** The Ledgerhook version that wrote it. */
  ledgerhook: string;
  database: 'pglite';
  /** The id (never the key) of the master key the records are sealed under; null before the first start. */
  masterKeyId: string | null;
  tarballBytes: number;
  tarballSha256: string;
}

/** A file that is not a whole Ledgerhook backup; the message completes "FILE …". */
export class BackupArchiveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BackupArchiveError';
  }
}

/** A manifest line longer than this is no manifest (the real one is ~300 bytes). */
const MAX_MANIFEST_BYTES = 64 * 1024;
const NOT_A_BACKUP = 'is not a Ledgerhook backup (it does not begin with the line ledgerhook backup writes)';

/** The master key id the database remembers (see checkMasterKey in app.ts), if it has one. */
async function recordedMasterKeyId(store: Store): Promise<string | null> {
  type Rows<T> = { rows: T[] };
  // A table is resolved when the statement is planned, so whether it exists is asked first.
  const exists = (await store.db.execute(
    sql`SELECT to_regclass('public.settings') IS NOT NULL AS found`,
  )) as unknown as Rows<{ found: boolean }>;
  if (!exists.rows[0]?.found) return null;
  const result = (await store.db.execute(
    sql`SELECT value FROM settings WHERE key = 'master_key_id'`,
  )) as unknown as Rows<{ value: string }>;
  return result.rows[0]?.value ?? null;
}

/** A consistent backup of the running embedded database: the manifest line, then the tarball. */
export async function createBackupArchive(
  store: Store,
): Promise<{ manifest: BackupManifest; header: Buffer; tarball: Uint8Array }> {
  if (!store.snapshotDataDir) throw new Error('only the embedded database is backed up by Ledgerhook');
  // Read first: the id never changes once the database has one, so it holds for the snapshot too.
  const masterKeyId = await recordedMasterKeyId(store);
  const tarball = await store.snapshotDataDir();
  const manifest: BackupManifest = {
    format: BACKUP_FORMAT,
    createdAt: new Date().toISOString(),
    ledgerhook: packageVersion(),
    database: 'pglite',
    masterKeyId,
    tarballBytes: tarball.length,
    tarballSha256: crypto.createHash('sha256').update(tarball).digest('hex'),
  };
  return { manifest, header: Buffer.from(`${JSON.stringify(manifest)}\n`), tarball };
}

function parseManifest(line: Buffer): BackupManifest {
  let manifest: Partial<BackupManifest>;
  try {
    manifest = JSON.parse(line.toString('utf8')) as Partial<BackupManifest>;
  } catch {
    throw new BackupArchiveError(NOT_A_BACKUP);
  }
  if (typeof manifest?.format !== 'string' || !manifest.format.startsWith('ledgerhook-backup/'))
    throw new BackupArchiveError(NOT_A_BACKUP);
  if (manifest.format !== BACKUP_FORMAT)
    throw new BackupArchiveError(`is a backup of format ${manifest.format}, which this version cannot read`);
  if (
    !Number.isSafeInteger(manifest.tarballBytes) ||
    typeof manifest.tarballSha256 !== 'string' ||
    (manifest.masterKeyId !== null && typeof manifest.masterKeyId !== 'string')
  )
    throw new BackupArchiveError('is a damaged Ledgerhook backup: its first line lacks fields');
  return manifest as BackupManifest;
}

/**
 * Checks an archive as its bytes come (from the service, or from a file): the manifest line, then
 * the tarball's length and checksum. `push` returns the tarball's part of each chunk.
 */
export function createArchiveReader() {
  let head: Buffer | undefined = Buffer.alloc(0);
  let manifest: BackupManifest | undefined;
  const hash = crypto.createHash('sha256');
  let bytes = 0;
  const push = (chunk: Uint8Array): Uint8Array => {
    if (head === undefined) {
      hash.update(chunk);
      bytes += chunk.length;
      return chunk;
    }
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf(0x0a);
    if (end < 0) {
      if (head.length > MAX_MANIFEST_BYTES) throw new BackupArchiveError(NOT_A_BACKUP);
      return new Uint8Array(0);
    }
    manifest = parseManifest(head.subarray(0, end));
    const rest = head.subarray(end + 1);
    head = undefined;
    return push(rest);
  };
  return {
    push,
    /** The manifest, once every byte it announces came and matched. */
    finish(): BackupManifest {
      if (!manifest) throw new BackupArchiveError(NOT_A_BACKUP);
      if (bytes < manifest.tarballBytes)
        throw new BackupArchiveError(
          `is truncated: it holds ${bytes} of the ${manifest.tarballBytes} bytes of database its first line announces`,
        );
      if (bytes > manifest.tarballBytes || hash.digest('hex') !== manifest.tarballSha256)
        throw new BackupArchiveError(
          'is damaged: its database does not match the checksum in its first line',
        );
      return manifest;
    },
  };
}

/** Reads and checks a whole archive file. */
export function readBackupArchive(file: string): { manifest: BackupManifest; tarball: Uint8Array } {
  const bytes = fs.readFileSync(file);
  const reader = createArchiveReader();
  const tarball = reader.push(bytes);
  return { manifest: reader.finish(), tarball };
}

function octal(field: Uint8Array): number {
  const text = Buffer.from(field).toString('latin1').replace(/\0.*$/s, '').trim();
  return /^[0-7]+$/.test(text) ? Number.parseInt(text, 8) : Number.NaN;
}

/** A tar entry's path: ustar keeps long names in two fields. */
function entryName(header: Uint8Array): string {
  const field = (from: number, to: number) =>
    Buffer.from(header.subarray(from, to)).toString('utf8').replace(/\0.*$/s, '');
  const prefix = field(257, 263) === 'ustar' ? field(345, 500) : '';
  return prefix ? `${prefix}/${field(0, 100)}` : field(0, 100);
}

/**
 * Checks every header of a data directory's tar (checksum, size, a plain file or directory, no
 * path leaving the directory) and that it holds PG_VERSION. PGlite is handed only a tar that
 * passed: a damaged one makes its loader throw where nobody can catch it.
 */
function checkDataDirTar(tar: Uint8Array): void {
  let offset = 0;
  let hasVersion = false;
  for (;;) {
    if (offset + 512 > tar.length) throw new BackupArchiveError('is damaged: its tar archive is cut short');
    const header = tar.subarray(offset, offset + 512);
    if (header.every((b) => b === 0)) break;
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : header[i]!;
    const size = octal(header.subarray(124, 136));
    if (octal(header.subarray(148, 156)) !== sum || !Number.isSafeInteger(size))
      throw new BackupArchiveError('is damaged: a header of its tar archive fails its checksum');
    const parts = entryName(header)
      .split('/')
      .filter((p) => p !== '' && p !== '.');
    const type = String.fromCharCode(header[156]!);
    if (!['0', '\0', '5'].includes(type) || parts.includes('..') || parts.length === 0)
      throw new BackupArchiveError(
        'is not a PGlite data directory: its tar holds other than files and folders in it',
      );
    if (parts.join('/') === 'PG_VERSION') hasVersion = true;
    offset += 512 + Math.ceil(size / 512) * 512;
  }
  if (!hasVersion) throw new BackupArchiveError('is not a PGlite data directory: it holds no PG_VERSION');
}

/** The tarball of a checked archive, unpacked and checked: the plain tar PGlite loads. */
export function unpackDataDirTarball(tarball: Uint8Array): Uint8Array {
  let tar: Uint8Array;
  try {
    tar = zlib.gunzipSync(tarball);
  } catch {
    throw new BackupArchiveError('is damaged: its database is not a readable gzip stream');
  }
  checkDataDirTar(tar);
  return tar;
}

/** What a restored database says of itself. */
export interface RestoredDatabase {
  /** The id of the master key its records are sealed under; null if no service ever started on it. */
  masterKeyId: string | null;
}

/**
 * Writes the data directory of `tar` (checked by unpackDataDirTarball) into `pgliteDir`, which
 * must not exist, and checks it opens as a Ledgerhook database; closed cleanly, so the service
 * starts on it without recovery. Throws BackupArchiveError for a database that is not Ledgerhook's.
 */
export async function restoreDataDir(pgliteDir: string, tar: Uint8Array): Promise<RestoredDatabase> {
  fs.mkdirSync(pgliteDir, { recursive: true, mode: 0o700 });
  const db = await PGlite.create({ dataDir: pgliteDir, loadDataDir: new Blob([tar]) });
  try {
    // A table is resolved when the statement is planned, so whether the tables exist is asked first.
    const { rows } = await db.query<{ tables: boolean }>(`
      SELECT to_regclass('public.settings') IS NOT NULL
        AND to_regclass('drizzle.__drizzle_migrations') IS NOT NULL AS tables`);
    if (!rows[0]?.tables)
      throw new BackupArchiveError('holds a database without Ledgerhook tables (an empty PGlite?)');
    const key = await db.query<{ value: string }>(`SELECT value FROM settings WHERE key = 'master_key_id'`);
    return { masterKeyId: key.rows[0]?.value ?? null };
  } finally {
    await db.close();
  }
}
