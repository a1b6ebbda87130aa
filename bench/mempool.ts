// Bitcoin mempool benchmark (issue 31; bench/README.md): Ledgerhook as shipped following a
// loopback Esplora node (bench/mempool-esplora.ts, its own process) whose pool holds 100,000 synthetic
// transactions (bench/mempool-synthetic.ts) and turns over 20 a second, in steps of 2 every 100 ms,
// with 1,000,000 watched addresses (10 address-list subscriptions of 100,000, `mempool: true`) of which
// one new transaction in 10 pays one. Each figure beside a reference measured in the same run:
// - CPU per new pool transaction: the service process over a steady window ÷ the transactions it
//   read; beside it a bare poller (plain undici + JSON.parse of the same two routes at the same
//   interval, bench/mempool-client.ts), Ledgerhook's pool reader alone, and the node's own CPU;
// - memory per tracked transaction: the reader's heap (gc forced) holding the read pool, less after
//   `reset()`, ÷ the transactions it tracks; beside it a bare Set of the pool's txids;
// - time from a transaction's entry into the node's pool to its pending notification at the receiver
//   (in this process; the node stamps entries with the same host clock): p50/p99, beside the time the
//   bare poller and the reader alone took to read the same traffic; and the startup: from a pool of
//   100,000 appearing at once until the service has read all of it, and notified all it pays.
// Usage: npm run bench:mempool [-- --database postgres://… --poll 200 --duration 60 --cpu-prof DIR]
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  apiCall,
  backendOfDataDir,
  cleanEnv,
  commCpuDelta,
  commCpuSeconds,
  cpuProfArgs,
  createScratchDatabaseIfUrl,
  databaseUrlOption,
  exitWithUsage,
  fixed,
  formatTable,
  freePort,
  grouped,
  isLoopback,
  ledgerhookDatabaseEnv,
  logLevelOption,
  machineLine,
  makeTempDir,
  now,
  numberOption,
  onCleanup,
  processCpuSeconds,
  quantile,
  redact,
  runMain,
  type Server,
  serverToken,
  sleep,
  startServer,
  startTimingReceiver,
  stopServer,
  type TimingReceiver,
  waitUntilServing,
  wholeNumberOption,
} from './lib.js';
import type { ClientMessage, ClientResult, Memory } from './mempool-client.js';
import type { Appearance, NodeCommand, NodeMessage, NodeStats } from './mempool-esplora.js';
import { watchedAddresses } from './mempool-synthetic.js';

const NETWORK = 'BTC';
/** Addresses per subscription: the API's limit for one list. */
const LIST_SIZE = 100_000;

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  pool: number;
  rate: number;
  stepMs: number;
  watched: number;
  hitEvery: number;
  pollMs: number;
  durationSeconds: number;
  referenceSeconds: number;
  warmupSeconds: number;
  databaseUrl: string | undefined;
  cpuProf: string | undefined;
  logLevel: string;
}

