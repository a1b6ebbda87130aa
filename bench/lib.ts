// Helpers shared by the benchmarks: option parsing, the backend (PGlite or the PostgreSQL of
// DATABASE_URL) and scratch databases, child processes (started one way, always cleaned up), ports,
// CPU accounting from /proc and table printing.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import inspector from 'node:inspector';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import v8 from 'node:v8';
import vm from 'node:vm';
import pg from 'pg';
import { request } from 'undici';
import type { Store } from '../src/store/db.js';
import { ensureBuilt } from '../test/helpers/build.js';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const TOKEN = /lh_[A-Za-z0-9_-]{32}/;
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** A fixed master key per benchmark, used on PostgreSQL when LEDGERHOOK_MASTER_KEY is unset. */
export function benchMasterKey(name: string): string {
  return process.env.LEDGERHOOK_MASTER_KEY?.trim() || crypto.createHash('sha256').update(name).digest('hex');
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// Options

/** A numeric option from its flag, else its environment variable, else `fallback`. */
export function numberOption(flag: string | undefined, env: string, fallback: number, min: number): number {
  const raw = flag ?? process.env[env];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw.replaceAll('_', ''));
  if (!Number.isFinite(value) || value < min)
    throw new Error(`${env} must be a number >= ${min}, got "${raw}"`);
  return value;
}

export function logLevelOption(flag: string | undefined): string {
  const logLevel = flag ?? process.env.BENCH_LOG_LEVEL ?? 'warn';
  if (!LOG_LEVELS.includes(logLevel)) throw new Error(`log level must be one of ${LOG_LEVELS.join(', ')}`);
  return logLevel;
}

/** `numberOption` rounded down to a whole number. */
export function wholeNumberOption(
  flag: string | undefined,
  env: string,
  fallback: number,
  min: number,
): number {
  return Math.floor(numberOption(flag, env, fallback, min));
}

/** The PostgreSQL to run on: `flag` (a script's own URL option), else DATABASE_URL; none: PGlite. */
export function databaseUrlOption(flag?: string): string | undefined {
  return flag?.trim() || process.env.DATABASE_URL?.trim() || undefined;
}

/** `--cpu-prof DIR`, else BENCH_CPU_PROF, as an absolute path; undefined when neither is given. */
export function cpuProfOption(flag: string | undefined): string | undefined {
  const dir = flag ?? process.env.BENCH_CPU_PROF;
  return dir ? path.resolve(dir) : undefined;
}

/** Writes a script's usage, one string per line, and exits 0 (`--help`). */
export function exitWithUsage(lines: string[]): never {
  process.stdout.write(lines.join('\n'));
  process.exit(0);
}

// ---------------------------------------------------------------------------------------------
// Backends: embedded PGlite, or the PostgreSQL of DATABASE_URL

export type Backend = 'pglite' | 'postgres';

/** The backends run when none is named: PGlite, and PostgreSQL too when there is a database URL. */
export function defaultBackends(databaseUrl: string | undefined): Backend[] {
  return databaseUrl ? ['pglite', 'postgres'] : ['pglite'];
}

/** Throws unless every name is a backend, and unless there is a database URL for `postgres`. */
function checkBackends(backends: string[], databaseUrl: string | undefined): asserts backends is Backend[] {
  for (const b of backends) {
    if (b !== 'pglite' && b !== 'postgres') throw new Error(`unknown backend "${b}" (pglite, postgres)`);
  }
  if (backends.includes('postgres') && !databaseUrl)
    throw new Error('the postgres backend needs DATABASE_URL');
}

/** `--backends LIST`, else BENCH_BACKENDS, comma-separated; else `defaultBackends`. */
export function backendsOption(flag: string | undefined, databaseUrl: string | undefined): Backend[] {
  const raw = flag ?? process.env.BENCH_BACKENDS;
  const backends = raw ? raw.split(',').map((b) => b.trim()) : defaultBackends(databaseUrl);
  checkBackends(backends, databaseUrl);
  return backends;
}

/** `--backend B`, else BENCH_BACKEND; else PostgreSQL when there is a database URL, PGlite otherwise. */
export function backendOption(flag: string | undefined, databaseUrl: string | undefined): Backend {
  const backend = flag ?? process.env.BENCH_BACKEND ?? (databaseUrl ? 'postgres' : 'pglite');
  checkBackends([backend], databaseUrl);
  return backend as Backend;
}

