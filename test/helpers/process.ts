import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const CLI = ['--import', 'tsx', 'src/main.ts'];
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
  );
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
  };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the `ledgerhook` CLI to completion. */
export function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve, reject) => {
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
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The lines a process wrote, without the warnings Node itself prints. */
export function meaningfulLines(text: string): string[] {
  return text.split('\n').filter((l) => l.trim() !== '' && !/^\(node:\d+\)|--trace-warnings/.test(l));
}

export function lastLine(text: string): string {
  return meaningfulLines(text).at(-1) ?? '';
}
