// API benchmark (bench/README.md): requests per second and latency for registry create and
// registry get, against fastify's hello world measured in the same run on the same machine; then
// registry create again with anchoring on (a real anvil chain, default batch size and interval),
// and what anchoring costs create (issue 12: under 10%).
// The load generator (autocannon) runs here; each server runs as its own child process, one under load at a time.
// Usage: npm run bench:api [-- --duration 10 --warmup 2 --connections 10 --log-level warn --cpu-prof DIR --no-anchoring]
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { type Hex, hexToNumber } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { ANCHOR_PREFIX } from '../src/anchor/receipt.js';
import { type Anvil, startAnvil } from '../src/chains/evm/anvil.js';
import {
  backendOfDataDir,
  cleanEnv,
  commCpuDelta,
  commCpuSeconds,
  cpuProfArgs,
  cpuProfOption,
  createScratchDatabaseIfUrl,
  databaseUrlOption,
  exitWithUsage,
  fixed,
  formatTable,
  freePort,
  grouped,
  isLoopback,
  jsonRpc,
  ledgerhookDatabaseEnv,
  logLevelOption,
  machineLine,
  makeTempDir,
  now,
  numberOption,
  onCleanup,
  percent,
  processCpuSeconds,
  redact,
  runMain,
  type Server,
  serverToken,
  sleep,
  startServer,
  stopServer,
  toQuantity,
  waitUntilServing,
  wholeNumberOption,
} from './lib.js';

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  duration: number;
  warmup: number;
  connections: number;
  logLevel: string;
  databaseUrl: string | undefined;
  cpuProf: string | undefined;
  /** Whether the two servers measuring what anchoring costs create run (`--no-anchoring`: not). */
  anchoring: boolean;
}

function readOptions(): Options {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      'log-level': { type: 'string' },
      'cpu-prof': { type: 'string' },
      'no-anchoring': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    exitWithUsage([
      'Usage: npm run bench:api [-- options]',
      '  --duration S      seconds measured per route (BENCH_DURATION, default 10)',
      '  --warmup S        seconds of unmeasured load before each route (BENCH_WARMUP, default 2)',
      '  --connections N   concurrent connections (BENCH_CONNECTIONS, default 10)',
      '  --log-level L     LOG_LEVEL of both servers (BENCH_LOG_LEVEL, default warn)',
      '  --cpu-prof DIR    V8 CPU profiles of the Ledgerhook processes, into DIR/plain, DIR/twin and DIR/anchoring (BENCH_CPU_PROF)',
      '  --no-anchoring    skip the two servers measuring what anchoring costs create (BENCH_NO_ANCHORING=1)',
      'DATABASE_URL set: Ledgerhook runs on that PostgreSQL (the same set-up and anchoring servers on',
      'scratch databases of the same server, dropped at the end); otherwise on embedded PGlite.',
      '',
    ]);
  }
  return {
    duration: numberOption(values.duration, 'BENCH_DURATION', 10, 1),
    warmup: numberOption(values.warmup, 'BENCH_WARMUP', 2, 0),
    connections: wholeNumberOption(values.connections, 'BENCH_CONNECTIONS', 10, 1),
    logLevel: logLevelOption(values['log-level']),
    databaseUrl: databaseUrlOption(),
    cpuProf: cpuProfOption(values['cpu-prof']),
    anchoring: !(values['no-anchoring'] ?? process.env.BENCH_NO_ANCHORING === '1'),
  };
}

// ---------------------------------------------------------------------------------------------
// Measurement

interface Target {
  label: string;
  url: string;
  /** Each request takes one of these paths at random instead of `url`'s (the same server). */
  paths?: readonly string[];
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
  /** Percent of one core used by all `postgres` processes of this host (PostgreSQL on loopback only). */
  postgresCpu: number | undefined;
  /** Latencies (ms) of the responses with the expected status, sorted. */
  samples: Float64Array;
  /** Responses during the warm-up before the measured run. */
  warmupResponses: number;
  /** The longest time without any response during the measured run (ms), and when it ended (epoch ms). */
  longestPause: { ms: number; endedAt: number };
  /** Responses in each whole second of the measured run. */
  perSecond: number[];
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
    postgresCpu:
      a.postgresCpu !== undefined && b.postgresCpu !== undefined
        ? (a.postgresCpu + b.postgresCpu) / 2
        : undefined,
    samples,
    warmupResponses: a.warmupResponses + b.warmupResponses,
    longestPause: a.longestPause.ms >= b.longestPause.ms ? a.longestPause : b.longestPause,
    perSecond: [...a.perSecond, ...b.perSecond],
  };
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

interface MeasureHooks {
  /**
   * The warm-up: this many requests instead of `--warmup` seconds; or, as a function of the
   * requests per second of the `--warmup` seconds, how many requests in all (the rest sent after).
   */
  warmup?: number | ((reqPerSec: number) => number);
  /** Called as the measured run starts and as it ends (epoch ms, see `now`). */
  onStart?: (at: number) => void;
  onEnd?: (at: number) => void;
}

const responseCount = (result: autocannon.Result) =>
  Object.values(result.statusCodeStats).reduce((sum, { count: n }) => sum + n, 0);

