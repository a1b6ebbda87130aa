import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { backends, createTestEnvironment, type TestEnvironment } from '../helpers/env.js';
import { lastLine, meaningfulLines, runCli, startServiceProcess } from '../helpers/process.js';

async function call(url: string, method: string, route: string, token: string | undefined, body?: unknown) {
  const response = await fetch(`${url}${route}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

function filesUnder(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name));
}

function filesContaining(dir: string, marker: string): string[] {
  const needle = Buffer.from(marker, 'utf8');
  return filesUnder(dir).filter((file) => fs.readFileSync(file).includes(needle));
}

const environments: TestEnvironment[] = [];
afterAll(async () => {
  for (const e of environments) await e.cleanup();
});

describe('the service as a new user runs it (embedded PGlite)', () => {
  test('first start prints a token; registries, tokens and encryption survive restarts; the CLI works with the service up or down', async () => {
    const environment = await createTestEnvironment('pglite');
    environments.push(environment);
    const env = environment.env;

    // First start: exactly one token is printed.
    const first = await startServiceProcess(env);
    expect(first.printedToken).toMatch(/^lh_/);
    const token = first.printedToken!;

    // The built service (as `npm start` runs it) serves the built console and the API docs.
    for (const [route, type] of [
      ['/console', 'text/html'],
      ['/docs/', 'text/html'],
    ] as const) {
      const page = await fetch(`${first.url}${route}`);
      expect(page.status, route).toBe(200);
      expect(page.headers.get('content-type'), route).toContain(type);
      await page.arrayBuffer();
    }

    const secretMarker = `SECRET-${crypto.randomUUID()}`;
    const descriptionMarker = `HIDDEN-${crypto.randomUUID()}`;
    const plainMarker = `VISIBLE-${crypto.randomUUID()}`;
    const encrypted = await call(first.url, 'POST', '/api/v1/registry/create', token, {
      title: 'Sealed record',
      metadata: [
        { type: 'TEXT', key: 'passport', value: secretMarker },
        { type: 'NUMBER', key: 'balance', value: '1234.5' },
      ],
      folder_id: 'vault',
      template: 'PASS',
      data_encrypted: true,
      description: descriptionMarker,
    });
    expect(encrypted.status).toBe(201);
    const plain = await call(first.url, 'POST', '/api/v1/registry/create', token, {
      title: 'Open record',
      metadata: [{ type: 'TEXT', key: 'note', value: plainMarker }],
      folder_id: 'open',
      template: 'STORAGE',
    });
    expect(plain.status).toBe(201);
    const encryptedId = (encrypted.body.data as { id: string }).id;
    const plainId = (plain.body.data as { id: string }).id;

    // A second service on the same data directory refuses with one clear line.
    const second = await runCli(['serve'], env);
    expect(second.code).toBe(1);
    expect(meaningfulLines(second.stderr)).toHaveLength(1);
    expect(second.stderr).toContain(`is in use by another Ledgerhook process (pid ${first.child.pid})`);

    // The CLI manages tokens while the service runs (through its admin endpoint).
    const created = await runCli(['token', 'create', '--account', 'team-b'], env);
    expect(created.code).toBe(0);
    const tokenB = lastLine(created.stdout);
    expect(tokenB).toMatch(/^lh_[A-Za-z0-9_-]{32}$/);
    const asB = await call(first.url, 'GET', '/api/v1/folder', tokenB);
    expect(asB).toEqual({ status: 200, body: { data: [], next_cursor: null } });
    expect((await call(first.url, 'GET', `/api/v1/registry/${plainId}`, tokenB)).status).toBe(404);

    const listed = await runCli(['token', 'list'], env);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain('default');
    expect(listed.stdout).toContain('team-b');
    expect(listed.stdout).not.toContain(token);
    const idOfB = listed.stdout
      .split('\n')
      .find((l) => l.includes('team-b'))
      ?.split(/\s+/)[0];
    const revoked = await runCli(['token', 'revoke', idOfB!], env);
    expect(revoked.code).toBe(0);
    expect((await call(first.url, 'GET', '/api/v1/folder', tokenB)).status).toBe(401);

    // Graceful stop on SIGTERM releases the data directory.
    expect(await first.stop('SIGTERM')).toBe(0);
    expect(fs.existsSync(path.join(environment.dataDir, 'ledgerhook.pid'))).toBe(false);

    // Encrypted metadata and description never reach the database files; plaintext does (the scan works).
    const dbDir = path.join(environment.dataDir, 'pglite');
    expect(filesContaining(dbDir, plainMarker).length).toBeGreaterThan(0);
    expect(filesContaining(dbDir, secretMarker)).toEqual([]);
    expect(filesContaining(dbDir, descriptionMarker)).toEqual([]);
    expect(fs.statSync(path.join(environment.dataDir, 'master.key')).mode & 0o777).toBe(0o600);

    // The CLI opens the database itself while no service runs.
    const offline = await runCli(['token', 'create'], env);
    expect(offline.code).toBe(0);
    const offlineToken = lastLine(offline.stdout);
    expect(offlineToken).toMatch(/^lh_/);

    // Restart: no new token printed, everything still there, revocation still in force.
    const again = await startServiceProcess(env);
    try {
      expect(again.printedToken).toBeUndefined();
      const back = await call(again.url, 'GET', `/api/v1/registry/${encryptedId}`, token);
      expect(back.status).toBe(200);
      expect(back.body.data).toMatchObject({
        title: 'Sealed record',
        description: descriptionMarker,
        data_encrypted: true,
        metadata: [
          { type: 'TEXT', key: 'passport', value: secretMarker },
          { type: 'NUMBER', key: 'balance', value: '1234.5' },
        ],
      });
      expect((await call(again.url, 'GET', `/api/v1/registry/${plainId}`, offlineToken)).status).toBe(200);
      expect((await call(again.url, 'GET', '/api/v1/folder', tokenB)).status).toBe(401);
    } finally {
      await again.stop();
    }
  });

  test('after kill -9 the stale lock is taken over and committed registries are still there', async () => {
    const environment = await createTestEnvironment('pglite');
    environments.push(environment);
    const first = await startServiceProcess(environment.env);
    const token = first.printedToken!;
    const created = await call(first.url, 'POST', '/api/v1/registry/create', token, {
      title: 'Committed before the crash',
      metadata: [{ type: 'DATE', key: 'at', value: '2026-11-21T10:00:00Z' }],
      folder_id: 'crash',
      template: 'STORAGE',
    });
    expect(created.status).toBe(201);
    await first.stop('SIGKILL');
    // The dead process left its pid file and admin files behind.
    expect(fs.existsSync(path.join(environment.dataDir, 'ledgerhook.pid'))).toBe(true);

    // The CLI sees no live holder and opens the database itself.
    const cli = await runCli(['token', 'list'], environment.env);
    expect(cli.code).toBe(0);
    expect(cli.stdout).toContain('default');

    const again = await startServiceProcess(environment.env);
    try {
      const id = (created.body.data as { id: string }).id;
      const back = await call(again.url, 'GET', `/api/v1/registry/${id}`, token);
      expect(back.status).toBe(200);
      expect(back.body.data).toMatchObject({ title: 'Committed before the crash', folder_id: 'crash' });
    } finally {
      await again.stop();
    }
  });

  test('a different master key than the database was sealed with refuses to start, in one line', async () => {
    const environment = await createTestEnvironment('pglite');
    environments.push(environment);
    const first = await startServiceProcess({ ...environment.env, LEDGERHOOK_MASTER_KEY: 'a'.repeat(64) });
    await first.stop();
    const wrong = await runCli(['serve'], { ...environment.env, LEDGERHOOK_MASTER_KEY: 'b'.repeat(64) });
    // A configuration mistake: exit code 2.
    expect(wrong.code).toBe(2);
    expect(meaningfulLines(wrong.stderr)).toHaveLength(1);
    expect(wrong.stderr).toContain('LEDGERHOOK_MASTER_KEY does not match this database');
  });
});

describe('invalid configuration stops the service with one line naming the variable', () => {
  test.each([
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['LOG_LEVEL', 'loud'],
    ['DATABASE_URL', 'mysql://root@localhost/db'],
    ['LEDGERHOOK_MASTER_KEY', 'too-short'],
    ['HOST', ' '],
  ])('%s=%s', async (variable, value) => {
    const result = await runCli(['serve'], {
      LEDGERHOOK_DATA_DIR: '/nonexistent/never-created',
      [variable]: value,
    });
    expect(result.code).toBe(2);
    const lines = meaningfulLines(result.stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^ledgerhook: invalid configuration: ${variable} `));
    expect(fs.existsSync('/nonexistent/never-created')).toBe(false);
  });
});

