/**
 * `ledgerhook doctor` as an operator runs it: real processes, a real anvil chain, real PGlite and
 * PostgreSQL. Every node a test names is on loopback; catalog networks that no subscription uses
 * and whose node is not overridden are never contacted, so nothing here reaches past loopback.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import { startRpcProxy, writeDevnetConfig } from '../helpers/anvil.js';
import { backends, createTestEnvironment, type TestEnvironment } from '../helpers/env.js';
import { closedPort } from '../helpers/loopback-server.js';
import { databaseUrlFor } from '../helpers/postgres.js';
import {
  type CliResult,
  meaningfulLines,
  runCli,
  type ServiceProcess,
  startServiceProcess,
  waitFor,
} from '../helpers/process.js';

let anvil: Anvil;
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-doctor-'));
/** A configuration file adding network DEVNET on the anvil chain. */
let configFile: string;

beforeAll(async () => {
  anvil = await startAnvil();
  configFile = writeDevnetConfig(path.join(scratch, 'ledgerhook.json'), anvil.chainId, anvil.rpcUrl);
});
afterAll(async () => {
  await anvil?.stop();
  fs.rmSync(scratch, { recursive: true, force: true });
});

const doctor = (env: Record<string, string>, args: string[] = []) => runCli(['doctor', ...args], env);

/** The doctor's line for `subject` (`database`, `network ETH`…). */
function lineOf(result: CliResult, subject: string): string {
  const line = meaningfulLines(result.stdout).find((l) => l.slice(6).startsWith(`${subject}: `));
  if (!line) throw new Error(`no "${subject}" line in:\n${result.stdout}\n${result.stderr}`);
  return line;
}

function failures(result: CliResult): string[] {
  return meaningfulLines(result.stdout).filter((l) => l.startsWith('FAIL'));
}

