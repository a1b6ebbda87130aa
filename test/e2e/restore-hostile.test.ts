/**
 * `ledgerhook restore` against hostile archives: a gzip bomb, a real data directory with
 * a file too many or too large, tar headers that hide entries, paths leaving the directory, links,
 * a manifest that lies about the size. Each is refused in one line, early and with the process's
 * memory flat, and leaves the target as it was. A restore killed midway blocks no later one. What
 * restore unpacks is what PGlite's own loader would have written from the same tar.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  BACKUP_FORMAT,
  type BackupManifest,
  checkBackupArchive,
  MAX_UNPACKED_BYTES,
  openRestoredDataDir,
  unpackDataDir,
} from '../../src/store/backup.js';
import { DATA_DIR_LIMITS } from '../../src/store/data-dir-shape.js';
import { createTestEnvironment } from '../helpers/env.js';
import { meaningfulLines, runCli, startCli, waitFor } from '../helpers/process.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

const cleanups: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => {});
});

function scratchDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-restore-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

interface TarEntry {
  name: string;
  /** The type flag: '0' a file, '5' a folder, '1' a hard link, '2' a symbolic link. */
  type?: string;
  /** The size the header announces; the content's length unless given. */
  size?: number;
  content?: Uint8Array;
  linkName?: string;
}

/** A ustar header as PGlite's tar writer makes it. */
function tarHeader(entry: TarEntry): Buffer {
  const header = Buffer.alloc(512);
  const octal = (value: number, width: number) => `${value.toString(8).padStart(width - 1, '0')}\0`;
  header.write(entry.name, 0, 100, 'utf8');
  header.write(octal(0o666, 8), 100, 'latin1');
  header.write(octal(0, 8), 108, 'latin1');
  header.write(octal(0, 8), 116, 'latin1');
  header.write(octal(entry.size ?? entry.content?.length ?? 0, 12), 124, 'latin1');
  header.write(octal(Math.floor(Date.now() / 1000), 12), 136, 'latin1');
  header.write(entry.type ?? '0', 156, 'latin1');
  header.write(entry.linkName ?? '', 157, 100, 'utf8');
  header.write('ustar\u000000', 257, 'latin1');
  header.write('        ', 148, 'latin1');
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
  return header;
}

/** Entries as tar blocks (headers, contents padded to 512 bytes), without the end marker. */
function tarBlocks(entries: TarEntry[]): Buffer {
  return Buffer.concat(
    entries.flatMap((entry) => {
      const content = entry.content ?? new Uint8Array(0);
      return [tarHeader(entry), content, Buffer.alloc((512 - (content.length % 512)) % 512)];
    }),
  );
}

const TAR_END = Buffer.alloc(1024);

/** `bytes` of zeros, gzipped as members of 1 MiB each (~1 KiB apiece): a gigabyte costs a megabyte. */
function gzippedZeros(bytes: number): Buffer[] {
  const member = zlib.gzipSync(Buffer.alloc(MiB));
  const members: Buffer[] = Array(Math.floor(bytes / MiB)).fill(member);
  if (bytes % MiB) members.push(zlib.gzipSync(Buffer.alloc(bytes % MiB)));
  return members;
}

/** An archive as ledgerhook backup writes it, around a gzip stream; `unpackedBytes` null leaves it out (earlier backups). */
function archiveOf(gzipParts: Buffer[], unpackedBytes: number | null): Buffer {
  const tarball = Buffer.concat(gzipParts);
  const manifest: BackupManifest = {
    format: BACKUP_FORMAT,
    createdAt: new Date().toISOString(),
    ledgerhook: '0.0.0',
    database: 'pglite',
    masterKeyId: null,
    tarballBytes: tarball.length,
    tarballSha256: crypto.createHash('sha256').update(tarball).digest('hex'),
    ...(unpackedBytes === null ? {} : { unpackedBytes }),
  };
  return Buffer.concat([Buffer.from(`${JSON.stringify(manifest)}\n`), tarball]);
}

