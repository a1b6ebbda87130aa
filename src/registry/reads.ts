import { and, eq, sql } from 'drizzle-orm';
import { createProofs } from '../anchor/proofs.js';
import type { Receipt } from '../anchor/receipt.js';
import { ConflictError, NotFoundError } from '../errors.js';
import { isUuid } from '../http-kit/pagination.js';
import { createReadBatches } from '../store/read-batches.js';
import type { RegistryContext } from './context.js';
import { createRegistryRowCache } from './row-cache.js';
import { registries } from './schema.js';
import type { RegistryView } from './types.js';

/**
 * Reading registries by id: the hot get (one prepared statement shared by concurrent gets, then
 * the row cache), what drops cached rows when a registry changes, and a registry's proof.
 */
export function createRegistryReads(ctx: RegistryContext) {
  const { deps, db, contentOf, toView, selectWithAnchor } = ctx;
  const proofs = createProofs(db);

  // The hot read, built once and prepared by name on each connection, and shared by the gets that
  // arrive while one is in flight (bench/README.md, bench:api): many ids, one statement.
  const selectMany = selectWithAnchor()
    .where(sql`${registries.id} = ANY(${sql.placeholder('ids')}::uuid[])`)
    .prepare('registry_get_many');
  const reads = createReadBatches({
    read: (keys: { accountId: string; id: string }[]) => selectMany.execute({ ids: keys.map((k) => k.id) }),
    // The account is compared here, not in SQL: a registry of another account is not found.
    matches: (key, row) => row.registry.id === key.id && row.registry.accountId === key.accountId,
  });
  type Row = NonNullable<Awaited<ReturnType<typeof reads.get>>>;
  const rows = createRegistryRowCache<Row>({
    ttlMs: deps.rowCacheTtlMs ?? 1_000,
    costOf: ({ registry: r }) =>
      r.title.length +
      (r.description?.length ?? 0) +
      (r.metadata ? JSON.stringify(r.metadata).length : 0) +
      (r.ciphertext?.length ?? 0) +
      512,
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