/** Runs the warm-up of `hooks`, printing it; returns how many responses it had. */
async function warmUp(
  load: autocannon.Options,
  label: string,
  options: Options,
  hooks: MeasureHooks,
): Promise<number> {
  if (typeof hooks.warmup === 'number') {
    if (hooks.warmup <= 0) return 0;
    process.stdout.write(`  ${label}: ${grouped(hooks.warmup)} requests warm-up, `);
    return responseCount(await autocannon({ ...load, amount: hooks.warmup }));
  }
  if (options.warmup <= 0) return 0;
  process.stdout.write(`  ${label}: ${options.warmup} s warm-up`);
  const t0 = performance.now();
  let sent = responseCount(await autocannon({ ...load, duration: options.warmup }));
  if (hooks.warmup !== undefined) {
    const more = Math.round(hooks.warmup(sent / ((performance.now() - t0) / 1000))) - sent;
    if (more > 0) {
      process.stdout.write(` + ${grouped(more)} requests`);
      sent += responseCount(await autocannon({ ...load, amount: more }));
    }
  }
  process.stdout.write(', ');
  return sent;
}

async function measure(
  target: Target,
  options: Options,
  server: Server,
  hooks: MeasureHooks = {},
): Promise<Row> {
  const { paths } = target;
  const load = {
    url: target.url,
    method: target.method ?? 'GET',
    connections: options.connections,
    headers: target.headers ?? {},
    ...(target.body !== undefined ? { body: target.body } : {}),
    ...(paths
      ? {
          requests: [
            {
              setupRequest: (request: autocannon.Request) => ({
                ...request,
                path: paths[Math.floor(Math.random() * paths.length)]!,
              }),
            },
          ],
        }
      : {}),
  };
  const warmupResponses = await warmUp(load, target.label, options, hooks);
  process.stdout.write(
    `${warmupResponses === 0 ? `  ${target.label}: ` : ''}${options.duration} s measured...`,
  );

  // autocannon's own latency histogram keeps whole milliseconds; record the exact times instead.
  let latencies = new Float64Array(1 << 16);
  let count = 0;
  const longestPause = { ms: 0, endedAt: 0 };
  let lastResponse = 0;
  const perSecond: number[] = [];
  const serverCpu0 = processCpuSeconds(server.proc.pid);
  const clientCpu0 = process.cpuUsage();
  const countPostgres = options.databaseUrl !== undefined && isLoopback(options.databaseUrl);
  const postgresCpu0 = countPostgres ? commCpuSeconds('postgres') : undefined;
  hooks.onStart?.(now());
  const t0 = performance.now();
  lastResponse = t0;
  const run = autocannon({ ...load, duration: options.duration });
  run.on('response', (_client: unknown, statusCode: number, _bytes: number, responseTime: number) => {
    const at = performance.now();
    const second = Math.floor((at - t0) / 1000);
    perSecond[second] = (perSecond[second] ?? 0) + 1;
    if (at - lastResponse > longestPause.ms) {
      longestPause.ms = at - lastResponse;
      longestPause.endedAt = performance.timeOrigin + at;
    }
    lastResponse = at;
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
  hooks.onEnd?.(now());
  const serverCpu1 = processCpuSeconds(server.proc.pid);
  const clientCpu = process.cpuUsage(clientCpu0);
  const postgresCpu = commCpuDelta(postgresCpu0, countPostgres ? commCpuSeconds('postgres') : undefined);

  const sorted = latencies.subarray(0, count).sort();
  const unexpected: Record<string, number> = {};
  for (const [status, { count: n }] of Object.entries(result.statusCodeStats)) {
    if (Number(status) !== target.expectStatus) unexpected[`HTTP ${status}`] = n;
  }
  if (result.errors > 0) unexpected['connection errors'] = result.errors;
  if (result.timeouts > 0) unexpected.timeouts = result.timeouts;
  const unexpectedTotal = Object.values(unexpected).reduce((a, b) => a + b, 0);
  const responses = responseCount(result);
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
    postgresCpu: postgresCpu === undefined ? undefined : (postgresCpu / seconds) * 100,
    samples: sorted,
    warmupResponses,
    longestPause,
    perSecond: Array.from(perSecond, (n) => n ?? 0),
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

/** The anchoring network; LEDGERHOOK_ANCHOR_BATCH and LEDGERHOOK_ANCHOR_INTERVAL keep their defaults: these. */
const NETWORK = 'DEVNET';
const BATCH_SIZE = 10_000;
const INTERVAL_S = 60;

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

/**
 * A floor: fastify and node-postgres (or PGlite) alone (`script`) serving one route with the
 * statement Ledgerhook's route runs, and none of Ledgerhook's work. On PostgreSQL, what a request
 * done the plain way gets on this machine: a target the floor misses is not missed in our code.
 * `database` is DATABASE_URL or PGLITE_DIR for the script.
 */
async function benchFloor(
  options: Options,
  database: Record<string, string>,
  script: string,
  target: (base: string) => Target,
  verify: (body: string) => void = () => {},
): Promise<Row> {
  const port = await freePort();
  const server = startServer(
    `floor server (${script})`,
    [script],
    cleanEnv({
      PORT: String(port),
      LOG_LEVEL: options.logLevel,
      EXIT_WITH_STDIN: '1',
      ...database,
    }),
  );
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitUntilServing(server, `${base}/`);
    const floor = target(base);
    verify(await preflight(floor));
    return await measure(floor, options, server);
  } finally {
    await stopServer(server);
  }
}

/** The floor under create (bench/bare-create.ts): the same rows, one create per statement. */
function benchCreateFloor(options: Options, databaseUrl: string): Promise<Row> {
  return benchFloor(options, { DATABASE_URL: databaseUrl }, 'bench/bare-create.ts', (base) => ({
    label: 'create floor: fastify + pg alone',
    url: `${base}/api/v1/registry/create`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: CREATE_BODY,
    expectStatus: 201,
  }));
}

/**
 * The floor under registry get among many (bench/bare-get.ts): the same registries at random, read
 * with the statement of a get, one statement per request, from the PostgreSQL database or the
 * PGlite directory (not in use: PGlite opens a directory in one process only) Ledgerhook read.
 */
function benchGetFloor(
  options: Options,
  database: { DATABASE_URL: string } | { PGLITE_DIR: string },
  paths: readonly string[],
): Promise<Row> {
  const alone = 'DATABASE_URL' in database ? 'pg' : 'PGlite';
  return benchFloor(
    options,
    database,
    'bench/bare-get.ts',
    (base) => ({
      label: `get floor: fastify + ${alone} alone (${grouped(paths.length)} at random)`,
      url: `${base}${paths[0]!}`,
      paths,
      expectStatus: 200,
    }),
    (body) => {
      // The registry asked for, as the statement gives it: a JSON array, its id first.
      const row = (JSON.parse(body) as { data: unknown[] }).data;
      if (`/api/v1/registry/${row[0]}` !== paths[0])
        throw new Error(`get floor: answered ${body.slice(0, 200)}`);
    },
  );
}

/** Variables of the bench's own environment that would change anchoring (or the networks) of a run. */
const ANCHOR_VARIABLES = [
  'LEDGERHOOK_CONFIG',
  'LEDGERHOOK_ANCHOR_NETWORK',
  'LEDGERHOOK_ANCHOR_KEY',
  'LEDGERHOOK_ANCHOR_INTERVAL',
  'LEDGERHOOK_ANCHOR_BATCH',
  'LEDGERHOOK_ANCHOR_CONFIRMATIONS',
  'LEDGERHOOK_ANCHOR_REPLACE_AFTER',
];

interface Ledgerhook {
  server: Server;
  base: string;
  auth: Record<string, string>;
  backend: 'pglite' | 'postgres';
}

/** `src/main.ts serve` on a free port, serving, with its API token; `extra` adds to its environment. */
async function startLedgerhook(
  options: Options,
  name: 'plain' | 'twin' | 'anchoring',
  dataDir: string,
  databaseUrl: string | undefined,
  extra: Record<string, string> = {},
): Promise<Ledgerhook> {
  const port = await freePort();
  const env = cleanEnv({
    LEDGERHOOK_DATA_DIR: dataDir,
    PORT: String(port),
    LOG_LEVEL: options.logLevel,
    // The benchmark measures capacity: one token sends thousands of requests a second, far past
    // the default per-account limit (1000/s), which would measure the limiter instead.
    LEDGERHOOK_RATE_LIMIT: 'off',
    ...ledgerhookDatabaseEnv(databaseUrl, 'ledgerhook-bench-api'),
  });
  // Anchoring is off unless this run turns it on, whatever the bench's own environment says.
  for (const name of ANCHOR_VARIABLES) delete env[name];
  Object.assign(env, extra);
  // A directory per server: Node names the files itself, one per thread.
  const server = startServer(`ledgerhook (${name})`, ['src/main.ts', 'serve'], env, {
    nodeArgs: cpuProfArgs(options.cpuProf, name),
  });
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitUntilServing(server, `${base}/healthz`);
    // PostgreSQL used before has accounts already, and prints no token: one is issued then.
    const token = await serverToken(server, env);
    // PGlite keeps its files under the data directory; PostgreSQL leaves it holding only master.key.
    const backend = backendOfDataDir(dataDir);
    if ((backend === 'postgres') !== (databaseUrl !== undefined)) {
      throw new Error(`expected Ledgerhook on ${databaseUrl ? 'postgres' : 'pglite'}, found ${backend}`);
    }
    return { server, base, auth: { authorization: `Bearer ${token}` }, backend };
  } catch (err) {
    await stopServer(server);
    throw err;
  }
}

function createTarget(lh: Ledgerhook, label: string): Target {
  return {
    label,
    url: `${lh.base}/api/v1/registry/create`,
    method: 'POST',
    headers: { ...lh.auth, 'content-type': 'application/json' },
    body: CREATE_BODY,
    expectStatus: 201,
  };
}

/** Registries read at random by the second get pass: too many for the row cache to answer most reads. */
const MANY_REGISTRIES = 20_000;

/**
 * The ids of `count` of the account's registries: those the create runs made (listed, newest
 * first), and more created, 32 at a time, if they made fewer.
 */
async function registryIds(lh: Ledgerhook, count: number): Promise<string[]> {
  process.stdout.write(`  ${grouped(count)} registries to read at random: listing`);
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const page: { data: { id: string }[]; next_cursor: string | null } = await getJson<{
      data: { id: string }[];
      next_cursor: string | null;
    }>(lh, `/api/v1/registry?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
    ids.push(...page.data.map((r) => r.id));
    cursor = page.next_cursor;
  } while (cursor && ids.length < count);
  const missing = count - ids.length;
  if (missing > 0) {
    process.stdout.write(`, creating ${grouped(missing)}`);
    const create = createTarget(lh, 'seed');
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < missing) {
          next++;
          ids.push((JSON.parse(await preflight(create)) as { data: { id: string } }).data.id);
        }
      }),
    );
  }
  process.stdout.write('\n');
  return ids.slice(0, count);
}

/**
 * A final transaction on the chain to look up: a transfer between two dev accounts, buried under
 * more blocks than the EVM lookup's finality depth (64), so the first lookup caches it.
 */
async function finalTransaction(chain: Chain): Promise<Hex> {
  const [from, to] = chain.anvil.accounts;
  const hash = await jsonRpc<Hex>(chain.anvil.rpcUrl, 'eth_sendTransaction', [
    { from: from!.address, to: to!.address, value: '0x1' },
  ]);
  await jsonRpc(chain.anvil.rpcUrl, 'anvil_mine', ['0x80']);
  return hash;
}

interface LedgerhookRuns<T> {
  /** Registry create (the mean of its two runs), registry get and the cached transaction lookup. */
  rows: Row[];
  createBefore: Row;
  createAfter: Row;
  /** The get floor's run on PostgreSQL, right after the random get's. */
  getFloor: Row | undefined;
  /** The random get's paths. */
  manyPaths: readonly string[];
  backend: string;
  /** What `between` returned. */
  between: T;
}

/**
 * Registry create, registry get, then `between` (create on two other servers, without and with
 * anchoring) while this server idles, then registry create again, so that those runs are bracketed
 * by two of this one, as the Ledgerhook routes are by the hello world.
 */
async function benchLedgerhook<T>(
  options: Options,
  dataDir: string,
  chain: Chain,
  between: (createWarmup: number) => Promise<T>,
): Promise<LedgerhookRuns<T>> {
  // The chain's config names DEVNET, for the transaction lookup; anchoring stays off here.
  const lh = await startLedgerhook(options, 'plain', dataDir, options.databaseUrl, {
    LEDGERHOOK_CONFIG: chain.configFile,
  });
  try {
    const create = createTarget(lh, 'registry create (before)');
    const created = JSON.parse(await preflight(create)) as { data: { id: string } };
    const get: Target = {
      label: 'registry get (one, cached)',
      url: `${lh.base}/api/v1/registry/${created.data.id}`,
      headers: lh.auth,
      expectStatus: 200,
    };
    await preflight(get);
    const lookup: Target = {
      label: 'transaction get (cached)',
      url: `${lh.base}/api/v1/transaction/${NETWORK}/${await finalTransaction(chain)}`,
      headers: lh.auth,
      expectStatus: 200,
    };
    // The first lookup asks the node and caches the final transaction; the measured ones read the cache.
    await preflight(lookup);
    // Create warms up until the waiting leaves would make a batch due about halfway through the
    // measured run (at the rate of the warm-up's first seconds); the servers of `between` get as
    // many warm-up requests, so all start measuring as warm and with as many registries.
    const createWarmup = (reqPerSec: number) =>
      Math.max(reqPerSec * options.warmup, BATCH_SIZE - (reqPerSec * options.duration) / 2);
    const createBefore = await measure(
      create,
      options,
      lh.server,
      options.anchoring ? { warmup: createWarmup } : {},
    );
    const getRow = await measure(get, options, lh.server);
    const manyIds = await registryIds(lh, MANY_REGISTRIES);
    const getMany: Target = {
      ...get,
      label: `registry get (${grouped(MANY_REGISTRIES)} at random)`,
      paths: manyIds.map((id) => `/api/v1/registry/${id}`),
    };
    const getManyRow = await measure(getMany, options, lh.server);
    const getFloor = options.databaseUrl
      ? await benchGetFloor(options, { DATABASE_URL: options.databaseUrl }, getMany.paths!)
      : undefined;
    const lookupRow = await measure(lookup, options, lh.server);
    const result = await between(createBefore.warmupResponses);
    const createAfter = await measure({ ...create, label: 'registry create (after)' }, options, lh.server);
    return {
      rows: [combine('registry create', createBefore, createAfter), getRow, getManyRow, lookupRow],
      createBefore,
      createAfter,
      getFloor,
      manyPaths: getMany.paths!,
      backend: lh.backend,
      between: result,
    };
  } finally {
    await stopServer(lh.server);
  }
}

// ---------------------------------------------------------------------------------------------
// Registry create with anchoring on

interface Chain {
  anvil: Anvil;
  configFile: string;
  /** The anchor key: anvil's last dev account, as `serve --devnet` uses. */
  key: Hex;
  address: string;
}

/** anvil (a block per transaction), named DEVNET in a config file. */
async function startChain(): Promise<Chain> {
  const anvil = await startAnvil();
  onCleanup(() => anvil.stop());
  const configFile = path.join(makeTempDir('ledgerhook-bench-api-config-'), 'ledgerhook.json');
  fs.writeFileSync(
    configFile,
    JSON.stringify({
      networks: {
        [NETWORK]: { family: 'evm', chainId: anvil.chainId, symbol: 'ETH', rpc: [anvil.rpcUrl] },
      },
    }),
  );
  const key = anvil.accounts.at(-1)!.privateKey;
  return { anvil, configFile, key, address: privateKeyToAccount(key).address.toLowerCase() };
}

interface RegistryAnchor {
  status: 'pending' | 'anchored';
  root: string | null;
  blockNumber: number | null;
  anchored_at: string | null;
}

async function getJson<T>(lh: Ledgerhook, route: string): Promise<T> {
  const res = await fetch(`${lh.base}${route}`, { headers: lh.auth });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`GET ${route}: HTTP ${res.status}: ${text}`);
  return JSON.parse(text) as T;
}

/** Waits until a registry's leaf is anchored (its batch's transaction deep enough). */
async function waitAnchored(lh: Ledgerhook, id: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { data } = await getJson<{ data: { anchor: RegistryAnchor | null } }>(lh, `/api/v1/registry/${id}`);
    if (data.anchor === null) throw new Error('Ledgerhook does not anchor: the registry has no anchor');
    if (data.anchor.status === 'anchored') return;
    if (Date.now() > deadline) {
      throw new Error(
        `registry ${id} was not anchored within ${timeoutMs / 1000} s; server output:\n${lh.server.tail()}`,
      );
    }
    await sleep(100);
  }
}

/** Notes when each new block of the chain is first seen, polling every 100 ms until stopped. */
function watchBlocks(rpcUrl: string): { seen: Map<number, number>; stop(): Promise<void> } {
  const seen = new Map<number, number>();
  let stopped = false;
  const loop = (async () => {
    let last: number | undefined;
    while (!stopped) {
      const head = hexToNumber(await jsonRpc<Hex>(rpcUrl, 'eth_blockNumber'));
      const at = now();
      if (last !== undefined) for (let n = last + 1; n <= head; n++) seen.set(n, at);
      last = head;
      await sleep(100);
    }
  })();
  return {
    seen,
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}

interface BatchSeen {
  root: string;
  block: number;
  /** When the block holding its transaction was first seen (epoch ms); undefined when not watched. */
  sentAt: number | undefined;
  /** Registries whose anchor names this root. */
  leaves: number;
  anchoredAt: number | undefined;
}

interface AnchorReport {
  batches: BatchSeen[];
  /** Registries still waiting for a batch (or in one not yet anchored) at the end. */
  pending: number;
  windowStart: number;
  windowEnd: number;
  /** Percent of one core used by anvil during the measured run. */
  anvilCpu: number | undefined;
}

/** The anchor transactions on the chain, in order: block and root. */
async function anchorTransactions(chain: Chain): Promise<Array<{ block: number; root: string }>> {
  const prefix = `0x${ANCHOR_PREFIX.toString('hex')}`;
  const head = hexToNumber(await jsonRpc<Hex>(chain.anvil.rpcUrl, 'eth_blockNumber'));
  const found: Array<{ block: number; root: string }> = [];
  for (let n = 1; n <= head; n++) {
    const block = await jsonRpc<{ transactions: Array<{ from: string; input: string }> }>(
      chain.anvil.rpcUrl,
      'eth_getBlockByNumber',
      [toQuantity(n), true],
    );
    for (const tx of block.transactions) {
      if (tx.from.toLowerCase() === chain.address && tx.input.startsWith(prefix)) {
        found.push({ block: n, root: tx.input.slice(prefix.length) });
      }
    }
  }
  return found;
}

/**
 * What anchoring did around the measured run, from the outside: the anchor transactions on the
 * chain, and every registry's anchor through the list API (leaves per root, when anchored).
 * Waits up to 30 s for the batches on chain to show as anchored.
 */
async function anchorReport(
  lh: Ledgerhook,
  chain: Chain,
  seen: Map<number, number>,
  window: { start: number; end: number; anvilCpu: number | undefined },
): Promise<AnchorReport> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const onChain = await anchorTransactions(chain);
    const byRoot = new Map<string, { leaves: number; anchoredAt: number | undefined }>();
    let pending = 0;
    let cursor: string | null = null;
    do {
      const page: { data: Array<{ anchor: RegistryAnchor | null }>; next_cursor: string | null } =
        await getJson(lh, `/api/v1/registry?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
      for (const { anchor } of page.data) {
        if (anchor?.status !== 'anchored' || anchor.root === null) {
          pending++;
          continue;
        }
        const batch = byRoot.get(anchor.root) ?? { leaves: 0, anchoredAt: undefined };
        batch.leaves++;
        batch.anchoredAt = anchor.anchored_at ? Date.parse(anchor.anchored_at) : undefined;
        byRoot.set(anchor.root, batch);
      }
      cursor = page.next_cursor;
    } while (cursor);
    const batches = onChain.map(({ block, root }) => ({
      root,
      block,
      sentAt: seen.get(block),
      leaves: byRoot.get(root)?.leaves ?? 0,
      anchoredAt: byRoot.get(root)?.anchoredAt,
    }));
    if (batches.every((b) => b.anchoredAt !== undefined) || Date.now() > deadline) {
      return {
        batches,
        pending,
        windowStart: window.start,
        windowEnd: window.end,
        anvilCpu: window.anvilCpu,
      };
    }
    await sleep(1_000);
  }
}

