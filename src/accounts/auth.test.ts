import net from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../../test/helpers/app.js';
import { backends } from '../../test/helpers/env.js';
import { waitFor } from '../../test/helpers/process.js';
import { snapshotDatabase } from '../../test/helpers/snapshot.js';
import { createAccounts } from './service.js';

const body = { title: 'x', metadata: [], folder_id: 'f', template: 'STORAGE' };

/**
 * One request written as is (fetch joins repeated headers into one), and the whole answer: the
 * status and the body. The server closes the connection after it (`Connection: close`).
 */
async function rawRequest(
  url: string,
  head: string,
  payload = '',
): Promise<{ status: number; body: unknown }> {
  const { hostname, port } = new URL(url);
  const text = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      // Not end(): a client that half-closes may be hung up on before its answer.
      socket.write(
        `${head}Content-Length: ${Buffer.byteLength(payload)}\r\nConnection: close\r\n\r\n${payload}`,
      );
    });
    let received = '';
    socket.setEncoding('utf8');
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')));
    socket.on('data', (chunk) => {
      received += chunk;
    });
    socket.on('end', () => resolve(received));
    socket.on('error', reject);
  });
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
  return { status, body: JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) };
}

describe.each(backends)('API tokens on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    // Principals kept for a minute: only the revocation's NOTIFY can make a revoked token fail in time.
    t = await startTestApp(backend, { LEDGERHOOK_AUTH_CACHE_TTL: '60s' });
  });
  afterAll(async () => {
    await t?.close();
  });

  test.each([
    ['missing', null, undefined],
    ['not Bearer', null, { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }],
    ['Bearer without token', null, { authorization: 'Bearer ' }],
    ['malformed token', 'not-a-token', undefined],
    ['unknown token', `lh_${'A'.repeat(32)}`, undefined],
  ])('%s → 401 problem with WWW-Authenticate, nothing written', async (_name, token, headers) => {
    const before = await snapshotDatabase(t.app.store);
    for (const [method, route] of [
      ['POST', '/api/v1/registry/create'],
      ['GET', '/api/v1/registry'],
      ['GET', '/api/v1/folder'],
      ['GET', '/api/v1/registry/01a1ffc2-3a39-75cc-aff5-245fafbb1e9b'],
    ] as const) {
      const r = await t.request(method, route, {
        token,
        headers,
        body: method === 'POST' ? body : undefined,
      });
      expect(r.status, `${method} ${route}`).toBe(401);
      expect(r.headers.get('content-type')).toContain('application/problem+json');
      expect(r.headers.get('www-authenticate')).toBe('Bearer');
      expect(r.body).toMatchObject({
        status: 401,
        title: 'Unauthorized',
        type: 'urn:ledgerhook:problem:unauthorized',
      });
    }
    expect(await snapshotDatabase(t.app.store)).toEqual(before);
  });

  test('x-api-key (as Tatum clients send it) authenticates like Authorization: Bearer', async () => {
    const accounts = createAccounts({ db: t.app.store.db });
    const issued = await accounts.issueToken('api-key-user');
    const viaKey = await t.request('POST', '/api/v1/registry/create', {
      token: null,
      headers: { 'x-api-key': issued.token },
      body: { ...body, folder_id: 'via-api-key' },
    });
    expect(viaKey.status, viaKey.text).toBe(201);
    // The registry belongs to the key's account: its owner sees it, the default account does not.
    const id = (viaKey.body as { data: { id: string } }).data.id;
    expect((await t.request('GET', `/api/v1/registry/${id}`, { token: issued.token })).status).toBe(200);
    expect((await t.request('GET', `/api/v1/registry/${id}`)).status).toBe(404);

    const both = await t.request('GET', '/api/v1/folder', {
      token: issued.token,
      headers: { 'x-api-key': issued.token },
    });
    expect(both.status).toBe(200);
    for (const headers of [
      { 'x-api-key': `lh_${'B'.repeat(32)}` },
      { 'x-api-key': '' },
      { 'x-api-key': 'not a token' },
    ]) {
      const r = await t.request('GET', '/api/v1/folder', { token: null, headers });
      expect(r.status, JSON.stringify(headers)).toBe(401);
      expect(r.headers.get('content-type')).toContain('application/problem+json');
    }
    // Two different tokens: refused rather than guessing which one was meant.
    const mixed = await t.request('GET', '/api/v1/folder', { headers: { 'x-api-key': issued.token } });
    expect(mixed.status).toBe(401);
    expect((mixed.body as { detail: string }).detail).toMatch(/x-api-key/);
  });

  test('credentials sent twice are refused with 400 naming the header, nothing written', async () => {
    const other = await createAccounts({ db: t.app.store.db }).issueToken('twice');
    const before = await snapshotDatabase(t.app.store);
    const payload = JSON.stringify({ ...body, folder_id: 'twice' });
    for (const [header, twice] of [
      ['authorization', `Authorization: Bearer ${t.token}\r\nAuthorization: Bearer ${other.token}\r\n`],
      // The same token twice too: a proxy in front may have read either line.
      ['authorization', `Authorization: Bearer ${t.token}\r\nauthorization: Bearer ${t.token}\r\n`],
      ['x-api-key', `X-Api-Key: ${t.token}\r\nX-Api-Key: ${other.token}\r\n`],
    ] as const) {
      const answer = await rawRequest(
        t.app.url,
        `POST /api/v1/registry/create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${twice}`,
        payload,
      );
      expect(answer.status, twice).toBe(400);
      expect(answer.body).toMatchObject({
        type: 'urn:ledgerhook:problem:validation',
        errors: [{ header, detail: 'is sent more than once; send one' }],
      });
    }
    expect(await snapshotDatabase(t.app.store)).toEqual(before);
    // Once, the same request is served.
    const once = await rawRequest(
      t.app.url,
      `POST /api/v1/registry/create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer ${t.token}\r\n`,
      payload,
    );
    expect(once.status).toBe(201);
  });

  test('a token revoked by another process is refused within a second, though cached; other tokens keep working', async () => {
    // A service of its own on the same database, as the CLI is when no service answers it.
    const accounts = createAccounts({ db: t.app.store.db });
    const issued = await accounts.issueToken('revocation');
    const other = await accounts.issueToken('revocation');
    expect((await t.request('GET', '/api/v1/folder', { token: issued.token })).status).toBe(200);
    const info = await accounts.revokeToken(issued.info.id);
    expect(info.revokedAt).toBeInstanceOf(Date);
    // The service learns of it by NOTIFY, after the commit: a moment later, never a minute.
    await waitFor(
      async () =>
        (await t.request('GET', '/api/v1/folder', { token: issued.token })).status === 401 ? true : undefined,
      'the revoked token to be refused',
      1_000,
    );
    expect((await t.request('GET', '/api/v1/folder', { token: other.token })).status).toBe(200);
  });

  test('tokens are stored only as hashes and listed without their secret', async () => {
    const accounts = createAccounts({ db: t.app.store.db });
    const issued = await accounts.issueToken('hashing');
    const listed = await accounts.listTokens();
    expect(JSON.stringify(listed)).not.toContain(issued.token);
    const dump = await snapshotDatabase(t.app.store);
    expect(JSON.stringify(dump)).not.toContain(issued.token);
    const { sql } = await import('drizzle-orm');
    const rows = (await t.app.store.db.execute(sql`SELECT * FROM api_tokens`)) as unknown as {
      rows: unknown[];
    };
    expect(JSON.stringify(rows.rows)).not.toContain(issued.token);
    expect(listed.find((x) => x.id === issued.info.id)).toMatchObject({
      accountName: 'hashing',
      prefix: issued.token.slice(0, 10),
    });
  });

  test('bootstrap creates the default account only on an empty database', async () => {
    const accounts = createAccounts({ db: t.app.store.db });
    expect(await accounts.bootstrap()).toBeUndefined();
  });
});
