// Delivery benchmark (bench/README.md): notifications per second from the outbox to acknowledged
// by a receiver, on embedded PGlite and (with DATABASE_URL) on PostgreSQL, beside raw undici POSTs of
// the same size and concurrency to the same receiver in the same run: the limit of this machine.
// The receiver and Ledgerhook each run as their own child process; the raw POSTs are sent from here.
// Usage: npm run bench:delivery [-- --notifications 20000 --warmup 2000 --concurrency 256]
import crypto from 'node:crypto';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { sql } from 'drizzle-orm';
import { Agent, request } from 'undici';
import { PGLITE_SUBDIR } from '../src/app/store.js';
import { dispatchPost, postTarget } from '../src/notify/http-post.js';
import { enqueueNotifications, newNotificationId } from '../src/notify/outbox.js';
import { openStore, type Store } from '../src/store/db.js';
import { acquireDataDirLock } from '../src/store/lock.js';
import {
  apiCall,
  type Backend,
  backendsLine,
  backendsOption,
  cleanEnv,
  commCpuDelta,
  commCpuSeconds,
  cpuProfArgs,
  cpuProfOption,
  createScratchDatabase,
  databaseUrlOption,
  exitWithUsage,
  fixed,
  formatTable,
  freePort,
  isLoopback,
  ledgerhookDatabaseEnv,
  logLevelOption,
  machineLine,
  makeTempDir,
  onCleanup,
  percent,
  processCpuSeconds,
  runMain,
  type Server,
  serverToken,
  sleep,
  startServer,
  stopServer,
  waitUntilServing,
  wholeNumberOption,
} from './lib.js';
import type { ReceiverCommand, ReceiverMessage, ReceiverStats } from './receiver.js';

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  notifications: number;
  warmup: number;
  concurrency: number;
  logLevel: string;
  databaseUrl: string | undefined;
  backends: Backend[];
  /** Write a V8 CPU profile of each delivering Ledgerhook process into this directory. */
  cpuProf: string | undefined;
  /** Ledgerhook processes delivering on PostgreSQL: the first with all roles, the rest `--role dispatcher`. */
  dispatchers: number;
}