/** A data directory's tar (PGlite's dump): where its entries end, and each file's time in ms. */
function readTar(tar: Buffer): { end: number; fileTimes: Map<string, number> } {
  const fileTimes = new Map<string, number>();
  let offset = 0;
  const field = (from: number, to: number) =>
    tar.toString('latin1', offset + from, offset + to).replace(/\0.*$/s, '');
  while (!tar.subarray(offset, offset + 512).every((b) => b === 0)) {
    const size = Number.parseInt(field(124, 136), 8);
    const isFolder = field(156, 157) === '5';
    if (!isFolder)
      fileTimes.set(field(0, 100).replace(/^\//, ''), Number.parseInt(field(136, 148), 8) * 1000);
    offset += 512 + (isFolder ? 0 : Math.ceil(size / 512) * 512);
  }
  return { end: offset, fileTimes };
}

/**
 * Loaded into the CLI before it starts: at exit it writes the process's peak resident memory to
 * LEDGERHOOK_TEST_RSS_FILE. VmHWM, not getrusage's maxRSS: a process spawned by the test worker
 * inherits the worker's peak in that figure.
 */
const RECORD_PEAK_RSS = [
  "import { readFileSync, writeFileSync } from 'node:fs';",
  "process.on('exit', () => {",
  "  const kB = /VmHWM:\\s*(\\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))[1];",
  '  writeFileSync(process.env.LEDGERHOOK_TEST_RSS_FILE, String(kB * 1024));',
  '});',
].join('\n');

/** Runs `ledgerhook restore FILE` into `target`, measuring the process's peak resident memory. */
async function restore(file: string, target: string) {
  const rssFile = path.join(scratchDir(), 'peak-rss');
  const result = await runCli(['restore', file], {
    LEDGERHOOK_DATA_DIR: target,
    LEDGERHOOK_TEST_RSS_FILE: rssFile,
    NODE_OPTIONS: `--import=data:text/javascript,${encodeURIComponent(RECORD_PEAK_RSS)}`,
  });
  return { ...result, peakRss: Number(fs.readFileSync(rssFile, 'utf8')) };
}

/** The peak a refused restore may reach: Node and the CLI take ~100 MB, unpacking up to the refusal ~40 MB more. */
const FLAT_RSS = 200 * MiB;

/** A backup file's manifest line and tarball. */
function partsOf(file: string): { manifest: BackupManifest; tarball: Buffer } {
  const bytes = fs.readFileSync(file);
  const end = bytes.indexOf('\n');
  return { manifest: JSON.parse(bytes.toString('utf8', 0, end)), tarball: bytes.subarray(end + 1) };
}

let goodFile: string;
let goodTar: Buffer;

beforeAll(async () => {
  const data = await createTestEnvironment('pglite');
  cleanups.push(() => data.cleanup());
  goodFile = path.join(scratchDir(), 'good.backup');
  const backup = await runCli(['backup', goodFile], data.env);
  expect(backup.code, backup.stderr).toBe(0);
  const { manifest, tarball } = partsOf(goodFile);
  goodTar = zlib.gunzipSync(tarball);
  // The manifest says how much the database unpacks to.
  expect(manifest.unpackedBytes).toBe(goodTar.length);
});

describe('restore refuses hostile archives early, in one line, with flat memory, and changes nothing', () => {
  test('bombs, files outside a data directory or larger than PostgreSQL writes, hidden entries, paths out, links, a manifest that lies', async () => {
    const dir = scratchDir();
    const entries = goodTar.subarray(0, readTar(goodTar).end);
    const gzippedEntries = zlib.gzipSync(entries, { level: 1 });
    /**
     * The real data directory, `extra` after it, then `zeros` bytes of zeros; the manifest announces
     * the true size unless `declared` is given.
     */
    const dataDirPlus = (extra: TarEntry[], zeros = 0, declared?: number) => {
      const added = tarBlocks(extra);
      const tail = Buffer.concat([Buffer.alloc((512 - (zeros % 512)) % 512), TAR_END]);
      return archiveOf(
        [gzippedEntries, zlib.gzipSync(added), ...gzippedZeros(zeros), zlib.gzipSync(tail)],
        declared ?? entries.length + added.length + zeros + tail.length,
      );
    };
    const escapeName = `escaped-${crypto.randomBytes(4).toString('hex')}`;
    const hiddenByFolder = tarBlocks([{ name: `/../${escapeName}`, content: Buffer.from('owned') }]);
    const cases: { name: string; archive: Buffer; refusal: RegExp }[] = [
      {
        // 1 GiB of zeros inside a file named as a table's, under a manifest announcing the real size.
        name: 'bomb',
        archive: dataDirPlus([{ name: '/base/5/99999', size: GiB }], GiB, goodTar.length),
        refusal: new RegExp(
          `is damaged: it unpacks to more than the ${goodTar.length} bytes its first line announces`,
        ),
      },
      {
        // An earlier backup's manifest (no size): 1 GiB of zeros, read as the tar's end and padding.
        name: 'bomb-without-size',
        archive: archiveOf(gzippedZeros(GiB), null),
        refusal: /is damaged: its tar archive goes on after its end/,
      },
      {
        name: 'extra-file',
        archive: dataDirPlus([{ name: '/ledgerhook-extra.bin', size: GiB }], GiB),
        refusal:
          /is not a PGlite data directory: its tar holds "ledgerhook-extra.bin", which PostgreSQL does not keep in one/,
      },
      {
        name: 'oversize-wal',
        archive: dataDirPlus([{ name: '/pg_wal/000000010000000000000002', size: 64 * MiB }], 64 * MiB),
        refusal: new RegExp(
          `is not a PGlite data directory: its tar holds "pg_wal/000000010000000000000002" of ${64 * MiB} bytes, more than PostgreSQL writes there \\(${DATA_DIR_LIMITS.walSegment}\\)`,
        ),
      },
      {
        name: 'oversize-table',
        archive: dataDirPlus([{ name: '/base/5/99999', size: GiB + 8192 }], GiB + 8192),
        refusal: new RegExp(
          `is not a PGlite data directory: its tar holds "base/5/99999" of ${GiB + 8192} bytes, more than PostgreSQL writes there \\(${GiB}\\)`,
        ),
      },
      {
        // PGlite's loader reads a folder as empty, so what follows its header is read as entries.
        name: 'folder-with-content',
        archive: dataDirPlus([{ name: '/base/6', type: '5', content: hiddenByFolder }]),
        refusal: new RegExp(
          `is damaged: the folder "/base/6" in its tar announces ${hiddenByFolder.length} bytes`,
        ),
      },
      {
        name: 'dot-dot',
        archive: dataDirPlus([{ name: `/base/../../${escapeName}`, content: Buffer.from('owned') }]),
        refusal: new RegExp(
          `is not a PGlite data directory: its tar holds a path leaving the directory \\("/base/../../${escapeName}"\\)`,
        ),
      },
      {
        name: 'symlink',
        archive: dataDirPlus([{ name: '/pg_tblspc/16500', type: '2', linkName: '/etc' }]),
        refusal:
          /is not a PGlite data directory: its tar holds a symbolic link \("\/pg_tblspc\/16500"\), not only files and folders/,
      },
      {
        name: 'hard-link',
        archive: dataDirPlus([{ name: '/base/5/99999', type: '1', linkName: '/PG_VERSION' }]),
        refusal:
          /is not a PGlite data directory: its tar holds a hard link \("\/base\/5\/99999"\), not only files and folders/,
      },
      {
        name: 'understated',
        archive: dataDirPlus([], 0, goodTar.length - 512),
        refusal: new RegExp(`is damaged: it unpacks to more than the ${goodTar.length - 512} bytes`),
      },
      {
        name: 'overstated',
        archive: dataDirPlus([], 0, goodTar.length + 512),
        refusal: new RegExp(
          `is damaged: it unpacks to ${goodTar.length} bytes, not the ${goodTar.length + 512}`,
        ),
      },
      {
        name: 'beyond-the-ceiling',
        archive: dataDirPlus([], 0, MAX_UNPACKED_BYTES + 1),
        refusal: new RegExp(
          `announces ${MAX_UNPACKED_BYTES + 1} bytes of database, more than a restore accepts`,
        ),
      },
    ];
    // Into a target that does not exist (restore would create it) and one holding the kept master.key, by turns.
    const withKey = path.join(dir, 'with-key');
    fs.mkdirSync(withKey);
    fs.writeFileSync(path.join(withKey, 'master.key'), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
    const outside = () => fs.readdirSync(dir).sort();
    for (const [index, { name, archive, refusal }] of cases.entries()) {
      const file = path.join(dir, `${name}.backup`);
      fs.writeFileSync(file, archive);
      const before = outside();
      const target = index % 2 === 0 ? path.join(dir, 'missing') : withKey;
      const result = await restore(file, target);
      expect(result.code, `${name}: ${result.stderr}`).toBe(1);
      const lines = meaningfulLines(result.stderr);
      expect(lines, name).toHaveLength(1);
      expect(lines[0], name).toMatch(
        new RegExp(`^ledgerhook: ${file} ${refusal.source}.*; nothing was restored$`),
      );
      expect(result.peakRss, `${name}: peak memory`).toBeLessThan(FLAT_RSS);
      // Nothing was left: not the target, nothing beside it or in it, nothing escaped from it.
      expect(outside(), name).toEqual(before);
      expect(fs.readdirSync(withKey), name).toEqual(['master.key']);
    }
  }, 120_000);
});

describe('a restore that died', () => {
  test('killed midway (SIGKILL), it leaves its staging folder and lock file; the next restore of a good backup succeeds and leaves neither', async () => {
    const target = path.join(scratchDir(), 'data');
    const killed = startCli(['restore', goodFile], { LEDGERHOOK_DATA_DIR: target });
    let exited = false;
    void killed.exited.then(() => {
      exited = true;
    });
    // Midway: the staging folder is being filled.
    await waitFor(() => {
      if (exited) throw new Error(`the restore ended before it could be killed: ${killed.stderr()}`);
      const staging = fs.existsSync(target) && fs.readdirSync(target).find((n) => n.startsWith('.restore-'));
      return staging && fs.existsSync(path.join(target, staging, 'pglite', 'base')) ? true : undefined;
    }, 'the restore to unpack into its staging folder');
    expect(await killed.stop('SIGKILL')).toBeNull();
    expect(fs.readdirSync(target).sort()).toEqual([expect.stringMatching(/^\.restore-/), 'ledgerhook.pid']);

    const restored = await runCli(['restore', goodFile], { LEDGERHOOK_DATA_DIR: target });
    expect(restored.code, restored.stderr).toBe(0);
    expect(fs.readdirSync(target)).toEqual(['pglite']);
  });

  test('a backup written before the manifest announced its size restores, bounded by the ceiling alone', async () => {
    const file = path.join(scratchDir(), 'earlier.backup');
    fs.writeFileSync(file, archiveOf([partsOf(goodFile).tarball], null));
    const target = path.join(scratchDir(), 'data');
    const restored = await runCli(['restore', file], { LEDGERHOOK_DATA_DIR: target });
    expect(restored.code, restored.stderr).toBe(0);
    expect(fs.readdirSync(target)).toEqual(['pglite']);
  });
});

/** Every file and folder under `root`: its type and mode, and for a file its size, time and digest. */
function treeOf(
  root: string,
): Map<string, { type: string; mode: number; size?: number; mtimeMs?: number; sha?: string }> {
  const tree = new Map<
    string,
    { type: string; mode: number; size?: number; mtimeMs?: number; sha?: string }
  >();
  for (const entry of fs.readdirSync(root, { recursive: true, withFileTypes: true })) {
    const file = path.join(entry.parentPath, entry.name);
    const stat = fs.lstatSync(file);
    const name = path.relative(root, file);
    if (stat.isDirectory()) tree.set(name, { type: 'folder', mode: stat.mode & 0o7777 });
    else
      tree.set(name, {
        type: stat.isFile() ? 'file' : 'other',
        mode: stat.mode & 0o7777,
        size: stat.size,
        mtimeMs: Math.floor(stat.mtimeMs / 1000) * 1000,
        sha: crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex'),
      });
  }
  return tree;
}

test("restore unpacks what PGlite's own loader writes from the same tar: names, contents, modes, times", async () => {
  const dir = scratchDir();
  const byLoader = path.join(dir, 'loader');
  fs.mkdirSync(byLoader, { mode: 0o700 });
  const loaded = await PGlite.create({ dataDir: byLoader, loadDataDir: new Blob([goodTar]) });
  await loaded.close();
  const byRestore = path.join(dir, 'restore');
  await unpackDataDir(await checkBackupArchive(goodFile), byRestore);
  await openRestoredDataDir(byRestore);

  const expected = treeOf(byLoader);
  const actual = treeOf(byRestore);
  expect([...actual.keys()].sort()).toEqual([...expected.keys()].sort());
  // Both were opened and closed once: the files PostgreSQL rewrote then (its control file, the log)
  // carry the time of that; every other must be the tar's, with the tar's time.
  const { fileTimes } = readTar(goodTar);
  let untouched = 0;
  for (const [name, want] of expected) {
    const got = actual.get(name)!;
    expect({ name, type: got.type, mode: got.mode }).toEqual({ name, type: want.type, mode: want.mode });
    const tarTime = fileTimes.get(name);
    if (want.type !== 'file' || want.mtimeMs !== tarTime || got.mtimeMs !== tarTime) continue;
    expect({ name, sha: got.sha }).toEqual({ name, sha: want.sha });
    untouched++;
  }
  expect(untouched).toBeGreaterThan(1000);
});
