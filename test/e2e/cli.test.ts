/**
 * The command line as a user meets it: every mistake is one line naming what is wrong (exit 2 for
 * the command line and the configuration), help for every command, and the first start's token
 * kept until the service really serves. Each case is a real process; cases run side by side.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { BUILT_CLI } from '../helpers/build.js';
import { backends, createTestEnvironment, type TestEnvironment } from '../helpers/env.js';
import { databaseUrlFor } from '../helpers/postgres.js';
import {
  type CliResult,
  meaningfulLines,
  runCli,
  type ServiceProcess,
  startCli,
  startServiceProcess,
  waitFor,
} from '../helpers/process.js';

const environments: TestEnvironment[] = [];
const services: ServiceProcess[] = [];
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-cli-'));
afterAll(async () => {
  for (const s of services) await s.stop('SIGKILL');
  for (const e of environments) await e.cleanup();
  fs.rmSync(scratch, { recursive: true, force: true });
});

const version = (
  JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/** One line on stderr, no stack trace, and the exit code. */
function expectOneLine(result: CliResult, code: number, pattern: RegExp): void {
  const lines = meaningfulLines(result.stderr);
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^ledgerhook: /);
  expect(lines[0]).toMatch(pattern);
  expect(result.code, result.stderr).toBe(code);
}