function readOptions(): Options {
  const { values } = parseArgs({
    options: {
      notifications: { type: 'string', short: 'n' },
      warmup: { type: 'string' },
      concurrency: { type: 'string' },
      backends: { type: 'string' },
      'log-level': { type: 'string' },
      'cpu-prof': { type: 'string' },
      dispatchers: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    exitWithUsage([
      'Usage: npm run bench:delivery [-- options]',
      '  --notifications N  notifications measured per backend, and raw POSTs per reference run',
      '                     (BENCH_NOTIFICATIONS, default 20000)',
      '  --warmup N         unmeasured notifications and POSTs before each (BENCH_WARMUP, default 2000)',
      '  --concurrency N    LEDGERHOOK_DISPATCH_CONCURRENCY, and raw POSTs in flight (BENCH_CONCURRENCY, default 256)',
      '  --dispatchers N    processes delivering on PostgreSQL, the extra ones with --role dispatcher',
      '                     (BENCH_DISPATCHERS, default 1)',
      '  --backends LIST    pglite,postgres (BENCH_BACKENDS; default pglite, plus postgres with DATABASE_URL)',
      '  --log-level L      LOG_LEVEL of Ledgerhook (BENCH_LOG_LEVEL, default warn)',
      '  --cpu-prof DIR     write a V8 CPU profile of each delivering Ledgerhook process to DIR (BENCH_CPU_PROF)',
      'DATABASE_URL set: also on that PostgreSQL, in a database created for the run and dropped after it.',
      '',
    ]);
  }
  const databaseUrl = databaseUrlOption();
  const backends = backendsOption(values.backends, databaseUrl);
  return {
    notifications: wholeNumberOption(values.notifications, 'BENCH_NOTIFICATIONS', 20_000, 1),
    warmup: wholeNumberOption(values.warmup, 'BENCH_WARMUP', 2_000, 0),
    concurrency: wholeNumberOption(values.concurrency, 'BENCH_CONCURRENCY', 256, 1),
    dispatchers: wholeNumberOption(values.dispatchers, 'BENCH_DISPATCHERS', 1, 1),
    logLevel: logLevelOption(values['log-level']),
    databaseUrl,
    backends,
    cpuProf: cpuProfOption(values['cpu-prof']),
  };
}

// ---------------------------------------------------------------------------------------------
// The receiver (bench/receiver.ts, its own process)

interface Receiver {
  server: Server;
  url(route: string): string;
  /** Forgets the counts; resolves once the receiver has done so. */
  reset(expect: number): Promise<void>;
  stats(): Promise<ReceiverStats>;
  /** The counts when the receiver acknowledged the expected number of distinct webhook-ids. */
  done(label: string, sender: Server | undefined, timeoutMs: number): Promise<ReceiverStats>;
  /** Resolves at the first measured request since the reset (polled, so a few ms late). */
  first(sender: Server | undefined, timeoutMs: number): Promise<ReceiverStats>;
}

async function startReceiver(): Promise<Receiver> {
  const server = startServer('receiver', ['bench/receiver.ts'], cleanEnv({}), { ipc: true });
  const waiting: Array<(message: ReceiverMessage) => void> = [];
  let doneStats: ReceiverStats | undefined;
  server.proc.on('message', (message: ReceiverMessage) => {
    if (message.ev === 'done') doneStats = message.stats;
    for (const waiter of waiting.splice(0)) waiter(message);
  });
  const next = (ev: ReceiverMessage['ev']) =>
    new Promise<ReceiverMessage>((resolve) => {
      const waiter = (message: ReceiverMessage) => {
        if (message.ev === ev) resolve(message);
        else waiting.push(waiter);
      };
      waiting.push(waiter);
    });
  const command = (message: ReceiverCommand) => server.proc.send(message);
  const listening = next('listening');
  const port = await Promise.race([
    listening.then((m) => (m as { port: number }).port),
    server.exited.then(() => {
      throw new Error(`receiver exited before listening:\n${server.tail()}`);
    }),
  ]);
  const stats = async () => {
    const reply = next('stats');
    command({ cmd: 'stats' });
    return ((await reply) as { stats: ReceiverStats }).stats;
  };
  const alive = (sender: Server | undefined) => {
    for (const s of [server, sender]) {
      if (s && s.exitCode !== undefined)
        throw new Error(`${s.name} exited (code ${s.exitCode}):\n${s.tail()}`);
    }
  };
  return {
    server,
    url: (route) => `http://127.0.0.1:${port}${route}`,
    async reset(expect) {
      doneStats = undefined;
      command({ cmd: 'reset', expect });
      await stats(); // IPC is ordered: the reset has been applied when this answers
    },
    stats,
    async done(label, sender, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      let progressAt = Date.now() + 5_000;
      while (doneStats === undefined) {
        alive(sender);
        if (Date.now() > deadline) {
          const s = await stats();
          throw new Error(
            `${label}: only ${s.distinct} distinct notifications acknowledged after ${timeoutMs / 1000} s` +
              (sender ? `; ${sender.name} output:\n${sender.tail()}` : ''),
          );
        }
        if (Date.now() > progressAt) {
          const s = await stats();
          process.stdout.write(`    ${label}: ${s.distinct} acknowledged so far\n`);
          progressAt = Date.now() + 5_000;
        }
        await sleep(5);
      }
      return doneStats;
    },
    async first(sender, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        alive(sender);
        const s = await stats();
        if (s.firstAt !== null) return s;
        if (Date.now() > deadline) {
          throw new Error(
            `no notification reached the receiver in ${timeoutMs / 1000} s` +
              (sender ? `; ${sender.name} output:\n${sender.tail()}` : ''),
          );
        }
        await sleep(2);
      }
    },
  };
}

// ---------------------------------------------------------------------------------------------
// What is sent

const WATCHED = '0x000000000000000000000000000000000000dEaD';
const COUNTER = '0x2222222222222222222222222222222222222222';

/** A realistic EVM transfer notification, the same size for every `n` below 10^9. */
function notificationBody(id: string, subscriptionId: string, n: number): string {
  return JSON.stringify({
    address: WATCHED,
    txId: `0x${crypto.createHash('sha256').update(String(n)).digest('hex')}`,
    type: 'native',
    blockNumber: 21_000_000_000 + n,
    asset: 'ETH',
    amount: '-0.125000000000000000',
    mempool: false,
    counterAddress: COUNTER,
    id,
    subscriptionId,
    chain: 'ETH',
    watchedAddress: WATCHED,
    confirmations: 1,
  });
}

/** Headers of the size Ledgerhook sends (bearer token, Standard Webhooks signature), without signing. */
function rawHeaders(id: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    authorization: `Bearer ${'t'.repeat(32)}`,
    'user-agent': 'Ledgerhook/0.1.0',
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
    'webhook-signature': `v1,${'s'.repeat(43)}=`,
  };
}

