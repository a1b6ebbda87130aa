import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { waitFor } from '../../../test/helpers/process.js';
import { ConfigError } from '../../errors.js';
import { RISK_LIST_LIMITS } from '../../risk-config.js';
import { createListRiskProvider, parseRiskList } from './lists.js';

let dir: string;
const closers: (() => Promise<void>)[] = [];
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-risk-'));
});
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
  fs.rmSync(dir, { recursive: true, force: true });
});

function write(name: string, text: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
}

/** A logger whose lines the test reads. */
function capturingLogger() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { logger, lines };
}

function provider(options: Parameters<typeof createListRiskProvider>[0]) {
  const created = createListRiskProvider(options);
  closers.push(() => created.close());
  return created;
}

const scoreOf = async (p: ReturnType<typeof provider>, network: string, address: string) =>
  (await p.scores(network, [address])).get(address);

describe('risk list files', () => {
  test('CSV with a header, comments, blank lines and bad lines: the good lines count, the bad are reported', () => {
    const bad: [number, string][] = [];
    const scores = parseRiskList(
      [
        'address,risk',
        '# scored by our compliance team',
        '',
        'Addr1,80',
        'Addr2 , 12.5  # trailing comment',
        'Addr3,abc',
        'Addr4,150',
        'Addr5,1,2',
        'has space,5',
        'Addr1,90',
      ].join('\n'),
      (line, _text, problem) => bad.push([line, problem]),
    );
    expect(Object.fromEntries(scores)).toEqual({ Addr1: 90, Addr2: 12.5 });
    expect(bad.map(([line]) => line)).toEqual([6, 7, 8, 9]);
  });

  test('one address a line (the OFAC format) means 100; CRLF endings are fine', () => {
    const bad: number[] = [];
    const scores = parseRiskList(
      '# OFAC SDN, SOL\r\n7UX2i7SucgLMQcfZ75s3VXmZZY4YRUyJN9X1RgfMoDUi\r\n\r\nbad address\r\n',
      (line) => bad.push(line),
    );
    expect(Object.fromEntries(scores)).toEqual({ '7UX2i7SucgLMQcfZ75s3VXmZZY4YRUyJN9X1RgfMoDUi': 100 });
    expect(bad).toEqual([4]);
  });

  test('a non-numeric second field after the first line is a bad line, not a header', () => {
    const bad: number[] = [];
    parseRiskList('A,1\naddress,risk\n', (line) => bad.push(line));
    expect(bad).toEqual([2]);
  });

  test('files per network, the highest score across files, bad lines logged and skipped', async () => {
    const { logger, lines } = capturingLogger();
    const csv = write('sol.csv', 'address,risk\nA,30\nB,oops\n');
    const ofac = write('ofac-sol.txt', 'A\nC\n');
    const eth = write('eth.csv', '0xAbC,60\n');
    const p = provider({
      files: { SOL: [csv, ofac], ETH: [eth] },
      logger,
      normalize: (network, address) => (network === 'ETH' ? address.toLowerCase() : address),
    });
    const sol = await p.scores('SOL', ['A', 'B', 'C', 'a']);
    expect(Object.fromEntries(sol)).toEqual({ A: 100, C: 100 });
    expect(Object.fromEntries(await p.scores('ETH', ['0xabc', 'A']))).toEqual({ '0xabc': 60 });
    expect(Object.fromEntries(await p.scores('BTC', ['A']))).toEqual({});
    expect(lines).toContainEqual(
      expect.objectContaining({ file: csv, line: 3, msg: 'risk list: bad line skipped' }),
    );
  });

  test('a missing file at start is a ConfigError naming the variable', () => {
    expect(() => provider({ files: { SOL: [path.join(dir, 'absent.csv')] } })).toThrow(ConfigError);
    expect(() => provider({ files: { SOL: [path.join(dir, 'absent.csv')] } })).toThrow(
      /^LEDGERHOOK_RISK_LISTS names .*absent\.csv, which cannot be read \(ENOENT\)/,
    );
  });

  test('without watching, a lookup checks the file and sees an edit at once', async () => {
    const file = write('sol.csv', 'A,10\n');
    const p = provider({ files: { SOL: [file] }, watch: false, checkIntervalMs: 0 });
    expect(await scoreOf(p, 'SOL', 'A')).toBe(10);
    fs.writeFileSync(file, 'A,55\nB,1\n');
    expect(await scoreOf(p, 'SOL', 'A')).toBe(55);
  });

  test('with a long check interval, watching the directory alone picks up an edit', async () => {
    const file = write('sol.csv', 'A,10\n');
    const p = provider({ files: { SOL: [file] }, checkIntervalMs: 3_600_000 });
    expect(await scoreOf(p, 'SOL', 'A')).toBe(10);
    fs.writeFileSync(file, 'A,77\n');
    await waitFor(async () => ((await scoreOf(p, 'SOL', 'A')) === 77 ? true : undefined), 'the edit', 5_000);
  });

  test('a file replaced by a rename (as a cron job should) is seen; a file removed keeps its last contents', async () => {
    const { logger, lines } = capturingLogger();
    const file = write('ofac.txt', 'A\n');
    const p = provider({ files: { SOL: [file] }, checkIntervalMs: 3_600_000, logger });
    expect(await scoreOf(p, 'SOL', 'B')).toBeUndefined();
    const next = write('ofac.txt.tmp', 'A\nB\n');
    fs.renameSync(next, file);
    await waitFor(
      async () => ((await scoreOf(p, 'SOL', 'B')) === 100 ? true : undefined),
      'the rename',
      5_000,
    );
    fs.rmSync(file);
    await waitFor(
      () =>
        lines.some((l) => l.msg === 'risk list cannot be read: its last contents are kept')
          ? true
          : undefined,
      'the removal to be noticed',
      5_000,
    );
    expect(await scoreOf(p, 'SOL', 'B')).toBe(100);
  });

  test('a list replaced by a FIFO or by a file past the limit keeps its last contents, and the lookup does not block', async () => {
    const { logger, lines } = capturingLogger();
    const file = write('sol.csv', 'A,10\n');
    const p = provider({ files: { SOL: [file] }, watch: false, checkIntervalMs: 0, logger });
    expect(await scoreOf(p, 'SOL', 'A')).toBe(10);
    fs.rmSync(file);
    execFileSync('mkfifo', [file]);
    // Nothing ever writes to the FIFO: a read of it would wait for good.
    expect(await scoreOf(p, 'SOL', 'A')).toBe(10);
    expect(lines).toContainEqual(expect.objectContaining({ file, code: 'ENOTREG' }));
    fs.rmSync(file);
    fs.writeFileSync(file, 'A,20\n');
    fs.truncateSync(file, RISK_LIST_LIMITS.bytes + 1);
    expect(await scoreOf(p, 'SOL', 'A')).toBe(10);
    fs.writeFileSync(file, 'A,30\n');
    expect(await scoreOf(p, 'SOL', 'A')).toBe(30);
  });

  test('a list that is a FIFO at start is a ConfigError, not a start that never ends', () => {
    const file = path.join(dir, 'fifo.csv');
    execFileSync('mkfifo', [file]);
    expect(() => provider({ files: { SOL: [file] } })).toThrow(/which is not a regular file but a FIFO/);
  });
});
