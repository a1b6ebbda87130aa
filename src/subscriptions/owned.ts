/** An account's subscription found by id: any (its log stays readable), or one not deleted. */
import { and, eq } from 'drizzle-orm';
import { ConflictError, NotFoundError } from '../errors.js';
import { isUuid } from '../http-kit/pagination.js';
import type { SubscriptionsContext } from './context.js';
import type { SubscriptionRow } from './model.js';
import { subscriptions } from './schema.js';

/** The account's subscription, deleted or not (a deleted one stays readable with its log). */
export async function owned(
  ctx: SubscriptionsContext,
  accountId: string,
  id: string,
): Promise<SubscriptionRow> {
  const [row] = isUuid(id)
    ? await ctx.db
        .select()
        .from(subscriptions)
        .where(and(eq(subscriptions.id, id), eq(subscriptions.accountId, accountId)))
    : [];
  if (!row) throw new NotFoundError(`No subscription with id ${id}`);
  return row;
}

/** The account's subscription, which must not be deleted: it can no longer be acted on. */
export async function undeleted(
  ctx: SubscriptionsContext,
  accountId: string,
  id: string,
): Promise<SubscriptionRow> {
  const row = await owned(ctx, accountId, id);
  if (row.deletedAt) {
    throw new ConflictError(
      `Subscription ${id} was deleted at ${row.deletedAt.toISOString()}; its log stays readable, but it cannot be used again`,
    );
  }
  return row;
}
