import { and, eq, gt, lt, sql } from 'drizzle-orm';
import { LedgerhookError } from '../../errors.js';
import type { Db } from '../../store/db.js';
import { chainCursors, chainHeaders } from '../schema.js';

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
 * The cursor is not where the blocks written continue from: something else moved it (a process
 * that took the network over while this one still believed it held the lock). The transaction
 * rolls back; the follower's next round reads the cursor anew.
 */
export class CursorMovedError extends LedgerhookError {
  constructor(network: string, expected: Cursor) {
    super(
      `${network}: the stored cursor is no longer block ${expected.height} (${expected.hash}), where this follower ` +
        'continued from: another process moved it; following again from the stored cursor',
    );
  }
}

const rowsOf = <T>(result: unknown): T[] => (result as { rows: T[] }).rows;

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
     * last. Their headers are written in one statement, the cursor once. The cursor must stand on
     * the first block's parent (CursorMovedError otherwise): a follower that continues from a
     * cursor it remembers never writes over one another process has moved.
     */
    async advanceThrough(tx: Db, blocks: readonly Header[]): Promise<void> {
      const first = blocks[0];
      const last = blocks[blocks.length - 1];
      if (!first || !last) return;
      // Old headers are pruned now and then (when the blocks pass a multiple of 32), not on every block.
      if (Math.floor(last.height / 32) > Math.floor((first.height - 1) / 32)) {
        await tx
          .delete(chainHeaders)
          .where(and(ofNetwork, lt(chainHeaders.height, last.height - KEPT_HEADERS)));
      }
      // The headers and the cursor in one statement: a round trip less on every block's commit,
      // which is on the path from a block to its notification (bench/README.md, "Issue 33: latency").
      const moved = await tx.execute(sql`
        WITH headers AS (
          INSERT INTO chain_headers (network, height, hash, parent_hash)
          SELECT ${network}, height, hash, parent_hash
          FROM unnest(${sql.param(blocks.map((b) => b.height))}::bigint[],
                      ${sql.param(blocks.map((b) => b.hash))}::text[],
                      ${sql.param(blocks.map((b) => b.parentHash))}::text[]) AS b(height, hash, parent_hash)
          ON CONFLICT (network, height) DO UPDATE SET hash = excluded.hash, parent_hash = excluded.parent_hash
        )
        UPDATE chain_cursors SET height = ${last.height}, hash = ${last.hash}, updated_at = ${new Date().toISOString()}
        WHERE network = ${network} AND height = ${first.height - 1} AND hash = ${first.parentHash}
        RETURNING height`);
      if (rowsOf(moved).length === 0)
        throw new CursorMovedError(network, { height: first.height - 1, hash: first.parentHash });
    },

    /**
     * Within the caller's transaction: forgets the blocks above the ancestor and moves back to it,
     * from the cursor `from` (CursorMovedError if the cursor is no longer there).
     */
    async rewind(tx: Db, ancestor: Cursor, from: Cursor): Promise<void> {
      await tx.delete(chainHeaders).where(and(ofNetwork, gt(chainHeaders.height, ancestor.height)));
      const moved = await tx
        .update(chainCursors)
        .set({ height: ancestor.height, hash: ancestor.hash, updatedAt: new Date() })
        .where(
          and(
            eq(chainCursors.network, network),
            eq(chainCursors.height, from.height),
            eq(chainCursors.hash, from.hash),
          ),
        )
        .returning({ height: chainCursors.height });
      if (moved.length === 0) throw new CursorMovedError(network, from);
    },
  };
}

export type ChainState = ReturnType<typeof chainState>;