/**
 * A Ledgerhook for one measurement, set up alike with or without anchoring: a fresh PGlite
 * directory or scratch database, the config file naming the anvil chain, all roles (the anchorer
 * is the watcher role's).
 */
async function withFreshServer<T>(
  options: Options,
  name: 'twin' | 'anchoring',
  chain: Chain,
  extra: Record<string, string>,
  run: (lh: Ledgerhook) => Promise<T>,
): Promise<T> {
  const scratch = await createScratchDatabaseIfUrl(options.databaseUrl, `api_${name}`);
  try {
    const lh = await startLedgerhook(options, name, makeTempDir(`ledgerhook-bench-${name}-`), scratch?.url, {
      LEDGERHOOK_CONFIG: chain.configFile,
      LEDGERHOOK_ROLES: 'api,dispatcher,watcher',
      ...extra,
    });
    try {
      return await run(lh);
    } finally {
      await stopServer(lh.server);
    }
  } finally {
    await scratch?.drop();
  }
}

/** Registry create on a server set up as the anchoring one, but not anchoring: its like-for-like baseline. */
async function benchTwin(options: Options, chain: Chain, warmupRequests: number): Promise<Row> {
  return withFreshServer(options, 'twin', chain, {}, async (lh) => {
    const create = createTarget(lh, 'registry create, same set-up, anchoring off');
    await preflight(create);
    return measure(create, options, lh.server, { warmup: warmupRequests });
  });
}

