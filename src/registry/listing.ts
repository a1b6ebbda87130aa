import { and, asc, count, desc, eq, gt, lt, type SQL } from 'drizzle-orm';
import { decodeCursor, type Page, toPage } from '../http-kit/pagination.js';
import type { RegistryContext } from './context.js';
import { folders, registries } from './schema.js';
import type { FolderView, RegistryView } from './types.js';

/** Listing an account's registries (newest first, by folder) and its folders, a page at a time. */
export function createRegistryListing(ctx: RegistryContext) {
  const { db, toView, selectWithAnchor } = ctx;

  /** Newest first; `cursor` continues after the last registry of the previous page. */
  async function list(
    accountId: string,
    query: { folderId?: string; limit: number; cursor?: string },
  ): Promise<Page<RegistryView>> {
    const conditions: SQL[] = [eq(registries.accountId, accountId)];
    if (query.folderId !== undefined) conditions.push(eq(registries.folderId, query.folderId));
    if (query.cursor !== undefined) conditions.push(lt(registries.id, decodeCursor(query.cursor)));
    const rows = await selectWithAnchor()
      .where(and(...conditions))
      .orderBy(desc(registries.id))
      .limit(query.limit + 1);
    return toPage(
      rows,
      query.limit,
      (r) => r.registry.id,
      (r) => toView(r.registry, r.anchor),
    );
  }

  /** Folders by name, with how many registries each holds. */
  async function listFolders(
    accountId: string,
    query: { limit: number; cursor?: string },
  ): Promise<Page<FolderView>> {
    const conditions: SQL[] = [eq(folders.accountId, accountId)];
    if (query.cursor !== undefined)
      conditions.push(
        gt(
          folders.folderId,
          decodeCursor(query.cursor, (v) => v.length > 0),
        ),
      );
    const rows = await db
      .select({
        folderId: folders.folderId,
        createdAt: folders.createdAt,
        registryCount: count(registries.id),
      })
      .from(folders)
      .leftJoin(
        registries,
        and(eq(registries.accountId, folders.accountId), eq(registries.folderId, folders.folderId)),
      )
      .where(and(...conditions))
      .groupBy(folders.accountId, folders.folderId, folders.createdAt)
      .orderBy(asc(folders.folderId))
      .limit(query.limit + 1);
    return toPage(
      rows,
      query.limit,
      (r) => r.folderId,
      (r) => ({
        folder_id: r.folderId,
        registry_count: Number(r.registryCount),
        created_at: r.createdAt.toISOString(),
      }),
    );
  }

  return { list, listFolders };
}