function readOptions(): Options {
  const { values } = parseArgs({
    options: {
      pool: { type: 'string' },
      rate: { type: 'string' },
      step: { type: 'string' },
      watched: { type: 'string' },
      'hit-every': { type: 'string' },
      poll: { type: 'string' },
      duration: { type: 'string' },
      'reference-duration': { type: 'string' },
      warmup: { type: 'string' },
      database: { type: 'string' },
      'cpu-prof': { type: 'string' },
      'log-level': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    exitWithUsage([
      'Usage: npm run bench:mempool [-- options]',
      '  --pool N                transactions in the node pool (BENCH_POOL, default 100000)',
      '  --rate N                transactions entering (and leaving) a second (BENCH_RATE, default 20)',
      '  --step MS               turnover step: rate × step / 1000 in and out each (BENCH_STEP, default 100)',
      '  --watched N             watched addresses, lists of 100,000 (BENCH_WATCHED, default 1000000)',
      '  --hit-every N           one new transaction in N pays a watched address (BENCH_HIT_EVERY, default 10)',
      '  --poll MS               LEDGERHOOK_WATCH_POLL_INTERVAL of the service and the clients (BENCH_POLL, default 200)',
      '  --duration S            the service steady window (BENCH_DURATION, default 60)',
      '  --reference-duration S  the bare poller and reader-alone steady windows (BENCH_REFERENCE_DURATION, default 10)',
      '  --warmup S              after the startup read, before the window (BENCH_WARMUP, default 5)',
      '  --database URL          PostgreSQL (a database of its own is created and dropped); default',
      '                          DATABASE_URL, else PGlite',
      '  --cpu-prof DIR          V8 CPU profiles into DIR/{bare,reader,service}, summarised over each steady window (BENCH_CPU_PROF)',
      '  --log-level L           LOG_LEVEL of Ledgerhook (BENCH_LOG_LEVEL, default warn)',
      '',
    ]);
  }
  const databaseUrl = databaseUrlOption(values.database);
  return {
    pool: wholeNumberOption(values.pool, 'BENCH_POOL', 100_000, 1),
    rate: numberOption(values.rate, 'BENCH_RATE', 20, 0.1),
    stepMs: wholeNumberOption(values.step, 'BENCH_STEP', 100, 10),
    watched: wholeNumberOption(values.watched, 'BENCH_WATCHED', 1_000_000, 1),
    hitEvery: wholeNumberOption(values['hit-every'], 'BENCH_HIT_EVERY', 10, 1),
    pollMs: wholeNumberOption(values.poll, 'BENCH_POLL', 200, 10),
    durationSeconds: numberOption(values.duration, 'BENCH_DURATION', 60, 1),
    referenceSeconds: numberOption(values['reference-duration'], 'BENCH_REFERENCE_DURATION', 10, 1),
    warmupSeconds: numberOption(values.warmup, 'BENCH_WARMUP', 5, 0),
    databaseUrl,
    cpuProf: values['cpu-prof'] ?? process.env.BENCH_CPU_PROF,
    logLevel: logLevelOption(values['log-level']),
  };
}

/** The monotonic clock in µs: V8's CPU profiles stamp their samples with it, in every process of the host. */
const monotonicMicros = () => Number(process.hrtime.bigint() / 1000n);

// ---------------------------------------------------------------------------------------------
// The loopback Esplora node, over IPC

interface EsploraNode {
  server: Server;
  url: string;
  meanBodyBytes: number;
  generateSeconds: number;
  ask<E extends NodeMessage['ev']>(command: NodeCommand, answer: E): Promise<Extract<NodeMessage, { ev: E }>>;
  stats(): Promise<NodeStats>;
  cpu(): number | undefined;
}

function nextMessage<T extends { ev: string }, E extends T['ev']>(
  server: Server,
  ev: E,
  timeoutMs = 600_000,
): Promise<Extract<T, { ev: E }>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`${server.name}: no '${ev}' in ${timeoutMs / 1000} s:\n${server.tail()}`));
    }, timeoutMs);
    const onMessage = (message: T) => {
      if (message.ev !== ev) return;
      cleanup();
      resolve(message as Extract<T, { ev: E }>);
    };
    const onExit = () => {
      cleanup();
      reject(new Error(`${server.name} exited (code ${server.proc.exitCode}):\n${server.tail()}`));
    };
    const cleanup = () => {
      clearTimeout(timer);
      server.proc.off('message', onMessage);
      server.proc.off('exit', onExit);
    };
    server.proc.on('message', onMessage);
    server.proc.on('exit', onExit);
  });
}

async function startEsplora(options: Options): Promise<EsploraNode> {
  const env = cleanEnv({
    BENCH_MEMPOOL_POOL: String(options.pool),
    BENCH_MEMPOOL_RATE: String(options.rate),
    BENCH_MEMPOOL_STEP: String(options.stepMs),
    BENCH_MEMPOOL_WATCHED: String(options.watched),
    BENCH_MEMPOOL_HIT_EVERY: String(options.hitEvery),
  });
  const server = startServer('esplora node', ['bench/mempool-esplora.ts'], env, { ipc: true });
  const ready = await nextMessage<NodeMessage, 'ready'>(server, 'ready');
  const node: EsploraNode = {
    server,
    url: `http://127.0.0.1:${ready.port}`,
    meanBodyBytes: ready.meanBodyBytes,
    generateSeconds: ready.generateSeconds,
    ask(command, answer) {
      const reply = nextMessage<NodeMessage, typeof answer>(server, answer);
      server.proc.send(command);
      return reply;
    },
    async stats() {
      return (await node.ask({ cmd: 'stats' }, 'stats')).stats;
    },
    cpu: () => processCpuSeconds(server.proc.pid),
  };
  return node;
}

