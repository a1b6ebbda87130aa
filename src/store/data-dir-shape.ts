/**
 * What a PGlite data directory may hold, for `ledgerhook restore`: every name PostgreSQL 18 (PGlite
 * 0.5) keeps there, by its shape, and the largest file it writes under each. An archive holding
 * anything else is refused before it is unpacked further. The shapes are PostgreSQL's own (see
 * "Database File Layout" in its documentation); the folders PGlite never fills (replication slots,
 * tablespaces, prepared transactions, exported snapshots, logical decoding) are admitted empty only.
 */

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

/** The bounds a restore enforces, in bytes (or entries); documented in docs/api.md, "Limits". */
export const DATA_DIR_LIMITS = {
  /** A relation segment: RELSEG_SIZE (131,072) blocks of 8 KiB, PGlite's segment_size of 1GB. */
  relationSegment: GiB,
  /** A write-ahead log segment: PGlite's initdb keeps PostgreSQL's wal_segment_size of 16MB. */
  walSegment: 16 * MiB,
  /** An SLRU segment (pg_xact, pg_subtrans, pg_multixact, pg_notify, …): 32 pages of 8 KiB. */
  slruSegment: 256 * KiB,
  /**
   * Anything else PostgreSQL writes (pg_control is 8 KiB, the relation cache's init file ~130 KiB,
   * postgresql.conf ~32 KiB, the statistics file grows with the number of tables).
   */
  otherFile: 16 * MiB,
  /** Files and folders in one archive: a Ledgerhook data directory holds ~1,100; each GiB of a table adds one. */
  entries: 100_000,
} as const;

/** A relation's file: its filenode (t<backend>_ for a temporary one), fork and segment number. */
const RELATION = String.raw`(?:t\d+_)?\d+(?:_(?:fsm|vm|init))?(?:\.\d+)?`;
const WAL = '[0-9A-F]{24}';
const SLRU_FOLDERS =
  'pg_xact|pg_subtrans|pg_multixact/offsets|pg_multixact/members|pg_commit_ts|pg_serial|pg_notify';

const FOLDERS = [
  'base',
  String.raw`base/\d+`,
  'base/pgsql_tmp',
  'global',
  'pg_wal',
  'pg_wal/archive_status',
  'pg_wal/summaries',
  'pg_xact',
  'pg_subtrans',
  'pg_multixact',
  'pg_multixact/offsets',
  'pg_multixact/members',
  'pg_commit_ts',
  'pg_serial',
  'pg_notify',
  'pg_logical',
  'pg_logical/mappings',
  'pg_logical/snapshots',
  'pg_stat',
  'pg_stat_tmp',
  'pg_dynshmem',
  'pg_replslot',
  'pg_snapshots',
  'pg_tblspc',
  'pg_twophase',
];

/** File shapes and the most PostgreSQL writes under each; a `.tmp` is the file it renames into place. */
const FILES: [string, number][] = [
  [
    String.raw`PG_VERSION|postgresql\.conf|postgresql\.auto\.conf(?:\.tmp)?|pg_hba\.conf|pg_ident\.conf|postmaster\.opts|postmaster\.pid`,
    DATA_DIR_LIMITS.otherFile,
  ],
  [String.raw`(?:base/\d+|global)/${RELATION}`, DATA_DIR_LIMITS.relationSegment],
  [
    String.raw`(?:base/\d+|global)/(?:PG_VERSION|pg_filenode\.map(?:\.tmp)?|pg_internal\.init(?:\.\d+)?)`,
    DATA_DIR_LIMITS.otherFile,
  ],
  ['global/pg_control', DATA_DIR_LIMITS.otherFile],
  // Spilled sorts and hashes, bounded by temp_file_limit and removed when PostgreSQL starts.
  [String.raw`base/pgsql_tmp/pgsql_tmp\d+\.\d+`, DATA_DIR_LIMITS.relationSegment],
  [String.raw`pg_wal/(?:${WAL}(?:\.partial)?|xlogtemp\.\d+)`, DATA_DIR_LIMITS.walSegment],
  [String.raw`pg_wal/(?:[0-9A-F]{8}\.history|${WAL}\.[0-9A-F]{8}\.backup)`, DATA_DIR_LIMITS.otherFile],
  [String.raw`pg_wal/archive_status/${WAL}(?:\.partial)?\.(?:ready|done)`, DATA_DIR_LIMITS.otherFile],
  ['pg_wal/summaries/[0-9A-F]{40}\\.summary', DATA_DIR_LIMITS.otherFile],
  [`(?:${SLRU_FOLDERS})/[0-9A-F]{4,15}`, DATA_DIR_LIMITS.slruSegment],
  ['pg_logical/replorigin_checkpoint(?:\\.tmp)?', DATA_DIR_LIMITS.otherFile],
  ['pg_stat/pgstat\\.stat', DATA_DIR_LIMITS.otherFile],
];

const FOLDER = new RegExp(`^(?:${FOLDERS.join('|')})$`);
const FILE_SHAPES = FILES.map(([shape, max]) => ({ pattern: new RegExp(`^(?:${shape})$`), max }));

/** Whether `name` (relative, '/'-separated, normalised) is a folder PostgreSQL keeps in a data directory. */
export function isDataDirFolder(name: string): boolean {
  return FOLDER.test(name);
}

/** The largest file PostgreSQL writes as `name`, or undefined when it writes no file of that name. */
export function dataDirFileLimit(name: string): number | undefined {
  return FILE_SHAPES.find((shape) => shape.pattern.test(name))?.max;
}
