import { inArray } from 'drizzle-orm';
import { expect } from 'vitest';
import { notifications } from '../../src/notify/schema.js';
import type { Db } from '../../src/store/db.js';
import type { TestApp } from './app.js';
import { waitFor } from './process.js';

/** A notification's body as stored in the outbox. */
export type StoredBody = Record<string, unknown>;

/** The bodies the outbox holds for these subscriptions, in no particular order. */
export async function storedBodies(db: Db, subscriptionIds: string[]): Promise<StoredBody[]> {
  const rows = await db
    .select({ body: notifications.body })
    .from(notifications)
    .where(inArray(notifications.subscriptionId, subscriptionIds));
  return rows.map((r) => JSON.parse(r.body) as StoredBody);
}

/**
 * A body without what differs between two subscriptions' notifications of one transfer (their ids,
 * and the backfill mark), so a live follower's and a backfill's can be compared as text.
 */
export const comparableBody = ({ id: _i, subscriptionId: _s, backfill: _b, ...rest }: StoredBody): string =>
  JSON.stringify(rest);

/** Starts a backfill of `range` for each subscription, then waits for each to end; their views. */
export async function runBackfills<View extends { state: string }>(
  t: Pick<TestApp, 'request'>,
  ids: string[],
  range: unknown,
  deadlineMs = 20_000,
): Promise<View[]> {
  for (const id of ids) {
    const res = await t.request('POST', `/api/v1/subscription/${id}/backfill`, { body: range });
    expect(res.status, res.text).toBe(202);
  }
  const views: View[] = [];
  for (const id of ids)
    views.push(
      await waitFor(
        async () => {
          const v = (await t.request('GET', `/api/v1/subscription/${id}/backfill`)).body as View;
          return v.state === 'running' ? undefined : v;
        },
        `backfill of ${id}`,
        deadlineMs,
      ),
    );
  return views;
}
