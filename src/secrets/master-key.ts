import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../errors.js';
import { readRegularFile } from '../shared/regular-file.js';

/** Accepts 64 hex characters or base64 of exactly 32 bytes. */
export function parseMasterKey(raw: string, variable = 'LEDGERHOOK_MASTER_KEY'): Buffer {
  const text = raw.trim();
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) {
    const key = Buffer.from(text, 'base64');
    if (key.length === 32) return key;
  }
  throw new ConfigError(variable, 'must be 32 bytes, as 64 hex characters or base64');
}

export const MASTER_KEY_FILE = 'master.key';
/** A key file holds 64 hex characters and a line end; anything far longer is no key. */
const MAX_KEY_FILE_BYTES = 4096;

/** The key in `file`, a regular file (a FIFO put there would block a plain read for good). */
export function readMasterKeyFile(file: string): Buffer {
  return parseMasterKey(readRegularFile(file, 'LEDGERHOOK_DATA_DIR', MAX_KEY_FILE_BYTES), file);
}

/**
 * The configured master key, or the one generated into the data directory on first use
 * (mode 0600). With several processes on one PostgreSQL, configure LEDGERHOOK_MASTER_KEY instead.
 */
export function loadMasterKey(
  configured: Buffer | undefined,
  dataDir: string,
): { key: Buffer; generated: boolean } {
  if (configured) return { key: configured, generated: false };
  const file = path.join(dataDir, MASTER_KEY_FILE);
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  try {
    const fd = fs.openSync(file, 'wx', 0o600);
    fs.writeSync(fd, `${crypto.randomBytes(32).toString('hex')}\n`);
    fs.closeSync(fd);
    return { key: readMasterKeyFile(file), generated: true };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  return { key: readMasterKeyFile(file), generated: false };
}
