// API benchmark (DESIGN.md section 11): requests per second and latency for registry create and
// registry get, against fastify's hello world measured in the same run on the same machine.
// The load generator (autocannon) runs here; each server runs as its own child process, one at a time.
// Usage: npm run bench:api [-- --duration 10 --warmup 2 --connections 10 --log-level warn]
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import autocannon from 'autocannon';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TOKEN = /lh_[A-Za-z0-9_-]{32}/;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
/** Used on PostgreSQL when LEDGERHOOK_MASTER_KEY is unset, so repeated runs on one database agree. */
const BENCH_MASTER_KEY = crypto.createHash('sha256').update('ledgerhook-bench-api').digest('hex');

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  duration: number;
  warmup: number;
  connections: number;
  logLevel: string;
  databaseUrl: string | undefined;
}

function readOptions(): Options {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      'log-level': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(
      [
        'Usage: npm run bench:api [-- options]',
        '  --duration S      seconds measured per route (BENCH_DURATION, default 10)',
        '  --warmup S        seconds of unmeasured load before each route (BENCH_WARMUP, default 2)',
        '  --connections N   concurrent connections (BENCH_CONNECTIONS, default 10)',
        '  --log-level L     LOG_LEVEL of both servers (BENCH_LOG_LEVEL, default warn)',
        'DATABASE_URL set: Ledgerhook runs on that PostgreSQL; otherwise on embedded PGlite.',
        '',
      ].join('\n'),
    );
    process.exit(0);
  }
  const num = (flag: string | undefined, env: string, fallback: number, min: number): number => {
    const raw = flag ?? process.env[env];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value < min)
      throw new Error(`${env} must be a number >= ${min}, got "${raw}"`);
    return value;
  };
  const logLevel = values['log-level'] ?? process.env.BENCH_LOG_LEVEL ?? 'warn';
  if (!LOG_LEVELS.includes(logLevel)) throw new Error(`log level must be one of ${LOG_LEVELS.join(', ')}`);
  return {
    duration: num(values.duration, 'BENCH_DURATION', 10, 1),
    warmup: num(values.warmup, 'BENCH_WARMUP', 2, 0),
    connections: Math.floor(num(values.connections, 'BENCH_CONNECTIONS', 10, 1)),
    logLevel,
    databaseUrl: process.env.DATABASE_URL?.trim() || undefined,
  };
}

// ---------------------------------------------------------------------------------------------
// Child processes

interface Server {
  name: string;
  proc: ChildProcess;
  /** The first API token seen on stdout. */
  token: string | undefined;
  /** The last lines of stdout and stderr, for error reports. */
  tail(): string;
  exitCode: number | null | undefined;
  exited: Promise<void>;
}

const running = new Set<ChildProcess>();
const tempDirs = new Set<string>();

/** Kills the servers still running and removes the temporary data directories, synchronously. */
function cleanUp(): void {
  for (const proc of running) {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  }
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}
process.on('exit', cleanUp);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => process.exit(130));
}

function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of [
    'DATABASE_URL',
    'LEDGERHOOK_DATA_DIR',
    'LEDGERHOOK_MASTER_KEY',
    'PORT',
    'HOST',
    'LOG_LEVEL',
  ])
    delete env[name];
  return { ...env, HOST: '127.0.0.1', ...extra };
}