/** The backends as a run's first line names them, the database URL's password hidden. */
export function backendsLine(backends: readonly Backend[], databaseUrl: string | undefined): string {
  return `${backends.join(' and ')}${databaseUrl && backends.includes('postgres') ? ` (${redact(databaseUrl)})` : ''}`;
}

/** The database a Ledgerhook started on `dataDir` used: PGlite keeps its files under it. */
export function backendOfDataDir(dataDir: string): Backend {
  return fs.existsSync(path.join(dataDir, 'pglite')) ? 'pglite' : 'postgres';
}

/** Ledgerhook's environment for the PostgreSQL at `databaseUrl`, with a fixed master key; none for PGlite. */
export function ledgerhookDatabaseEnv(
  databaseUrl: string | undefined,
  bench: string,
): Record<string, string> {
  return databaseUrl ? { DATABASE_URL: databaseUrl, LEDGERHOOK_MASTER_KEY: benchMasterKey(bench) } : {};
}

export function redact(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '(unparseable DATABASE_URL)';
  }
}

export function isLoopback(databaseUrl: string): boolean {
  try {
    const host = new URL(databaseUrl).hostname;
    return host === 'localhost' || host === '[::1]' || host.startsWith('127.') || host === '';
  } catch {
    return false;
  }
}

/**
 * A database of its own for this run on the server of `databaseUrl`, `lh_bench_<pid>[_<suffix>]`,
 * dropped at the end (and on errors and signals).
 */
export async function createScratchDatabase(
  databaseUrl: string,
  suffix?: string,
): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `lh_bench_${process.pid}${suffix ? `_${suffix}` : ''}`;
  const admin = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)}`); // a previous run with our pid
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  let dropped = false;
  const drop = async () => {
    if (dropped) return;
    dropped = true;
    const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 });
    await client.connect();
    try {
      await client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
      await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)}`);
    } finally {
      await client.end();
    }
  };
  onCleanup(drop);
  const url = new URL(databaseUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop };
}

/** `createScratchDatabase` on the server of `databaseUrl`; none without a URL (PGlite). */
export async function createScratchDatabaseIfUrl(
  databaseUrl: string | undefined,
  suffix?: string,
): Promise<{ url: string; drop: () => Promise<void> } | undefined> {
  return databaseUrl ? createScratchDatabase(databaseUrl, suffix) : undefined;
}

/**
 * Runs `run` on a fresh store: a temporary PGlite directory (on this thread unless
 * BENCH_PGLITE_WORKER=1: bench:ingest's figures since issue 13 are so, while the service puts it on
 * a worker thread by default), or a scratch PostgreSQL database, `lh_bench_<pid>_<name>`. The store
 * module is loaded here, not by every process that imports these helpers.
 */
export async function withFreshStore<T>(
  backend: Backend,
  databaseUrl: string | undefined,
  name: string,
  run: (store: Store) => Promise<T>,
): Promise<T> {
  const { openStore } = await import('../src/store/db.js');
  if (backend === 'pglite') {
    const store = await openStore({
      pgliteDir: path.join(makeTempDir(`ledgerhook-bench-${name}-`), 'pglite'),
      pgliteWorker: process.env.BENCH_PGLITE_WORKER === '1',
    });
    try {
      return await run(store);
    } finally {
      await store.close();
    }
  }
  const scratch = await createScratchDatabase(databaseUrl!, name);
  try {
    const store = await openStore({ databaseUrl: scratch.url, onError: () => {} });
    try {
      return await run(store);
    } finally {
      await store.close();
    }
  } finally {
    await scratch.drop();
  }
}

export function machineLine(): string {
  return `${os.cpus().length} CPUs, load average ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`;
}

// ---------------------------------------------------------------------------------------------
// Cleaning up: children killed and temporary directories removed on exit, error and signals

const running = new Set<ChildProcess>();
const tempDirs = new Set<string>();
const asyncCleanups: Array<() => Promise<void>> = [];

/** Kills the children still running and removes the temporary directories, synchronously. */
export function cleanUp(): void {
  for (const proc of running) {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  }
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
  tempDirs.clear();
}