/** Registry create on a server anchoring on anvil with the default batch size and interval. */
async function benchAnchoring(
  options: Options,
  chain: Chain,
  warmupRequests: number,
): Promise<{ row: Row; report: AnchorReport }> {
  const extra = { LEDGERHOOK_ANCHOR_NETWORK: NETWORK, LEDGERHOOK_ANCHOR_KEY: chain.key };
  return withFreshServer(options, 'anchoring', chain, extra, async (lh) => {
    const create = createTarget(lh, 'registry create, anchoring on');
    const first = JSON.parse(await preflight(create)) as { data: { id: string } };
    // With no batch yet the interval counts as passed, so the anchorer cuts this first leaf
    // alone at once. Once it is anchored (which shows the chain works), the next batch is cut
    // when 10,000 leaves wait, or 60 s later.
    await waitAnchored(lh, first.data.id, 60_000);
    const blocks = watchBlocks(chain.anvil.rpcUrl);
    const window = { start: 0, end: 0, anvilCpu: undefined as number | undefined };
    let anvilCpu0: number | undefined;
    let row: Row;
    try {
      row = await measure(create, options, lh.server, {
        warmup: warmupRequests,
        onStart: (at) => {
          window.start = at;
          anvilCpu0 = processCpuSeconds(chain.anvil.pid);
        },
        onEnd: (at) => {
          window.end = at;
          const anvilCpu1 = processCpuSeconds(chain.anvil.pid);
          if (anvilCpu0 !== undefined && anvilCpu1 !== undefined) {
            window.anvilCpu = ((anvilCpu1 - anvilCpu0) / ((window.end - window.start) / 1000)) * 100;
          }
        },
      });
    } finally {
      await blocks.stop();
    }
    return { row, report: await anchorReport(lh, chain, blocks.seen, window) };
  });
}