describe.each(backends.filter((b) => b === 'postgres'))('the service on %s', (backend) => {
  test('prints a token on first start only; data survives a restart; the CLI works beside it', async () => {
    const environment = await createTestEnvironment(backend);
    environments.push(environment);
    const first = await startServiceProcess(environment.env);
    const token = first.printedToken!;
    expect(token).toMatch(/^lh_/);
    const created = await call(first.url, 'POST', '/api/v1/registry/create', token, {
      title: 'On PostgreSQL',
      metadata: [{ type: 'BOOLEAN', key: 'ok', value: 'true' }],
      folder_id: 'pg',
      template: 'STORAGE',
      data_encrypted: true,
    });
    expect(created.status).toBe(201);
    const cli = await runCli(['token', 'create', '--account', 'pg-b'], environment.env);
    expect(cli.code).toBe(0);
    expect((await call(first.url, 'GET', '/api/v1/folder', lastLine(cli.stdout))).status).toBe(200);
    expect(await first.stop()).toBe(0);

    const again = await startServiceProcess(environment.env);
    try {
      expect(again.printedToken).toBeUndefined();
      const id = (created.body.data as { id: string }).id;
      const back = await call(again.url, 'GET', `/api/v1/registry/${id}`, token);
      expect(back.body.data).toMatchObject({
        title: 'On PostgreSQL',
        metadata: [{ type: 'BOOLEAN', key: 'ok', value: 'true' }],
      });
    } finally {
      await again.stop();
    }
  });
});
