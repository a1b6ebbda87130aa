import { and, asc, count, eq, gt, inArray } from 'drizzle-orm';
import { getAddress, isAddress } from 'viem';
import type { WatchedAddresses } from '../chains/source.js';
import type { Db } from '../store/db.js';
import { subscriptionAddresses } from '../subscriptions/schema.js';

/** Candidates per `IN (…)` query: well under PostgreSQL's 65,535 parameters. */
const AMONG_BATCH = 5_000;

/**
 * A subscription's watched addresses, read from subscription_addresses page by page (keyset on
 * the primary key), never all at once. On EVM networks candidates come in any case and are
 * checksummed first, since addresses are stored EIP-55.
 */
export async function watchedAddresses(
  db: Db,
  subscriptionId: string,
  evm: boolean,
): Promise<WatchedAddresses> {
  const ofSubscription = eq(subscriptionAddresses.subscriptionId, subscriptionId);
  const [row] = await db.select({ n: count() }).from(subscriptionAddresses).where(ofSubscription);
  return {
    count: Number(row?.n ?? 0),
    async *pages(size) {
      let after: string | undefined;
      for (;;) {
        const rows = await db
          .select({ address: subscriptionAddresses.address })
          .from(subscriptionAddresses)
          .where(
            after === undefined
              ? ofSubscription
              : and(ofSubscription, gt(subscriptionAddresses.address, after)),
          )
          .orderBy(asc(subscriptionAddresses.address))
          .limit(size);
        if (rows.length === 0) return;
        yield rows.map((r) => r.address);
        if (rows.length < size) return;
        after = rows[rows.length - 1]!.address;
      }
    },
    async among(candidates) {
      const wanted = evm
        ? candidates.filter((a) => isAddress(a, { strict: false })).map((a) => getAddress(a))
        : [...candidates];
      const found: string[] = [];
      for (let i = 0; i < wanted.length; i += AMONG_BATCH) {
        const rows = await db
          .select({ address: subscriptionAddresses.address })
          .from(subscriptionAddresses)
          .where(
            and(ofSubscription, inArray(subscriptionAddresses.address, wanted.slice(i, i + AMONG_BATCH))),
          );
        for (const r of rows) found.push(r.address);
      }
      return found;
    },
  };
}
