/**
 * A subscription's life after its creation: listed, counted, read, deleted and re-enabled.
 */
import { and, desc, eq, isNotNull, isNull, lt, type SQL, sql } from 'drizzle-orm';
import { ValidationError } from '../errors.js';
import { decodeCursor, type PageQuery, toPage } from '../http-kit/pagination.js';
import { notifications } from '../notify/schema.js';
import { announce } from './announce.js';
import type { SubscriptionsContext } from './context.js';
import type { SubscriptionView } from './model.js';
import { owned, undeleted } from './owned.js';
import { subscriptions } from './schema.js';
import { toView } from './view.js';

export function createSubscriptionLifecycle(ctx: SubscriptionsContext) {
  const { db, networks, now } = ctx;

  return {
    /**
     * Newest first; deleted subscriptions only when asked for by `status`. `chain` is any name of
     * a configured network (an alias finds the subscriptions stored under its canonical name).
     */
    async list(accountId: string, query: PageQuery & { type?: string; status?: string; chain?: string }) {
      const conditions: SQL[] = [eq(subscriptions.accountId, accountId)];
      if (query.chain !== undefined) {
        const network = networks.find(query.chain);
        if (!network)
          throw new ValidationError('Unknown network', [
            {
              parameter: 'chain',
              detail: `is not a configured network; use one of ${networks.names().join(', ')}`,
            },
          ]);
        conditions.push(eq(subscriptions.network, network.name));
      }
      if (query.status === 'deleted') conditions.push(isNotNull(subscriptions.deletedAt));
      else {
        conditions.push(isNull(subscriptions.deletedAt));
        if (query.status) conditions.push(eq(subscriptions.status, query.status));
      }
      if (query.type) conditions.push(eq(subscriptions.type, query.type));
      if (query.cursor) conditions.push(lt(subscriptions.id, decodeCursor(query.cursor)));
      const rows = await db
        .select()
        .from(subscriptions)
        .where(and(...conditions))
        .orderBy(desc(subscriptions.id))
        .limit(query.limit + 1)
        .offset(query.offset ?? 0);
      return toPage(
        rows,
        query.limit,
        (r) => r.id,
        (row) => toView(ctx, row),
      );
    },

    /** Subscriptions of every account by state (active, disabled, deleted), for /metrics. */
    async countByState(): Promise<Record<string, number>> {
      const rows = await db
        .select({
          state: sql<string>`CASE WHEN ${subscriptions.deletedAt} IS NOT NULL THEN 'deleted' ELSE ${subscriptions.status} END`,
          count: sql<number>`count(*)::int`,
        })
        .from(subscriptions)
        .groupBy(sql`1`);
      const counts: Record<string, number> = { active: 0, disabled: 0, deleted: 0 };
      for (const row of rows) counts[row.state] = Number(row.count);
      return counts;
    },

    async get(accountId: string, id: string): Promise<SubscriptionView> {
      return toView(ctx, await owned(ctx, accountId, id));
    },

    /**
     * Stops watching and delivering; the subscription and its log stay readable. Deleting it
     * again changes nothing.
     */
    async remove(accountId: string, id: string): Promise<void> {
      const row = await owned(ctx, accountId, id);
      if (row.deletedAt) return;
      await db.transaction(async (tx) => {
        await tx.update(subscriptions).set({ deletedAt: now() }).where(eq(subscriptions.id, id));
        await announce(tx, { type: 'remove', id }, ctx.origin, ctx.notifyOthers);
        await tx
          .update(notifications)
          .set({ state: 'failed', nextAttemptAt: null, lastError: 'subscription deleted' })
          .where(and(eq(notifications.subscriptionId, id), eq(notifications.state, 'pending')));
      });
      await ctx.onChange?.({ type: 'remove', id });
    },

    /** Re-enables a disabled subscription; its failed notifications can then be recovered. */
    async enable(accountId: string, id: string): Promise<SubscriptionView> {
      await undeleted(ctx, accountId, id);
      await db
        .update(subscriptions)
        .set({ status: 'active', disabledReason: null, disabledAt: null, failingSince: null })
        .where(eq(subscriptions.id, id));
      return toView(ctx, await owned(ctx, accountId, id));
    },
  };
}