/** Registers work that needs the event loop (dropping a database); run by `finish` and on signals. */
export function onCleanup(cleanup: () => Promise<void>): void {
  asyncCleanups.push(cleanup);
}

/**
 * Runs the asynchronous clean-ups (each at most 10 s, newest first), then the synchronous ones.
 * Called from several places (end of the run, a failure, a signal): all get the same promise, so
 * nobody exits while another is still dropping a database.
 */
let finishing: Promise<void> | undefined;
export function finish(): Promise<void> {
  finishing ??= (async () => {
    cleanUp(); // children first: a database cannot be dropped while they hold it
    for (const cleanup of asyncCleanups.splice(0).reverse()) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        cleanup().catch((err: unknown) =>
          process.stderr.write(`clean-up failed: ${err instanceof Error ? err.message : String(err)}\n`),
        ),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, 10_000);
        }),
      ]);
      clearTimeout(timer);
    }
    cleanUp();
  })();
  return finishing;
}

let interrupted = false;
process.on('exit', cleanUp);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (!interrupted) process.stderr.write(`\n${signal}: cleaning up\n`);
    interrupted = true;
    finish().finally(() => process.exit(130));
  });
}

export function makeTempDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

/** `node` flags writing V8 CPU profiles into `dir/name` (Node names the files, one per thread), or none. */
export function cpuProfArgs(dir: string | undefined, name: string): string[] {
  return dir ? ['--cpu-prof', '--cpu-prof-dir', path.join(dir, name)] : [];
}

/** Runs `main`, cleans up, and exits 0, or 1 after printing why it failed. */
export function runMain(name: string, main: () => Promise<void>): void {
  main().then(
    () => finish().finally(() => process.exit(0)),
    (err: unknown) => {
      if (interrupted) return; // the signal handler finishes and exits
      process.stderr.write(`\n${name} failed: ${err instanceof Error ? err.message : String(err)}\n`);
      finish().finally(() => process.exit(1));
    },
  );
}

// ---------------------------------------------------------------------------------------------
// Child processes

export interface Server {
  name: string;
  proc: ChildProcess;
  /** The first API token seen on stdout. */
  token: string | undefined;
  /** The last lines of stdout and stderr, for error reports. */
  tail(): string;
  exitCode: number | null | undefined;
  exited: Promise<void>;
}

/** The environment without the variables that choose a database, key, address or log level. */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of [
    'DATABASE_URL',
    'LEDGERHOOK_DATA_DIR',
    'LEDGERHOOK_MASTER_KEY',
    'LEDGERHOOK_ROLES',
    'LEDGERHOOK_DISPATCH_CONCURRENCY',
    'PORT',
    'HOST',
    'LOG_LEVEL',
  ])
    delete env[name];
  return { ...env, HOST: '127.0.0.1', ...extra };
}

/**
 * Ledgerhook is measured as shipped: built (`npm run build`, as `npm start` does), not through
 * tsx, whose loader and source maps would be measured too. Built only when a source is newer than
 * the last build, as the tests do: rebuilding removes dist/ for a few seconds under any test or
 * bench started from it meanwhile.
 */
function runnable(args: string[]): string[] {
  if (args[0] !== 'src/main.ts') return ['--import', 'tsx', ...args];
  ensureBuilt();
  return ['dist/main.js', ...args.slice(1)];
}

