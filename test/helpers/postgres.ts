import pg from 'pg';

export const TEMPLATE_DB_PREFIX = 'lh_tpl_';

export function databaseUrlFor(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

let counter = 0;

/** A fresh database cloned from the migrated template; each test file gets its own. */
export async function createDatabaseFromTemplate(
  serverUrl: string,
  template: string,
): Promise<{ url: string; drop: () => Promise<void> }> {
  // The template name ends with the vitest main process pid, which global teardown matches on.
  const suffix = template.slice(TEMPLATE_DB_PREFIX.length);
  const name = `lh_t${process.pid}x${counter++}_${suffix}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
  } finally {
    await admin.end();
  }
  return {
    url: databaseUrlFor(serverUrl, name),
    async drop() {
      const client = new pg.Client({ connectionString: serverUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
