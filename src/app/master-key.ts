/**
 * The master key that seals records at rest, bound to the database it first touched, so that a
 * service started with another key refuses to start instead of writing records nobody can read.
 */
import fs from 'node:fs';
import path from 'node:path';
import { eq } from 'drizzle-orm';
import type { Logger } from 'pino';
import { type Config, ConfigError } from '../config.js';
import { createEnvelope, type Envelope } from '../secrets/envelope.js';
import { loadMasterKey, MASTER_KEY_FILE, readMasterKeyFile } from '../secrets/master-key.js';
import type { Db, Store } from '../store/db.js';
import { settings } from '../store/schema.js';

/**
 * A master.key already in the data directory is read before the database is opened, so a file
 * that is no key (a FIFO, a malformed key) is refused at once, not after the store's first start.
 */
export function checkMasterKeyFile(config: Config): void {
  const keyFile = path.join(config.dataDir, MASTER_KEY_FILE);
  if (!config.masterKey && fs.existsSync(keyFile)) readMasterKeyFile(keyFile);
}

/** The id of the master key the database's records are sealed under, once a service has started on it. */
async function recordedMasterKeyId(db: Db): Promise<string | undefined> {
  const [row] = await db.select().from(settings).where(eq(settings.key, 'master_key_id'));
  return row?.value;
}

/**
 * Binds the database to the first master key that touches it, so a service started later with
 * another key refuses to start instead of writing records nobody can read together. A wrong key
 * is a configuration mistake (exit code 2), named by where the key came from.
 */
async function checkMasterKey(db: Db, envelope: Envelope, source: string): Promise<void> {
  await db.insert(settings).values({ key: 'master_key_id', value: envelope.keyId }).onConflictDoNothing();
  const recorded = await recordedMasterKeyId(db);
  if (recorded !== undefined && recorded !== envelope.keyId) {
    throw new ConfigError(
      source,
      `does not match this database: its records use master key ${recorded}, the configured key is ${envelope.keyId}; give the key it was first started with`,
    );
  }
}

/** The envelope that seals records at rest, its master key loaded (or generated) and bound to the database. */
export async function openEnvelope(config: Config, store: Store, logger: Logger): Promise<Envelope> {
  const keyFile = path.join(config.dataDir, MASTER_KEY_FILE);
  // A database that already has a key (a restored backup, a data directory whose master.key was
  // lost) must not get a new one generated beside it: the operator gives the kept key.
  const recorded =
    config.masterKey || fs.existsSync(keyFile) ? undefined : await recordedMasterKeyId(store.db);
  if (recorded !== undefined) {
    throw new ConfigError(
      'LEDGERHOOK_MASTER_KEY',
      `is not set and ${keyFile} does not exist, but this database's records use master key ${recorded}; set LEDGERHOOK_MASTER_KEY to that key or copy its master.key into ${config.dataDir}`,
    );
  }
  // After the database opened: a database that cannot be used leaves no key generated behind.
  const { key: masterKey, generated } = loadMasterKey(config.masterKey, config.dataDir);
  if (generated) {
    logger.info(
      { file: path.join(config.dataDir, 'master.key') },
      'generated a master key for encryption at rest; back it up',
    );
  }
  if (generated && config.databaseUrl) {
    logger.warn(
      'with DATABASE_URL and several processes, set LEDGERHOOK_MASTER_KEY so they all share one master key',
    );
  }
  const envelope = createEnvelope(masterKey);
  await checkMasterKey(store.db, envelope, config.masterKey ? 'LEDGERHOOK_MASTER_KEY' : keyFile);
  return envelope;
}
