/**
 * A process that follows a chain and dispatches too hands a block's new notifications to its own
 * dispatcher as they commit (OutboxHandoff, outbox.ts): they leave without a claim query, and
 * what the dispatcher has no room for is claimed as before. Every claim query's rows are recorded
 * here by wrapping the service's database handle.
 */
import { type Hex, parseEther } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { type Devnet, startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';

/** Ids the dispatcher's claim queries returned, in order. */
function recordClaims(db: Db): string[] {
  const claimed: string[] = [];
  const dialect = (db as unknown as { dialect: { sqlToQuery(q: unknown): { sql: string } } }).dialect;
  const execute = db.execute.bind(db);
  db.execute = (async (query: Parameters<Db['execute']>[0]) => {
    const result = await execute(query);
    const text = typeof query === 'string' ? query : dialect.sqlToQuery(query).sql;
    if (text.includes('FOR UPDATE SKIP LOCKED')) {
      for (const row of (result as unknown as { rows: { id: string }[] }).rows) claimed.push(row.id);
    }
    return result;
  }) as Db['execute'];
  return claimed;
}

describe.each(backends)('notifications handed to the dispatcher of the same process on %s', (backend) => {
  let d: Devnet;
  let claimed: string[];

  beforeAll(async () => {
    // One slot and a slow receiver: a block of five transfers is more than the dispatcher has room for.
    d = await startDevnet(backend, { env: { LEDGERHOOK_DISPATCH_CONCURRENCY: '1' } });
    claimed = recordClaims(d.t.app.store.db);
  });

  afterAll(async () => {
    await d?.close();
  });

  test('a block’s notification is sent without being claimed by a query', async () => {
    const watched = d.addresses[1]!;
    d.subs.set(watched, await d.subscribe(watched, { mempool: false }));
    const { hash } = await d.send(0, watched, parseEther('0.25'));
    const [body] = await d.receivedAtLeast(hash, 1);
    expect(body!.txId).toBe(hash);
    expect(claimed).not.toContain(body!.id);
    await waitFor(async () => {
      const logged = (await d.logged(d.subs.get(watched)!.id)).find((n) => n.id === body!.id);
      return logged?.state === 'delivered' ? logged : undefined;
    }, 'the notification recorded as delivered');
  });

  test('what the dispatcher has no room for is claimed by a query; each is sent once', async () => {
    const targets: Hex[] = [d.addresses[2]!, d.addresses[3]!, d.addresses[4]!];
    for (const address of targets) d.subs.set(address, await d.subscribe(address, { mempool: false }));
    d.receiver.respond(() => ({ status: 200, body: '{"status":"success"}', delayMs: 300 }));
    await d.setAutomine(false);
    const hashes: Hex[] = [];
    try {
      // From dev account 0, which no subscription watches: one notification per transfer.
      for (let i = 0; i < 6; i++) hashes.push(await d.submit(0, targets[i % 3]!, parseEther('0.01')));
      await d.mine();
    } finally {
      await d.setAutomine(true);
    }
    const bodies = (await Promise.all(hashes.map((h) => d.receivedAtLeast(h, 1)))).flat();
    const ids = bodies.map((b) => b.id as string);
    // Each notification arrived once.
    expect(new Set(ids).size).toBe(hashes.length);
    for (const h of hashes) expect(d.received(h)).toHaveLength(1);
    // One slot and a read-ahead of two: three were handed over, the rest claimed.
    const byQuery = ids.filter((id) => claimed.includes(id));
    expect(byQuery.length).toBeGreaterThan(0);
    expect(byQuery.length).toBeLessThan(hashes.length);
  });
});
