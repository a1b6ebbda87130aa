/**
 * Backups of the embedded database: the archive `ledgerhook backup` writes and `ledgerhook restore`
 * reads. An archive is one line of JSON (the manifest) followed by PGlite's gzipped tarball of its
 * data directory, so `tail -n +2 FILE | tar -tz` lists it with ordinary tools. The manifest names
 * the master key the records are sealed under by its id only: the key itself is kept apart.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import { LedgerhookError } from '../errors.js';
import { packageVersion } from '../version.js';
import { DATA_DIR_LIMITS, dataDirFileLimit, isDataDirFolder } from './data-dir-shape.js';
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
  /**
   * The length of the tar the tarball unpacks to: a restore unpacks no more. Archives written before
   * it was recorded lack it, and are bounded by MAX_UNPACKED_BYTES alone.
   */
  unpackedBytes?: number;
}

/**
 * The most a restore unpacks, whatever the manifest says. A backup is made in memory (PGlite's
 * dump holds every file, then their tar, then its gzip), so a data directory this large already
 * needs tens of GB of RAM to back up; a database that size belongs on PostgreSQL.
 */
export const MAX_UNPACKED_BYTES = 16 * 1024 ** 3;

/** A file that is not a whole Ledgerhook backup; the message completes "FILE …". */
export class BackupArchiveError extends LedgerhookError {}

/** A manifest line longer than this is no manifest (the real one is ~300 bytes). */
const MAX_MANIFEST_BYTES = 64 * 1024;
const NOT_A_BACKUP = 'is not a Ledgerhook backup (it does not begin with the line ledgerhook backup writes)';

/** The master key id the database remembers (see checkMasterKey in app/master-key.ts), if it has one. */
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

/** How long the tar in a gzipped tarball is, counted as it is unpacked (never held whole). */
async function unpackedLength(tarball: Uint8Array): Promise<number> {
  const gunzip = zlib.createGunzip();
  gunzip.end(tarball);
  let bytes = 0;
  for await (const chunk of gunzip) bytes += (chunk as Buffer).length;
  return bytes;
}

