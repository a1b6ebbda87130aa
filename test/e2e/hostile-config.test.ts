/**
 * A configuration file that is not one (a FIFO nothing writes to, /dev/zero, a directory), one far
 * too large, or one with too many networks: `doctor` and `serve` refuse it at once, in one line
 * naming the file and the limit, instead of blocking for good or filling memory first.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { type CliResult, meaningfulLines, startCli } from '../helpers/process.js';

/** Each command must have ended by then; before the bounds, a FIFO or /dev/zero never ended. */
const DEADLINE_MS = 8_000;

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-hostile-config-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

const fifo = path.join(scratch, 'config.fifo');
execFileSync('mkfifo', [fifo]);
// Sparse: 3 GiB long, no block written.
const huge = path.join(scratch, 'huge.json');
fs.writeFileSync(huge, '');
fs.truncateSync(huge, 3 * 1024 ** 3);
const crowded = path.join(scratch, 'crowded.json');
fs.writeFileSync(
  crowded,
  JSON.stringify({
    networks: Object.fromEntries(
      Array.from({ length: 1_001 }, (_, i) => [
        `NET${i}`,
        { family: 'evm', chainId: 100_000 + i, symbol: 'ETH', rpc: 'http://127.0.0.1:9' },
      ]),
    ),
  }),
);

/** Runs `ledgerhook <args>`, killed (and the test failed) if it has not ended by the deadline. */
async function runWithDeadline(args: string[], env: Record<string, string>): Promise<CliResult> {
  const run = startCli(args, env);
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'deadline'>((resolve) => {
    timer = setTimeout(() => resolve('deadline'), DEADLINE_MS);
  });
  const outcome = await Promise.race([run.exited, deadline]);
  clearTimeout(timer);
  if (outcome === 'deadline') {
    await run.stop('SIGKILL');
    throw new Error(`ledgerhook ${args.join(' ')} had not ended after ${DEADLINE_MS} ms:\n${run.stderr()}`);
  }
  return { code: outcome, stdout: run.stdout(), stderr: run.stderr() };
}

const cases = [
  ['a FIFO nothing writes to', fifo, /which is not a regular file but a FIFO \(named pipe\)$/],
  ['/dev/zero', '/dev/zero', /which is not a regular file but a character device$/],
  ['a directory', scratch, /which is not a regular file but a directory$/],
  ['a 3 GiB file', huge, /which is 3,221,225,472 bytes, over the limit of 1 MiB$/],
  ['1,001 networks', crowded, /which has 1001 networks, over the limit of 1000$/],
] as const;

describe.concurrent('a hostile LEDGERHOOK_CONFIG is refused at once, in one line naming it', () => {
  const env = (file: string) => ({
    LEDGERHOOK_CONFIG: file,
    LEDGERHOOK_DATA_DIR: path.join(scratch, 'data'),
  });

  test.each(cases)('doctor: %s', async (_, file, problem) => {
    const result = await runWithDeadline(['doctor'], env(file));
    expect(result.code).toBe(2);
    const failed = meaningfulLines(result.stdout).filter((l) => l.startsWith('FAIL'));
    expect(failed).toHaveLength(1);
    expect(failed[0]).toContain(`FAIL  configuration: LEDGERHOOK_CONFIG names ${file}, which `);
    expect(failed[0]!.replace(/ — correct LEDGERHOOK_CONFIG$/, '')).toMatch(problem);
  });

  test.each(cases)('serve: %s', async (_, file, problem) => {
    const result = await runWithDeadline(['serve'], env(file));
    expect(result.code).toBe(2);
    const lines = meaningfulLines(result.stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`ledgerhook: invalid configuration: LEDGERHOOK_CONFIG names ${file}, which `);
    expect(lines[0]).toMatch(problem);
    expect(fs.existsSync(path.join(scratch, 'data'))).toBe(false);
  });
});

describe.concurrent('other files an operator names are refused the same way', () => {
  test('a master.key that is a FIFO: serve refuses it in one line instead of waiting on it', async () => {
    const dataDir = path.join(scratch, 'fifo-key');
    fs.mkdirSync(dataDir);
    execFileSync('mkfifo', [path.join(dataDir, 'master.key')]);
    const result = await runWithDeadline(['serve'], { LEDGERHOOK_DATA_DIR: dataDir, PORT: '0' });
    expect(result.code).toBe(2);
    const lines = meaningfulLines(result.stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/master\.key, which is not a regular file but a FIFO \(named pipe\)$/);
  });

  test('verify /dev/zero: one line, exit 2, at once', async () => {
    const result = await runWithDeadline(['verify', '/dev/zero', '--rpc', 'http://127.0.0.1:9'], {});
    expect(result.code).toBe(2);
    const lines = meaningfulLines(result.stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /receipt names \/dev\/zero, which is not a regular file but a character device$/,
    );
  });
});
