import { and, eq, isNull, sql } from 'drizzle-orm';
import { accounts } from '../accounts/schema.js';
import { anchorColumns, leafJoin, REGISTRY_CHANGED_CHANNEL, toAnchorView } from '../anchor/leaves.js';
import { anchorLeaves } from '../anchor/schema.js';
import { ConflictError, NotFoundError } from '../errors.js';
import { isUuid } from '../http-kit/pagination.js';
import { enqueueNotifications, newNotificationId } from '../notify/outbox.js';
import type { Db } from '../store/db.js';
import type { RegistryContext } from './context.js';
import { registries } from './schema.js';
import type { PassView, RegistryView } from './types.js';

/** The one answer for any id that is not a PASS (see `pass`). */
export const PASS_NOT_FOUND = 'No pass with this id';

/**
 * PASS: revocation (with its registry.revoked event, and the cached row dropped at once) and the
 * public verification view read by the PASS page.
 */
export function createRegistryRevocation(
  ctx: RegistryContext,
  /** The row cache of reads.ts, which a revocation makes stale. */
  rows: { forget(key: string): void },
) {
  const { deps, db, now, toView, selectWithAnchor } = ctx;

  /** The endpoint told of a registry's events, recorded with its leaf when it was created. */
  async function eventEndpoint(tx: Db, registryId: string): Promise<string | null> {
    const [leaf] = await tx
      .select({ subscriptionId: anchorLeaves.subscriptionId })
      .from(anchorLeaves)
      .where(eq(anchorLeaves.registryId, registryId));
    return leaf?.subscriptionId ?? null;
  }

  /** Revokes in `tx`; a registry already revoked is left as it is, and tells nobody again. */
  async function markRevoked(tx: Db, accountId: string, id: string): Promise<void> {
    const revokedAt = now();
    // Only the update that finds it unrevoked wins: concurrent revokes set one time, send one event.
    const [row] = await tx
      .update(registries)
      .set({ revokedAt })
      .where(
        and(
          eq(registries.accountId, accountId),
          eq(registries.id, id),
          eq(registries.template, 'PASS'),
          isNull(registries.revokedAt),
        ),
      )
      .returning();
    if (row) await tx.execute(sql`SELECT pg_notify(${REGISTRY_CHANGED_CHANNEL}, ${row.id})`);
    if (!row) {
      const [existing] = await tx
        .select({ template: registries.template })
        .from(registries)
        .where(and(eq(registries.accountId, accountId), eq(registries.id, id)));
      if (!existing) throw new NotFoundError(`No registry with id ${id}`);
      if (existing.template !== 'PASS')
        throw new ConflictError(
          `Registry ${id} is a ${existing.template} record, which cannot be revoked: only a PASS can`,
        );
      return;
    }
    if (row.callbackUrl === null) return;
    const subscriptionId = await eventEndpoint(tx, id);
    if (subscriptionId === null) return;
    const notificationId = newNotificationId();
    // Thin, like registry.created: the receiver fetches the registry if it needs more.
    const event = {
      type: 'registry.revoked',
      id: notificationId,
      subscriptionId,
      registry: {
        id,
        title: row.title,
        folder_id: row.folderId,
        template: row.template,
        revoked_at: revokedAt.toISOString(),
      },
    };
    await enqueueNotifications(
      tx,
      [
        {
          id: notificationId,
          accountId,
          subscriptionId,
          eventType: 'registry.revoked',
          body: JSON.stringify(event),
        },
      ],
      revokedAt,
    );
  }

  /** Revokes a PASS of the account (409 for any other template); revoking again changes nothing. */
  async function revoke(accountId: string, id: string): Promise<RegistryView> {
    if (!isUuid(id)) throw new NotFoundError(`No registry with id ${id}`);
    await db.transaction((tx) => markRevoked(tx, accountId, id));
    // Other processes drop it on the NOTIFY; this one at once, so its next get shows the revocation.
    rows.forget(id.toLowerCase());
    const [row] = await selectWithAnchor().where(
      and(eq(registries.accountId, accountId), eq(registries.id, id)),
    );
    if (!row) throw new NotFoundError(`No registry with id ${id}`);
    return toView(row.registry, row.anchor);
  }

  /**
   * A PASS as anyone may see it, without a token. Whatever is not a PASS (no such id, a malformed
   * one, a STORAGE record) is the same not-found, so the page tells nothing of other records.
   * An encrypted PASS is never opened here: its metadata and description stay with its owner.
   */
  async function pass(id: string): Promise<PassView> {
    const [row] = isUuid(id)
      ? await db
          .select({ registry: registries, anchor: anchorColumns, issuer: accounts.name })
          .from(registries)
          .innerJoin(accounts, eq(accounts.id, registries.accountId))
          .leftJoin(leafJoin.leaves, leafJoin.leafOn(registries.id))
          .leftJoin(leafJoin.batches, leafJoin.batchOn)
          .where(and(eq(registries.id, id), eq(registries.template, 'PASS')))
      : [];
    if (!row) throw new NotFoundError(PASS_NOT_FOUND);
    const r = row.registry;
    const sealed = r.dataEncrypted;
    return {
      id: r.id,
      title: r.title,
      description: sealed ? null : r.description,
      issuer: row.issuer,
      created_at: r.createdAt.toISOString(),
      status: r.revokedAt ? 'revoked' : 'valid',
      revoked_at: r.revokedAt?.toISOString() ?? null,
      data_encrypted: sealed,
      metadata: sealed ? null : (r.metadata ?? []),
      anchor: toAnchorView(row.anchor, deps.anchorNetwork),
    };
  }

  return { revoke, pass };
}