/** A consistent backup of the running embedded database: the manifest line, then the tarball. */
export async function createBackupArchive(
  store: Store,
): Promise<{ manifest: BackupManifest; header: Buffer; tarball: Uint8Array }> {
  if (!store.snapshotDataDir) throw new Error('only the embedded database is backed up by Ledgerhook');
  // Read first: the id never changes once the database has one, so it holds for the snapshot too.
  const masterKeyId = await recordedMasterKeyId(store);
  const tarball = await store.snapshotDataDir();
  const unpackedBytes = await unpackedLength(tarball);
  const manifest: BackupManifest = {
    format: BACKUP_FORMAT,
    createdAt: new Date().toISOString(),
    ledgerhook: packageVersion(),
    database: 'pglite',
    masterKeyId,
    tarballBytes: tarball.length,
    tarballSha256: crypto.createHash('sha256').update(tarball).digest('hex'),
    unpackedBytes,
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
    (manifest.masterKeyId !== null && typeof manifest.masterKeyId !== 'string') ||
    (manifest.unpackedBytes !== undefined && !Number.isSafeInteger(manifest.unpackedBytes))
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

/** A backup file whose manifest, length and checksum were checked; its tarball begins at `tarballOffset`. */
export interface CheckedArchive {
  file: string;
  manifest: BackupManifest;
  tarballOffset: number;
}

/** Bytes read from a backup file at a time. */
const READ_CHUNK = 1024 * 1024;

/**
 * Reads a backup file through, checking its manifest, length and checksum (it keeps none of it),
 * and that it announces no more database than a restore accepts.
 */
export async function checkBackupArchive(file: string): Promise<CheckedArchive> {
  const reader = createArchiveReader();
  let size = 0;
  for await (const chunk of fs.createReadStream(file, { highWaterMark: READ_CHUNK })) {
    reader.push(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  const manifest = reader.finish();
  if (manifest.unpackedBytes !== undefined && manifest.unpackedBytes > MAX_UNPACKED_BYTES)
    throw new BackupArchiveError(
      `announces ${manifest.unpackedBytes} bytes of database, more than a restore accepts (${MAX_UNPACKED_BYTES})`,
    );
  return { file, manifest, tarballOffset: size - manifest.tarballBytes };
}

function octal(field: Uint8Array): number {
  const text = Buffer.from(field).toString('latin1').replace(/\0.*$/s, '').trim();
  return /^[0-7]+$/.test(text) ? Number.parseInt(text, 8) : Number.NaN;
}

const BLOCK = 512;
/** Zeros a tar may carry after its end marker: tar pads to its record size, 1 MiB at most (PGlite writes 1 KiB). */
const TAR_TRAILER_BYTES = 1024 * 1024;
/** The size of the pieces gunzip hands on, each written before the next is unpacked. */
const UNPACK_CHUNK = 256 * 1024;

/** A name from an archive, quoted so that no byte of it can break the one-line message. */
const quoted = (name: string) => JSON.stringify(name);

interface TarEntry {
  name: string;
  type: 'file' | 'folder';
  size: number;
  /** Seconds since the epoch. */
  mtime: number;
}

function entryKind(flag: string): string {
  if (flag === '1') return 'a hard link';
  if (flag === '2') return 'a symbolic link';
  if (flag === '3' || flag === '4') return 'a device';
  if (flag === '6') return 'a FIFO';
  return `an entry of type ${quoted(flag)}`;
}

/** One header, read as PGlite's loader reads it; refused where the loader would read something else. */
function parseHeader(header: Buffer): TarEntry {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : header[i]!;
  const size = octal(header.subarray(124, 136));
  if (octal(header.subarray(148, 156)) !== sum || !Number.isSafeInteger(size))
    throw new BackupArchiveError('is damaged: a header of its tar archive fails its checksum');
  const name = header.toString('utf8', 0, 100).replace(/\0.*$/s, '');
  // The loader reads the name field alone: a ustar prefix (or no ustar header at all) names another path.
  if (header.toString('latin1', 257, 262) !== 'ustar' || header[345] !== 0)
    throw new BackupArchiveError(
      `is not a PGlite data directory: its tar names ${quoted(name)} otherwise than PGlite does`,
    );
  const flag = String.fromCharCode(header[156]!);
  const type = flag === '0' || flag === '\0' ? 'file' : flag === '5' ? 'folder' : undefined;
  if (!type)
    throw new BackupArchiveError(
      `is not a PGlite data directory: its tar holds ${entryKind(flag)} (${quoted(name)}), not only files and folders`,
    );
  // The loader reads a folder as holding nothing: bytes announced there would be read as further entries.
  if (type === 'folder' && size !== 0)
    throw new BackupArchiveError(
      `is damaged: the folder ${quoted(name)} in its tar announces ${size} bytes of content`,
    );
  // The loader's times: none (now) when the field is empty.
  const mtime = header[136] === 0 ? Date.now() / 1000 : octal(header.subarray(136, 148)) || 0;
  return { name, type, size, mtime };
}

/** An entry's path in the data directory: '/'-separated, without '.' and empty parts; never outside it. */
function relativeName(name: string): string {
  const parts = name.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..'))
    throw new BackupArchiveError(
      `is not a PGlite data directory: its tar holds a path leaving the directory (${quoted(name)})`,
    );
  return parts.join('/');
}

const notInDataDir = (name: string) =>
  new BackupArchiveError(
    `is not a PGlite data directory: its tar holds ${quoted(name)}, which PostgreSQL does not keep in one`,
  );

const bothKinds = (name: string) =>
  new BackupArchiveError(`is damaged: its tar holds ${quoted(name)} both as a file and as a folder`);

async function writeAll(handle: fs.promises.FileHandle, bytes: Uint8Array): Promise<void> {
  for (let done = 0; done < bytes.length; )
    done += (await handle.write(bytes, done, bytes.length - done)).bytesWritten;
}

/**
 * Writes the entries of a data directory's tar into `root` as its bytes come, each checked before
 * anything of it is written, and written as PGlite's loader (loadDataDir) writes it: folders with
 * mode 0777 less the umask, files 0666 whatever the umask, a file's times set to its header's.
 */
function createDataDirWriter(root: string) {
  const made = new Map<string, 'file' | 'folder'>();
  const header = Buffer.alloc(BLOCK);
  let filled = 0;
  let current: { handle: fs.promises.FileHandle; left: number; mtime: number } | undefined;
  let padding = 0;
  let entries = 0;
  let ended = false;
  let trailer = 0;

  async function makeFolder(name: string): Promise<void> {
    const kind = made.get(name);
    if (kind === 'folder') return;
    if (kind === 'file') throw bothKinds(name);
    if (!isDataDirFolder(name)) throw notInDataDir(name);
    const parent = path.posix.dirname(name);
    if (parent !== '.') await makeFolder(parent);
    await fs.promises.mkdir(path.join(root, name), { mode: 0o777 });
    made.set(name, 'folder');
  }

  async function endFile(): Promise<void> {
    const file = current!;
    current = undefined;
    try {
      await file.handle.utimes(file.mtime, file.mtime);
    } finally {
      await file.handle.close();
    }
  }

  async function begin(entry: TarEntry): Promise<void> {
    if (++entries > DATA_DIR_LIMITS.entries)
      throw new BackupArchiveError(
        `is not a PGlite data directory: its tar holds more than ${DATA_DIR_LIMITS.entries} entries`,
      );
    const name = relativeName(entry.name);
    if (entry.type === 'folder') return makeFolder(name);
    const limit = dataDirFileLimit(name);
    if (limit === undefined) throw notInDataDir(name);
    if (entry.size > limit)
      throw new BackupArchiveError(
        `is not a PGlite data directory: its tar holds ${quoted(name)} of ${entry.size} bytes, more than PostgreSQL writes there (${limit})`,
      );
    if (made.has(name))
      throw made.get(name) === 'folder'
        ? bothKinds(name)
        : new BackupArchiveError(`is damaged: its tar holds ${quoted(name)} twice`);
    const parent = path.posix.dirname(name);
    if (parent !== '.') await makeFolder(parent);
    const handle = await fs.promises.open(path.join(root, name), 'wx');
    made.set(name, 'file');
    current = { handle, left: entry.size, mtime: entry.mtime };
    padding = Math.ceil(entry.size / BLOCK) * BLOCK - entry.size;
    await handle.chmod(0o666);
    if (entry.size === 0) await endFile();
  }

  return {
    /** The next bytes of the tar. */
    async write(chunk: Buffer): Promise<void> {
      let at = 0;
      while (at < chunk.length) {
        if (ended) {
          trailer += chunk.length - at;
          if (trailer > TAR_TRAILER_BYTES || chunk.subarray(at).some((b) => b !== 0))
            throw new BackupArchiveError('is damaged: its tar archive goes on after its end');
          return;
        }
        if (current) {
          const part = chunk.subarray(at, at + current.left);
          await writeAll(current.handle, part);
          current.left -= part.length;
          at += part.length;
          if (current.left === 0) await endFile();
        } else if (padding > 0) {
          const skipped = Math.min(padding, chunk.length - at);
          padding -= skipped;
          at += skipped;
        } else {
          const copied = chunk.copy(header, filled, at, Math.min(chunk.length, at + BLOCK - filled));
          filled += copied;
          at += copied;
          if (filled < BLOCK) continue;
          filled = 0;
          if (header.every((b) => b === 0)) ended = true;
          else await begin(parseHeader(header));
        }
      }
    },
    /** Once every byte came: the tar ended where it should, and it held a data directory. */
    finish(): void {
      if (!ended) throw new BackupArchiveError('is damaged: its tar archive is cut short');
      if (made.get('PG_VERSION') !== 'file')
        throw new BackupArchiveError('is not a PGlite data directory: it holds no PG_VERSION');
    },
    /** Closes the file being written, if any (after a failure). */
    async close(): Promise<void> {
      await current?.handle.close().catch(() => {});
      current = undefined;
    },
  };
}

/**
 * Unpacks a checked archive's data directory into `dir`, which it creates: streamed from the file
 * through gunzip to the disk, so memory stays flat whatever the archive holds. It refuses, before
 * writing them, entries that are not part of a PostgreSQL data directory or larger than
 * PostgreSQL writes (data-dir-shape.ts), and stops unpacking beyond the size the manifest
 * announces (MAX_UNPACKED_BYTES for an archive that announces none). What it writes is what
 * PGlite's loader would have written from the same tar; what a refused archive wrote, the caller
 * removes with `dir`.
 */
export async function unpackDataDir(archive: CheckedArchive, dir: string): Promise<void> {
  const declared = archive.manifest.unpackedBytes;
  const limit = Math.min(declared ?? MAX_UNPACKED_BYTES, MAX_UNPACKED_BYTES);
  fs.mkdirSync(dir, { mode: 0o700 });
  const writer = createDataDirWriter(dir);
  let unpacked = 0;
  const source = fs.createReadStream(archive.file, {
    start: archive.tarballOffset,
    highWaterMark: READ_CHUNK,
  });
  const tar = zlib.createGunzip({ chunkSize: UNPACK_CHUNK });
  source.on('error', (err) => tar.destroy(err));
  try {
    for await (const chunk of source.pipe(tar) as AsyncIterable<Buffer>) {
      unpacked += chunk.length;
      if (unpacked > limit)
        throw new BackupArchiveError(
          declared === undefined
            ? `unpacks to more than ${MAX_UNPACKED_BYTES} bytes, the most a restore accepts`
            : `is damaged: it unpacks to more than the ${declared} bytes its first line announces`,
        );
      await writer.write(chunk);
    }
  } catch (err) {
    // zlib's errors carry codes such as Z_DATA_ERROR and Z_BUF_ERROR (cut short).
    if (String((err as { code?: unknown }).code).startsWith('Z_'))
      throw new BackupArchiveError('is damaged: its database is not a readable gzip stream');
    throw err;
  } finally {
    source.destroy();
    await writer.close();
  }
  writer.finish();
  if (declared !== undefined && unpacked !== declared)
    throw new BackupArchiveError(
      `is damaged: it unpacks to ${unpacked} bytes, not the ${declared} its first line announces`,
    );
}

/** What a restored database says of itself. */
export interface RestoredDatabase {
  /** The id of the master key its records are sealed under; null if no service ever started on it. */
  masterKeyId: string | null;
}

/**
 * Opens the data directory unpackDataDir wrote and checks it is a Ledgerhook database; closed
 * cleanly, so the service starts on it without recovery. Throws BackupArchiveError for a database
 * that is not Ledgerhook's.
 */
export async function openRestoredDataDir(pgliteDir: string): Promise<RestoredDatabase> {
  const db = await PGlite.create({ dataDir: pgliteDir });
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
