import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { drizzle } from 'drizzle-orm/pglite';
import { migrate } from 'drizzle-orm/pglite/migrator';
import { afterAll, describe, expect, test } from 'vitest';
import { type Db, migrationsFolder } from '../store/db.js';
import { sequencePass } from './feed.js';

/** The migrations as a database of the release before `tag` had them. */
function migrationsBefore(tag: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-migrations-'));
  const journal = JSON.parse(fs.readFileSync(path.join(migrationsFolder, 'meta/_journal.json'), 'utf8'));
  const cut = journal.entries.findIndex((e: { tag: string }) => e.tag === tag);
  expect(cut).toBeGreaterThan(0);
  journal.entries = journal.entries.slice(0, cut);
  fs.mkdirSync(path.join(dir, 'meta'));
  fs.writeFileSync(path.join(dir, 'meta/_journal.json'), JSON.stringify(journal));
  for (const e of journal.entries as { tag: string }[])
    fs.copyFileSync(path.join(migrationsFolder, `${e.tag}.sql`), path.join(dir, `${e.tag}.sql`));
  return dir;
}

describe('migration 0011: the feed queue ordered by its own index', () => {
  const dirs: string[] = [];
  const clients: PGlite[] = [];
  afterAll(async () => {
    for (const c of clients) await c.close();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  test('entries waiting at the upgrade keep their notification’s creation order; one without a notification is dropped, not sequenced', async () => {
    const old = migrationsBefore('0011_feed_queue_order');
    dirs.push(old);
    const client = new PGlite();
    clients.push(client);
    const db = drizzle(client);
    await migrate(db, { migrationsFolder: old });

    // Ids sort the opposite way to creation, so an order by id alone would be caught.
    const later = '00000000-0000-4000-8000-000000000001';
    const earlier = 'ffffffff-ffff-4fff-8fff-ffffffffffff';
    const orphan = '77777777-7777-4777-8777-777777777777';
    const account = '11111111-1111-4111-8111-111111111111';
    const subscription = '22222222-2222-4222-8222-222222222222';
    await client.exec(`
      SET session_replication_role = replica; -- no foreign-key checks: the rows are the outbox's alone
      INSERT INTO notifications (id, account_id, subscription_id, event_type, body, state, created_at) VALUES
        ('${later}', '${account}', '${subscription}', 'address.activity', '{}', 'pending', '2026-03-01T00:00:00.002Z'),
        ('${earlier}', '${account}', '${subscription}', 'address.activity', '{}', 'delivered', '2026-03-01T00:00:00.001Z');
      INSERT INTO feed_queue (notification_id) VALUES ('${later}'), ('${orphan}'), ('${earlier}');
      SET session_replication_role = origin;`);

    const next = migrationsBefore('0016_derived_notification_ids');
    dirs.push(next);
    await migrate(db, { migrationsFolder: next });

    const queued = await client.query<{ id: string; created_at: Date }>(
      'SELECT notification_id AS id, created_at FROM feed_queue ORDER BY created_at, notification_id',
    );
    expect(queued.rows.map((r) => r.id)).toEqual([earlier, later, orphan]);
    expect(queued.rows[0]?.created_at.toISOString()).toBe('2026-03-01T00:00:00.001Z');
    expect(queued.rows[1]?.created_at.toISOString()).toBe('2026-03-01T00:00:00.002Z');

    // Then 0016 numbers the outbox and drops the orphan from the queue (the sequencer dropped it before).
    await migrate(db, { migrationsFolder });
    const pass = await sequencePass(db as unknown as Db);
    expect(pass).toMatchObject({ locked: true, taken: 2, sequenced: 2, accounts: [account] });
    const feed = await client.query<{ seq: string; id: string }>(
      'SELECT seq::text, notification_id AS id FROM feed_events ORDER BY seq',
    );
    expect(feed.rows).toEqual([
      { seq: '1', id: earlier },
      { seq: '2', id: later },
    ]);
    expect((await client.query('SELECT 1 FROM feed_queue')).rows).toHaveLength(0);
  });
});

describe('migration 0016: the outbox numbered in its own order (seq), as chain ids carry none', () => {
  const dirs: string[] = [];
  const clients: PGlite[] = [];
  afterAll(async () => {
    for (const c of clients) await c.close();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  test('existing rows are numbered in the order of their time-ordered ids; queued ones keep their place; new ones follow', async () => {
    const old = migrationsBefore('0016_derived_notification_ids');
    dirs.push(old);
    const client = new PGlite();
    clients.push(client);
    const db = drizzle(client);
    await migrate(db, { migrationsFolder: old });

    // Written in an order unlike the ids' (as updates move rows, the table's order is no guide).
    const ids = [
      '01900000-0000-7000-8000-000000000003',
      '01900000-0000-7000-8000-000000000001',
      '01900000-0000-7000-8000-000000000002',
    ];
    const orphan = '77777777-7777-4777-8777-777777777777';
    const account = '11111111-1111-4111-8111-111111111111';
    const subscription = '22222222-2222-4222-8222-222222222222';
    await client.exec(`
      SET session_replication_role = replica;
      INSERT INTO notifications (id, account_id, subscription_id, event_type, body, state, created_at) VALUES
        ${ids.map((id) => `('${id}', '${account}', '${subscription}', 'address.transaction', '{}', 'pending', '2026-03-01T00:00:00Z')`).join(',')};
      INSERT INTO feed_queue (notification_id, created_at) VALUES
        ('${ids[0]}', '2026-03-01T00:00:00Z'), ('${orphan}', '2026-03-01T00:00:00Z'), ('${ids[2]}', '2026-03-01T00:00:00Z');
      SET session_replication_role = origin;`);

    await migrate(db, { migrationsFolder });

    const numbered = await client.query<{ id: string; seq: number }>(
      'SELECT id, seq::int AS seq FROM notifications ORDER BY seq',
    );
    expect(numbered.rows).toEqual([
      { id: ids[1], seq: 1 },
      { id: ids[2], seq: 2 },
      { id: ids[0], seq: 3 },
    ]);
    const queued = await client.query<{ id: string; seq: number }>(
      'SELECT notification_id AS id, seq::int AS seq FROM feed_queue ORDER BY created_at, seq',
    );
    expect(queued.rows).toEqual([
      { id: ids[2], seq: 2 },
      { id: ids[0], seq: 3 },
    ]);

    await client.exec(`
      SET session_replication_role = replica;
      INSERT INTO notifications (id, account_id, subscription_id, event_type, body, state, created_at)
        VALUES ('00000000-0000-4000-8000-000000000000', '${account}', '${subscription}', 'address.transaction', '{}', 'pending', now());
      SET session_replication_role = origin;`);
    const added = await client.query<{ seq: number }>(
      "SELECT seq::int AS seq FROM notifications WHERE id = '00000000-0000-4000-8000-000000000000'",
    );
    expect(added.rows).toEqual([{ seq: 4 }]);

    const pass = await sequencePass(db as unknown as Db);
    expect(pass).toMatchObject({ locked: true, taken: 2, sequenced: 2 });
    const feed = await client.query<{ id: string }>(
      'SELECT notification_id AS id FROM feed_events ORDER BY seq',
    );
    expect(feed.rows.map((r) => r.id)).toEqual([ids[2], ids[0]]);
  });
});
