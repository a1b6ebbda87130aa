// The service's processes in the chaos run: the shipped build (a copy taken at the start, so that a
// rebuild of dist/ by someone else meanwhile cannot pull it from under a restart), each process
// with its role, its port (kept across restarts, as a supervisor keeps a unit's), its data
// directory and its log file; killed with SIGKILL and restarted as a supervisor would.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { ensureBuilt } from '../../test/helpers/build.js';
import { cleanEnv, freePort, ROOT, sleep, TOKEN } from '../lib.js';

export type Role = 'api' | 'dispatcher' | 'watcher';

/**
 * dist/, drizzle/ and package.json copied to `dir`, with node_modules linked: the build under test.
 * `source` is this repository (built first if a source is newer) or another checkout's built tree.
 */
export function snapshotBuild(dir: string, source = ROOT): string {
  if (source === ROOT) ensureBuilt();
  else if (!fs.existsSync(path.join(source, 'dist', 'main.js')))
    throw new Error(`${source} has no dist/main.js: build it first`);
  fs.cpSync(path.join(source, 'dist'), path.join(dir, 'dist'), { recursive: true });
  fs.cpSync(path.join(source, 'drizzle'), path.join(dir, 'drizzle'), { recursive: true });
  fs.copyFileSync(path.join(source, 'package.json'), path.join(dir, 'package.json'));
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  return path.join(dir, 'dist', 'main.js');
}

export interface ServiceProcess {
  name: string;
  role: Role;
  port: number;
  url: string;
  dataDir: string;
  logFile: string;
  proc: ChildProcess | undefined;
  /** Every pid this slot has had, for the leftover check. */
  pids: number[];
  starts: number;
  exitCodes: Array<number | string>;
}

const all = new Set<ServiceProcess>();
process.on('exit', () => {
  for (const s of all)
    if (s.proc && s.proc.exitCode === null && s.proc.signalCode === null) s.proc.kill('SIGKILL');
});

export class Services {
  readonly list: ServiceProcess[] = [];

  constructor(
    private readonly main: string,
    private readonly env: Record<string, string>,
    private readonly dir: string,
  ) {}

  async add(role: Role, index: number): Promise<ServiceProcess> {
    const port = await freePort();
    const name = `${role}-${index}`;
    const dataDir = path.join(this.dir, name);
    fs.mkdirSync(dataDir, { recursive: true });
    const service: ServiceProcess = {
      name,
      role,
      port,
      url: `http://127.0.0.1:${port}`,
      dataDir,
      logFile: path.join(this.dir, `${name}.log`),
      proc: undefined,
      pids: [],
      starts: 0,
      exitCodes: [],
    };
    this.list.push(service);
    all.add(service);
    return service;
  }

  byRole(role: Role): ServiceProcess[] {
    return this.list.filter((s) => s.role === role);
  }

  envOf(service: ServiceProcess): NodeJS.ProcessEnv {
    return cleanEnv({
      ...this.env,
      PORT: String(service.port),
      LEDGERHOOK_DATA_DIR: service.dataDir,
      LEDGERHOOK_ROLES: service.role,
      LOG_FORMAT: 'json',
    });
  }

  start(service: ServiceProcess): void {
    const out = fs.openSync(service.logFile, 'a');
    fs.writeSync(out, `--- start ${service.starts + 1} at ${new Date().toISOString()}\n`);
    const proc = spawn(process.execPath, [this.main, 'serve', '--role', service.role], {
      cwd: path.dirname(path.dirname(this.main)),
      env: this.envOf(service),
      stdio: ['ignore', out, out],
    });
    fs.closeSync(out);
    service.proc = proc;
    service.pids.push(proc.pid!);
    service.starts++;
    proc.on('exit', (code, signal) => service.exitCodes.push(signal ?? code ?? 'unknown'));
  }

  /** Resolves when /readyz answers 200 (the database answers); fails if the process exits. */
  async ready(service: ServiceProcess, timeoutMs = 90_000): Promise<void> {
    const proc = service.proc!;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (proc.exitCode !== null || proc.signalCode !== null)
        throw new Error(
          `${service.name} exited (${proc.exitCode ?? proc.signalCode}); see ${service.logFile}`,
        );
      try {
        const res = await fetch(`${service.url}/readyz`, { signal: AbortSignal.timeout(3_000) });
        await res.arrayBuffer();
        if (res.status === 200) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline)
        throw new Error(`${service.name} not ready in ${timeoutMs / 1000} s; see ${service.logFile}`);
      await sleep(100);
    }
  }

  async kill(service: ServiceProcess): Promise<void> {
    const proc = service.proc!;
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill('SIGKILL');
    await exited;
  }

  /** SIGTERM to all, SIGKILL to any still running after `graceMs`. */
  async stopAll(graceMs = 15_000): Promise<void> {
    await Promise.all(
      this.list.map(async (service) => {
        const proc = service.proc;
        if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
        const exited = new Promise((resolve) => proc.once('exit', resolve));
        proc.kill('SIGTERM');
        const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(timer);
      }),
    );
  }

  /** `ledgerhook migrate`, then a token of a new account: the CLI as an operator runs it. */
  async migrateAndToken(account: string): Promise<string> {
    const env = cleanEnv({ ...this.env, LEDGERHOOK_DATA_DIR: path.join(this.dir, 'cli') });
    const cwd = path.dirname(path.dirname(this.main));
    const exec = promisify(execFile);
    await exec(process.execPath, [this.main, 'migrate'], { cwd, env, timeout: 120_000 });
    const { stdout } = await exec(process.execPath, [this.main, 'token', 'create', '--account', account], {
      cwd,
      env,
      timeout: 60_000,
    });
    const token = TOKEN.exec(stdout)?.[0];
    if (!token) throw new Error(`ledgerhook token create printed no token:\n${stdout}`);
    return token;
  }
}