/**
 * Creates lost to the cuts, within the anchoring run itself (so apart from the differences between
 * server processes and moments that the comparison with another run carries): the responses of the
 * seconds from the one before each cut to the one after it, against the median second of the rest.
 * Undefined when no cut fell in the run, or too few seconds are left to compare with.
 */
function lostToCuts(
  perSecond: number[],
  measuredSeconds: number,
  cutSeconds: number[],
): { lost: number; median: number; seconds: number[] } | undefined {
  // Whole seconds only: the run's last fraction of a second is not one.
  const full = Array.from({ length: Math.floor(measuredSeconds) }, (_, i) => perSecond[i] ?? 0);
  const around = new Set(
    cutSeconds.flatMap((c) => [c - 1, c, c + 1]).filter((i) => i >= 0 && i < full.length),
  );
  const rest = full.filter((_, i) => !around.has(i)).sort((a, b) => a - b);
  if (around.size === 0 || rest.length < 3) return undefined;
  const median = rest[Math.floor(rest.length / 2)]!;
  const seconds = [...around].sort((a, b) => a - b);
  const lost = seconds.reduce((sum, i) => sum + (median - full[i]!), 0);
  return { lost, median, seconds };
}

/** The batches around the measured run, and whether one was cut and anchored during it. */
function formatAnchorReport(
  report: AnchorReport,
  options: Options,
  without: Row,
  withAnchoring: Row,
): string[] {
  const rel = (at: number | undefined) =>
    at === undefined ? '-' : fixed((at - report.windowStart) / 1000, 2);
  const inWindow = (at: number | undefined) =>
    at !== undefined && at >= report.windowStart && at <= report.windowEnd;
  const cut = report.batches.filter((b) => inWindow(b.sentAt));
  const anchored = report.batches.filter((b) => inWindow(b.anchoredAt));
  const seconds = (report.windowEnd - report.windowStart) / 1000;
  const table = formatTable(
    ['batch', 'leaves', 'tx block', 'tx seen at s', 'anchored at s', 'root'],
    report.batches.map((b, i) => [
      String(i + 1),
      grouped(b.leaves),
      String(b.block),
      b.sentAt === undefined ? (i === 0 ? 'before' : 'after') : rel(b.sentAt),
      b.anchoredAt === undefined ? 'not yet' : rel(b.anchoredAt),
      `${b.root.slice(0, 16)}...`,
    ]),
  );
  const leaves = (list: BatchSeen[]) => grouped(list.reduce((sum, b) => sum + b.leaves, 0));
  /** CPU milliseconds per create without and with anchoring, when `cpu` (percent of a core) is known. */
  const cpuLine = (who: string, cpu: (r: Row) => number | undefined): string[] => {
    const [a, b] = [without, withAnchoring].map((r) => {
      const percentOfCore = cpu(r);
      return percentOfCore === undefined ? undefined : (percentOfCore * 10) / r.reqPerSec;
    });
    if (a === undefined || b === undefined) return [];
    return [
      `cpu per create, ${who}: ${fixed(a, 3)} ms without anchoring, ${fixed(b, 3)} ms with ` +
        `(${b >= a ? '+' : ''}${fixed((b / a - 1) * 100, 1)}%)`,
    ];
  };
  const fillSeconds = BATCH_SIZE / withAnchoring.reqPerSec;
  const lost = lostToCuts(
    withAnchoring.perSecond,
    seconds,
    cut.map((b) => Math.floor((b.sentAt! - report.windowStart) / 1000)),
  );
  const lostPerBatch = lost === undefined ? 0 : Math.max(0, lost.lost) / cut.length;
  return [
    `anchoring on ${NETWORK} (anvil, a block per transaction), batch size ${grouped(BATCH_SIZE)} and interval ${INTERVAL_S} s (the defaults), ` +
      `1 confirmation; anvil cpu ${percent(report.anvilCpu)} during the measured run`,
    `batches on chain (times in seconds from the start of the measured ${fixed(seconds, 1)} s; negative: during warm-up):`,
    table,
    cut.length > 0
      ? `during the measured run: ${cut.length} batch${cut.length > 1 ? 'es' : ''} cut and sent (${leaves(cut)} leaves), ` +
        `${anchored.length} anchored (${leaves(anchored)} leaves); ${grouped(report.pending)} registries not anchored at the end`
      : `NO batch was cut during the measured run (${anchored.length} anchored): the anchoring row measures the anchorer ` +
        `idle, not a batch being cut; a longer --duration than ${options.duration} s would include one`,
    `at ${Math.round(withAnchoring.reqPerSec)} creates/s a batch of ${grouped(BATCH_SIZE)} fills every ${fixed(fillSeconds, 1)} s; ` +
      `the measured ${fixed(seconds, 1)} s held ${cut.length} cut${cut.length === 1 ? '' : 's'}` +
      (cut.length > 0 && fillSeconds > seconds
        ? ` (the warm-up brought the waiting leaves near ${grouped(BATCH_SIZE)}), more than their share: the cost is an upper bound`
        : ''),
    ...cpuLine('Ledgerhook process', (r) => r.serverCpu),
    ...cpuLine('PostgreSQL', (r) => r.postgresCpu),
    ...(lost === undefined
      ? []
      : [
          `within the anchoring run: seconds ${lost.seconds.join(', ')} (around the cut${cut.length > 1 ? 's' : ''}) had ${grouped(lost.lost)} responses fewer than ` +
            `the median second of the rest (${grouped(lost.median)}), ${fixed(lost.lost / lost.median, 2)} s of creating; per batch of ${grouped(BATCH_SIZE)} ` +
            `that is a cost of ${fixed((lostPerBatch / (BATCH_SIZE + lostPerBatch)) * 100, 1)}% when batches are full, target < 10%: ${lostPerBatch / (BATCH_SIZE + lostPerBatch) < 0.1 ? 'met' : 'NOT met'}`,
        ]),
    `responses per second of the measured run: ${without.perSecond.join(' ')} without anchoring; ` +
      `${withAnchoring.perSecond.join(' ')} with`,
    `longest time without a response: ${fixed(without.longestPause.ms, 0)} ms without anchoring, ` +
      `${fixed(withAnchoring.longestPause.ms, 0)} ms with (ending at ${rel(withAnchoring.longestPause.endedAt)} s)`,
  ];
}