// ---------------------------------------------------------------------------------------------
// The receiver: in this process, so that arrival and entry times come from one clock

// ---------------------------------------------------------------------------------------------
// Clients of the node: the bare poller (reference) and Ledgerhook's reader alone

interface ClientRun {
  result: ClientResult;
  /** The node's CPU seconds over the client's steady window. */
  nodeCpuSeconds: number | undefined;
  /** When the steady window began and ended (epoch ms), and on the monotonic clock (µs) for its CPU profile. */
  window: [number, number];
  monotonic: [number, number];
}

async function runClient(node: EsploraNode, mode: 'bare' | 'reader', options: Options): Promise<ClientRun> {
  const server = startServer(
    `mempool client (${mode})`,
    [
      'bench/mempool-client.ts',
      mode,
      node.url,
      String(options.pollMs),
      String(options.referenceSeconds * 1000),
    ],
    cleanEnv({}),
    { ipc: true, nodeArgs: ['--expose-gc', ...cpuProfArgs(options.cpuProf, mode)] },
  );
  let nodeCpuStart: number | undefined;
  let nodeCpuSeconds: number | undefined;
  const window: [number, number] = [0, 0];
  const monotonic: [number, number] = [0, 0];
  server.proc.on('message', (message: ClientMessage) => {
    if (message.ev !== 'steady') return;
    const cpu = node.cpu();
    const i = message.phase === 'start' ? 0 : 1;
    window[i] = now();
    monotonic[i] = monotonicMicros();
    if (i === 0) nodeCpuStart = cpu;
    else nodeCpuSeconds = cpu !== undefined && nodeCpuStart !== undefined ? cpu - nodeCpuStart : undefined;
  });
  const { result } = await nextMessage<ClientMessage, 'result'>(server, 'result');
  // Disconnected, it exits by itself (writing its CPU profile); a signal would lose the profile.
  server.proc.disconnect();
  await Promise.race([server.exited, sleep(10_000)]);
  await stopServer(server);
  return { result, nodeCpuSeconds, window, monotonic };
}

// ---------------------------------------------------------------------------------------------
// The service

interface ServiceRun {
  uploadSeconds: number;
  /** Startup: the pool appears at once; until every transaction of it was read, and notified. */
  startupReadSeconds: number;
  startupNotifiedSeconds: number;
  startupWatched: number;
  startupNotified: number;
  /** The service's RSS before the pool appeared and once it had read it (MB). */
  rssBefore: number | undefined;
  rssAfter: number | undefined;
  /** …and at the end of the steady window. */
  rssEnd: number | undefined;
  windowSeconds: number;
  txRead: number;
  listRequests: number;
  serviceCpuSeconds: number | undefined;
  nodeCpuSeconds: number | undefined;
  postgresCpuSeconds: number | undefined;
  /** Watched transactions that entered during the window: latency of each notified, and those not notified. */
  latencies: number[];
  missing: number;
  duplicates: number;
  others: number;
  /** The window on the monotonic clock (µs), for the CPU profile. */
  monotonic: [number, number];
  backend: string;
}

function rssMegabytes(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const kb = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? undefined : Number(kb) / 1024;
  } catch {
    return undefined;
  }
}

async function until(
  what: string,
  server: Server,
  timeoutMs: number,
  check: () => Promise<boolean> | boolean,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (server.exitCode !== undefined)
      throw new Error(`${server.name} exited (code ${server.exitCode}):\n${server.tail()}`);
    if (Date.now() > deadline) throw new Error(`${what}: not in ${timeoutMs / 1000} s\n${server.tail()}`);
    await sleep(20);
  }
}

