import { type Column, getTableColumns, sql } from 'drizzle-orm';
import { anchorColumns, leafJoin, toAnchorView } from '../anchor/leaves.js';
import { ServerMisconfiguredError } from '../errors.js';
import type { Idempotency } from '../idempotency/service.js';
import { type Envelope, EnvelopeKeyMismatchError } from '../secrets/envelope.js';
import type { Db } from '../store/db.js';
import { registries } from './schema.js';
import type { RegistryCallbacks, RegistryView, SealedContent, Template } from './types.js';

/** What `createRegistries` is given (service.ts). */
export type RegistryDeps = {
  db: Db;
  envelope: Envelope;
  idempotency: Idempotency;
  callbacks: RegistryCallbacks;
  /** The network registries are anchored on; undefined while anchoring is off. */
  anchorNetwork?: string;
  /** How long a registry read by id is served from memory (row-cache.ts); 0 reads every time. */
  rowCacheTtlMs?: number;
  now?: () => Date;
};

export type RegistryRow = typeof registries.$inferSelect;
export type AnchorColumns = Parameters<typeof toAnchorView>[0];

/**
 * The columns {@link createRegistryContext}'s selectWithAnchor reads, in its order (drizzle's: the
 * selection's own), each with the object and key it fills: `registry` (RegistryRow) or `anchor`.
 */
export const anchoredRowColumns: ReadonlyArray<readonly ['registry' | 'anchor', string, Column]> = [
  ...Object.entries(getTableColumns(registries)).map(([key, column]) => ['registry', key, column] as const),
  ...Object.entries(anchorColumns).map(([key, column]) => ['anchor', key, column as Column] as const),
];

/**
 * What the parts of the registries (create.ts, reads.ts, listing.ts, revocation.ts) share, built
 * once by `createRegistries`: the dependencies, the clock, and how a row is opened, shown and read
 * with its anchoring. The parts take what they use out of it when they are built, so a request
 * calls these as plain functions.
 */
export function createRegistryContext(deps: RegistryDeps) {
  const { db, envelope, idempotency, callbacks } = deps;
  const now = deps.now ?? (() => new Date());
  const sealContext = (accountId: string, id: string) => `registry:${accountId}:${id}`;

  /** The registry's content, opened when it is sealed, with its salt when it is sealed with it. */
  function contentOf(row: RegistryRow): SealedContent {
    if (!row.dataEncrypted) return { metadata: row.metadata ?? [], description: row.description };
    try {
      const sealed = {
        ciphertext: row.ciphertext ?? '',
        wrappedKey: row.wrappedKey ?? '',
        keyId: row.keyId ?? '',
      };
      return JSON.parse(envelope.open(sealed, sealContext(row.accountId, row.id))) as SealedContent;
    } catch (err) {
      if (err instanceof EnvelopeKeyMismatchError) {
        throw new ServerMisconfiguredError(
          `Registry ${row.id} is encrypted under another master key (${err.recordKeyId})`,
        );
      }
      throw err;
    }
  }

  function toView(row: RegistryRow, anchor: AnchorColumns): RegistryView {
    const { metadata, description } = contentOf(row);
    return {
      id: row.id,
      title: row.title,
      description,
      folder_id: row.folderId,
      template: row.template as Template,
      metadata,
      callback_url: row.callbackUrl,
      data_encrypted: row.dataEncrypted,
      created_at: row.createdAt.toISOString(),
      anchor: toAnchorView(anchor, deps.anchorNetwork),
      revoked_at: row.revokedAt?.toISOString() ?? null,
    };
  }

  /**
   * What {@link selectWithAnchor} reads, as one JSON array per row (json_build_array): the values of
   * {@link anchoredRowColumns}, in that order. One column is cheaper to parse than its twenty-one,
   * for node-postgres and more so for PGlite's parser on its worker thread (bench/README.md, "Issue
   * 33: registry get among many").
   */
  function selectWithAnchorAsJson() {
    const columns = sql.join(
      anchoredRowColumns.map(([, , column]) => column),
      sql`, `,
    );
    return db
      .select({ row: sql<string>`json_build_array(${columns})` })
      .from(registries)
      .leftJoin(leafJoin.leaves, leafJoin.leafOn(registries.id))
      .leftJoin(leafJoin.batches, leafJoin.batchOn);
  }

  /** Registries with their anchoring: each row the registry and its leaf's batch, if any. */
  function selectWithAnchor() {
    return db
      .select({ registry: registries, anchor: anchorColumns })
      .from(registries)
      .leftJoin(leafJoin.leaves, leafJoin.leafOn(registries.id))
      .leftJoin(leafJoin.batches, leafJoin.batchOn);
  }

  return {
    deps,
    db,
    envelope,
    idempotency,
    callbacks,
    now,
    sealContext,
    contentOf,
    toView,
    selectWithAnchor,
    selectWithAnchorAsJson,
  };
}

export type RegistryContext = ReturnType<typeof createRegistryContext>;
