/**
 * What the database costs per delivered notification: the real dispatcher delivers a backlog to an
 * answer given at once in this process (no socket, no receiver), so what is measured is the
 * dispatcher's statements. On PGlite (running in this thread) each statement's time is summed by its
 * first words; on PostgreSQL (with DATABASE_URL, in a scratch database) the CPU of its processes is
 * read from /proc. The evidence behind "Delivery on PGlite/PostgreSQL" in
 * bench/results/2026-11-27-issue-13-summary.md;
 * bench:delivery measures the whole path.
 *
 *   [DATABASE_URL=…] npx tsx bench/delivery-database.ts [--notifications 20000] [--rounds 3]
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { PGlite } from '@electric-sql/pglite';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import type { Dispatcher } from 'undici';
import { loadNetworks } from '../src/chains/networks.js';
import { createIdempotency } from '../src/idempotency/service.js';
import { createDispatcher } from '../src/notify/dispatcher.js';
import { enqueueNotifications, newNotificationId } from '../src/notify/outbox.js';
import { createRetryPolicy } from '../src/notify/retry-policy.js';
import { createEnvelope } from '../src/secrets/envelope.js';
import { openStore } from '../src/store/db.js';
import { createSubscriptions } from '../src/subscriptions/service.js';
import { commCpuDelta, commCpuSeconds, createScratchDatabaseIfUrl, databaseUrlOption } from './lib.js';

const { values } = parseArgs({
  options: { notifications: { type: 'string' }, rounds: { type: 'string' } },
});
const N = Number(values.notifications ?? 20_000);
const ROUNDS = Number(values.rounds ?? 3);
const ACK = Buffer.from('{"status":"success"}');

/** Statement time by kind, summed over every query PGlite ran in this thread. */
const byKind = new Map<string, { calls: number; ms: number }>();
/** Statements PGlite's plan cache prepared (src/store/pglite-plans.ts), by name. */
const preparedKinds = new Map<string, string>();
function kindOf(text: string): string {
  const t = text.replace(/\s+/g, ' ').trim();
  const prepared = /^PREPARE (lh_plan_\d+) AS (.*)$/.exec(t);
  if (prepared) {
    preparedKinds.set(prepared[1]!, kindOf(prepared[2]!));
    return 'PREPARE (plan cache)';
  }
  const executed = /^EXECUTE (lh_plan_\d+)/.exec(t);
  if (executed) return preparedKinds.get(executed[1]!) ?? t.slice(0, 48);
  if (t.startsWith('WITH due AS')) return 'claim';
  if (t.startsWith('WITH v AS')) return 'record results';
  if (t.includes('min(next_attempt_at)')) return 'next due';
  if (t.includes('FROM feed_queue')) return 'feed sequencer';
  return t.slice(0, 48);
}
// PGlite runs one statement at a time; the wrapper does too, so each statement's time is its own
// and not its wait behind another (drizzle's transactions use PGlite's own, not these methods).
let turn: Promise<unknown> = Promise.resolve();
for (const method of ['query', 'exec'] as const) {
  const original = PGlite.prototype[method] as (...args: unknown[]) => Promise<unknown>;
  (PGlite.prototype as unknown as Record<string, unknown>)[method] = function (
    this: PGlite,
    ...args: unknown[]
  ) {
    const run = turn.then(async () => {
      const started = performance.now();
      try {
        return await original.apply(this, args);
      } finally {
        const kind = kindOf(String(args[0]));
        const entry = byKind.get(kind) ?? { calls: 0, ms: 0 };
        entry.calls++;
        entry.ms += performance.now() - started;
        byKind.set(kind, entry);
      }
    });
    turn = run.catch(() => {});
    return run;
  };
}

/** Answers every POST with the acknowledgement at once, on the next tick. */
const instantAnswer = {
  dispatch(_options: unknown, handler: Dispatcher.DispatchHandler) {
    const controller = { abort() {}, pause() {}, resume() {} } as unknown as Dispatcher.DispatchController;
    setImmediate(() => {
      handler.onRequestStart?.(controller, {});
      handler.onResponseStart?.(controller, 200, {}, 'OK');
      handler.onResponseData?.(controller, ACK);
      handler.onResponseEnd?.(controller, {});
    });
    return true;
  },
} as unknown as Dispatcher;

const databaseUrl = databaseUrlOption();
let walBytes = 0;
let hotShare = 0;

