/**
 * Notifications delivered again on request: one (resend), or every failed one of a subscription
 * since a time (recover), each with a fresh retry schedule.
 */
import { and, eq, gte, isNull, lt, or, sql } from 'drizzle-orm';
import { ConflictError, NotFoundError } from '../errors.js';
import { isUuid } from '../http-kit/pagination.js';
import { signalOutbox } from '../notify/outbox.js';
import { notifications } from '../notify/schema.js';
import type { SubscriptionsContext } from './context.js';
import { undeleted } from './owned.js';

/** Not held by a dispatcher right now (no claim, or one whose lease ran out). */
const unclaimed = or(isNull(notifications.lockedUntil), lt(notifications.lockedUntil, sql`now()`))!;

export function createRedelivery(ctx: SubscriptionsContext) {
  const { db, now } = ctx;

  return {
    /** Delivers one notification again as a new attempt, whatever its state, with a fresh retry schedule. */
    async resend(accountId: string, notificationId: string): Promise<{ id: string; state: string }> {
      const [row] = isUuid(notificationId)
        ? await db
            .select({ id: notifications.id, subscriptionId: notifications.subscriptionId })
            .from(notifications)
            .where(and(eq(notifications.id, notificationId), eq(notifications.accountId, accountId)))
        : [];
      if (!row) throw new NotFoundError(`No notification with id ${notificationId}`);
      const sub = await undeleted(ctx, accountId, row.subscriptionId);
      if (sub.status !== 'active') throw new ConflictError('The subscription is disabled; enable it first');
      const rearmed = await db.transaction(async (tx) => {
        // A delivery in flight keeps its claim; resending it now would race with its result.
        const rows = await tx
          .update(notifications)
          .set({
            state: 'pending',
            scheduleStep: 0,
            armedBy: 'resend',
            nextAttemptAt: now(),
            lockedBy: null,
            lockedUntil: null,
          })
          .where(and(eq(notifications.id, row.id), unclaimed))
          .returning({ id: notifications.id });
        if (rows.length > 0) await signalOutbox(tx);
        return rows.length > 0;
      });
      if (!rearmed)
        throw new ConflictError(
          'A delivery of this notification is in progress; try again when it has finished',
        );
      return { id: row.id, state: 'pending' };
    },

    /** Resends every failed notification of the subscription created since `since`. */
    async recover(accountId: string, id: string, since: Date): Promise<{ resent: number }> {
      const sub = await undeleted(ctx, accountId, id);
      if (sub.status !== 'active') throw new ConflictError('The subscription is disabled; enable it first');
      const resent = await db.transaction(async (tx) => {
        const rows = await tx
          .update(notifications)
          .set({
            state: 'pending',
            scheduleStep: 0,
            armedBy: 'recover',
            nextAttemptAt: now(),
            lockedBy: null,
            lockedUntil: null,
          })
          .where(
            and(
              eq(notifications.subscriptionId, id),
              eq(notifications.state, 'failed'),
              gte(notifications.createdAt, since),
              unclaimed,
            ),
          )
          .returning({ id: notifications.id });
        if (rows.length > 0) await signalOutbox(tx);
        return rows.length;
      });
      return { resent };
    },
  };
}