describe.each(backends)('doctor on a healthy %s setup', (backend) => {
  let environment: TestEnvironment;
  let env: Record<string, string>;
  let service: ServiceProcess | undefined;

  beforeAll(async () => {
    environment = await createTestEnvironment(backend);
    env = { ...environment.env, LEDGERHOOK_CONFIG: configFile, LEDGERHOOK_ALLOW_CIDRS: '127.0.0.0/8' };
    service = await startServiceProcess(env);
    // A subscription on DEVNET: the watcher follows it, so doctor checks its node and its lag.
    const created = await fetch(`${service.url}/api/v1/subscription`, {
      method: 'POST',
      headers: { authorization: `Bearer ${service.printedToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        type: 'ADDRESS_TRANSACTION',
        attr: { address: anvil.accounts[1]!.address, chain: 'DEVNET', url: 'http://127.0.0.1:9/hook' },
      }),
    });
    expect(created.status).toBe(201);
    await waitFor(async () => {
      const ready = (await (await fetch(`${service!.url}/readyz`)).json()) as {
        networks?: { network: string; height: number | null }[];
      };
      return ready.networks?.some((n) => n.network === 'DEVNET' && n.height !== null) ? true : undefined;
    }, 'the DEVNET follower to store its cursor');
  }, 90_000);
  afterAll(async () => {
    await service?.stop('SIGKILL');
    await environment?.cleanup();
  });

  test('while the service runs: every check passes, exit 0', async () => {
    const result = await doctor(env);
    expect(failures(result), result.stdout).toEqual([]);
    expect(result.code, result.stdout + result.stderr).toBe(0);
    expect(lineOf(result, 'configuration')).toMatch(/^ok {4}configuration: valid/);
    const database = lineOf(result, 'database');
    if (backend === 'pglite') {
      // The embedded database is not opened beside the service: it is read through it.
      expect(database).toMatch(
        new RegExp(
          `^ok {4}database: PGlite \\(PostgreSQL [\\d.]+\\) in .*in use by the running service \\(pid ${service!.child.pid}\\), read through its admin endpoint, migrations up to date \\(\\d{4}\\)$`,
        ),
      );
      expect(lineOf(result, 'admin files')).toMatch(
        /^ok {4}admin files: admin\.json and admin\.secret of pid \d+, mode 0600$/,
      );
    } else {
      expect(database).toMatch(
        /^ok {4}database: PostgreSQL [\d.]+.* at 127\.0\.0\.1:\d+\/\w+, primary, migrations up to date \(\d{4}\)$/,
      );
    }
    expect(lineOf(result, 'master key')).toMatch(
      /^ok {4}master key: .*master\.key \(key [0-9a-f]{16}\), the one the database uses$/,
    );
    expect(lineOf(result, 'network DEVNET')).toMatch(
      new RegExp(
        `^ok {4}network DEVNET: ${anvil.rpcUrl.replace(/[.]/g, '\\.')}, chain ${anvil.chainId}, head \\d+, follower at \\d+ \\(\\d+ behind\\), traces by trace_block \\[used by subscriptions, node configured\\]$`,
      ),
    );
    // The catalog's networks are named, not contacted.
    expect(result.stdout).toMatch(/^skip {2}networks: ETH, BSC, .* not contacted/m);
    expect(meaningfulLines(result.stdout).at(-1)).toMatch(/^doctor: all \d+ checks passed/);
  });

  test('once it has stopped: the database is opened by doctor itself, still exit 0', async () => {
    expect(await service!.stop()).toBe(0);
    service = undefined;
    const result = await doctor(env);
    expect(failures(result), result.stdout).toEqual([]);
    expect(result.code).toBe(0);
    if (backend === 'pglite') {
      expect(lineOf(result, 'database')).toMatch(
        /^ok {4}database: PGlite .*, no service running, migrations up to date/,
      );
      expect(lineOf(result, 'admin files')).toBe('ok    admin files: no service runs, none published');
      // Doctor let go of the data directory: a service starts on it.
      service = await startServiceProcess(env);
    }
    expect(lineOf(result, 'network DEVNET')).toMatch(/^ok {4}network DEVNET: .*follower at \d+/);
  });
});

describe('doctor reporting failures', () => {
  let environment: TestEnvironment;
  beforeAll(async () => {
    environment = await createTestEnvironment('pglite');
  });
  afterAll(async () => environment?.cleanup());

  test('a node that is down: the line names the network and its variable, the secret in its URL blanked; exit 1', async () => {
    const port = await closedPort();
    const result = await doctor({
      ...environment.env,
      LEDGERHOOK_RPC_ETH: `http://127.0.0.1:${port}`,
      LEDGERHOOK_RPC_BSC: `http://127.0.0.1:${port}/v3/supersecretapikey`,
    });
    expect(result.code, result.stdout + result.stderr).toBe(1);
    expect(lineOf(result, 'network ETH')).toBe(
      `FAIL  network ETH: http://127.0.0.1:${port} refused the connection (nothing listens there) — check LEDGERHOOK_RPC_ETH`,
    );
    expect(lineOf(result, 'network BSC')).toMatch(
      new RegExp(
        `^FAIL {2}network BSC: http://127\\.0\\.0\\.1:${port}/\\[redacted\\] refused the connection .* — check LEDGERHOOK_RPC_BSC$`,
      ),
    );
    expect(result.stdout + result.stderr).not.toContain('supersecretapikey');
    expect(lineOf(result, 'database')).toMatch(/^ok {4}database: PGlite/);
    expect(meaningfulLines(result.stdout).at(-1)).toBe(
      `doctor: 2 of ${meaningfulLines(result.stdout).length - 1} checks failed`,
    );
  });

  test("a node of another chain than the network's: exit 1", async () => {
    const result = await doctor({ ...environment.env, LEDGERHOOK_RPC_ETH: anvil.rpcUrl });
    expect(result.code).toBe(1);
    expect(lineOf(result, 'network ETH')).toBe(
      `FAIL  network ETH: ${anvil.rpcUrl} is a node of chain ${anvil.chainId}, not of chain 1 (ETH) — point LEDGERHOOK_RPC_ETH at a node of chain 1`,
    );
  });

  test('a node that does not answer in time is cut off at --timeout', async () => {
    // A loopback listener that accepts connections and never answers.
    const net = await import('node:net');
    const sockets: import('node:net').Socket[] = [];
    const silent = net.createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as import('node:net').AddressInfo;
    try {
      const started = Date.now();
      const result = await doctor({ ...environment.env, LEDGERHOOK_RPC_ETH: `http://127.0.0.1:${port}` }, [
        '--timeout',
        '300ms',
      ]);
      expect(result.code).toBe(1);
      expect(lineOf(result, 'network ETH')).toBe(
        `FAIL  network ETH: http://127.0.0.1:${port} did not answer within 300ms — check LEDGERHOOK_RPC_ETH`,
      );
      expect(Date.now() - started).toBeLessThan(15_000);
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });

  test('a node without traces: a warning with traces auto (exit 0), a failure when a method was asked for', async () => {
    const proxy = await startRpcProxy(anvil.rpcUrl);
    proxy.intercept((request) =>
      request.method === 'debug_traceBlockByNumber' || request.method === 'trace_block'
        ? { error: { code: -32601, message: `the method ${request.method} does not exist/is not available` } }
        : undefined,
    );
    const file = path.join(scratch, 'traceless.json');
    fs.writeFileSync(
      file,
      JSON.stringify({
        networks: { TRACELESS: { family: 'evm', chainId: anvil.chainId, symbol: 'ETH', rpc: [proxy.url] } },
      }),
    );
    try {
      const auto = await doctor({ ...environment.env, LEDGERHOOK_CONFIG: file });
      expect(auto.code, auto.stdout).toBe(0);
      expect(lineOf(auto, 'network TRACELESS')).toMatch(
        /^warn {2}network TRACELESS: .*, no traces: the node refuses debug_traceBlockByNumber and trace_block: internal transfers are not notified \[node configured\] — use a node that serves debug_traceBlockByNumber or trace_block, or set traces: off for TRACELESS$/,
      );
      expect(proxy.methods).toContain('trace_block');
      const asked = await doctor({
        ...environment.env,
        LEDGERHOOK_CONFIG: file,
        LEDGERHOOK_TRACES_TRACELESS: 'debug',
      });
      expect(asked.code).toBe(1);
      expect(lineOf(asked, 'network TRACELESS')).toMatch(
        /^FAIL {2}network TRACELESS: .*, no traces: the node refuses debug_traceBlockByNumber:/,
      );
    } finally {
      await proxy.close();
    }
  });

  test('a node that cannot trace its latest block is a warning; a tracing node of its own (tracesRpc) is asked and named', async () => {
    const proxy = await startRpcProxy(anvil.rpcUrl);
    proxy.intercept((request) =>
      request.method === 'debug_traceBlockByNumber' || request.method === 'trace_block'
        ? { error: { code: -32000, message: 'required historical state unavailable (reexec=128)' } }
        : undefined,
    );
    const file = path.join(scratch, 'pruned.json');
    fs.writeFileSync(
      file,
      JSON.stringify({
        networks: { PRUNED: { family: 'evm', chainId: anvil.chainId, symbol: 'ETH', rpc: [proxy.url] } },
      }),
    );
    try {
      const pruned = await doctor({ ...environment.env, LEDGERHOOK_CONFIG: file });
      expect(pruned.code, pruned.stdout).toBe(0);
      expect(lineOf(pruned, 'network PRUNED')).toMatch(
        /^warn {2}network PRUNED: .*, the node cannot trace its latest block: the node no longer has this block's state \(.*required historical state unavailable.*\) \[node configured\] — blocks it cannot trace are committed without their internal transfers \(trace gaps\): name an archive or tracing node in LEDGERHOOK_TRACES_RPC_PRUNED \(tracesRpc\)$/,
      );
      const traced = await doctor({
        ...environment.env,
        LEDGERHOOK_CONFIG: file,
        LEDGERHOOK_TRACES_RPC_PRUNED: anvil.rpcUrl,
      });
      expect(traced.code, traced.stdout).toBe(0);
      expect(lineOf(traced, 'network PRUNED')).toMatch(
        new RegExp(
          `^ok {4}network PRUNED: .*, traces by debug_traceBlockByNumber from ${new URL(anvil.rpcUrl).host.replace(/[.]/g, '\\.')} \\[node configured\\]$`,
        ),
      );
    } finally {
      await proxy.close();
    }
  });

  test('every invalid variable is a line of its own naming it; nothing else is checked; exit 2', async () => {
    const result = await doctor({ ...environment.env, LOG_LEVEL: 'loud', LEDGERHOOK_BODY_LIMIT: 'lots' });
    expect(result.code).toBe(2);
    expect(failures(result)).toEqual([
      'FAIL  configuration: LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent (got "loud") — correct LOG_LEVEL',
      'FAIL  configuration: LEDGERHOOK_BODY_LIMIT must be an integer (got "lots") — correct LEDGERHOOK_BODY_LIMIT',
    ]);
    expect(result.stdout).toContain(
      'skip  database, files and networks: not checked until the configuration is valid',
    );
  });

  test('a data directory without Ledgerhook data is named, and not created', async () => {
    const missing = path.join(scratch, 'no-such-dir');
    const result = await doctor({ LEDGERHOOK_DATA_DIR: missing });
    expect(result.code).toBe(1);
    expect(lineOf(result, 'database')).toBe(
      `FAIL  database: ${missing} holds no Ledgerhook data (no pglite/ database there) — point LEDGERHOOK_DATA_DIR at your service's data directory, or start the service there once (ledgerhook serve)`,
    );
    expect(fs.existsSync(missing)).toBe(false);
  });

  test('a master key others may read, and an admin.json left by a process that is gone', async () => {
    const dataDir = path.join(scratch, 'loose');
    fs.cpSync(environment.dataDir, dataDir, { recursive: true });
    fs.writeFileSync(path.join(dataDir, 'master.key'), `${'ab'.repeat(32)}\n`, { mode: 0o644 });
    fs.chmodSync(path.join(dataDir, 'master.key'), 0o644);
    // A pid above the system's largest: no process has it.
    const gone = Number(fs.readFileSync('/proc/sys/kernel/pid_max', 'utf8')) + 1;
    fs.writeFileSync(
      path.join(dataDir, 'admin.json'),
      JSON.stringify({ pid: gone, url: 'http://127.0.0.1:9' }),
      {
        mode: 0o600,
      },
    );
    const result = await doctor({ LEDGERHOOK_DATA_DIR: dataDir });
    expect(result.code).toBe(1);
    expect(lineOf(result, 'master key')).toBe(
      `FAIL  master key: ${dataDir}/master.key may be read by others (mode 0644) — chmod 600 ${dataDir}/master.key`,
    );
    expect(lineOf(result, 'admin files')).toMatch(
      new RegExp(`^warn {2}admin files: ${dataDir}/admin\\.json was left by pid ${gone}, which is gone`),
    );
  });

  test('a PostgreSQL server that cannot be reached: exit 1 within the timeout', async () => {
    const port = await closedPort();
    const result = await doctor({
      LEDGERHOOK_DATA_DIR: environment.dataDir,
      DATABASE_URL: `postgres://ledgerhook:hunter22secret@127.0.0.1:${port}/ledgerhook`,
    });
    expect(result.code).toBe(1);
    expect(lineOf(result, 'database')).toBe(
      `FAIL  database: PostgreSQL at 127.0.0.1:${port}/ledgerhook refused the connection (nothing listens there) — check DATABASE_URL and that the server runs and accepts connections from here`,
    );
    expect(result.stdout).not.toContain('hunter22secret');
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)('doctor on a PostgreSQL database not migrated', () => {
  const serverUrl = process.env.TEST_DATABASE_URL!;
  const name = `lh_doctor_${process.pid}`;
  let databaseUrl: string;
  let dataDir: string;
  beforeAll(async () => {
    const admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    databaseUrl = databaseUrlFor(serverUrl, name);
    dataDir = fs.mkdtempSync(path.join(scratch, 'pg-'));
  });
  afterAll(async () => {
    const admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  });

  test('names the pending migrations and says to migrate; after ledgerhook migrate it passes', async () => {
    const env = { DATABASE_URL: databaseUrl, LEDGERHOOK_DATA_DIR: dataDir };
    const before = await doctor(env);
    expect(before.code).toBe(1);
    const known = fs
      .readdirSync(new URL('../../drizzle', import.meta.url))
      .filter((f) => f.endsWith('.sql')).length;
    expect(lineOf(before, 'database')).toMatch(
      new RegExp(
        `^FAIL {2}database: PostgreSQL .* primary, ${known} of ${known} migrations not applied \\(0000_init, … \\d{4}_\\w+\\) — run \`ledgerhook migrate\` \\(serve applies them too\\)$`,
      ),
    );
    expect((await runCli(['migrate'], env)).code).toBe(0);
    const after = await doctor(env);
    expect(failures(after), after.stdout).toEqual([]);
    expect(after.code).toBe(0);
    expect(lineOf(after, 'database')).toMatch(/primary, migrations up to date \(\d{4}\)$/);
  });
});

/**
 * Where initdb and pg_ctl are (Debian's PostgreSQL packages, which this machine and CI have), and
 * whom to run them as (the server refuses root).
 */
function clusterTools(): { bin: string; uid?: number; gid?: number } {
  const bin = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
  if (process.getuid?.() !== 0) return { bin };
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { bin, uid: id('-u'), gid: id('-g') };
}

describe('doctor on a PostgreSQL standby', () => {
  const tools = clusterTools();
  // A real server of its own in recovery: a fresh cluster started with standby.signal is a hot
  // standby (pg_is_in_recovery() is true, every write is refused), with no primary needed.
  // Not under the run's temporary directory: the postgres user must reach it (that one is 0700).
  const dir = fs.mkdtempSync('/tmp/ledgerhook-standby-');
  const run = (command: string, args: string[]) =>
    execFileSync(path.join(tools.bin, command), args, { uid: tools.uid, gid: tools.gid, stdio: 'ignore' });
  let port: number;
  beforeAll(async () => {
    if (tools.uid !== undefined) fs.chownSync(dir, tools.uid, tools.gid!);
    port = await closedPort();
    run('initdb', ['-D', path.join(dir, 'db'), '-A', 'trust', '-U', 'postgres']);
    fs.writeFileSync(path.join(dir, 'db', 'standby.signal'), '');
    if (tools.uid !== undefined) fs.chownSync(path.join(dir, 'db', 'standby.signal'), tools.uid, tools.gid!);
    const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`;
    run('pg_ctl', ['-D', path.join(dir, 'db'), '-o', options, '-w', '-l', path.join(dir, 'log'), 'start']);
  }, 60_000);
  afterAll(() => {
    run('pg_ctl', ['-D', path.join(dir, 'db'), '-m', 'immediate', 'stop']);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('is a failure that says to point DATABASE_URL at the primary', async () => {
    const result = await doctor({
      DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/postgres`,
      LEDGERHOOK_DATA_DIR: path.join(scratch, 'standby-data'),
    });
    expect(result.code).toBe(1);
    expect(lineOf(result, 'database')).toMatch(
      new RegExp(
        `^FAIL {2}database: PostgreSQL [\\d.]+ at 127\\.0\\.0\\.1:${port}/postgres is a read-only standby — point DATABASE_URL at the primary$`,
      ),
    );
  });
});
