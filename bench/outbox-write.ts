// The outbox write alone (issue 33): transactions of N notifications written by the shipped
// `enqueueNotifications` (one statement over column arrays), beside the multi-row VALUES insert it
// replaced and beside the shipped write with one part taken away (an index, the foreign key, the
// feed queue), so each part's cost shows. Each variant runs on a fresh database, in rounds that
// alternate the variants; a figure is the median of the rounds.
// Usage: npm run bench:outbox [-- --rows 160 --transactions 200 --rounds 3 --variants a,b]
// DATABASE_URL set: PostgreSQL (scratch databases of that server) as well as PGlite.
import crypto from 'node:crypto';
import { parseArgs } from 'node:util';
import { sql } from 'drizzle-orm';
import { chainNotificationId, enqueueNotifications, type NewNotification } from '../src/notify/outbox.js';
import { notifications } from '../src/notify/schema.js';
import type { Db } from '../src/store/db.js';
import {
  type Backend,
  databaseUrlOption,
  defaultBackends,
  fixed,
  formatTable,
  machineLine,
  runMain,
  wholeNumberOption,
  withFreshStore,
} from './lib.js';

interface Variant {
  name: string;
  /** Run after migrating: what this variant takes away. */
  prepare?: string[];
  write(tx: Db, items: NewNotification[]): Promise<unknown>;
}

/** The insert before issue 33: drizzle's multi-row VALUES (15 parameters a row), then the queue. */
async function valuesInsert(tx: Db, items: NewNotification[]): Promise<void> {
  const now = new Date();
  const rows = await tx
    .insert(notifications)
    .values(
      items.map((n) => ({
        id: n.id,
        accountId: n.accountId,
        subscriptionId: n.subscriptionId,
        eventType: n.eventType,
        body: n.body,
        dedupeKey: n.dedupeKey ?? null,
        state: n.state ?? 'pending',
        armedBy: 'created',
        lastError: null,
        nextAttemptAt: now,
        createdAt: now,
        chain: n.chain ?? null,
        blockNumber: n.blockNumber ?? null,
        blockHash: n.blockHash ?? null,
        releaseHeight: n.releaseHeight ?? null,
      })),
    )
    .onConflictDoNothing({ target: [notifications.subscriptionId, notifications.dedupeKey] })
    .returning({ id: notifications.id, seq: notifications.seq });
  await tx.execute(sql`
    INSERT INTO feed_queue (notification_id, created_at, seq)
    SELECT * FROM unnest(${sql.param(rows.map((r) => r.id))}::uuid[],
                         ${sql.param(rows.map(() => now.toISOString()))}::timestamptz[],
                         ${sql.param(rows.map((r) => r.seq))}::bigint[])
    ON CONFLICT DO NOTHING`);
  await tx.execute(sql`SELECT pg_notify('ledgerhook_outbox', '')`);
}

const shipped = (tx: Db, items: NewNotification[]) => enqueueNotifications(tx, items);
const without = (name: string, statement: string): Variant => ({
  name,
  prepare: [statement],
  write: shipped,
});

const VARIANTS: Variant[] = [
  { name: 'multi-row VALUES (before)', write: valuesInsert },
  { name: 'unnest (shipped)', write: shipped },
  without(
    '- foreign key to subscriptions',
    'ALTER TABLE notifications DROP CONSTRAINT notifications_subscription_id_subscriptions_id_fk',
  ),
  without('- (chain, block_hash) index', 'DROP INDEX notifications_block_idx'),
  without('- (account_id, seq) index', 'DROP INDEX notifications_account_idx'),
  without('- (subscription_id, seq) index', 'DROP INDEX notifications_subscription_idx'),
  without('- due index', 'DROP INDEX notifications_due_idx'),
  // The queue's rows still go in; only their ordering index is taken away.
  without('- feed queue order index', 'DROP INDEX feed_queue_order_idx'),
];

const SUBSCRIPTIONS = 100;