async function runService(
  node: EsploraNode,
  receiver: TimingReceiver,
  addresses: string[],
  options: Options,
): Promise<ServiceRun> {
  await node.ask({ cmd: 'close' }, 'closed');
  const scratch = await createScratchDatabaseIfUrl(options.databaseUrl, 'mempool');
  try {
    const port = await freePort();
    const dataDir = makeTempDir('ledgerhook-bench-mempool-');
    const env = cleanEnv({
      PORT: String(port),
      LEDGERHOOK_DATA_DIR: dataDir,
      [`LEDGERHOOK_RPC_${NETWORK}`]: node.url,
      LEDGERHOOK_ALLOW_CIDRS: '127.0.0.0/8',
      LEDGERHOOK_WATCH_POLL_INTERVAL: `${options.pollMs}ms`,
      LEDGERHOOK_RATE_LIMIT: 'off',
      LOG_LEVEL: options.logLevel,
      ...ledgerhookDatabaseEnv(scratch?.url, 'ledgerhook-bench-mempool'),
    });
    const nodeArgs = cpuProfArgs(options.cpuProf, 'service');
    const server = startServer('ledgerhook', ['src/main.ts', 'serve'], env, { nodeArgs });
    try {
      const base = `http://127.0.0.1:${port}`;
      await waitUntilServing(server, `${base}/healthz`);
      const backend = backendOfDataDir(dataDir);
      const token = await serverToken(server, env);
      process.stdout.write(
        `  service (${backend}): creating ${grouped(addresses.length)} watched addresses... `,
      );
      const uploadStart = now();
      for (let start = 0; start < addresses.length; start += LIST_SIZE) {
        const created = await apiCall(base, token, 'POST', '/api/v1/subscription', {
          type: 'ADDRESS_TRANSACTION',
          attr: { addresses: addresses.slice(start, start + LIST_SIZE), chain: NETWORK, url: receiver.url },
          mempool: true,
        });
        if (created.status !== 201)
          throw new Error(`creating a subscription: HTTP ${created.status} ${JSON.stringify(created.body)}`);
      }
      const uploadSeconds = (now() - uploadStart) / 1000;
      process.stdout.write(`${fixed(uploadSeconds, 1)} s\n`);

      // Following: the follower at the node's tip, and the mempool watcher polling (the empty pool).
      await until('the BTC follower at the tip', server, 60_000, async () => {
        const ready = (await (await fetch(`${base}/readyz`)).json()) as {
          networks?: { network: string; height: number | null }[];
        };
        return (ready.networks?.find((n) => n.network === NETWORK)?.height ?? null) !== null;
      });
      const listed = (await node.stats()).listRequests;
      await until('the mempool watcher polling', server, 30_000, async () => {
        return (await node.stats()).listRequests >= listed + 2;
      });

      // Startup: the whole pool appears at once, as to a service starting beside a full node.
      const rssBefore = rssMegabytes(server.proc.pid);
      const opened = await node.ask({ cmd: 'open' }, 'opened');
      const startupWatched = new Set(opened.watched);
      process.stdout.write(
        `  service: startup, ${grouped((await node.stats()).pool)} transactions appear at once ` +
          `(${grouped(startupWatched.size)} pay watched addresses)... `,
      );
      let readAt: number | null = null;
      let progress = '';
      await until('the service reading the whole pool', server, 180_000, async () => {
        const stats = await node.stats();
        readAt = stats.startupDoneAt;
        progress = `${grouped(stats.startupRemaining)} not read yet; ${grouped(stats.txServed)} /tx answered, ${grouped(stats.txNotFound)} 404`;
        return readAt !== null;
      }).catch((err: Error) => {
        throw new Error(`${err.message}\n${progress}`);
      });
      const startupReadSeconds = (readAt! - opened.at) / 1000;
      // Then its notifications: all of them, or none more for 3 s (one that left the pool unread).
      let last = -1;
      let quietSince = now();
      await until('the startup notifications', server, 300_000, () => {
        const count = [...startupWatched].filter((txid) => receiver.arrivals.has(txid)).length;
        if (count !== last) {
          last = count;
          quietSince = now();
        }
        return count === startupWatched.size || now() - quietSince > 3_000;
      });
      let lastArrival = opened.at;
      for (const txid of startupWatched)
        lastArrival = Math.max(lastArrival, receiver.arrivals.get(txid) ?? 0);
      const startupNotifiedSeconds = (lastArrival - opened.at) / 1000;
      const rssAfter = rssMegabytes(server.proc.pid);
      process.stdout.write(
        `read in ${fixed(startupReadSeconds, 1)} s, ${grouped(last)} notified in ${fixed(startupNotifiedSeconds, 1)} s\n`,
      );

      await sleep(options.warmupSeconds * 1000);
      process.stdout.write(`  service: steady window of ${options.durationSeconds} s... `);
      const duplicatesBefore = receiver.duplicates;
      const othersBefore = receiver.others;
      const statsBefore = await node.stats();
      const cpuBefore = processCpuSeconds(server.proc.pid);
      const nodeCpuBefore = node.cpu();
      const pgBefore =
        backend === 'postgres' && isLoopback(options.databaseUrl!) ? commCpuSeconds('postgres') : undefined;
      const monotonicStart = monotonicMicros();
      const windowStart = now();
      await sleep(options.durationSeconds * 1000);
      const windowEnd = now();
      const monotonicEnd = monotonicMicros();
      const pgAfter = pgBefore ? commCpuSeconds('postgres') : undefined;
      const rssEnd = rssMegabytes(server.proc.pid);
      const nodeCpuAfter = node.cpu();
      const cpuAfter = processCpuSeconds(server.proc.pid);
      const statsAfter = await node.stats();

      // The notifications of what entered during the window, given time to arrive.
      const { list } = await node.ask(
        { cmd: 'appearances', from: windowStart, to: windowEnd },
        'appearances',
      );
      const watched = list.filter(([, , w]) => w);
      const drainMs = 10_000 + 5 * options.pollMs;
      await until('the window notifications', server, drainMs + 1_000, () => {
        return watched.every(([txid]) => receiver.arrivals.has(txid)) || now() - windowEnd > drainMs;
      });
      const latencies: number[] = [];
      for (const [txid, at] of watched) {
        const arrived = receiver.arrivals.get(txid);
        if (arrived !== undefined) latencies.push(arrived - at);
      }
      const delta = (a: number | undefined, b: number | undefined) =>
        a === undefined || b === undefined ? undefined : b - a;
      const sorted = [...latencies].sort((a, b) => a - b);
      process.stdout.write(
        `${grouped(statsAfter.txServed - statsBefore.txServed)} read, ${latencies.length} notified: ` +
          `p50 ${fixed(quantile(sorted, 0.5), 0)} ms, p99 ${fixed(quantile(sorted, 0.99), 0)} ms\n`,
      );
      return {
        uploadSeconds,
        startupReadSeconds,
        startupNotifiedSeconds,
        startupWatched: startupWatched.size,
        startupNotified: last,
        rssBefore,
        rssAfter,
        rssEnd,
        windowSeconds: (windowEnd - windowStart) / 1000,
        txRead: statsAfter.txServed - statsBefore.txServed,
        listRequests: statsAfter.listRequests - statsBefore.listRequests,
        serviceCpuSeconds: delta(cpuBefore, cpuAfter),
        nodeCpuSeconds: delta(nodeCpuBefore, nodeCpuAfter),
        postgresCpuSeconds: commCpuDelta(pgBefore, pgAfter),
        latencies,
        missing: watched.length - latencies.length,
        duplicates: receiver.duplicates - duplicatesBefore,
        others: receiver.others - othersBefore,
        monotonic: [monotonicStart, monotonicEnd],
        backend,
      };
    } finally {
      await stopServer(server);
    }
  } finally {
    await scratch?.drop();
  }
}