/** `node [nodeArgs] <script> ...args` in the repository (Ledgerhook compiled, the rest through tsx). */
export function startServer(
  name: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  options: { ipc?: boolean; nodeArgs?: string[] } = {},
): Server {
  const proc = spawn(process.execPath, [...(options.nodeArgs ?? []), ...runnable(args)], {
    cwd: ROOT,
    env,
    stdio: options.ipc ? ['pipe', 'pipe', 'pipe', 'ipc'] : ['pipe', 'pipe', 'pipe'],
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

export async function stopServer(server: Server): Promise<void> {
  if (server.exitCode !== undefined) return;
  server.proc.kill('SIGTERM');
  const timer = setTimeout(() => server.proc.kill('SIGKILL'), 10_000);
  await server.exited;
  clearTimeout(timer);
}

export async function freePort(): Promise<number> {
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
export async function waitUntilServing(server: Server, url: string, timeoutMs = 90_000): Promise<void> {
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
    await sleep(100);
  }
}

/** Issues an API token with `ledgerhook token create` (for a database that already has accounts). */
export async function createToken(env: NodeJS.ProcessEnv): Promise<string> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', 'src/main.ts', 'token', 'create', '--account', 'bench'],
    { cwd: ROOT, env },
  );
  const token = TOKEN.exec(stdout)?.[0];
  if (!token) throw new Error(`ledgerhook token create printed no token:\n${stdout}`);
  return token;
}

/** The token a first start printed, or a new one when the database already had accounts. */
export async function serverToken(server: Server, env: NodeJS.ProcessEnv): Promise<string> {
  // The first start of a database prints the default account's token before listening; a
  // database that already has accounts prints none, so issue one.
  const printDeadline = Date.now() + 1_000;
  while (server.token === undefined && Date.now() < printDeadline) await sleep(50);
  return server.token ?? (await createToken(env));
}

// ---------------------------------------------------------------------------------------------
// JSON-RPC (an EVM node such as anvil), without a client library in between

let rpcId = 0;

export interface RpcCall {
  method: string;
  params: unknown[];
}

/**
 * POSTs JSON and parses the answer, through undici's request: the references measure the cheapest
 * client, not fetch's Request and web streams (several times the CPU a call; the service's EVM
 * transport is on undici too, src/chains/evm/rpc-transport.ts).
 */
export async function postJson(url: string, body: string): Promise<unknown> {
  const res = await request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return res.body.json();
}

/** One JSON-RPC call; throws the node's error. */
export async function jsonRpc<T>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const body = (await postJson(url, JSON.stringify({ jsonrpc: '2.0', id: ++rpcId, method, params }))) as {
    result?: T;
    error?: { message: string };
  };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

/** A JSON-RPC batch, answers in the order of `calls`; throws the first error. */
export async function jsonRpcBatch<T>(url: string, calls: RpcCall[]): Promise<T[]> {
  if (calls.length === 0) return [];
  const first = rpcId + 1;
  rpcId += calls.length;
  const body = (await postJson(
    url,
    JSON.stringify(calls.map((c, i) => ({ jsonrpc: '2.0', id: first + i, ...c }))),
  )) as Array<{ id: number; result?: T; error?: { message: string } }>;
  body.sort((a, b) => a.id - b.id);
  const failed = body.find((b) => b.error);
  if (failed) throw new Error(`${calls[failed.id - first]?.method}: ${failed.error!.message}`);
  return body.map((b) => b.result as T);
}

export const toQuantity = (n: number | bigint) => `0x${n.toString(16)}`;

// ---------------------------------------------------------------------------------------------
// CPU accounting

const CLOCK_TICKS = 100; // USER_HZ, 100 on Linux for all mainstream architectures

function statCpuSeconds(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/** CPU seconds (user + system) used so far by `pid`, or undefined where /proc is unavailable. */
export function processCpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    return statCpuSeconds(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

/** The pids of this process's children named `comm` (e.g. the anvil a helper spawned), from /proc. */
export function childPids(comm: string): number[] {
  const pids: number[] = [];
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return pids;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid && stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) === comm) {
        pids.push(Number(entry));
      }
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/**
 * CPU seconds used so far by every process of this host named `comm` (e.g. all `postgres`
 * processes), per pid so that a difference counts only processes alive at both readings.
 */
export function commCpuSeconds(comm: string): Map<number, number> | undefined {
  const result = new Map<number, number>();
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) === comm) {
        result.set(Number(entry), statCpuSeconds(stat));
      }
    } catch {
      // gone meanwhile
    }
  }
  return result;
}

/** CPU seconds used between two `commCpuSeconds` readings (processes started meanwhile count in full). */
export function commCpuDelta(
  before: Map<number, number> | undefined,
  after: Map<number, number> | undefined,
) {
  if (!before || !after) return undefined;
  let sum = 0;
  for (const [pid, seconds] of after) sum += seconds - (before.get(pid) ?? 0);
  return sum;
}

// ---------------------------------------------------------------------------------------------
// Output