function startServer(name: string, args: string[], env: NodeJS.ProcessEnv): Server {
  const proc = spawn(process.execPath, ['--import', 'tsx', ...args], {
    cwd: ROOT,
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  running.add(proc);
  const lines: string[] = [];
  const keep = (line: string) => {
    lines.push(line);
    if (lines.length > 40) lines.shift();
  };
  const server: Server = {
    name,
    proc,
    token: undefined,
    tail: () => lines.join('\n'),
    exitCode: undefined,
    exited: new Promise((resolve) => {
      proc.on('exit', (code, signal) => {
        server.exitCode = code ?? (signal ? -1 : null);
        running.delete(proc);
        resolve();
      });
    }),
  };
  readline.createInterface({ input: proc.stdout! }).on('line', (line) => {
    if (server.token === undefined) server.token = TOKEN.exec(line)?.[0];
    keep(line);
  });
  readline.createInterface({ input: proc.stderr! }).on('line', keep);
  return server;
}

async function stopServer(server: Server): Promise<void> {
  if (server.exitCode !== undefined) return;
  server.proc.kill('SIGTERM');
  const timer = setTimeout(() => server.proc.kill('SIGKILL'), 10_000);
  await server.exited;
  clearTimeout(timer);
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** Polls `url` until it answers 200; fails at once if the server process exits. */
async function waitUntilServing(server: Server, url: string, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (server.exitCode !== undefined) {
      throw new Error(`${server.name} exited (code ${server.exitCode}) before serving:\n${server.tail()}`);
    }
    try {
      const res = await fetch(url);
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline)
      throw new Error(`${server.name} did not serve ${url} in time:\n${server.tail()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** CPU seconds (user + system) used so far by `pid`, or undefined where /proc is unavailable. */
const CLOCK_TICKS = 100; // USER_HZ, 100 on Linux for all mainstream architectures
function processCpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Measurement

interface Target {
  label: string;
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  expectStatus: number;
}

interface Row {
  label: string;
  reqPerSec: number;
  p50: number;
  p99: number;
  /** Responses with the expected status. */
  ok: number;
  /** Other responses, connection errors and timeouts, by kind. */
  unexpected: Record<string, number>;
  unexpectedTotal: number;
  /** Percent of one core used by the server process (its database included on PGlite). */
  serverCpu: number | undefined;
  /** Percent of one core used by this process (autocannon). */
  clientCpu: number;
  /** Latencies (ms) of the responses with the expected status, sorted. */
  samples: Float64Array;
}

/** Two runs of one route as one row: mean req/s and cpu, percentiles over all their samples. */
function combine(label: string, a: Row, b: Row): Row {
  const samples = new Float64Array(a.samples.length + b.samples.length);
  samples.set(a.samples);
  samples.set(b.samples, a.samples.length);
  samples.sort();
  const unexpected: Record<string, number> = { ...a.unexpected };
  for (const [kind, n] of Object.entries(b.unexpected)) unexpected[kind] = (unexpected[kind] ?? 0) + n;
  return {
    label,
    reqPerSec: (a.reqPerSec + b.reqPerSec) / 2,
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    ok: a.ok + b.ok,
    unexpected,
    unexpectedTotal: a.unexpectedTotal + b.unexpectedTotal,
    serverCpu:
      a.serverCpu !== undefined && b.serverCpu !== undefined ? (a.serverCpu + b.serverCpu) / 2 : undefined,
    clientCpu: (a.clientCpu + b.clientCpu) / 2,
    samples,
  };
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function measure(target: Target, options: Options, server: Server): Promise<Row> {
  const load = {
    url: target.url,
    method: target.method ?? 'GET',
    connections: options.connections,
    headers: target.headers ?? {},
    ...(target.body !== undefined ? { body: target.body } : {}),
  };
  if (options.warmup > 0) {
    process.stdout.write(`  ${target.label}: ${options.warmup} s warm-up`);
    await autocannon({ ...load, duration: options.warmup });
    process.stdout.write(`, ${options.duration} s measured...`);
  } else {
    process.stdout.write(`  ${target.label}: ${options.duration} s measured...`);
  }

  // autocannon's own latency histogram keeps whole milliseconds; record the exact times instead.
  let latencies = new Float64Array(1 << 16);
  let count = 0;
  const serverCpu0 = processCpuSeconds(server.proc.pid);
  const clientCpu0 = process.cpuUsage();
  const t0 = performance.now();
  const run = autocannon({ ...load, duration: options.duration });
  run.on('response', (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
    if (Number(statusCode) !== target.expectStatus) return;
    if (count === latencies.length) {
      const grown = new Float64Array(latencies.length * 2);
      grown.set(latencies);
      latencies = grown;
    }
    latencies[count++] = responseTime;
  });
  const result = await run;
  const seconds = (performance.now() - t0) / 1000;
  const serverCpu1 = processCpuSeconds(server.proc.pid);
  const clientCpu = process.cpuUsage(clientCpu0);

  const sorted = latencies.subarray(0, count).sort();
  const unexpected: Record<string, number> = {};
  for (const [status, { count: n }] of Object.entries(result.statusCodeStats)) {
    if (Number(status) !== target.expectStatus) unexpected[`HTTP ${status}`] = n;
  }
  if (result.errors > 0) unexpected['connection errors'] = result.errors;
  if (result.timeouts > 0) unexpected.timeouts = result.timeouts;
  const unexpectedTotal = Object.values(unexpected).reduce((a, b) => a + b, 0);
  const responses = Object.values(result.statusCodeStats).reduce((sum, { count: n }) => sum + n, 0);
  const row: Row = {
    label: target.label,
    // Over the elapsed time: autocannon sometimes runs one sample interval past `duration`.
    reqPerSec: responses / seconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    ok: count,
    unexpected,
    unexpectedTotal,
    serverCpu:
      serverCpu0 !== undefined && serverCpu1 !== undefined
        ? ((serverCpu1 - serverCpu0) / seconds) * 100
        : undefined,
    clientCpu: ((clientCpu.user + clientCpu.system) / 1e6 / seconds) * 100,
    samples: sorted,
  };
  process.stdout.write(
    ` ${Math.round(row.reqPerSec)} req/s, ${count} x ${target.expectStatus} in ${seconds.toFixed(1)} s` +
      (unexpectedTotal > 0 ? `, ${unexpectedTotal} unexpected: ${JSON.stringify(unexpected)}` : '') +
      '\n',
  );
  if (count === 0 || unexpectedTotal > count) {
    throw new Error(
      `${target.label}: most requests failed (${count} x ${target.expectStatus}, ${JSON.stringify(unexpected)}); server output:\n${server.tail()}`,
    );
  }
  return row;
}

/** One request outside the load, to fail with a readable message before measuring. */
async function preflight(target: Target): Promise<string> {
  const res = await fetch(target.url, {
    method: target.method ?? 'GET',
    headers: target.headers ?? {},
    ...(target.body !== undefined ? { body: target.body } : {}),
  });
  const text = await res.text();
  if (res.status !== target.expectStatus) {
    throw new Error(`${target.label}: expected HTTP ${target.expectStatus}, got ${res.status}: ${text}`);
  }
  return text;
}

// ---------------------------------------------------------------------------------------------
// The run

/** A realistic create: a document registry with five typed metadata items, stored unencrypted. */
const CREATE_BODY = JSON.stringify({
  title: 'Invoice 2026-0042',
  description: 'Supplier invoice for Q3 hosting, approved by finance',
  folder_id: 'bench-invoices',
  template: 'STORAGE',
  metadata: [
    { type: 'TEXT', key: 'supplier', title: 'Supplier', value: 'Northwind Hosting GmbH' },
    { type: 'NUMBER', key: 'amount', title: 'Amount (EUR)', value: '12480.50' },
    { type: 'DATE', key: 'due', title: 'Due date', value: '2026-11-21' },
    { type: 'EMAIL', key: 'contact', title: 'Billing contact', value: 'billing@northwind.example' },
    {
      type: 'URL',
      key: 'document',
      title: 'Original PDF',
      value: 'https://files.example.com/inv/2026-0042.pdf',
    },
  ],
});

function redact(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '(unparseable DATABASE_URL)';
  }
}

async function createToken(env: NodeJS.ProcessEnv): Promise<string> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', 'src/main.ts', 'token', 'create', '--account', 'bench'],
    { cwd: ROOT, env },
  );
  const token = TOKEN.exec(stdout)?.[0];
  if (!token) throw new Error(`ledgerhook token create printed no token:\n${stdout}`);
  return token;
}

async function benchHello(options: Options, label: string): Promise<Row> {
  const port = await freePort();
  const server = startServer(
    'hello-world server',
    ['bench/hello-server.ts'],
    cleanEnv({ PORT: String(port), LOG_LEVEL: options.logLevel, EXIT_WITH_STDIN: '1' }),
  );
  try {
    const url = `http://127.0.0.1:${port}/`;
    await waitUntilServing(server, url);
    const target: Target = { label, url, expectStatus: 200 };
    await preflight(target);
    return await measure(target, options, server);
  } finally {
    await stopServer(server);
  }
}

async function benchLedgerhook(options: Options, dataDir: string): Promise<{ rows: Row[]; backend: string }> {
  const port = await freePort();
  const env = cleanEnv({
    LEDGERHOOK_DATA_DIR: dataDir,
    PORT: String(port),
    LOG_LEVEL: options.logLevel,
    ...(options.databaseUrl
      ? {
          DATABASE_URL: options.databaseUrl,
          LEDGERHOOK_MASTER_KEY: process.env.LEDGERHOOK_MASTER_KEY?.trim() || BENCH_MASTER_KEY,
        }
      : {}),
  });
  const server = startServer('ledgerhook', ['src/main.ts', 'serve'], env);
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitUntilServing(server, `${base}/healthz`);
    // The first start of a database prints the default account's token before listening; a
    // database that already has accounts (PostgreSQL used before) prints none, so issue one.
    const printDeadline = Date.now() + 1_000;
    while (server.token === undefined && Date.now() < printDeadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const token = server.token ?? (await createToken(env));
    // PGlite keeps its files under the data directory; PostgreSQL leaves it holding only master.key.
    const backend = fs.existsSync(path.join(dataDir, 'pglite')) ? 'pglite' : 'postgres';
    if ((backend === 'postgres') !== (options.databaseUrl !== undefined)) {
      throw new Error(
        `expected Ledgerhook on ${options.databaseUrl ? 'postgres' : 'pglite'}, found ${backend}`,
      );
    }

    const auth = { authorization: `Bearer ${token}` };
    const create: Target = {
      label: 'registry create',
      url: `${base}/api/v1/registry/create`,
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: CREATE_BODY,
      expectStatus: 201,
    };
    const created = JSON.parse(await preflight(create)) as { data: { id: string } };
    const get: Target = {
      label: 'registry get',
      url: `${base}/api/v1/registry/${created.data.id}`,
      headers: auth,
      expectStatus: 200,
    };
    await preflight(get);
    const rows = [await measure(create, options, server), await measure(get, options, server)];
    return { rows, backend };
  } finally {
    await stopServer(server);
  }
}

function formatTable(rows: Row[], reference: Row): string {
  const fixed = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : '-');
  const header = [
    'route',
    'req/s',
    'p50 ms',
    'p99 ms',
    'ratio to hello-world',
    'server cpu',
    'bench cpu',
    'unexpected',
  ];
  const body = rows.map((r) => [
    r.label,
    Math.round(r.reqPerSec).toString(),
    fixed(r.p50, 2),
    fixed(r.p99, 2),
    fixed(r.reqPerSec / reference.reqPerSec, 3),
    r.serverCpu === undefined ? '-' : `${Math.round(r.serverCpu)}%`,
    `${Math.round(r.clientCpu)}%`,
    r.unexpectedTotal.toString(),
  ]);
  const table = [header, ...body];
  const widths = header.map((_, i) => Math.max(...table.map((cells) => cells[i]!.length)));
  return table
    .map((cells) =>
      cells
        .map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

async function main(): Promise<void> {
  const options = readOptions();
  const backendWanted = options.databaseUrl ? `postgres (${redact(options.databaseUrl)})` : 'pglite';
  const estimate = 4 * (options.warmup + options.duration);
  process.stdout.write(
    `bench:api: ${backendWanted}; ${options.connections} connections, ${options.warmup} s warm-up + ${options.duration} s measured per route (~${estimate} s of load); ` +
      `${os.cpus().length} CPUs, load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}\n`,
  );

  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-bench-'));
  tempDirs.add(dataDir);
  try {
    // The reference brackets the Ledgerhook routes: its two runs differing much means the machine
    // was busy with something else meanwhile, and the ratios are only as good as that spread.
    const before = await benchHello(options, 'hello-world (before)');
    const { rows, backend } = await benchLedgerhook(options, dataDir);
    const after = await benchHello(options, 'hello-world (after)');
    const hello = combine('hello-world (reference)', before, after);
    const spread = Math.abs(before.reqPerSec - after.reqPerSec) / hello.reqPerSec;
    const unexpected = [hello, ...rows].filter((r) => r.unexpectedTotal > 0);
    process.stdout.write(
      [
        '',
        `backend: ${backend}${options.databaseUrl ? ` (${redact(options.databaseUrl)})` : ' (embedded)'}`,
        `connections: ${options.connections}, duration: ${options.duration} s per route after ${options.warmup} s warm-up, server LOG_LEVEL: ${options.logLevel}`,
        formatTable([hello, ...rows], hello),
        `reference: mean of hello-world before (${Math.round(before.reqPerSec)} req/s) and after (${Math.round(after.reqPerSec)} req/s) the Ledgerhook routes, ` +
          `spread ${(spread * 100).toFixed(0)}%${spread > 0.15 ? ': the machine was busy, treat the ratios as rough' : ''}`,
        ...unexpected.map((r) => `unexpected responses for ${r.label}: ${JSON.stringify(r.unexpected)}`),
        'req/s: responses (any status) per second measured; p50/p99: latency of responses with the expected status',
        '(hello-world 200, create 201, get 200); cpu: percent of one core used by the server process',
        '(PGlite runs inside it; a PostgreSQL server does not) and by this load-generating process.',
        '',
      ].join('\n'),
    );
  } finally {
    cleanUp();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`\nbench:api failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1); // the exit handler kills the servers
  },
);
