import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { ConfigError } from '../errors.js';
import { formatBytes, readRegularFile } from './regular-file.js';

describe('readRegularFile', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-regular-file-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  test('reads a regular file up to the limit, inclusive', () => {
    const file = path.join(dir, 'exact.txt');
    fs.writeFileSync(file, 'x'.repeat(64));
    expect(readRegularFile(file, 'SOME_FILE', 64)).toBe('x'.repeat(64));
  });

  test.each([
    [
      'a FIFO',
      () => {
        const fifo = path.join(dir, 'pipe');
        execFileSync('mkfifo', [fifo]);
        return fifo;
      },
      /^SOME_FILE names .*pipe, which is not a regular file but a FIFO \(named pipe\)$/,
    ],
    [
      '/dev/zero',
      () => '/dev/zero',
      /^SOME_FILE names \/dev\/zero, which is not a regular file but a character device$/,
    ],
    ['a directory', () => dir, /which is not a regular file but a directory$/],
    ['a missing file', () => path.join(dir, 'missing'), /which cannot be read \(ENOENT\)$/],
    [
      'a file over the limit',
      () => {
        const file = path.join(dir, 'long.txt');
        fs.writeFileSync(file, 'x'.repeat(65));
        return file;
      },
      /which is 65 bytes, over the limit of 64 bytes$/,
    ],
  ])('%s is refused in one line naming it', (_, make, problem) => {
    const file = make();
    expect(() => readRegularFile(file, 'SOME_FILE', 64)).toThrow(ConfigError);
    expect(() => readRegularFile(file, 'SOME_FILE', 64)).toThrow(problem);
  });

  test('a file that says it is empty but is not (it grew, or /proc) is never read past the limit', () => {
    // /proc files are regular and report size 0: only the read itself can stop at the limit.
    expect(() => readRegularFile('/proc/self/status', 'SOME_FILE', 64)).toThrow(
      /^SOME_FILE names \/proc\/self\/status, which grew past the limit of 64 bytes while it was read$/,
    );
  });

  test('sizes are written for people', () => {
    expect([formatBytes(64), formatBytes(1024 ** 2), formatBytes(64 * 1024 ** 2), formatBytes(1536)]).toEqual(
      ['64 bytes', '1 MiB', '64 MiB', '1.5 KiB'],
    );
  });
});