// ---------------------------------------------------------------------------------------------
// Measurement

interface Row {
  label: string;
  notifications: number;
  seconds: number;
  /** Percent of one core: the sending process (this one for the reference, else Ledgerhook). */
  senderCpu: number | undefined;
  receiverCpu: number | undefined;
  /** All `postgres` processes of this host, when the database is local. */
  postgresCpu: number | undefined;
}

const rate = (row: Row) => row.notifications / row.seconds;

interface CpuMark {
  at: number;
  sender: number | undefined;
  receiver: number | undefined;
  postgres: Map<number, number> | undefined;
}

const now = () => performance.timeOrigin + performance.now();

/** CPU seconds of the sending processes (all dispatchers), or of this process for the reference. */
function senderCpuSeconds(sender: Server | Server[] | 'self'): number | undefined {
  if (sender === 'self') {
    const self = process.cpuUsage();
    return (self.user + self.system) / 1e6;
  }
  let total = 0;
  for (const s of Array.isArray(sender) ? sender : [sender]) {
    const seconds = processCpuSeconds(s.proc.pid);
    if (seconds === undefined) return undefined;
    total += seconds;
  }
  return total;
}

function cpuMark(sender: Server | Server[] | 'self', receiver: Receiver, postgres: boolean): CpuMark {
  return {
    at: now(),
    sender: senderCpuSeconds(sender),
    receiver: processCpuSeconds(receiver.server.proc.pid),
    postgres: postgres ? commCpuSeconds('postgres') : undefined,
  };
}

function cpuRow(label: string, notifications: number, seconds: number, a: CpuMark, b: CpuMark): Row {
  const pct = (x: number | undefined, y: number | undefined) =>
    x === undefined || y === undefined ? undefined : ((y - x) / ((b.at - a.at) / 1000)) * 100;
  const pgSeconds = commCpuDelta(a.postgres, b.postgres);
  return {
    label,
    notifications,
    seconds,
    senderCpu: pct(a.sender, b.sender),
    receiverCpu: pct(a.receiver, b.receiver),
    postgresCpu: pgSeconds === undefined ? undefined : (pgSeconds / ((b.at - a.at) / 1000)) * 100,
  };
}

/**
 * How a raw POST is sent: `request()`, undici's usual API (the reference), or `dispatch()` with the
 * dispatcher's own small handler (src/notify/http-post.ts), shown beside it so the reader sees how
 * much of the dispatcher's lead over the reference is that API alone.
 */
type RawApi = 'request' | 'dispatch';

/** `total` POSTs, `concurrency` in flight through one Agent, like the dispatcher. */
async function postRaw(
  url: string,
  total: number,
  concurrency: number,
  agent: Agent,
  via: RawApi,
): Promise<number> {
  let next = 0;
  let failed = 0;
  const subscriptionId = crypto.randomUUID();
  const target = postTarget(url);
  const post = async (id: string, n: number): Promise<{ status: number; text: string }> => {
    const headers = rawHeaders(id);
    const body = notificationBody(id, subscriptionId, n);
    if (via === 'dispatch') {
      const response = await dispatchPost(agent, target, headers, body, 20 * 1024).done;
      return { status: response.statusCode, text: response.body };
    }
    const res = await request(url, { method: 'POST', headers, body, dispatcher: agent });
    return { status: res.statusCode, text: await res.body.text() };
  };
  const worker = async () => {
    while (next < total) {
      const n = next++;
      const { status, text } = await post(crypto.randomUUID(), n);
      if (status !== 200 || (JSON.parse(text) as { status?: string }).status !== 'success') failed++;
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, worker));
  return failed;
}

