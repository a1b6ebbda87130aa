/**
 * Which networks the watchers follow and how far each has got, as the database says: for
 * `ledgerhook doctor`, which checks those networks' nodes and compares their heads with the cursors.
 */
import { sql } from 'drizzle-orm';
import type { Db } from '../store/db.js';
import { chainCursors } from './schema.js';

export interface FollowState {
  /** Networks with a subscription that is not deleted: the watcher follows exactly these (and --devnet's). */
  inUse: string[];
  /** Per network, the last block processed and when. */
  cursors: Record<string, { height: number; updatedAt: string }>;
}

export async function followState(db: Db): Promise<FollowState> {
  const used = (await db.execute(
    sql`SELECT DISTINCT network FROM subscriptions WHERE deleted_at IS NULL AND network IS NOT NULL ORDER BY network`,
  )) as unknown as { rows: { network: string }[] };
  const cursors = await db.select().from(chainCursors);
  return {
    inUse: used.rows.map((r) => r.network),
    cursors: Object.fromEntries(
      cursors.map((c) => [c.network, { height: c.height, updatedAt: c.updatedAt.toISOString() }]),
    ),
  };
}
