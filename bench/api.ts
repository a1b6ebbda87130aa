// API benchmark (DESIGN.md section 11): requests per second and latency for registry create and
// registry get, against fastify's hello world measured in the same run on the same machine.
// The load generator (autocannon) runs here; each server runs as its own child process, one at a time.
// Usage: npm run bench:api [-- --duration 10 --warmup 2 --connections 10 --log-level warn]
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import {
  benchMasterKey,
  cleanEnv,
  databaseUrlOption,
  fixed,
  formatTable,
  freePort,
  logLevelOption,
  machineLine,
  makeTempDir,
  numberOption,
  percent,
  processCpuSeconds,
  redact,
  runMain,
  type Server,
  serverToken,
  startServer,
  stopServer,
  waitUntilServing,
} from './lib.js';

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
  return {
    duration: numberOption(values.duration, 'BENCH_DURATION', 10, 1),
    warmup: numberOption(values.warmup, 'BENCH_WARMUP', 2, 0),
    connections: Math.floor(numberOption(values.connections, 'BENCH_CONNECTIONS', 10, 1)),
    logLevel: logLevelOption(values['log-level']),
    databaseUrl: databaseUrlOption(),
  };
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
    // The benchmark measures capacity: one token sends thousands of requests a second, far past
    // the default per-account limit (1000/s), which would measure the limiter instead.
    LEDGERHOOK_RATE_LIMIT: 'off',
    ...(options.databaseUrl
      ? {
          DATABASE_URL: options.databaseUrl,
          LEDGERHOOK_MASTER_KEY: benchMasterKey('ledgerhook-bench-api'),
        }
      : {}),
  });
  const server = startServer('ledgerhook', ['src/main.ts', 'serve'], env);
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitUntilServing(server, `${base}/healthz`);
    // PostgreSQL used before has accounts already, and prints no token: one is issued then.
    const token = await serverToken(server, env);
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

function formatRows(rows: Row[], reference: Row): string {
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
    percent(r.serverCpu),
    percent(r.clientCpu),
    r.unexpectedTotal.toString(),
  ]);
  return formatTable(header, body);
}

async function main(): Promise<void> {
  const options = readOptions();
  const backendWanted = options.databaseUrl ? `postgres (${redact(options.databaseUrl)})` : 'pglite';
  const estimate = 4 * (options.warmup + options.duration);
  process.stdout.write(
    `bench:api: ${backendWanted}; ${options.connections} connections, ${options.warmup} s warm-up + ${options.duration} s measured per route (~${estimate} s of load); ` +
      `${machineLine()}\n`,
  );

  const dataDir = makeTempDir('ledgerhook-bench-');
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
      formatRows([hello, ...rows], hello),
      `reference: mean of hello-world before (${Math.round(before.reqPerSec)} req/s) and after (${Math.round(after.reqPerSec)} req/s) the Ledgerhook routes, ` +
        `spread ${(spread * 100).toFixed(0)}%${spread > 0.15 ? ': the machine was busy, treat the ratios as rough' : ''}`,
      ...unexpected.map((r) => `unexpected responses for ${r.label}: ${JSON.stringify(r.unexpected)}`),
      'req/s: responses (any status) per second measured; p50/p99: latency of responses with the expected status',
      '(hello-world 200, create 201, get 200); cpu: percent of one core used by the server process',
      '(PGlite runs inside it; a PostgreSQL server does not) and by this load-generating process.',
      '',
    ].join('\n'),
  );
}

runMain('bench:api', main); // cleans up: kills the servers, removes the data directory