interface Detail {
  row: Row;
  bodyBytes: number;
}

async function benchRaw(
  options: Options,
  receiver: Receiver,
  label: string,
  via: RawApi = 'request',
): Promise<Detail> {
  process.stdout.write(`  ${label}: `);
  // Default pool options, as the egress Agent: one origin, connections as needed, keep-alive.
  const agent = new Agent();
  try {
    if (options.warmup > 0) {
      process.stdout.write(`${options.warmup} warm-up, `);
      await postRaw(receiver.url('/warmup'), options.warmup, options.concurrency, agent, via);
    }
    await receiver.reset(options.notifications);
    const a = cpuMark('self', receiver, false);
    const failed = await postRaw(
      receiver.url('/hook'),
      options.notifications,
      options.concurrency,
      agent,
      via,
    );
    const b = cpuMark('self', receiver, false);
    const stats = await receiver.done(label, undefined, 10_000);
    if (failed > 0) throw new Error(`${label}: ${failed} POSTs were not acknowledged`);
    const seconds = (b.at - a.at) / 1000;
    const row = cpuRow(label, options.notifications, seconds, a, b);
    process.stdout.write(
      `${options.notifications} measured: ${Math.round(rate(row))}/s in ${seconds.toFixed(2)} s\n`,
    );
    return { row, bodyBytes: stats.bodyBytes / stats.total };
  } finally {
    await agent.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Ledgerhook

interface LedgerhookResult {
  backend: Backend;
  acknowledged: Row;
  recorded: Row;
  /** Extra lines for the report. */
  notes: string[];
}

interface Subscriptions {
  measured: string;
  warmup: string | undefined;
}

async function subscribe(base: string, token: string, url: string): Promise<string> {
  const res = await apiCall(base, token, 'POST', '/api/v1/subscription', {
    type: 'ADDRESS_TRANSACTION',
    attr: { address: WATCHED, chain: 'ETH', url },
  });
  if (res.status !== 201)
    throw new Error(`creating a subscription: HTTP ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

async function subscribeAll(base: string, token: string, receiver: Receiver, options: Options) {
  return {
    measured: await subscribe(base, token, receiver.url('/hook')),
    warmup: options.warmup > 0 ? await subscribe(base, token, receiver.url('/warmup')) : undefined,
  } satisfies Subscriptions;
}

const rowsOf = <T>(result: unknown): T[] => (result as { rows: T[] }).rows;

/**
 * Writes `count` notifications for `subscriptionId` in one transaction (several INSERTs of 2,000
 * rows: PostgreSQL binds at most 65,535 parameters per statement). Returns when it has committed.
 */
async function enqueue(store: Store, subscriptionId: string, count: number, at: Date): Promise<void> {
  const [row] = rowsOf<{ account_id: string }>(
    await store.db.execute(sql`SELECT account_id FROM subscriptions WHERE id = ${subscriptionId}`),
  );
  const items = Array.from({ length: count }, (_, n) => {
    const id = newNotificationId();
    return {
      id,
      accountId: row!.account_id,
      subscriptionId,
      eventType: 'ADDRESS_TRANSACTION',
      body: notificationBody(id, subscriptionId, n),
    };
  });
  await store.db.transaction(async (tx) => {
    for (let i = 0; i < items.length; i += 2_000)
      await enqueueNotifications(tx, items.slice(i, i + 2_000), at);
  });
}

async function countStates(store: Store, subscriptionId: string) {
  const [counts] = rowsOf<{ delivered: number; pending: number; failed: number; locked: number }>(
    await store.db.execute(sql`
      SELECT count(*) FILTER (WHERE state = 'delivered')::int AS delivered,
             count(*) FILTER (WHERE state = 'pending')::int AS pending,
             count(*) FILTER (WHERE state = 'failed')::int AS failed,
             count(*) FILTER (WHERE locked_by IS NOT NULL)::int AS locked
      FROM notifications WHERE subscription_id = ${subscriptionId}`),
  );
  const [attempts] = rowsOf<{ n: number }>(
    await store.db.execute(sql`
      SELECT count(*)::int AS n FROM delivery_attempts a JOIN notifications n ON n.id = a.notification_id
      WHERE n.subscription_id = ${subscriptionId}`),
  );
  return { ...counts!, attempts: attempts!.n };
}

/** Fails unless every measured notification was delivered once and recorded with one attempt. */
function checkRecorded(
  label: string,
  options: Options,
  counts: Awaited<ReturnType<typeof countStates>>,
  stats: ReceiverStats,
): string {
  const n = options.notifications;
  if (counts.delivered !== n || counts.attempts < n) {
    throw new Error(`${label}: expected ${n} delivered, found ${JSON.stringify(counts)}`);
  }
  return (
    `${counts.delivered} delivered, ${counts.attempts} attempts recorded, ` +
    `${stats.total - stats.distinct} duplicate requests, ${Math.round(stats.bodyBytes / stats.total)}-byte bodies`
  );
}

function deliveryTimeoutMs(options: Options): number {
  return 30_000 + options.notifications * 5; // 20,000 notifications: 130 s, i.e. at least ~150/s
}

function ledgerhookEnv(options: Options, dataDir: string, extra: Record<string, string>) {
  return cleanEnv({
    LEDGERHOOK_DATA_DIR: dataDir,
    LEDGERHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    LEDGERHOOK_DISPATCH_CONCURRENCY: String(options.concurrency),
    LOG_LEVEL: options.logLevel,
    ...extra,
  });
}

function nodeArgs(options: Options, backend: Backend): string[] {
  const extra = process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ') : [];
  // A directory per backend: Node names the files itself, one per thread (tsx's loader has one).
  return [...extra, ...cpuProfArgs(options.cpuProf, backend)];
}

/**
 * PGlite admits one process, so: Ledgerhook with the API role alone creates the subscriptions and
 * stops; this process opens the data directory and enqueues; then Ledgerhook starts with all roles
 * and delivers the backlog. Timed from the first measured request the receiver sees.
 */
async function benchPglite(options: Options, receiver: Receiver): Promise<LedgerhookResult> {
  const label = 'pglite';
  const dataDir = makeTempDir('ledgerhook-bench-delivery-');
  const pgliteDir = path.join(dataDir, PGLITE_SUBDIR);

  const apiPort = await freePort();
  const apiEnv = ledgerhookEnv(options, dataDir, { PORT: String(apiPort), LEDGERHOOK_ROLES: 'api' });
  const apiOnly = startServer('ledgerhook (api role)', ['src/main.ts', 'serve'], apiEnv);
  let subs: Subscriptions;
  let token: string;
  try {
    const base = `http://127.0.0.1:${apiPort}`;
    await waitUntilServing(apiOnly, `${base}/healthz`);
    token = await serverToken(apiOnly, apiEnv);
    subs = await subscribeAll(base, token, receiver, options);
  } finally {
    await stopServer(apiOnly);
  }
  if (apiOnly.exitCode !== 0)
    throw new Error(`ledgerhook (api role) exited with ${apiOnly.exitCode}:\n${apiOnly.tail()}`);

  process.stdout.write(
    `  ${label}: enqueueing ${options.warmup} warm-up + ${options.notifications} measured... `,
  );
  let lock = acquireDataDirLock(dataDir);
  let store = await openStore({ pgliteDir });
  const t0 = now();
  try {
    // Warm-up rows are due a minute earlier, so they are claimed first.
    if (subs.warmup) await enqueue(store, subs.warmup, options.warmup, new Date(Date.now() - 60_000));
    await enqueue(store, subs.measured, options.notifications, new Date());
  } finally {
    await store.close();
    lock.release();
  }
  const enqueueSeconds = (now() - t0) / 1000;
  process.stdout.write(`${enqueueSeconds.toFixed(1)} s\n`);

  await receiver.reset(options.notifications);
  const port = await freePort();
  const env = ledgerhookEnv(options, dataDir, { PORT: String(port) });
  const spawnedAt = now();
  const server = startServer('ledgerhook', ['src/main.ts', 'serve'], env, {
    nodeArgs: nodeArgs(options, 'pglite'),
  });
  let acknowledged: Row;
  let recorded: Row;
  let stats: ReceiverStats;
  let firstAt: number;
  try {
    const first = await receiver.first(server, 90_000);
    firstAt = first.firstAt!;
    const a = cpuMark(server, receiver, false);
    process.stdout.write(
      `  ${label}: delivering, first measured request ${((firstAt - spawnedAt) / 1000).toFixed(1)} s after start...\n`,
    );
    stats = await receiver.done(label, server, deliveryTimeoutMs(options));
    const b = cpuMark(server, receiver, false);
    acknowledged = cpuRow(
      `${label}: acknowledged by receiver`,
      options.notifications,
      (stats.doneAt! - firstAt) / 1000,
      a,
      b,
    );

    // Recorded: the delivery log shows nothing pending (the embedded database is not ours to open now).
    const base = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 60_000;
    for (;;) {
      const res = await apiCall(
        base,
        token,
        'GET',
        `/api/v1/subscription/${subs.measured}/notifications?state=pending&limit=1`,
      );
      if (res.status !== 200) throw new Error(`delivery log: HTTP ${res.status} ${JSON.stringify(res.body)}`);
      if ((res.body.data as unknown[]).length === 0) break;
      if (Date.now() > deadline)
        throw new Error(`${label}: notifications still pending 60 s after acknowledgement`);
      await sleep(10);
    }
    const c = cpuMark(server, receiver, false);
    recorded = cpuRow(`${label}: recorded delivered`, options.notifications, (c.at - firstAt) / 1000, a, c);
    process.stdout.write(
      `  ${label}: ${Math.round(rate(acknowledged))}/s acknowledged, ${Math.round(rate(recorded))}/s recorded\n`,
    );
  } finally {
    await stopServer(server);
  }

  lock = acquireDataDirLock(dataDir);
  store = await openStore({ pgliteDir });
  let check: string;
  try {
    check = checkRecorded(label, options, await countStates(store, subs.measured), stats);
  } finally {
    await store.close();
    lock.release();
  }
  return {
    backend: 'pglite',
    acknowledged,
    recorded,
    notes: [
      `${label}: ${check}; enqueued in ${enqueueSeconds.toFixed(1)} s before the start; ` +
        `first measured request ${((firstAt - spawnedAt) / 1000).toFixed(1)} s after the process was spawned`,
    ],
  };
}

/**
 * Ledgerhook with all roles on a fresh database; this process enqueues while it runs, as a watcher
 * in another process would. Timed from the commit of the measured batch.
 */
async function benchPostgres(options: Options, receiver: Receiver): Promise<LedgerhookResult> {
  const label = options.dispatchers > 1 ? `postgres (${options.dispatchers} processes)` : 'postgres';
  const scratch = await createScratchDatabase(options.databaseUrl!);
  const local = isLoopback(options.databaseUrl!);
  try {
    const port = await freePort();
    const env = ledgerhookEnv(options, makeTempDir('ledgerhook-bench-delivery-'), {
      PORT: String(port),
      // The database is new, so any key would do; a fixed one keeps reruns on one database possible.
      ...ledgerhookDatabaseEnv(scratch.url, 'ledgerhook-bench-delivery'),
    });
    const server = startServer('ledgerhook', ['src/main.ts', 'serve'], env, {
      nodeArgs: nodeArgs(options, 'postgres'),
    });
    // Ignore its idle connections being cut when the database is dropped after a failure.
    const store = await openStore({ databaseUrl: scratch.url, onError: () => {} });
    onCleanup(() => store.close()); // before the drop, which runs after it
    try {
      const base = `http://127.0.0.1:${port}`;
      await waitUntilServing(server, `${base}/healthz`);
      const subs = await subscribeAll(base, await serverToken(server, env), receiver, options);
      // Scaling out as documented: more processes with the dispatcher role on the same database.
      const dispatchers = [server];
      for (let n = 2; n <= options.dispatchers; n++) {
        const extraPort = await freePort();
        const extra = startServer(
          `ledgerhook dispatcher ${n}`,
          ['src/main.ts', 'serve'],
          { ...env, PORT: String(extraPort), LEDGERHOOK_ROLES: 'dispatcher' },
          { nodeArgs: nodeArgs(options, 'postgres') },
        );
        onCleanup(() => stopServer(extra));
        dispatchers.push(extra);
        await waitUntilServing(extra, `http://127.0.0.1:${extraPort}/healthz`);
      }

      if (subs.warmup) {
        process.stdout.write(`  ${label}: ${options.warmup} warm-up... `);
        await enqueue(store, subs.warmup, options.warmup, new Date());
        const deadline = Date.now() + deliveryTimeoutMs(options);
        while ((await countStates(store, subs.warmup)).delivered < options.warmup) {
          if (server.exitCode !== undefined) throw new Error(`ledgerhook exited:\n${server.tail()}`);
          if (Date.now() > deadline)
            throw new Error(`${label}: warm-up not delivered in time:\n${server.tail()}`);
          await sleep(20);
        }
      } else {
        process.stdout.write(`  ${label}: `);
      }

      await receiver.reset(options.notifications);
      process.stdout.write(`${options.notifications} measured...\n`);
      const enqueueStart = now();
      await enqueue(store, subs.measured, options.notifications, new Date());
      const a = cpuMark(dispatchers, receiver, local);
      const committedAt = a.at;
      const stats = await receiver.done(label, server, deliveryTimeoutMs(options));
      const b = cpuMark(dispatchers, receiver, local);
      const acknowledged = cpuRow(
        `${label}: acknowledged by receiver`,
        options.notifications,
        (stats.doneAt! - committedAt) / 1000,
        a,
        b,
      );
      const deadline = Date.now() + 60_000;
      let counts = await countStates(store, subs.measured);
      while (counts.delivered < options.notifications || counts.locked > 0) {
        if (Date.now() > deadline)
          throw new Error(`${label}: not all recorded 60 s after acknowledgement: ${JSON.stringify(counts)}`);
        await sleep(10);
        counts = await countStates(store, subs.measured);
      }
      const c = cpuMark(dispatchers, receiver, local);
      const recorded = cpuRow(
        `${label}: recorded delivered`,
        options.notifications,
        (c.at - committedAt) / 1000,
        a,
        c,
      );
      process.stdout.write(
        `  ${label}: ${Math.round(rate(acknowledged))}/s acknowledged, ${Math.round(rate(recorded))}/s recorded\n`,
      );
      const check = checkRecorded(label, options, counts, stats);
      await stopServer(server);
      return {
        backend: 'postgres',
        acknowledged,
        recorded,
        notes: [
          `${label}: ${check}; the measured batch took ${((committedAt - enqueueStart) / 1000).toFixed(1)} s to insert and commit; ` +
            `first request ${(stats.firstAt! - committedAt).toFixed(0)} ms after the commit` +
            (local ? '' : '; postgres cpu not measured (not on this host)'),
        ],
      };
    } finally {
      await stopServer(server);
      await store.close();
    }
  } finally {
    await scratch.drop();
  }
}

// ---------------------------------------------------------------------------------------------
// The run

function formatRows(rows: Row[], reference: Row): string {
  const header = [
    'sender',
    'notifications',
    'seconds',
    'notifications/s',
    'ratio to raw undici',
    'sender cpu',
    'sender cpu µs each',
    'receiver cpu',
    'postgres cpu',
  ];
  return formatTable(
    header,
    rows.map((r) => [
      r.label,
      String(r.notifications),
      fixed(r.seconds, 2),
      String(Math.round(rate(r))),
      fixed(rate(r) / rate(reference), 3),
      percent(r.senderCpu),
      r.senderCpu === undefined ? '-' : fixed(((r.senderCpu / 100) * r.seconds * 1e6) / r.notifications, 0),
      percent(r.receiverCpu),
      percent(r.postgresCpu),
    ]),
  );
}

function mean(label: string, a: Row, b: Row): Row {
  const avg = (x: number | undefined, y: number | undefined) =>
    x === undefined || y === undefined ? undefined : (x + y) / 2;
  const perSecond = (rate(a) + rate(b)) / 2;
  return {
    label,
    notifications: a.notifications,
    seconds: a.notifications / perSecond,
    senderCpu: avg(a.senderCpu, b.senderCpu),
    receiverCpu: avg(a.receiverCpu, b.receiverCpu),
    postgresCpu: undefined,
  };
}

const TARGET = 10_000;

async function main(): Promise<void> {
  const options = readOptions();
  process.stdout.write(
    `bench:delivery: ${backendsLine(options.backends, options.databaseUrl)}; ` +
      `${options.notifications} notifications measured after ${options.warmup} warm-up, concurrency ${options.concurrency}; ${machineLine()}\n`,
  );
  const receiver = await startReceiver();

  // The reference brackets the Ledgerhook runs: its two runs differing much means the machine was
  // busy with something else meanwhile, and the ratios are only as good as that spread.
  const before = await benchRaw(options, receiver, 'raw undici POST (before)');
  const results: LedgerhookResult[] = [];
  for (const backend of options.backends) {
    results.push(
      backend === 'pglite' ? await benchPglite(options, receiver) : await benchPostgres(options, receiver),
    );
  }
  const after = await benchRaw(options, receiver, 'raw undici POST (after)');
  const dispatched = await benchRaw(options, receiver, 'raw undici dispatch()', 'dispatch');
  const reference = mean('raw undici POST (reference)', before.row, after.row);
  const spread = Math.abs(rate(before.row) - rate(after.row)) / rate(reference);

  const postgres = results.find((r) => r.backend === 'postgres');
  const target = postgres
    ? `target ≥ 10,000/s on PostgreSQL (bench/README.md): ${rate(postgres.acknowledged) >= TARGET ? 'met' : 'NOT met'} ` +
      `(${Math.round(rate(postgres.acknowledged))}/s acknowledged, ${Math.round(rate(postgres.recorded))}/s recorded)`
    : 'target ≥ 10,000/s on PostgreSQL (bench/README.md): not measured, set DATABASE_URL';
  process.stdout.write(
    [
      '',
      `concurrency: ${options.concurrency} (LEDGERHOOK_DISPATCH_CONCURRENCY, and raw POSTs in flight), ` +
        `${options.notifications} notifications measured after ${options.warmup} warm-up, Ledgerhook LOG_LEVEL: ${options.logLevel}`,
      formatRows(
        [reference, dispatched.row, ...results.flatMap((r) => [r.acknowledged, r.recorded])],
        reference,
      ),
      target,
      `reference: mean of raw undici POSTs before (${Math.round(rate(before.row))}/s) and after (${Math.round(rate(after.row))}/s) Ledgerhook, ` +
        `spread ${(spread * 100).toFixed(0)}%${spread > 0.15 ? ': the machine was busy, treat the ratios as rough' : ''}; ` +
        `${Math.round(before.bodyBytes)}-byte bodies`,
      ...results.flatMap((r) => r.notes),
      "raw undici dispatch(): the same POSTs through the dispatcher's own handler of undici's dispatch()",
      '(no request() streams), not signed, no database: the floor of what the dispatcher could reach.',
      'acknowledged: until the receiver answered the last of the N distinct webhook-ids; recorded: until the',
      'database showed all N delivered. pglite is timed from the first measured request the receiver saw',
      '(the backlog was enqueued before the start), postgres from the commit of the N notifications.',
      'cpu: percent of one core over the acknowledged (or recorded) time, of the sender (this process for',
      'the reference, Ledgerhook otherwise, PGlite included), of the receiver, and of all postgres processes.',
      '',
    ].join('\n'),
  );
}

runMain('bench:delivery', main); // cleans up: kills the children, removes temp dirs, drops the database
