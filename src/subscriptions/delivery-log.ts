/**
 * The delivery log: notifications, newest first, each with its attempts, of one subscription or
 * across every subscription of an account.
 */
import { and, desc, eq, gte, inArray, lt, type SQL, sql } from 'drizzle-orm';
import { decodeCursor, isUuid, type PageQuery, toPage } from '../http-kit/pagination.js';
import { deliveryAttempts, notifications } from '../notify/schema.js';
import type { Db } from '../store/db.js';
import type { SubscriptionsContext } from './context.js';
import type { AttemptView, LogFilter, NotificationView } from './model.js';
import { owned } from './owned.js';
import { iso } from './view.js';

/**
 * A log cursor is the outbox `seq` of the last row shown. One given out before `seq` existed is
 * that row's (time-ordered) id, still honoured so a client paging through an upgrade goes on.
 */
const isLogKey = (key: string): boolean => /^[1-9][0-9]{0,17}$/.test(key) || isUuid(key);

function before(key: string): SQL {
  return isUuid(key)
    ? sql`${notifications.seq} < (SELECT seq FROM notifications WHERE id = ${key}::uuid)`
    : lt(notifications.seq, Number(key));
}

/** A page of a delivery log: the notifications matching `conditions`, newest first, with their attempts. */
async function logPage(db: Db, conditions: SQL[], query: PageQuery & LogFilter) {
  const where = [...conditions];
  if (query.state) where.push(eq(notifications.state, query.state));
  if (query.since) where.push(gte(notifications.createdAt, query.since));
  if (query.until) where.push(lt(notifications.createdAt, query.until));
  if (query.cursor) where.push(before(decodeCursor(query.cursor, isLogKey)));
  const rows = await db
    .select()
    .from(notifications)
    .where(and(...where))
    .orderBy(desc(notifications.seq))
    .limit(query.limit + 1)
    .offset(query.offset ?? 0);
  const page = rows.slice(0, query.limit);
  const attempts =
    page.length === 0
      ? []
      : await db
          .select()
          .from(deliveryAttempts)
          .where(
            inArray(
              deliveryAttempts.notificationId,
              page.map((r) => r.id),
            ),
          )
          .orderBy(deliveryAttempts.attemptNumber);
  const byNotification = new Map<string, AttemptView[]>();
  for (const a of attempts) {
    const list = byNotification.get(a.notificationId) ?? [];
    list.push({
      attempt: a.attemptNumber,
      trigger: a.trigger,
      startedAt: a.startedAt.toISOString(),
      durationMs: a.durationMs,
      statusCode: a.statusCode,
      error: a.error,
      response: a.responseBody,
      outcome: a.outcome,
      nextAttemptAt: iso(a.nextAttemptAt),
    });
    byNotification.set(a.notificationId, list);
  }
  return toPage(
    rows,
    query.limit,
    (n) => String(n.seq),
    (n): NotificationView => ({
      id: n.id,
      subscriptionId: n.subscriptionId,
      eventType: n.eventType,
      state: n.state,
      attemptCount: n.attempts,
      nextAttemptAt: n.state === 'pending' ? iso(n.nextAttemptAt) : null,
      lastStatusCode: n.lastStatusCode,
      lastError: n.lastError,
      createdAt: n.createdAt.toISOString(),
      deliveredAt: iso(n.deliveredAt),
      payload: JSON.parse(n.body) as unknown,
      attempts: byNotification.get(n.id) ?? [],
    }),
  );
}

export function createDeliveryLog(ctx: SubscriptionsContext) {
  const { db } = ctx;

  return {
    /** A subscription's delivery log: newest notifications first, each with its attempts. */
    async notifications(accountId: string, id: string, query: PageQuery & LogFilter) {
      await owned(ctx, accountId, id);
      return logPage(db, [eq(notifications.subscriptionId, id)], query);
    },

    /**
     * The account's delivery log across its subscriptions (one of them with `subscriptionId`),
     * newest first. Every row carries its account, so another account's notifications never match.
     */
    async accountNotifications(
      accountId: string,
      query: PageQuery & LogFilter & { subscriptionId?: string },
    ) {
      const conditions: SQL[] = [eq(notifications.accountId, accountId)];
      if (query.subscriptionId) conditions.push(eq(notifications.subscriptionId, query.subscriptionId));
      return logPage(db, conditions, query);
    },
  };
}