/** Columns separated by two spaces; the first left-aligned, the others right-aligned. */
export function formatTable(header: string[], rows: string[][]): string {
  const table = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...table.map((cells) => (cells[i] ?? '').length)));
  return table
    .map((cells) =>
      cells
        .map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** The `q`-quantile (0..1) of sorted values, nearest rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** Epoch milliseconds with sub-millisecond precision, comparable between processes of this host. */
export const now = () => performance.timeOrigin + performance.now();

/** A whole number with thousands separators (1,000,000). */
export const grouped = (value: number) => Math.round(value).toLocaleString('en-US');

export const fixed = (value: number, digits: number) =>
  Number.isFinite(value) ? value.toFixed(digits) : '-';
export const percent = (value: number | undefined) => (value === undefined ? '-' : `${Math.round(value)}%`);

/** The median seconds of `runs` runs of `run`. */
export async function medianSeconds(runs: number, run: () => Promise<void>): Promise<number> {
  const seconds: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = now();
    await run();
    seconds.push((now() - t) / 1000);
  }
  seconds.sort((a, b) => a - b);
  return seconds[Math.floor(seconds.length / 2)]!;
}

/** Runs a follower from its start until its cursor reaches `height`; fails on its first error. */
export async function followUntil(
  follower: {
    start(): void;
    stop(): Promise<void>;
    status(): { height: number | null; lastError: string | null };
  },
  height: number,
  label: string,
  timeoutMs = 120_000,
): Promise<void> {
  follower.start();
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const status = follower.status();
      if (status.height === height) return;
      if (status.lastError) throw new Error(`${label}: the follower failed: ${status.lastError}`);
      if (Date.now() > deadline) throw new Error(`${label}: ${height} not reached in ${timeoutMs / 1000} s`);
      await sleep(1);
    }
  } finally {
    await follower.stop();
  }
}

let gcFunction: (() => void) | undefined;
/** A full garbage collection (without --expose-gc), so heap figures before and after mean what is retained. */
export function gc(): void {
  if (!gcFunction) {
    v8.setFlagsFromString('--expose-gc');
    gcFunction = vm.runInNewContext('gc') as () => void;
  }
  gcFunction();
  gcFunction();
}

/**
 * Runs `pass` under V8's sampling profiler when a directory is given, writing `<name>.cpuprofile`
 * (open it in Chrome DevTools or summarise self time by function): the pass alone, not the set-up.
 */
export async function profiled<T>(dir: string | undefined, name: string, pass: () => Promise<T>): Promise<T> {
  if (!dir) return pass();
  const session = new inspector.Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) =>
      session.post(method, params, (err, result) => (err ? reject(err) : resolve(result))),
    );
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 500 });
  await post('Profiler.start');
  try {
    return await pass();
  } finally {
    const { profile } = (await post('Profiler.stop')) as { profile: unknown };
    session.disconnect();
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, `${name}.cpuprofile`), JSON.stringify(profile));
  }
}

/** A receiver in the bench's own process, so that arrival times share the clock of what it times. */
export interface TimingReceiver {
  url: string;
  /** Arrival (`now()`) of the first timed notification of each transaction. */
  arrivals: Map<string, number>;
  /** Timed notifications of a transaction already received. */
  duplicates: number;
  /** Notifications `timed` left out. */
  others: number;
  close(): Promise<void>;
}

const ACK = Buffer.from('{"status":"success"}');

/** Acknowledges every webhook at once and stamps those `timed` picks, by `txId`. */
export async function startTimingReceiver(
  timed: (body: { txId: string; mempool?: boolean; dropped?: boolean }) => boolean,
): Promise<TimingReceiver> {
  const receiver: TimingReceiver = {
    url: '',
    arrivals: new Map(),
    duplicates: 0,
    others: 0,
    close: async () => {},
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const at = now();
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(ACK.length) });
      res.end(ACK);
      let body: { txId?: unknown; mempool?: boolean; dropped?: boolean };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body;
      } catch {
        return;
      }
      if (typeof body.txId !== 'string') return;
      if (!timed(body as { txId: string })) receiver.others++;
      else if (receiver.arrivals.has(body.txId)) receiver.duplicates++;
      else receiver.arrivals.set(body.txId, at);
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  onCleanup(() => receiver.close());
  return receiver;
}

/** One call of Ledgerhook's API with a token: its status and JSON body. */
export async function apiCall(
  base: string,
  token: string,
  method: string,
  route: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}
