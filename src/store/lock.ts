import fs from 'node:fs';
import path from 'node:path';
import { LedgerhookError } from '../errors.js';

/** Another live process holds the data directory. */
export class DataDirInUseError extends LedgerhookError {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`data directory ${dataDir} is in use by another Ledgerhook process (pid ${pid})`);
  }
}

export interface DataDirLock {
  release(): void;
}

const LOCK_FILE = 'ledgerhook.pid';

/** Whether a process with this id exists (also used by the test run to sweep what a killed run left). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The pid holding `dataDir`, or undefined when nobody (alive) does. */
export function dataDirHolder(dataDir: string): number | undefined {
  try {
    const pid = Number.parseInt(fs.readFileSync(path.join(dataDir, LOCK_FILE), 'utf8'), 10);
    return Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The embedded database admits one process. A pid file created with O_EXCL guards it; a file left
 * by a process that died (kill -9) is recognised by its dead pid and taken over.
 */
export function acquireDataDirLock(dataDir: string): DataDirLock {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = path.join(dataDir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = fs.openSync(file, 'wx', 0o600);
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          try {
            if (fs.readFileSync(file, 'utf8') === String(process.pid)) fs.unlinkSync(file);
          } catch {
            // already gone
          }
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = dataDirHolder(dataDir);
      if (holder !== undefined) throw new DataDirInUseError(dataDir, holder);
      fs.rmSync(file, { force: true });
    }
  }
  throw new Error(`could not lock data directory ${dataDir}`);
}
