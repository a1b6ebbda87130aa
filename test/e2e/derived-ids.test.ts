/**
 * Chain notification ids are derived from the event (docs/scaling-out.md). When the database loses
 * notifications it had sent (a failover to a replica that lost the last commits, a restore from a
 * backup), the blocks are processed again and their notifications made again: with the ids they
 * had, so a receiver that deduplicates by `webhook-id` does not credit a deposit twice. Here the
 * loss is the rows deleted, and the blocks processed again by a backfill, which builds its
 * notifications with the follower's own code.
 */
import { sql } from 'drizzle-orm';
import { type Hex, parseEther } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { type Created, type Devnet, startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';

/** What the receiver got for `txHash` from blocks: the webhook-id header and the body. */
function deliveries(d: Devnet, txHash: Hex): { webhookId: string; body: Record<string, unknown> }[] {
  return d.receiver.requests
    .map((r) => ({ webhookId: r.headers['webhook-id'] as string, body: JSON.parse(r.body) }))
    .filter(({ body }) => body.txId === txHash && body.mempool === false);
}

/** Deletes these notifications and every trace of them, as a database that lost its last commits would. */
async function lose(db: Db, ids: string[]): Promise<void> {
  const list = sql.join(
    ids.map((id) => sql`${id}::uuid`),
    sql`, `,
  );
  await db.transaction(async (tx) => {
    await tx.execute(sql`DELETE FROM delivery_attempts WHERE notification_id IN (${list})`);
    await tx.execute(sql`DELETE FROM feed_events WHERE notification_id IN (${list})`);
    await tx.execute(sql`DELETE FROM feed_queue WHERE notification_id IN (${list})`);
    await tx.execute(sql`DELETE FROM notifications WHERE id IN (${list})`);
  });
}

describe.each(backends)('derived notification ids on %s', (backend) => {
  let d: Devnet;
  let watchers: Created[];

  beforeAll(async () => {
    d = await startDevnet(backend);
    const alice = d.addresses[1]!;
    // Two subscriptions watch alice: one chain event, two notifications, two ids.
    watchers = [
      await d.subscribe(alice, { mempool: false }),
      await d.subscribe(alice, { mempool: false }, { url: `${d.receiver.url}?copy=2` }),
    ];
    await d.processed(await d.chain.getBlockNumber());
  });

  afterAll(async () => {
    await d?.close();
  });

  const backfilled = (subscription: string) =>
    waitFor(async () => {
      const job = await d.t.request('GET', `/api/v1/subscription/${subscription}/backfill`);
      return (job.body as { state: string }).state === 'done' ? true : undefined;
    }, `the backfill of ${subscription} to finish`);

  test('a block whose notifications were lost is notified again under the same ids', async () => {
    const { hash, block } = await d.send(1, d.addresses[3]!, parseEther('0.25'));
    const first = await waitFor(() => {
      const got = deliveries(d, hash);
      return got.length >= 2 ? got : undefined;
    }, 'the transfer notified to both subscriptions');
    const ids = first.map((f) => f.webhookId);
    expect(new Set(ids).size).toBe(2);
    for (const f of first) expect(f.body.id).toBe(f.webhookId);

    await lose(d.t.app.store.db, ids);
    for (const w of watchers) {
      const res = await d.t.request('POST', `/api/v1/subscription/${w.id}/backfill`, {
        body: { from: Number(block), to: Number(block) },
      });
      expect(res.status, res.text).toBe(202);
    }

    const again = await waitFor(() => {
      const got = deliveries(d, hash).slice(first.length);
      return got.length >= 2 ? got : undefined;
    }, 'the transfer notified again');
    // The same ids, each once more: a receiver that keeps the ids it processed skips both.
    expect(again.map((a) => a.webhookId).sort()).toEqual([...ids].sort());
    for (const a of again) {
      const before = first.find((f) => f.webhookId === a.webhookId)!;
      expect(a.body).toEqual({ ...before.body, backfill: true });
    }
    for (const w of watchers) await backfilled(w.id);
    const logged = await d.logged(watchers[0]!.id);
    expect(logged.filter((n) => n.payload.txId === hash).map((n) => n.id)).toEqual([
      first.find((f) => f.body.subscriptionId === watchers[0]!.id)!.webhookId,
    ]);
  });

  test('another transfer, another id; a backfill over notified blocks sends nothing again', async () => {
    const one = await d.send(1, d.addresses[3]!, parseEther('0.5'));
    const two = await d.send(1, d.addresses[3]!, parseEther('0.5'));
    const ids = await waitFor(() => {
      const got = [...deliveries(d, one.hash), ...deliveries(d, two.hash)];
      return got.length >= 4 ? got.map((g) => g.webhookId) : undefined;
    }, 'both transfers notified to both subscriptions');
    expect(new Set(ids).size).toBe(4);

    const res = await d.t.request('POST', `/api/v1/subscription/${watchers[0]!.id}/backfill`, {
      body: { from: Number(one.block), to: Number(two.block) },
    });
    expect(res.status, res.text).toBe(202);
    await backfilled(watchers[0]!.id);
    expect([...deliveries(d, one.hash), ...deliveries(d, two.hash)]).toHaveLength(4);
  });
});
