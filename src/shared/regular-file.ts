/**
 * Files an operator names (the configuration file, risk lists): a regular file of bounded size,
 * or a one-line ConfigError. Read naively, a FIFO blocks the start for good, /dev/zero never
 * ends, and a file of gigabytes fills memory before any error is given.
 */
import fs from 'node:fs';
import { ConfigError } from '../errors.js';

const READ_CHUNK_BYTES = 1024 * 1024;

/** "512 bytes", "1 MiB", "3.5 GiB": a size for an error message. */
export function formatBytes(bytes: number): string {
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  if (bytes < 1024) return `${bytes} bytes`;
  let value = bytes;
  let unit = '';
  for (const next of units) {
    if (value < 1024) break;
    value /= 1024;
    unit = next;
  }
  return `${Number.isInteger(value) ? value : value.toFixed(1)} ${unit}`;
}

function kindOf(stat: fs.Stats): string {
  if (stat.isDirectory()) return 'a directory';
  if (stat.isFIFO()) return 'a FIFO (named pipe)';
  if (stat.isCharacterDevice()) return 'a character device';
  if (stat.isBlockDevice()) return 'a block device';
  if (stat.isSocket()) return 'a socket';
  return 'something else';
}

function cannotRead(variable: string, file: string, err: unknown): ConfigError {
  const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
  return new ConfigError(variable, `names ${file}, which cannot be read (${code})`);
}

/** Refuses what is not a regular file of at most `maxBytes`. */
function checkStats(stat: fs.Stats, file: string, variable: string, maxBytes: number): void {
  if (!stat.isFile())
    throw new ConfigError(variable, `names ${file}, which is not a regular file but ${kindOf(stat)}`);
  if (stat.size > maxBytes) throw tooLarge(file, variable, stat.size, maxBytes);
}

/** `size` undefined: the file grew past the limit while it was read. */
function tooLarge(file: string, variable: string, size: number | undefined, maxBytes: number): ConfigError {
  const limit = formatBytes(maxBytes);
  return new ConfigError(
    variable,
    size === undefined
      ? `names ${file}, which grew past the limit of ${limit} while it was read`
      : `names ${file}, which is ${size.toLocaleString('en-US')} bytes, over the limit of ${limit}`,
  );
}

/** The stat of `file`, which must be a regular file of at most `maxBytes` (symbolic links followed). */
export function statRegularFile(file: string, variable: string, maxBytes: number): fs.Stats {
  let stat: fs.Stats;
  try {
    stat = fs.statSync(file);
  } catch (err) {
    throw cannotRead(variable, file, err);
  }
  checkStats(stat, file, variable, maxBytes);
  return stat;
}

/**
 * The text of `file`, a regular file of at most `maxBytes`. It is checked before it is opened,
 * opened non-blocking (a FIFO put in its place meanwhile cannot hang the open), checked again
 * once open, and never read past `maxBytes` (a file growing meanwhile).
 */
export function readRegularFile(file: string, variable: string, maxBytes: number): string {
  statRegularFile(file, variable, maxBytes);
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch (err) {
    throw cannotRead(variable, file, err);
  }
  try {
    checkStats(fs.fstatSync(fd), file, variable, maxBytes);
    // In chunks, as much as the file holds: its size may be 0 (/proc) or change while it is read.
    const chunks: Buffer[] = [];
    let length = 0;
    for (;;) {
      const chunk = Buffer.allocUnsafe(Math.min(READ_CHUNK_BYTES, maxBytes + 1 - length));
      const read = fs.readSync(fd, chunk, 0, chunk.length, null);
      if (read === 0) break;
      chunks.push(chunk.subarray(0, read));
      length += read;
      if (length > maxBytes) throw tooLarge(file, variable, undefined, maxBytes);
    }
    return Buffer.concat(chunks, length).toString('utf8');
  } catch (err) {
    throw err instanceof ConfigError ? err : cannotRead(variable, file, err);
  } finally {
    fs.closeSync(fd);
  }
}