// ---------------------------------------------------------------------------------------------
// CPU profile: self time by function over the steady window

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

function profileSummary(dir: string, window: [number, number], top: number): string[] {
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')) : [];
  const threads: { file: string; total: number; busy: number; rows: [string, number][] }[] = [];
  for (const file of files) {
    const profile = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')) as CpuProfile;
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    const self = new Map<string, number>();
    let t = profile.startTime;
    let total = 0;
    let idle = 0;
    profile.samples.forEach((id, i) => {
      const dt = profile.timeDeltas[i] ?? 0;
      t += dt;
      if (t < window[0] || t > window[1]) return;
      const frame = byId.get(id)!.callFrame;
      total += dt;
      if (frame.functionName === '(idle)') {
        idle += dt;
        return;
      }
      const where = frame.url ? `${path.basename(frame.url)}:${frame.lineNumber + 1}` : '';
      const key = `${frame.functionName || '(anonymous)'}${where ? ` ${where}` : ''}`;
      self.set(key, (self.get(key) ?? 0) + dt);
    });
    if (total === 0) continue;
    const rows = [...self].sort((a, b) => b[1] - a[1]).slice(0, top);
    threads.push({ file, total, busy: total - idle, rows });
  }
  const out: string[] = [];
  for (const thread of threads.sort((a, b) => b.busy - a.busy)) {
    if (thread.busy / thread.total < 0.01) continue; // an idle thread (a client's, the logger's)
    out.push(
      `  ${thread.file}: busy ${fixed((thread.busy / thread.total) * 100, 1)}% of the window; self time, share of busy:`,
    );
    for (const [name, micros] of thread.rows)
      out.push(`    ${fixed((micros / thread.busy) * 100, 1).padStart(5)}%  ${name}`);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The run

const micros = (seconds: number | undefined, count: number) =>
  seconds === undefined || count === 0 ? '-' : fixed((seconds * 1e6) / count, 0);

function perTracked(a: Memory, b: Memory, count: number): [string, string] {
  return [fixed((a.heapUsed - b.heapUsed) / count, 0), fixed((a.rss - b.rss) / count, 0)];
}

/**
 * Entry → read (reference clients: when the poll that read it ended), over what entered in the window
 * up to a second before its end (so that every one had its chance to be read in it).
 */
function clientLatencies(run: ClientRun, list: Appearance[]): number[] {
  const read = new Map(run.result.reads);
  const out: number[] = [];
  for (const [txid, at] of list) {
    if (at > run.window[1] - 1_000) continue;
    const r = read.get(txid);
    if (r !== undefined) out.push(r - at);
  }
  return out;
}

function latencyRow(label: string, latencies: number[], missing: number | string): string[] {
  const sorted = [...latencies].sort((a, b) => a - b);
  const mean = sorted.reduce((s, x) => s + x, 0) / sorted.length;
  return [
    label,
    String(sorted.length),
    String(missing),
    fixed(quantile(sorted, 0.5), 0),
    fixed(quantile(sorted, 0.9), 0),
    fixed(quantile(sorted, 0.99), 0),
    fixed(sorted[sorted.length - 1] ?? Number.NaN, 0),
    fixed(mean, 0),
  ];
}

async function main(): Promise<void> {
  const options = readOptions();
  const started = now();
  const backendLine = options.databaseUrl ? `PostgreSQL (${redact(options.databaseUrl)})` : 'PGlite';
  process.stdout.write(
    `bench:mempool: ${backendLine}; pool ${grouped(options.pool)}, ${options.rate}/s in and out ` +
      `(${fixed((options.rate * options.stepMs) / 1000, 1)} every ${options.stepMs} ms), ${grouped(options.watched)} ` +
      `watched addresses, 1 in ${options.hitEvery} new transactions pays one; poll ${options.pollMs} ms; ${machineLine()}\n`,
  );
  process.stdout.write(`  generating the node's pool and ${grouped(options.watched)} watched addresses... `);
  const nodeStarting = startEsplora(options);
  nodeStarting.catch(() => {});
  const addressStart = now();
  const addresses = watchedAddresses(options.watched);
  const addressSeconds = (now() - addressStart) / 1000;
  const node = await nodeStarting;
  onCleanup(() => stopServer(node.server));
  process.stdout.write(
    `pool ${fixed(node.generateSeconds, 1)} s (${fixed(node.meanBodyBytes, 0)} bytes of JSON a transaction), ` +
      `addresses ${fixed(addressSeconds, 1)} s\n`,
  );
  // Pending notifications are timed; nothing else is expected (no block is ever found).
  const receiver = await startTimingReceiver((body) => body.mempool === true && body.dropped !== true);

  process.stdout.write(
    `  bare poller (reference): whole pool, then ${options.referenceSeconds} s steady... `,
  );
  const bare = await runClient(node, 'bare', options);
  process.stdout.write(
    `${fixed(bare.result.startupSeconds, 1)} s, ${grouped(bare.result.steadyRead)} read\n`,
  );
  process.stdout.write(`  reader alone: whole pool, then ${options.referenceSeconds} s steady, memory... `);
  const reader = await runClient(node, 'reader', options);
  process.stdout.write(
    `${fixed(reader.result.startupSeconds, 1)} s, ${grouped(reader.result.steadyRead)} read\n`,
  );
  const bareList = (
    await node.ask({ cmd: 'appearances', from: bare.window[0], to: bare.window[1] }, 'appearances')
  ).list;
  const readerList = (
    await node.ask({ cmd: 'appearances', from: reader.window[0], to: reader.window[1] }, 'appearances')
  ).list;

  const service = await runService(node, receiver, addresses, options);

  // Tables
  const clientRow = (label: string, run: ClientRun, reference: ClientRun): string[] => {
    const r = run.result;
    const per = (r.steadyCpuSeconds * 1e6) / r.steadyRead;
    const ref = (reference.result.steadyCpuSeconds * 1e6) / reference.result.steadyRead;
    return [
      label,
      grouped(r.steadyRead),
      String(r.steadyPolls),
      fixed((r.steadyCpuSeconds / r.steadySeconds) * 100, 1),
      fixed((r.steadyCpuSeconds * 1e3) / r.steadyPolls, 2),
      fixed(per, 0),
      fixed(per / ref, 2),
      micros(run.nodeCpuSeconds, r.steadyRead),
    ];
  };
  const serviceCpuPer =
    service.serviceCpuSeconds === undefined ? Number.NaN : (service.serviceCpuSeconds * 1e6) / service.txRead;
  const bareCpuPer = (bare.result.steadyCpuSeconds * 1e6) / bare.result.steadyRead;
  const cpuRows = [
    clientRow('bare poller: undici + JSON.parse (reference)', bare, bare),
    clientRow("Ledgerhook's pool reader alone", reader, bare),
    [
      `Ledgerhook service (${service.backend}): reader, watcher, database, delivery`,
      grouped(service.txRead),
      String(service.listRequests),
      service.serviceCpuSeconds === undefined
        ? '-'
        : fixed((service.serviceCpuSeconds / service.windowSeconds) * 100, 1),
      service.serviceCpuSeconds === undefined
        ? '-'
        : fixed((service.serviceCpuSeconds * 1e3) / service.listRequests, 2),
      fixed(serviceCpuPer, 0),
      fixed(serviceCpuPer / bareCpuPer, 2),
      micros(service.nodeCpuSeconds, service.txRead),
    ],
  ];
  if (service.postgresCpuSeconds !== undefined) {
    const per = (service.postgresCpuSeconds * 1e6) / service.txRead;
    cpuRows.push([
      '  PostgreSQL, same window',
      '-',
      '-',
      fixed((service.postgresCpuSeconds / service.windowSeconds) * 100, 1),
      fixed((service.postgresCpuSeconds * 1e3) / service.listRequests, 2),
      fixed(per, 0),
      fixed(per / bareCpuPer, 2),
      '-',
    ]);
  }
  const mem = reader.result.memory!;
  const [heapReset, rssReset] = perTracked(mem.holding, mem.none, mem.tracked);
  const [heapBefore, rssBefore] = perTracked(mem.holding, mem.before, mem.tracked);
  const [setHeap, setRss] = perTracked(mem.txidSet, mem.setBefore, mem.txidSetSize);
  const serviceRssPer =
    service.rssBefore === undefined || service.rssAfter === undefined
      ? '-'
      : fixed(((service.rssAfter - service.rssBefore) * 1024 * 1024) / options.pool, 0);
  const bareLat = clientLatencies(bare, bareList);
  const readerLat = clientLatencies(reader, readerList);
  const sortedService = [...service.latencies].sort((a, b) => a - b);
  const totalSeconds = (now() - started) / 1000;

  const lines = [
    '',
    `CPU per new pool transaction (steady: ${options.rate}/s entering a pool of ${grouped(options.pool)}; every client polls ` +
      `/mempool/txids ${options.pollMs} ms after its last poll ended and fetches each new /tx/:txid once, 8 at a time)`,
    formatTable(
      [
        'who',
        'new txs read',
        'polls',
        'cpu % of a core',
        'cpu ms per poll',
        'cpu µs per new tx',
        'ratio to bare',
        "node's cpu µs per new tx",
      ],
      cpuRows,
    ),
    `windows: bare ${fixed(bare.result.steadySeconds, 1)} s, reader ${fixed(reader.result.steadySeconds, 1)} s, service ` +
      `${fixed(service.windowSeconds, 1)} s; service cpu is the whole process (/proc: its main thread, ` +
      `${service.backend === 'pglite' ? "PGlite's worker thread, " : ''}the dispatcher), the clients' their own process.cpuUsage.`,
    '',
    `Memory per tracked transaction (the reader alone, gc forced before each reading; ${grouped(mem.tracked)} tracked)`,
    formatTable(
      ['what', 'heap bytes per tx', 'rss bytes per tx'],
      [
        ['reader holding the pool, less after its reset()', heapReset, `(${rssReset})`],
        ['reader holding the pool, less before its first poll', heapBefore, rssBefore],
        ["a bare Set of the pool's txids from JSON.parse, less before it (reference)", setHeap, setRss],
        [
          "the service's RSS after its startup read, less before (no gc; notifications too)",
          '-',
          serviceRssPer,
        ],
      ],
    ),
    `mean Esplora JSON of a transaction: ${fixed(node.meanBodyBytes, 0)} bytes (what keeping transactions whole would start from). ` +
      'RSS in parentheses: freed pages are not returned at once, so RSS barely falls after reset().',
    '',
    `Entry into the node's pool → pending notification at the receiver (ms; poll interval ${options.pollMs} ms, ` +
      `LEDGERHOOK_WATCH_POLL_INTERVAL=${options.pollMs}ms; the default 2 s would make it poll-bound)`,
    formatTable(
      ['who', 'txs', 'missing', 'p50', 'p90', 'p99', 'max', 'mean'],
      [
        latencyRow('bare poller: entry → the poll that read it ended (reference)', bareLat, '-'),
        latencyRow('reader alone: entry → its poll returned', readerLat, '-'),
        latencyRow(
          `service (${service.backend}): entry → notification received`,
          service.latencies,
          service.missing,
        ),
      ],
    ),
    `service: ${service.latencies.length} watched transactions entered in the ${fixed(service.windowSeconds, 0)} s window ` +
      `(p99 of n=${sortedService.length} is its ${Math.ceil(0.99 * sortedService.length)}th); duplicates ${service.duplicates}, ` +
      `other notifications ${service.others} (none expected: nothing is mined or replaced).`,
    '',
    `Startup: the pool of ${grouped(options.pool)} appears at once (the reader reads at most 5,000 new transactions a poll)`,
    formatTable(
      ['who', 'polls', 'seconds'],
      [
        [
          'bare poller: whole pool read (reference)',
          String(bare.result.startupPolls),
          fixed(bare.result.startupSeconds, 1),
        ],
        [
          'reader alone: whole pool read',
          String(reader.result.startupPolls),
          fixed(reader.result.startupSeconds, 1),
        ],
        [
          `service (${service.backend}): whole pool read (node: last /tx fetched)`,
          '-',
          fixed(service.startupReadSeconds, 1),
        ],
        [
          `service: its ${grouped(service.startupNotified)} of ${grouped(service.startupWatched)} pending notifications received`,
          '-',
          fixed(service.startupNotifiedSeconds, 1),
        ],
      ],
    ),
    `set-up: ${grouped(options.watched)} watched addresses created in ${fixed(service.uploadSeconds, 1)} s ` +
      `(${Math.ceil(options.watched / LIST_SIZE)} lists); service RSS ${fixed(service.rssBefore ?? Number.NaN, 0)} MB ` +
      `before the pool, ${fixed(service.rssAfter ?? Number.NaN, 0)} MB once read, ` +
      `${fixed(service.rssEnd ?? Number.NaN, 0)} MB at the window's end; the whole run ${fixed(totalSeconds, 0)} s.`,
    'The pool is synthetic (bench/mempool-synthetic.ts): P2WPKH transactions built with bitcoinjs-lib from random bytes.',
  ];
  if (options.cpuProf) {
    lines.push('', `CPU profiles over each steady window (${options.cpuProf}), self time by function:`);
    lines.push('bare poller:', ...profileSummary(path.join(options.cpuProf, 'bare'), bare.monotonic, 6));
    lines.push('reader alone:', ...profileSummary(path.join(options.cpuProf, 'reader'), reader.monotonic, 8));
    lines.push('service:', ...profileSummary(path.join(options.cpuProf, 'service'), service.monotonic, 15));
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

runMain('bench:mempool', main); // cleans up: stops the node and Ledgerhook, removes temp dirs, drops databases
