/**
 * `ledgerhook doctor`'s checks of the data directory's files: the master key (present, private,
 * the one the database's records are sealed under) and the admin endpoint's files (private, not
 * left behind by a process that is gone).
 */
import fs from 'node:fs';
import path from 'node:path';
import { ADMIN_FILE, SECRET_FILE } from '../accounts/admin.js';
import type { Config } from '../config.js';
import { ConfigError } from '../errors.js';
import { masterKeyId } from '../secrets/envelope.js';
import { MASTER_KEY_FILE, readMasterKeyFile } from '../secrets/master-key.js';
import { dataDirHolder, isAlive } from '../store/lock.js';
import type { Check } from './doctor-report.js';

/** The mode of a file others may read or write, or undefined when only its owner may. */
function looseMode(file: string): string | undefined {
  const mode = fs.statSync(file).mode & 0o777;
  return (mode & 0o077) === 0 ? undefined : `0${mode.toString(8)}`;
}

/** The key the service would use, its id, and where it comes from; or a failed check. */
function configuredKey(config: Config): { id: string; source: string } | Check | undefined {
  if (config.masterKey) return { id: masterKeyId(config.masterKey), source: 'LEDGERHOOK_MASTER_KEY' };
  const file = path.join(config.dataDir, MASTER_KEY_FILE);
  if (!fs.existsSync(file)) return undefined;
  const loose = looseMode(file);
  if (loose)
    return {
      outcome: 'FAIL',
      subject: 'master key',
      detail: `${file} may be read by others (mode ${loose})`,
      fix: `chmod 600 ${file}`,
    };
  try {
    return { id: masterKeyId(readMasterKeyFile(file)), source: file };
  } catch (err) {
    const notAFile = err instanceof ConfigError && err.variable === 'LEDGERHOOK_DATA_DIR';
    return {
      outcome: 'FAIL',
      subject: 'master key',
      detail: notAFile
        ? err.message
        : `${file} does not hold a key (64 hex characters or base64 of 32 bytes)`,
      fix: 'restore it from your backup, or set LEDGERHOOK_MASTER_KEY',
    };
  }
}

/**
 * The master key against the database: `recorded` is the key id its records use (undefined before
 * a service first ran on it), `null` when the database could not be read.
 */
export function checkMasterKey(config: Config, recorded: string | undefined | null): Check {
  const subject = 'master key';
  const key = configuredKey(config);
  if (key && 'outcome' in key) return key;
  if (!key) {
    const file = path.join(config.dataDir, MASTER_KEY_FILE);
    if (recorded)
      return {
        outcome: 'FAIL',
        subject,
        detail: `none configured and ${file} does not exist, but the database's records use key ${recorded}`,
        fix: 'copy the kept master.key into the data directory, or set LEDGERHOOK_MASTER_KEY to it',
      };
    return {
      outcome: 'ok',
      subject,
      detail: `none yet: one is generated into ${file} at the first start (back it up then)`,
    };
  }
  if (recorded === null)
    return {
      outcome: 'ok',
      subject,
      detail: `${key.source} (key ${key.id}); not compared, the database could not be read`,
    };
  if (recorded !== undefined && recorded !== key.id)
    return {
      outcome: 'FAIL',
      subject,
      detail: `${key.source} is key ${key.id}, but the database's records use key ${recorded}`,
      fix: 'give the key the database was first started with',
    };
  return {
    outcome: 'ok',
    subject,
    detail: `${key.source} (key ${key.id})${recorded ? ', the one the database uses' : ''}`,
  };
}

function publishedPid(file: string): number | undefined {
  try {
    const { pid } = JSON.parse(fs.readFileSync(file, 'utf8')) as { pid?: unknown };
    return typeof pid === 'number' ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** The admin endpoint's files (embedded database only: with PostgreSQL the CLI needs none). */
export function checkAdminFiles(config: Config): Check {
  const subject = 'admin files';
  const adminFile = path.join(config.dataDir, ADMIN_FILE);
  const secretFile = path.join(config.dataDir, SECRET_FILE);
  const holder = dataDirHolder(config.dataDir);
  if (!fs.existsSync(adminFile)) {
    return holder === undefined
      ? { outcome: 'ok', subject, detail: 'no service runs, none published' }
      : {
          outcome: 'warn',
          subject,
          detail: `the service (pid ${holder}) has not published ${adminFile} yet`,
          fix: 'token commands wait for it while it starts',
        };
  }
  const pid = publishedPid(adminFile);
  if (pid === undefined || !isAlive(pid))
    return {
      outcome: 'warn',
      subject,
      detail: `${adminFile} was left by ${pid === undefined ? 'an unknown process' : `pid ${pid}`}, which is gone (killed?)`,
      fix: 'nothing uses it; the next start replaces it (or delete it and admin.secret)',
    };
  if (!fs.existsSync(secretFile))
    return {
      outcome: 'FAIL',
      subject,
      detail: `${secretFile} is missing beside ${adminFile}: the CLI cannot reach the service (pid ${pid})`,
      fix: 'restart the service, which writes both',
    };
  for (const file of [adminFile, secretFile]) {
    const loose = looseMode(file);
    if (loose)
      return {
        outcome: 'FAIL',
        subject,
        detail: `${file} may be read by others (mode ${loose}): they could manage API tokens`,
        fix: `chmod 600 ${file}, and restart the service to change the secret`,
      };
  }
  return { outcome: 'ok', subject, detail: `${ADMIN_FILE} and ${SECRET_FILE} of pid ${pid}, mode 0600` };
}