describe('mistakes on the command line', () => {
  test('unknown options, a bad account name and missing arguments: one line, exit 2, nothing opened', async () => {
    const dataDir = path.join(scratch, 'never-created');
    const env = { LEDGERHOOK_DATA_DIR: dataDir };
    const [acount, rol, account, revoke, command, token] = await Promise.all([
      runCli(['token', 'create', '--acount', 'x'], env),
      runCli(['serve', '--rol', 'api'], env),
      runCli(['token', 'create', '--account', 'a/b'], env),
      runCli(['token', 'revoke'], env),
      runCli(['frob'], env),
      runCli(['token', 'frob'], env),
    ]);
    expectOneLine(acount, 2, /unknown option --acount for token create \(did you mean --account\?\)/);
    expectOneLine(rol, 2, /unknown option --rol for serve \(did you mean --role\?\)/);
    expectOneLine(
      account,
      2,
      /invalid account name "a\/b": it must be 1-64 letters, digits, "\.", "_" or "-", starting with a letter or digit/,
    );
    expectOneLine(revoke, 2, /token revoke needs ID/);
    expectOneLine(command, 2, /unknown command "frob"/);
    expectOneLine(token, 2, /unknown command "token frob"; use token create, token list or token revoke ID/);
    expect(fs.existsSync(dataDir)).toBe(false);
  });

  test('wrong configuration names the variable and the real cause: one line, exit 2', async () => {
    const file = path.join(scratch, 'a-file');
    fs.writeFileSync(file, 'not a directory');
    const empty = fs.mkdtempSync(path.join(scratch, 'empty-'));
    const missing = path.join(scratch, 'missing');
    const [dataDirFile, dns, host, listEmpty, listMissing, noKey, badKey, solana] = await Promise.all([
      runCli(['serve'], { LEDGERHOOK_DATA_DIR: file }),
      runCli(['serve'], { LEDGERHOOK_DATA_DIR: missing, LEDGERHOOK_DNS_SERVERS: 'foo' }),
      runCli(['serve'], { LEDGERHOOK_DATA_DIR: missing, HOST: '999.1.1.1' }),
      runCli(['token', 'list'], { LEDGERHOOK_DATA_DIR: empty }),
      runCli(['token', 'list'], { LEDGERHOOK_DATA_DIR: missing }),
      runCli(['serve'], { LEDGERHOOK_DATA_DIR: missing, LEDGERHOOK_ANCHOR_NETWORK: 'ETH' }),
      runCli(['serve'], {
        LEDGERHOOK_DATA_DIR: missing,
        LEDGERHOOK_ANCHOR_NETWORK: 'ETH',
        LEDGERHOOK_ANCHOR_KEY: 'abandon abandon secret words',
      }),
      runCli(['serve'], {
        LEDGERHOOK_DATA_DIR: missing,
        LEDGERHOOK_ANCHOR_NETWORK: 'SOL',
        LEDGERHOOK_ANCHOR_KEY: '0x01',
      }),
    ]);
    // Anchoring: the key is required, of the network's kind, never echoed; only EVM and Algorand.
    expectOneLine(noKey, 2, /LEDGERHOOK_ANCHOR_KEY must be set to anchor on ETH/);
    expectOneLine(badKey, 2, /LEDGERHOOK_ANCHOR_KEY must be an EVM private key/);
    expect(badKey.stderr).not.toMatch(/secret words/);
    expectOneLine(solana, 2, /LEDGERHOOK_ANCHOR_NETWORK names SOL, a solana network/);
    expectOneLine(dataDirFile, 2, new RegExp(`LEDGERHOOK_DATA_DIR ${file} is a file, not a directory`));
    expectOneLine(
      dns,
      2,
      /LEDGERHOOK_DNS_SERVERS has "foo", which is not an IP address with an optional port/,
    );
    expectOneLine(host, 2, /HOST is not a valid IPv4 address \(got "999\.1\.1\.1"/);
    expect(host.stderr).not.toMatch(/database/);
    // token list does not create a database where there is none.
    expectOneLine(listEmpty, 2, new RegExp(`LEDGERHOOK_DATA_DIR ${empty} holds no Ledgerhook data`));
    expect(fs.readdirSync(empty)).toEqual([]);
    expectOneLine(listMissing, 2, new RegExp(`LEDGERHOOK_DATA_DIR ${missing} holds no Ledgerhook data`));
    // No refusal above opened a database or wrote a key.
    expect(fs.existsSync(missing)).toBe(false);
  });
});

// Only where a PostgreSQL server is at hand (TEST_DATABASE_URL, as in CI): none is started here.
describe.each(backends.filter((b) => b === 'postgres'))('the command line with %s', () => {
  test('a DATABASE_URL naming a database that does not exist: one line naming it, exit 2', async () => {
    const url = databaseUrlFor(process.env.TEST_DATABASE_URL!, `lh_missing_${process.pid}`);
    const result = await runCli(['token', 'list'], {
      DATABASE_URL: url,
      LEDGERHOOK_DATA_DIR: path.join(scratch, 'pg'),
    });
    expectOneLine(
      result,
      2,
      new RegExp(`DATABASE_URL names database "lh_missing_${process.pid}", which does not exist on `),
    );
  });
});

describe('help', () => {
  test('--help, --version, and help for every command, whatever the configuration', async () => {
    // An invalid configuration does not stand between a user and the help.
    const env = { PORT: 'eighty', LEDGERHOOK_DATA_DIR: path.join(scratch, 'never-created') };
    const runs = await Promise.all(
      [
        ['--help'],
        ['--version'],
        ['help'],
        ['help', 'token'],
        ['token', '--help'],
        ['help', 'serve'],
        ['serve', '--help'],
        ['help', 'token', 'create'],
        ['token', 'create', '--help'],
        ['help', 'token', 'revoke'],
        ['help', 'nope'],
      ].map((args) => runCli(args, env)),
    );
    const [
      general,
      v,
      helpCommand,
      helpToken,
      tokenHelp,
      helpServe,
      serveHelp,
      helpCreate,
      createHelp,
      helpRevoke,
    ] = runs;
    for (const run of runs.slice(0, -1)) expect(run!.code, run!.stderr).toBe(0);
    expect(general!.stdout).toMatch(/^Usage: ledgerhook/);
    for (const command of ['serve', 'migrate', 'token create', 'token list', 'token revoke ID', 'help'])
      expect(general!.stdout).toContain(`  ${command}`);
    expect(helpCommand!.stdout).toBe(general!.stdout);
    expect(v!.stdout.trim()).toBe(version);
    expect(helpToken!.stdout).toContain('token revoke ID');
    expect(tokenHelp!.stdout).toBe(helpToken!.stdout);
    expect(helpServe!.stdout).toMatch(/^Usage: ledgerhook serve \[--role ROLE\] \[--devnet\]/);
    expect(serveHelp!.stdout).toBe(helpServe!.stdout);
    expect(helpCreate!.stdout).toMatch(/^Usage: ledgerhook token create \[--account NAME\]/);
    expect(createHelp!.stdout).toBe(helpCreate!.stdout);
    expect(helpRevoke!.stdout).toMatch(/^Usage: ledgerhook token revoke ID/);
    expectOneLine(runs.at(-1)!, 2, /no such command "nope"/);
  });
});

describe('tokens around a starting service', () => {
  test('a first start on a taken port fails in one line and prints no token; the next start prints one that works', async () => {
    const environment = await createTestEnvironment('pglite');
    environments.push(environment);
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as net.AddressInfo).port;
    let failed: CliResult;
    try {
      failed = await runCli(['serve'], { ...environment.env, PORT: String(port) });
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
    // No token was issued: the next start prints it.
    expect(failed.stdout).not.toMatch(/lh_/);
    expectOneLine(failed, 1, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use`));

    const service = await startServiceProcess(environment.env);
    services.push(service);
    expect(service.printedToken).toMatch(/^lh_/);
    const response = await fetch(`${service.url}/api/v1/folder`, {
      headers: { authorization: `Bearer ${service.printedToken}` },
    });
    expect(response.status).toBe(200);
    expect(await service.stop()).toBe(0);
  });

  test('token list waits for a service that is still starting; one that never comes up is named in one line', async () => {
    const starting = await createTestEnvironment('pglite');
    environments.push(starting);
    // A data directory held by a live process (this one) that never publishes an admin endpoint.
    const stuck = await createTestEnvironment('pglite');
    environments.push(stuck);
    fs.writeFileSync(path.join(stuck.dataDir, 'ledgerhook.pid'), String(process.pid));

    const service = startServiceProcess(starting.env);
    const pidFile = path.join(starting.dataDir, 'ledgerhook.pid');
    await waitFor(
      () => (fs.existsSync(pidFile) ? true : undefined),
      'the service to take its data directory',
    );
    const [listed, gaveUp] = await Promise.all([
      runCli(['token', 'list'], starting.env),
      runCli(['token', 'list'], stuck.env),
    ]);
    services.push(await service);
    expectOneLine(
      gaveUp,
      1,
      new RegExp(`the service using ${stuck.dataDir} \\(pid ${process.pid}\\) is still starting`),
    );
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/\bdefault\b/);
  });
});

/** An ANSI colour sequence (ESC [ … m). */
const ANSI_COLOUR = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');

describe('the log, for people and for machines', () => {
  /** The service's output under a pseudo-terminal (util-linux `script`), as a person starting it sees it. */
  function startOnTerminal(env: Record<string, string>) {
    const command = [process.execPath, BUILT_CLI, 'serve'].map((a) => `'${a}'`).join(' ');
    const child = spawn('script', ['-qfec', command, '/dev/null'], {
      env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', LOG_FORMAT: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group: the service under `script` goes with it
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
    return {
      output: () => out,
      async stop() {
        try {
          process.kill(-child.pid!, 'SIGTERM');
        } catch {}
        await exited;
      },
    };
  }

  test('LOG_FORMAT=pretty: time, level, message and fields on lines for people; a terminal gets that by default, in colour; a bad value is one line, exit 2', async () => {
    const environment = await createTestEnvironment('pglite');
    environments.push(environment);
    const bad = await runCli(['serve'], {
      LEDGERHOOK_DATA_DIR: path.join(scratch, 'never'),
      LOG_FORMAT: 'yaml',
    });
    expectOneLine(bad, 2, /LOG_FORMAT must be json or pretty \(got "yaml"\)/);

    const pretty = startCli(['serve'], { ...environment.env, LOG_FORMAT: 'pretty' });
    try {
      await pretty.waitForOutput(/ledgerhook is serving/, 'the service to serve');
      const serving = meaningfulLines(pretty.stdout()).findIndex((l) => l.includes('ledgerhook is serving'));
      const lines = meaningfulLines(pretty.stdout());
      expect(lines[serving]).toMatch(
        /^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] INFO: ledgerhook is serving$/,
      );
      expect(lines.slice(serving + 1).join('\n')).toMatch(/^ {4}url: "http:\/\/127\.0\.0\.1:\d+"/m);
      // No JSON object per line, and no colours when the output is not a terminal.
      expect(lines.filter((l) => l.startsWith('{'))).toEqual([]);
      expect(pretty.stdout()).not.toContain('\u001b[');
    } finally {
      expect(await pretty.stop()).toBe(0);
    }

    // The same data directory, now started at a terminal with LOG_FORMAT unset.
    const terminal = startOnTerminal(environment.env);
    try {
      await waitFor(
        () => (terminal.output().includes('ledgerhook is serving') ? true : undefined),
        'the service to serve on a terminal',
      );
      const line = terminal
        .output()
        .split('\n')
        .find((l) => l.includes('ledgerhook is serving'))!;
      // Coloured (ANSI escapes), and not JSON.
      expect(line).toContain('\u001b[');
      expect(line.replace(ANSI_COLOUR, '').trim()).toMatch(/^\[[^\]]+\] INFO: ledgerhook is serving$/);
    } finally {
      await terminal.stop();
    }
  });
});