/** A block's notifications as the EVM follower makes them: bodies of the usual size, keys of the block. */
function blockOf(
  height: number,
  rows: number,
  accountId: string,
  subscriptions: string[],
): NewNotification[] {
  const hash = `0x${crypto.randomBytes(32).toString('hex')}`;
  return Array.from({ length: rows }, (_, i) => {
    const subscriptionId = subscriptions[i % subscriptions.length]!;
    const dedupeKey = `${hash}:0x${crypto.randomBytes(32).toString('hex')}:${i}`;
    const id = chainNotificationId(subscriptionId, 'bench', dedupeKey);
    const hex = (bytes: number) => `0x${crypto.randomBytes(bytes).toString('hex')}`;
    const body = JSON.stringify({
      id,
      subscriptionId,
      type: 'ADDRESS_TRANSACTION',
      chain: 'bench',
      address: hex(20),
      counterAddress: hex(20),
      txId: hex(32),
      blockNumber: height,
      blockHash: hash,
      amount: '1.5',
      asset: 'ETH',
      direction: 'incoming',
      mempool: false,
      confirmations: 1,
      timestamp: new Date().toISOString(),
      transactionIndex: i,
    });
    return {
      id,
      accountId,
      subscriptionId,
      eventType: 'address.transaction',
      body,
      dedupeKey,
      chain: 'bench',
      blockNumber: height,
      blockHash: hash,
      releaseHeight: height,
    };
  });
}

async function measure(
  backend: Backend,
  databaseUrl: string | undefined,
  variant: Variant,
  rows: number,
  transactions: number,
): Promise<{ wallMs: number; cpuMs: number }> {
  return withFreshStore(backend, databaseUrl, 'outbox', async (store) => {
    await store.migrate();
    const { db } = store;
    for (const statement of variant.prepare ?? []) await db.execute(sql.raw(statement));
    const accountId = crypto.randomUUID();
    await db.execute(sql`INSERT INTO accounts (id, name, created_at) VALUES (${accountId}, 'bench', now())`);
    const subscriptions = Array.from({ length: SUBSCRIPTIONS }, () => crypto.randomUUID());
    await db.execute(sql`
      INSERT INTO subscriptions (id, account_id, type, network, address, url, secret, callback_token, created_at)
      SELECT id, ${accountId}, 'ADDRESS_TRANSACTION', 'bench', md5(id::text), 'http://127.0.0.1:9/', '{}', '{}', now()
      FROM unnest(${sql.param(subscriptions)}::uuid[]) AS s(id)`);
    const blocks = Array.from({ length: transactions }, (_, i) => blockOf(i, rows, accountId, subscriptions));
    const started = performance.now();
    const cpu = process.cpuUsage();
    for (const items of blocks) await db.transaction((tx) => variant.write(tx, items).then(() => {}));
    const used = process.cpuUsage(cpu);
    const wallMs = performance.now() - started;
    return { wallMs: wallMs / transactions, cpuMs: (used.user + used.system) / 1000 / transactions };
  });
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rows: { type: 'string' },
      transactions: { type: 'string' },
      rounds: { type: 'string' },
      variants: { type: 'string' },
    },
  });
  const rows = wholeNumberOption(values.rows, 'BENCH_ROWS', 160, 1);
  const transactions = wholeNumberOption(values.transactions, 'BENCH_TRANSACTIONS', 200, 1);
  const rounds = wholeNumberOption(values.rounds, 'BENCH_ROUNDS', 3, 1);
  const chosen = values.variants?.split(',').map(Number) ?? VARIANTS.map((_, i) => i);
  const databaseUrl = databaseUrlOption();
  const backends = defaultBackends(databaseUrl);
  process.stdout.write(
    `bench:outbox-write: ${transactions} transactions of ${rows} notifications, ${rounds} rounds; ${machineLine()}\n`,
  );
  for (const backend of backends) {
    const results = new Map<number, { wallMs: number; cpuMs: number }[]>();
    for (let round = 0; round < rounds; round++) {
      for (const i of chosen) {
        const result = await measure(backend, databaseUrl, VARIANTS[i]!, rows, transactions);
        results.set(i, [...(results.get(i) ?? []), result]);
        process.stdout.write('.');
      }
    }
    process.stdout.write('\n');
    const table = chosen.map((i) => {
      const runs = results.get(i)!;
      const wall = median(runs.map((r) => r.wallMs));
      const cpu = median(runs.map((r) => r.cpuMs));
      return [
        `${i} ${VARIANTS[i]!.name}`,
        fixed(wall, 2),
        fixed((wall * 1000) / rows, 0),
        fixed(cpu, 2),
        runs.map((r) => fixed(r.wallMs, 1)).join(' '),
      ];
    });
    process.stdout.write(
      `${backend}\n${formatTable(['variant', 'ms/transaction', 'µs/row', 'our cpu ms/transaction', 'rounds ms'], table)}\n`,
    );
  }
  process.stdout.write(
    `our cpu: this process's CPU (the client; PGlite's database too, as it runs in this thread).\n`,
  );
}

runMain('bench:outbox-write', main);
