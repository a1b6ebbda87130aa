import { and, eq, inArray, sql } from 'drizzle-orm';
import { createProofs } from '../anchor/proofs.js';
import type { Receipt } from '../anchor/receipt.js';
import { ConflictError, NotFoundError } from '../errors.js';
import { isUuid } from '../http-kit/pagination.js';
import { readRows, type Statement } from '../store/db.js';
import { createReadBatches } from '../store/read-batches.js';
import { type AnchorColumns, anchoredRowColumns, type RegistryContext, type RegistryRow } from './context.js';
import { createRegistryRowCache } from './row-cache.js';
import { registries } from './schema.js';
import type { RegistryView } from './types.js';

/** Gets per statement at most (a power of two: the largest statement's parameters). */
const MAX_BATCH = 64;

/**
 * The hot read's one column (json) is kept as the text PostgreSQL sent and parsed here: from
 * PGlite's worker thread it is then copied as one string, and parsed on the service's thread.
 */
const TEXT_TYPES = [114];

/**
 * A registry as the hot read gives it: its row, its leaf's anchoring (selectWithAnchor), and the
 * characters of its JSON as read (what it costs the row cache).
 */
type AnchoredRow = { registry: RegistryRow; anchor: AnchorColumns; chars: number };

// How each value of the hot read's JSON array is mapped: JSON values are already what their column
// holds (a jsonb string must not be parsed again); the others are as PostgreSQL writes them in JSON
// (timestamps in ISO 8601), mapped as drizzle maps what it reads.
const rowFields = anchoredRowColumns.map(([object, key, column]) => ({
  inRegistry: object === 'registry',
  key,
  map:
    column.columnType === 'PgJson' || column.columnType === 'PgJsonb'
      ? undefined
      : (value: unknown) => column.mapFromDriverValue(value),
}));

/** A row of the hot read (selectWithAnchorAsJson), as drizzle maps selectWithAnchor's. */
function toAnchoredRow([json]: unknown[]): AnchoredRow {
  const text = json as string;
  const values = JSON.parse(text) as unknown[];
  const registry: Record<string, unknown> = {};
  const anchor: Record<string, unknown> = {};
  for (let i = 0; i < rowFields.length; i++) {
    const { inRegistry, key, map } = rowFields[i]!;
    const value = values[i] ?? null;
    (inRegistry ? registry : anchor)[key] = value === null || !map ? value : map(value);
  }
  return { registry: registry as RegistryRow, anchor: anchor as AnchorColumns, chars: text.length };
}

/**
 * Reading registries by id: the hot get (one prepared statement shared by concurrent gets, then
 * the row cache), what drops cached rows when a registry changes, and a registry's proof.
 */
export function createRegistryReads(ctx: RegistryContext) {
  const { deps, db, contentOf, toView, selectWithAnchorAsJson } = ctx;
  const proofs = createProofs(db);

  // The hot read: the gets that arrive together share one statement (read-batches.ts), `WHERE id IN
  // ($1, …, $n)` for n a power of two, the ids padded with the first one. A fixed number of
  // parameters lets PostgreSQL keep one generic plan per statement; `id = ANY($ids)`, whose array's
  // length it cannot know, was planned again at every execution, which was half the database's CPU
  // per read (bench/README.md, "Issue 33: registry get among many"). Each is prepared by name on
  // each connection when first used. Each row is one JSON array (selectWithAnchorAsJson), mapped here.
  const statements = new Map<number, Statement>();
  function statementFor(size: number): Statement {
    let statement = statements.get(size);
    if (!statement) {
      const ids = Array.from({ length: size }, (_, i) => sql.placeholder(`id${i}`));
      const text = selectWithAnchorAsJson().where(inArray(registries.id, ids)).toSQL().sql;
      statement = { name: `registry_get_${size}`, text };
      statements.set(size, statement);
    }
    return statement;
  }
  async function readMany(ids: string[]): Promise<AnchoredRow[]> {
    let size = 1;
    while (size < ids.length) size *= 2;
    const values = ids.slice();
    while (values.length < size) values.push(ids[0]!);
    const rows = await readRows(db, statementFor(size), values, TEXT_TYPES);
    return rows.map(toAnchoredRow);
  }
  const reads = createReadBatches({
    read: (keys: { accountId: string; id: string }[]) => readMany(keys.map((k) => k.id)),
    // The account is compared here, not in SQL: a registry of another account is not found.
    matches: (key, row) => row.registry.id === key.id && row.registry.accountId === key.accountId,
    maxBatch: MAX_BATCH,
  });
  const rows = createRegistryRowCache<AnchoredRow>({
    ttlMs: deps.rowCacheTtlMs ?? 1_000,
    // The row's text as read (its metadata's JSON included), and what an entry costs besides.
    costOf: (row) => row.chars + 512,
  });

  async function get(accountId: string, id: string): Promise<RegistryView> {
    if (!isUuid(id)) throw new NotFoundError(`No registry with id ${id}`);
    // PostgreSQL reads a UUID in any case and gives it back in lower case.
    const key = id.toLowerCase();
    let row = rows.get(key);
    if (row === undefined) {
      const generation = rows.generation();
      row = await reads.get({ accountId, id: key });
      if (row) rows.set(key, row, generation);
    }
    // A cached row of another account's registry is not found, as the read would not find it.
    if (!row || row.registry.accountId !== accountId) throw new NotFoundError(`No registry with id ${id}`);
    return toView(row.registry, row.anchor);
  }

  /**
   * What arrives on REGISTRY_CHANGED_CHANNEL: a changed registry's id; '' when anchoring changed
   * (any registry); nothing after the listener reconnected (anything may have changed meanwhile).
   */
  function onRegistryChanged(id?: string): void {
    if (id) rows.forget(id);
    else rows.clear();
  }

  /** The receipt proving the registry's leaf is anchored (409 while it is not yet). */
  async function proof(accountId: string, id: string): Promise<Receipt> {
    const [row] = isUuid(id)
      ? await db
          .select()
          .from(registries)
          .where(and(eq(registries.accountId, accountId), eq(registries.id, id)))
      : [];
    if (!row) throw new NotFoundError(`No registry with id ${id}`);
    const leaf = await proofs.leafOf(id);
    // The salt of an encrypted registry is sealed with its content.
    const salt = leaf?.salt ?? (leaf ? contentOf(row).salt : undefined);
    if (!leaf || salt === undefined) {
      throw new ConflictError(`Registry ${id} was created before anchoring existed and has no proof`);
    }
    const answer = await proofs.receipt(id, salt);
    if (answer.state !== 'anchored') {
      throw new ConflictError(
        `Registry ${id} is not anchored yet; its receipt is ready once anchor.status is anchored`,
      );
    }
    return answer.receipt;
  }

  return { rows, get, onRegistryChanged, proof };
}
