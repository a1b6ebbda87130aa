import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { PGLITE_SUBDIR } from '../src/app.js';
import { openStore } from '../src/store/db.js';
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

export default async function setup(project: TestProject) {
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
