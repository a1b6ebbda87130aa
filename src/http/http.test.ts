import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../../test/helpers/app.js';
import { snapshotDatabase } from '../../test/helpers/snapshot.js';

describe('HTTP surface', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp('pglite');
  });
  afterAll(async () => {
    await t?.close();
  });

  test('healthz and readyz need no token; readyz reports the database', async () => {
    expect(await t.request('GET', '/healthz', { token: null })).toMatchObject({
      status: 200,
      body: { status: 'ok' },
    });
    expect(await t.request('GET', '/readyz', { token: null })).toMatchObject({
      status: 200,
      body: { status: 'ready', database: 'ok' },
    });
  });

  test('readyz is 503 when the database is gone', async () => {
    const other = await startTestApp('pglite');
    try {
      await other.app.store.close();
      const r = await other.request('GET', '/readyz', { token: null });
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({ status: 503, type: 'urn:ledgerhook:problem:not_ready' });
    } finally {
      await other.close();
    }
  });

  test('the OpenAPI document describes every route the service serves', async () => {
    const r = await t.request('GET', '/openapi.json', { token: null });
    expect(r.status).toBe(200);
    const doc = r.body as { openapi: string; paths: Record<string, Record<string, unknown>> };
    expect(doc.openapi).toMatch(/^3\./);
    const documented = new Set(
      Object.entries(doc.paths).flatMap(([p, ops]) =>
        Object.keys(ops).map((m) => `${m.toUpperCase()} ${p.replace(/\{(\w+)\}/g, ':$1')}`),
      ),
    );
    const served = t.app.http.servedRoutes.filter((r) => !r.includes(' /docs'));
    expect(served).toEqual(
      expect.arrayContaining([
        'POST /api/v1/registry/create',
        'GET /api/v1/registry/:id',
        'GET /api/v1/registry',
        'GET /api/v1/folder',
      ]),
    );
    for (const route of served) expect(documented, route).toContain(route);
    for (const route of ['GET /healthz', 'GET /readyz', 'GET /metrics', 'GET /openapi.json'])
      expect(served).toContain(route);
    const create = doc.paths['/api/v1/registry/create']?.post as {
      responses: Record<string, unknown>;
      requestBody: unknown;
    };
    expect(Object.keys(create.responses)).toEqual(
      expect.arrayContaining(['201', '400', '401', '409', '413']),
    );
    expect(JSON.stringify(create.requestBody)).toContain('data_encrypted');
  });

  test('/docs serves a browsable page', async () => {
    const r = await t.request('GET', '/docs/', { token: null });
    expect(r.status).toBe(200);
    expect(r.text).toContain('swagger-ui');
  });

  test('/metrics counts requests by route and status', async () => {
    await t.request('GET', '/api/v1/folder');
    await t.request('GET', '/api/v1/folder', { token: null });
    const r = await t.request('GET', '/metrics', { token: null });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('text/plain');
    expect(r.text).toMatch(
      /ledgerhook_http_requests_total\{method="GET",route="\/api\/v1\/folder",status_code="200"\} [1-9]/,
    );
    expect(r.text).toMatch(
      /ledgerhook_http_requests_total\{method="GET",route="\/api\/v1\/folder",status_code="401"\} [1-9]/,
    );
    expect(r.text).toContain('ledgerhook_http_request_duration_seconds_bucket');
  });

  test('an unknown route is a 404 problem', async () => {
    const r = await t.request('GET', '/api/v1/nothing-here');
    expect(r.status).toBe(404);
    expect(r.headers.get('content-type')).toContain('application/problem+json');
  });

  test.each([
    ['PUT', '/api/v1/subscription/01a1ffc2-3a39-75cc-aff5-245fafbb1e9b', 'DELETE, GET, HEAD'],
    ['PATCH', '/api/v1/subscription', 'GET, HEAD, POST'],
    ['DELETE', '/api/v1/folder', 'GET, HEAD'],
    ['GET', '/api/v1/subscription/01a1ffc2-3a39-75cc-aff5-245fafbb1e9b/test', 'POST'],
    ['POST', '/healthz', 'GET, HEAD'],
    ['POST', '/readyz/', 'GET, HEAD'],
  ])('%s %s is 405 with Allow: %s, as a problem, with or without a token', async (method, path, allow) => {
    const before = await snapshotDatabase(t.app.store);
    for (const token of [undefined, null]) {
      const r = await t.request(method, path, { token, body: method === 'GET' ? undefined : {} });
      expect(r.status, r.text).toBe(405);
      expect(r.headers.get('allow')).toBe(allow);
      expect(r.headers.get('content-type')).toContain('application/problem+json');
      expect(r.body).toMatchObject({
        status: 405,
        title: 'Method Not Allowed',
        type: 'urn:ledgerhook:problem:method_not_allowed',
      });
    }
    expect(await snapshotDatabase(t.app.store)).toEqual(before);
  });

  test('GET / points to the documentation: browsers are redirected to /docs', async () => {
    const browser = await fetch(`${t.app.url}/`, {
      headers: { accept: 'text/html,application/xhtml+xml' },
      redirect: 'manual',
    });
    expect(browser.status).toBe(302);
    expect(browser.headers.get('location')).toBe('/docs');
    const client = await t.request('GET', '/', { token: null });
    expect(client.status).toBe(200);
    expect(client.body).toEqual({
      service: 'ledgerhook',
      version: expect.stringMatching(/^\d+\.\d+\.\d+/),
      docs: '/docs',
      openapi: '/openapi.json',
    });
    expect((await t.request('GET', (client.body as { docs: string }).docs, { token: null })).status).toBe(
      200,
    );
  });

  test('a body over the limit is 413 and stores nothing', async () => {
    const before = await snapshotDatabase(t.app.store);
    const r = await t.request('POST', '/api/v1/registry/create', {
      body: {
        title: 'big',
        metadata: [],
        folder_id: 'big',
        template: 'STORAGE',
        description: 'x'.repeat(1_100_000),
      },
    });
    expect(r.status).toBe(413);
    expect(r.body).toMatchObject({ status: 413, type: 'urn:ledgerhook:problem:body_too_large' });
    expect(await snapshotDatabase(t.app.store)).toEqual(before);
  });
});
