/**
 * How a subscription change reaches the watchers of every process: NOTIFY when the transaction
 * commits, through a row of subscription_changes when it is too large for a payload.
 */
import { sql } from 'drizzle-orm';
import type { Db } from '../store/db.js';
import {
  MAX_NOTICE_BYTES,
  SUBSCRIPTIONS_CHANNEL,
  type SubscriptionChange,
  type SubscriptionNotice,
} from './events.js';

/** How long a change too large for NOTIFY stays readable by other processes' watchers. */
const STORED_CHANGE_TTL = '10 minutes';

/**
 * Tells watchers in every process about a change, when the transaction commits: in the NOTIFY
 * payload when it fits, otherwise (a list of thousands of addresses) as a row of
 * subscription_changes whose sequence number the payload carries.
 */
export async function announce(
  tx: Db,
  change: SubscriptionChange,
  origin: string | undefined,
  others: boolean,
): Promise<void> {
  if (!others) return;
  const inline = JSON.stringify({ ...change, origin } satisfies SubscriptionNotice);
  let payload = inline;
  if (Buffer.byteLength(inline) > MAX_NOTICE_BYTES) {
    await tx.execute(
      sql`DELETE FROM subscription_changes WHERE created_at < now() - ${STORED_CHANGE_TTL}::interval`,
    );
    const result = (await tx.execute(
      sql`INSERT INTO subscription_changes (change) VALUES (${JSON.stringify(change)}) RETURNING seq::text AS seq`,
    )) as unknown as { rows: { seq: string }[] };
    payload = JSON.stringify({
      type: 'stored',
      seq: result.rows[0]!.seq,
      origin,
    } satisfies SubscriptionNotice);
  }
  await tx.execute(sql`SELECT pg_notify(${SUBSCRIPTIONS_CHANNEL}, ${payload})`);
}