function formatRows(rows: Row[], reference: Row): string {
  // PostgreSQL on loopback: its processes' CPU too, since a route's cost is split with them.
  const postgres = rows.some((r) => r.postgresCpu !== undefined);
  const header = [
    'route',
    'req/s',
    'p50 ms',
    'p99 ms',
    'ratio to hello-world',
    'server cpu',
    'bench cpu',
    ...(postgres ? ['postgres cpu'] : []),
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
    ...(postgres ? [percent(r.postgresCpu)] : []),
    r.unexpectedTotal.toString(),
  ]);
  return formatTable(header, body);
}

async function main(): Promise<void> {
  const options = readOptions();
  const backendWanted = options.databaseUrl ? `postgres (${redact(options.databaseUrl)})` : 'pglite';
  const estimate =
    ((options.anchoring ? 8 : 6) + (options.databaseUrl ? 1 : 0)) * (options.warmup + options.duration);
  process.stdout.write(
    `bench:api: ${backendWanted}; ${options.connections} connections, ${options.warmup} s warm-up + ${options.duration} s measured per route (~${estimate} s of load, ` +
      `more when create needs a longer warm-up to make a batch due mid-run); ${machineLine()}\n`,
  );

  const dataDir = makeTempDir('ledgerhook-bench-');
  const chain = await startChain();
  // The reference brackets the Ledgerhook routes: its two runs differing much means the machine
  // was busy with something else meanwhile, and the ratios are only as good as that spread.
  const before = await benchHello(options, 'hello-world (before)');
  const {
    rows,
    createBefore,
    createAfter,
    getFloor: postgresGetFloor,
    manyPaths,
    backend,
    between: anchoringRuns,
  } = await benchLedgerhook(options, dataDir, chain, async (createWarmup) =>
    options.anchoring
      ? {
          twin: await benchTwin(options, chain, createWarmup),
          anchoring: await benchAnchoring(options, chain, createWarmup),
        }
      : undefined,
  );
  const create = rows[0]!;
  const floor = options.databaseUrl ? await benchCreateFloor(options, options.databaseUrl) : undefined;
  // PGlite's floor opens the directory the first Ledgerhook used, now that it has stopped.
  const getFloor =
    postgresGetFloor ??
    (await benchGetFloor(options, { PGLITE_DIR: path.join(dataDir, 'pglite') }, manyPaths));
  const after = await benchHello(options, 'hello-world (after)');
  const hello = combine('hello-world (reference)', before, after);
  const spread = Math.abs(before.reqPerSec - after.reqPerSec) / hello.reqPerSec;
  const createSpread = Math.abs(createBefore.reqPerSec - createAfter.reqPerSec) / create.reqPerSec;
  const all = [
    hello,
    ...rows,
    getFloor,
    ...(floor ? [floor] : []),
    ...(anchoringRuns ? [anchoringRuns.twin, anchoringRuns.anchoring.row] : []),
  ];
  const unexpected = all.filter((r) => r.unexpectedTotal > 0);
  process.stdout.write(
    [
      '',
      `backend: ${backend}${options.databaseUrl ? ` (${redact(options.databaseUrl)}${anchoringRuns ? '; same set-up and anchoring on: scratch databases of that server' : ''})` : ' (embedded)'}`,
      `connections: ${options.connections}, duration: ${options.duration} s per route after ${options.warmup} s warm-up, server LOG_LEVEL: ${options.logLevel}`,
      formatRows(all, hello),
      `reference: mean of hello-world before (${Math.round(before.reqPerSec)} req/s) and after (${Math.round(after.reqPerSec)} req/s) the Ledgerhook routes, ` +
        `spread ${(spread * 100).toFixed(0)}%${spread > 0.15 ? ': the machine was busy, treat the ratios as rough' : ''}`,
      `registry create: mean of the runs before (${Math.round(createBefore.reqPerSec)} req/s) and after (${Math.round(createAfter.reqPerSec)} req/s) ` +
        `${anchoringRuns ? 'the two servers below' : 'the other routes'}, spread ${(createSpread * 100).toFixed(0)}%`,
      ...(floor
        ? [
            `create floor: the same rows written by fastify + pg alone, a statement per create (bench/bare-create.ts): ` +
              `registry create is ${((create.reqPerSec / floor.reqPerSec) * 100).toFixed(0)}% of it`,
          ]
        : []),
      `get floor: the same registries read at random by fastify + ${options.databaseUrl ? 'pg' : 'PGlite'} alone, a statement per get (bench/bare-get.ts): ` +
        `registry get at random is ${((rows[2]!.reqPerSec / getFloor.reqPerSec) * 100).toFixed(0)}% of it`,
      ...(anchoringRuns
        ? formatAnchoring(anchoringRuns, create, options)
        : ['anchoring cost: not measured (--no-anchoring)']),
      ...unexpected.map((r) => `unexpected responses for ${r.label}: ${JSON.stringify(r.unexpected)}`),
      'req/s: responses (any status) per second measured; p50/p99: latency of responses with the expected status',
      '(hello-world 200, create 201, get 200, transaction get 200 from the cache); cpu: percent of one core used by the server process',
      '(PGlite runs inside it; a PostgreSQL server does not) and by this load-generating process.',
      '',
    ].join('\n'),
  );
}

