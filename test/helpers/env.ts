import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { inject } from 'vitest';
import { createDatabaseFromTemplate } from './postgres.js';

export type Backend = 'pglite' | 'postgres';

/** PGlite always; PostgreSQL too when TEST_DATABASE_URL is set (as in CI). */
export const backends: Backend[] = process.env.TEST_DATABASE_URL ? ['pglite', 'postgres'] : ['pglite'];

export interface TestEnvironment {
  /** A data directory of its own (holding a copy of the migrated embedded database). */
  dataDir: string;
  /** Set for the postgres backend: a database of its own, cloned from the migrated template. */
  databaseUrl: string | undefined;
  /** Environment variables that point a service at this environment. */
  env: Record<string, string>;
  cleanup(): Promise<void>;
}

/** Isolated storage for one test file (or one test), on the given backend. */
export async function createTestEnvironment(backend: Backend): Promise<TestEnvironment> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-data-'));
  fs.cpSync(inject('pgliteTemplateDir'), dataDir, { recursive: true });
  let databaseUrl: string | undefined;
  let drop = async () => {};
  if (backend === 'postgres') {
    const serverUrl = process.env.TEST_DATABASE_URL;
    if (!serverUrl) throw new Error('TEST_DATABASE_URL is not set');
    const db = await createDatabaseFromTemplate(serverUrl, inject('postgresTemplate'));
    databaseUrl = db.url;
    drop = db.drop;
  }
  return {
    dataDir,
    databaseUrl,
    env: { LEDGERHOOK_DATA_DIR: dataDir, ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}) },
    async cleanup() {
      await drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
