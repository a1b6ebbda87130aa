import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { BUILT_CLI } from './build.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
/**
 * The compiled CLI (kept current by the test run's global setup), as `npm start` runs it. V8 compiles
 * PGlite's WebAssembly quickly first and optimises what runs often; a process that opens PGlite and
 * lives a few seconds spent a third of its CPU on that optimisation, on background threads. A larger
 * budget before it (V8's default is 1,800,000) cut a start's CPU from 1.5-1.7 s to 1.15-1.2 s; a long
 * job still gets its optimised code (bench/README.md, "Issue 33, eighth session").
 */
const CLI = ['--wasm-tiering-budget=18000000', BUILT_CLI];
const TOKEN = /lh_[A-Za-z0-9_-]{32}/;

export interface ServiceProcess {
  child: ChildProcess;
  url: string;
  /** The token printed on first start, if this start printed one. */
  printedToken: string | undefined;
  stdout(): string;
  stderr(): string;
  /** Sends `signal` and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /**
   * Sends `signal` to the whole process group, as Ctrl-C in a terminal does (`detached` only:
   * the service then leads a group of its own, with the children it started).
   */
  signalGroup(signal: NodeJS.Signals): void;
  exited: Promise<number | null>;
}

/** Resolves when `check` returns a value, polling until `timeoutMs`. */
export async function waitFor<T>(
  check: () => T | undefined | Promise<T | undefined>,
  what: string,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

function baseEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const clean = { ...process.env };
  for (const name of [
    'DATABASE_URL',
    'LEDGERHOOK_DATA_DIR',
    'LEDGERHOOK_MASTER_KEY',
    'PORT',
    'HOST',
    'LOG_LEVEL',
    'LEDGERHOOK_ALLOW_CIDRS',
  ])
    delete clean[name];
  return { ...clean, PORT: '0', LOG_LEVEL: 'info', ...env };
}

export interface ServiceProcessOptions {
  /** The command line after the binary; `['serve']` by default (e.g. `['serve', '--devnet']`). */
  args?: string[];
  /** Start the service as the leader of a new process group (see `signalGroup`). */
  detached?: boolean;
}

/** Starts `ledgerhook serve` as its own process and waits until it serves. */
export async function startServiceProcess(
  env: Record<string, string>,
  options: ServiceProcessOptions = {},
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [...CLI, ...(options.args ?? ['serve'])], {
    cwd: repoRoot,
    env: baseEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached === true,
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let exitCode: number | null | undefined;
  void exited.then((code) => {
    exitCode = code === null ? -1 : code;
  });
  const url = await waitFor(
    () => {
      if (exitCode !== undefined)
        throw new Error(`service exited (${exitCode}) before serving:\n${out}\n${err}`);
      for (const line of out.split('\n')) {
        if (!line.includes('ledgerhook is serving')) continue;
        return (JSON.parse(line) as { url: string }).url;
      }
      return undefined;
    },
    'the service to serve',
    60_000,
  ).catch((error: unknown) => {
    // Leave nothing behind (with its own process group, nobody else would stop it).
    if (options.detached) process.kill(-child.pid!, 'SIGKILL');
    else child.kill('SIGKILL');
    throw error;
  });
  return {
    child,
    url,
    printedToken: TOKEN.exec(out)?.[0],
    stdout: () => out,
    stderr: () => err,
    exited,
    async stop(signal = 'SIGTERM') {
      if (exitCode === undefined) child.kill(signal);
      return exited;
    },
    signalGroup(signal) {
      if (!options.detached) throw new Error('signalGroup needs a service started with detached: true');
      try {
        process.kill(-child.pid!, signal);
      } catch (err) {
        // ESRCH: the group is already empty.
        if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
      }
    },
  };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The CLI as a child process, its output gathered as it comes. */
function spawnCli(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [...CLI, ...args], {
    cwd: repoRoot,
    env: baseEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr.on('data', (c: Buffer) => {
    stderr += c.toString();
  });
  // 'close', not 'exit': a process may exit before its output has been read; what a test reads
  // once it ended must be whole (doctor's one line was missing from 1 run in 20 under load).
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

/** Runs the `ledgerhook` CLI to completion. */
export async function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  const run = spawnCli(args, env);
  const code = await run.exited;
  return { code, stdout: run.stdout(), stderr: run.stderr() };
}

export interface CliProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first match of `pattern` in stdout; fails if the process exits first. */
  waitForOutput(pattern: RegExp, what: string, timeoutMs?: number): Promise<RegExpExecArray>;
  /** Sends `signal` (unless it has exited) and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  exited: Promise<number | null>;
}

/** Starts a `ledgerhook` command that keeps running (e.g. listen), reading its output as it comes. */
export function startCli(args: string[], env: Record<string, string>): CliProcess {
  const run = spawnCli(args, env);
  let code: number | null | undefined;
  void run.exited.then((exitCode) => {
    code = exitCode;
  });
  return {
    ...run,
    waitForOutput: (pattern, what, timeoutMs) =>
      waitFor(
        () => {
          const match = pattern.exec(run.stdout());
          if (match) return match;
          if (code !== undefined)
            throw new Error(`exited (${code}) before ${what}:\n${run.stdout()}\n${run.stderr()}`);
          return undefined;
        },
        what,
        timeoutMs,
      ),
    async stop(signal = 'SIGTERM') {
      if (code === undefined) run.child.kill(signal);
      return run.exited;
    },
  };
}

/** The lines a process wrote, without the warnings Node itself prints. */
export function meaningfulLines(text: string): string[] {
  return text.split('\n').filter((l) => l.trim() !== '' && !/^\(node:\d+\)|--trace-warnings/.test(l));
}

export function lastLine(text: string): string {
  return meaningfulLines(text).at(-1) ?? '';
}
