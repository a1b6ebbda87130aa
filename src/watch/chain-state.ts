import { and, eq, gt, lt, sql } from 'drizzle-orm';
import type { Db } from '../store/db.js';
import { chainCursors, chainHeaders } from './schema.js';

/** Headers kept per network: a reorganisation deeper than this is not followed. */
export const KEPT_HEADERS = 128;

/** The last block processed. */
export interface Cursor {
  height: number;
  hash: string;
}

export interface Header extends Cursor {
  parentHash: string;
}

/**
 * A network's durable place in its chain: the cursor and the headers of the last blocks
 * processed, which is all a reorganisation needs to find the common ancestor.
 */
export function chainState(db: Db, network: string) {
  const ofNetwork = eq(chainHeaders.network, network);

  return {
    async cursor(): Promise<Cursor | undefined> {
      const [row] = await db.select().from(chainCursors).where(eq(chainCursors.network, network));
      return row ? { height: row.height, hash: row.hash } : undefined;
    },

    /** The first cursor of a network; a concurrent first start keeps whichever came first. */
    async initialise(block: Header): Promise<Cursor> {
      await db.transaction(async (tx) => {
        await tx
          .insert(chainCursors)
          .values({ network, height: block.height, hash: block.hash, updatedAt: new Date() })
          .onConflictDoNothing();
        await tx
          .insert(chainHeaders)
          .values({ network, ...block })
          .onConflictDoNothing();
      });
      return (await this.cursor())!;
    },

    async storedHash(height: number): Promise<string | undefined> {
      const [row] = await db
        .select({ hash: chainHeaders.hash })
        .from(chainHeaders)
        .where(and(ofNetwork, eq(chainHeaders.height, height)));
      return row?.hash;
    },

    /** Hashes of the blocks processed above a height: what a reorganisation there orphans. */
    async hashesAbove(height: number): Promise<string[]> {
      const rows = await db
        .select({ hash: chainHeaders.hash })
        .from(chainHeaders)
        .where(and(ofNetwork, gt(chainHeaders.height, height)));
      return rows.map((r) => r.hash);
    },

    /** Within the caller's transaction: the block is processed; the cursor moves onto it. */
    advance(tx: Db, block: Header): Promise<void> {
      return this.advanceThrough(tx, [block]);
    },

    /**
     * Within the caller's transaction: consecutive blocks are processed; the cursor moves onto the
     * last. Their headers are written in one statement, the cursor once.
     */
    async advanceThrough(tx: Db, blocks: readonly Header[]): Promise<void> {
      const last = blocks[blocks.length - 1];
      if (!last) return;
      // Old headers are pruned now and then (when the blocks pass a multiple of 32), not on every block.
      if (Math.floor(last.height / 32) > Math.floor((blocks[0]!.height - 1) / 32)) {
        await tx
          .delete(chainHeaders)
          .where(and(ofNetwork, lt(chainHeaders.height, last.height - KEPT_HEADERS)));
      }
      // The headers and the cursor in one statement: a round trip less on every block's commit,
      // which is on the path from a block to its notification (bench/README.md, "Issue 33: latency").
      await tx.execute(sql`
        WITH headers AS (
          INSERT INTO chain_headers (network, height, hash, parent_hash)
          SELECT ${network}, height, hash, parent_hash
          FROM unnest(${sql.param(blocks.map((b) => b.height))}::bigint[],
                      ${sql.param(blocks.map((b) => b.hash))}::text[],
                      ${sql.param(blocks.map((b) => b.parentHash))}::text[]) AS b(height, hash, parent_hash)
          ON CONFLICT (network, height) DO UPDATE SET hash = excluded.hash, parent_hash = excluded.parent_hash
        )
        UPDATE chain_cursors SET height = ${last.height}, hash = ${last.hash}, updated_at = ${new Date().toISOString()}
        WHERE network = ${network}`);
    },

    /** Within the caller's transaction: forgets the blocks above the ancestor and moves back to it. */
    async rewind(tx: Db, ancestor: Cursor): Promise<void> {
      await tx.delete(chainHeaders).where(and(ofNetwork, gt(chainHeaders.height, ancestor.height)));
      await tx
        .update(chainCursors)
        .set({ height: ancestor.height, hash: ancestor.hash, updatedAt: new Date() })
        .where(eq(chainCursors.network, network));
    },
  };
}

export type ChainState = ReturnType<typeof chainState>;