async function round(): Promise<{ seconds: number; cpu: number; databaseCpu: number | undefined }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-bench-delivery-db-'));
  const scratch = await createScratchDatabaseIfUrl(databaseUrl);
  const store = scratch
    ? await openStore({ databaseUrl: scratch.url })
    : await openStore({ pgliteDir: dir, pgliteWorker: false });
  try {
    await store.migrate();
    for (const ddl of (process.env.BENCH_DDL ?? '').split(';').filter((d) => d.trim()))
      await store.db.execute(sql.raw(ddl));
    const envelope = createEnvelope(crypto.randomBytes(32));
    const subscriptions = createSubscriptions({
      db: store.db,
      envelope,
      idempotency: createIdempotency({ db: store.db, envelope }),
      networks: loadNetworks({}),
      urls: { checkUrl: async () => {} },
      notifyOthers: false,
    });
    const accountId = crypto.randomUUID();
    await store.db.execute(
      sql`INSERT INTO accounts (id, name, created_at) VALUES (${accountId}, 'bench', now())`,
    );
    const { body } = await subscriptions.create(accountId, {
      type: 'ADDRESS_TRANSACTION',
      attr: {
        address: '0x000000000000000000000000000000000000dEaD',
        chain: 'ETH',
        url: 'http://127.0.0.1:9/hook',
      },
    } as never);
    const items = Array.from({ length: N }, (_, n) => {
      const id = newNotificationId();
      return {
        id,
        accountId,
        subscriptionId: body.id,
        eventType: 'ADDRESS_TRANSACTION',
        body: JSON.stringify({ id, n, txId: crypto.createHash('sha256').update(String(n)).digest('hex') }),
      };
    });
    await store.db.transaction(async (tx) => {
      for (let i = 0; i < items.length; i += 2_000)
        await enqueueNotifications(tx, items.slice(i, i + 2_000), new Date());
    });
    await store.db.execute(sql`VACUUM ANALYZE`);
    byKind.clear();

    let delivered = 0;
    let allDelivered!: () => void;
    const done = new Promise<void>((resolve) => {
      allDelivered = resolve;
    });
    const dispatcher = createDispatcher({
      store,
      envelope,
      httpDispatcher: instantAnswer,
      policy: createRetryPolicy([5_000]),
      logger: pino({ level: 'warn' }),
      releaseAllClaimsOnStart: true,
      pollIntervalMs: 20,
      observer: {
        attempt(outcome) {
          if (outcome === 'delivered' && ++delivered === N) allDelivered();
        },
      },
    });
    const walAt = async () =>
      (
        (await store.db.execute(sql`SELECT pg_current_wal_lsn()::text AS lsn`)) as unknown as {
          rows: { lsn: string }[];
        }
      ).rows[0]!.lsn;
    const wal0 = await walAt();
    const cpu0 = process.cpuUsage();
    const pg0 = scratch ? commCpuSeconds('postgres') : undefined;
    const t0 = performance.now();
    await dispatcher.start();
    await done;
    await dispatcher.stop(1_000); // records what is left
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const databaseCpu = scratch ? commCpuDelta(pg0, commCpuSeconds('postgres')) : undefined;
    const [row] = (
      (await store.db.execute(
        sql`SELECT count(*)::int AS n FROM notifications WHERE state = 'delivered'`,
      )) as unknown as { rows: { n: number }[] }
    ).rows;
    if (row!.n !== N) throw new Error(`${row!.n} of ${N} recorded delivered`);
    const [wal] = (
      (await store.db.execute(
        sql`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), ${wal0}::pg_lsn)::float8 AS bytes,
              (SELECT n_tup_hot_upd::float8 / nullif(n_tup_upd, 0) FROM pg_stat_user_tables WHERE relname = 'notifications') AS hot`,
      )) as unknown as { rows: { bytes: number; hot: number | null }[] }
    ).rows;
    walBytes = wal!.bytes;
    hotShare = wal!.hot ?? 0;
    return { seconds, cpu: (cpu.user + cpu.system) / 1e6, databaseCpu };
  } finally {
    await store.close();
    await scratch?.drop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

for (let r = 1; r <= ROUNDS; r++) {
  const { seconds, cpu, databaseCpu } = await round();
  process.stdout.write(
    `round ${r} (${databaseUrl ? 'postgres' : 'pglite'}): ${N} delivered in ${seconds.toFixed(2)} s = ${Math.round(N / seconds)}/s; ` +
      `this process ${((cpu / N) * 1e6).toFixed(0)} µs of CPU per notification` +
      (databaseCpu === undefined ? '' : `, PostgreSQL ${((databaseCpu / N) * 1e6).toFixed(0)} µs`) +
      `; WAL ${Math.round(walBytes / N)} bytes per notification, ${Math.round(hotShare * 100)}% of the outbox's updates HOT` +
      '\n',
  );
  const rows = [...byKind].sort((a, b) => b[1].ms - a[1].ms);
  for (const [kind, { calls, ms }] of rows.slice(0, 8))
    process.stdout.write(
      `  ${kind.padEnd(50)} ${String(calls).padStart(6)} calls ${((ms / N) * 1000).toFixed(1).padStart(7)} µs per notification\n`,
    );
}