/** What anchoring costs create: against the same set-up without it, and against the first server. */
function formatAnchoring(
  { twin, anchoring }: { twin: Row; anchoring: { row: Row; report: AnchorReport } },
  create: Row,
  options: Options,
): string[] {
  const cost = 1 - anchoring.row.reqPerSec / twin.reqPerSec;
  const costFirst = 1 - anchoring.row.reqPerSec / create.reqPerSec;
  const twinGap = 1 - twin.reqPerSec / create.reqPerSec;
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  return [
    `anchoring cost: 1 - (create with anchoring ${Math.round(anchoring.row.reqPerSec)} req/s / create without, same set-up ${Math.round(twin.reqPerSec)} req/s) = ` +
      `${pct(cost)}, target < 10%: ${cost < 0.1 ? 'met' : 'NOT met'}`,
    `  against the first server's registry create (${Math.round(create.reqPerSec)} req/s): ${pct(costFirst)}; the same set-up without anchoring ` +
      `measured ${pct(Math.abs(twinGap))} ${twinGap >= 0 ? 'below' : 'above'} it, where neither anchors: the slot and the machine, not anchoring`,
    ...formatAnchorReport(anchoring.report, options, twin, anchoring.row),
  ];
}

runMain('bench:api', main); // cleans up: kills the servers and anvil, removes the data directories, drops the scratch database
