import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { PGLITE_SUBDIR } from '../src/app/store.js';
import { openStore } from '../src/store/db.js';
import { isAlive } from '../src/store/lock.js';
import { ensureBuilt, ensureConsoleBuilt } from './helpers/build.js';
import { databaseUrlFor, TEMPLATE_DB_PREFIX } from './helpers/postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A migrated data directory to copy: initialising PGlite costs seconds, copying it milliseconds. */
    pgliteTemplateDir: string;
    /** A migrated PostgreSQL database to clone with CREATE DATABASE ... TEMPLATE, when TEST_DATABASE_URL is set. */
    postgresTemplate: string;
  }
}

/**
 * Temporary files on tmpfs where the machine has one: each test's embedded database is a copy of a
 * 40 MB, 1,078-file template, which costs 0.4-0.7 s of CPU on ext4 and 0.06-0.14 s on tmpfs (and
 * every PGlite write after it costs less too). Set before the workers start, so they, the services
 * they spawn and anvil all inherit it; removed with everything in it at the end.
 */
function tmpfsTmpdir(): string | undefined {
  const shm = '/dev/shm';
  try {
    fs.accessSync(shm, fs.constants.W_OK);
  } catch {
    return undefined;
  }
  // A run that was killed left its directory in memory: remove those whose process is gone.
  for (const name of fs.readdirSync(shm)) {
    const pid = /^ledgerhook-test-(\d+)-/.exec(name)?.[1];
    if (pid && !isAlive(Number(pid))) fs.rmSync(path.join(shm, name), { recursive: true, force: true });
  }
  const dir = fs.mkdtempSync(path.join(shm, `ledgerhook-test-${process.pid}-`));
  // What a test keeps for people to look at after the run (screenshots) goes where it did.
  process.env.LEDGERHOOK_TEST_KEEP_DIR = os.tmpdir();
  process.env.TMPDIR = dir;
  return dir;
}

export default async function setup(project: TestProject) {
  const tmpfs = tmpfsTmpdir();
  // Process-level tests run the compiled service; a source changed since the last build rebuilds it.
  ensureBuilt();
  // The service serves the console's build at /console (test/e2e/console.test.ts uses it).
  ensureConsoleBuilt();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-test-'));
  const templateDir = path.join(root, 'template');
  const store = await openStore({ pgliteDir: path.join(templateDir, PGLITE_SUBDIR) });
  await store.migrate();
  await store.close();
  project.provide('pgliteTemplateDir', templateDir);

  const serverUrl = process.env.TEST_DATABASE_URL;
  const templateName = `${TEMPLATE_DB_PREFIX}${process.pid}`;
  project.provide('postgresTemplate', serverUrl ? templateName : '');
  if (serverUrl) {
    const admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${templateName}`);
    await admin.query(`CREATE DATABASE ${templateName}`);
    await admin.end();
    const pgStore = await openStore({ databaseUrl: databaseUrlFor(serverUrl, templateName) });
    await pgStore.migrate();
    await pgStore.close();
  }

  return async () => {
    fs.rmSync(root, { recursive: true, force: true });
    if (tmpfs) fs.rmSync(tmpfs, { recursive: true, force: true });
    if (serverUrl) {
      const admin = new pg.Client({ connectionString: serverUrl });
      await admin.connect();
      const { rows } = await admin.query<{ datname: string }>(
        'SELECT datname FROM pg_database WHERE datname LIKE $1',
        [`lh_%\\_${process.pid}`],
      );
      for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`);
      await admin.end();
    }
  };
}
