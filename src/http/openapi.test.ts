/**
 * The OpenAPI document as served: `redocly lint` (the repository's redocly.yaml) finds nothing, and
 * it documents what the service answers: an operationId per operation, every error as
 * application/problem+json, 429 and 503 on every API route, 413 and 415 where a body is read.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../../test/helpers/app.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

interface Operation {
  operationId?: string;
  requestBody?: unknown;
  responses: Record<string, { content?: Record<string, unknown>; $ref?: string }>;
}
type Document = {
  paths: Record<string, Record<string, Operation>>;
  components: { responses?: Record<string, { content?: Record<string, unknown> }> };
};

function lint(file: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [path.join(repoRoot, 'node_modules/@redocly/cli/bin/cli.js'), 'lint', file, '--format=json'],
      {
        cwd: repoRoot,
        // No telemetry and no update check: tests never reach past loopback.
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', CI: 'true' },
        timeout: 60_000,
      },
      (error, stdout, stderr) => resolve({ code: error ? (error.code as number) : 0, stdout, stderr }),
    );
  });
}

describe('the OpenAPI document', () => {
  let t: TestApp;
  let doc: Document;
  let dir: string;
  beforeAll(async () => {
    t = await startTestApp('pglite');
    doc = (await t.request('GET', '/openapi.json', { token: null })).body as Document;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-openapi-'));
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const operations = () =>
    Object.entries(doc.paths).flatMap(([route, methods]) =>
      Object.entries(methods).map(([method, op]) => ({
        name: `${method.toUpperCase()} ${route}`,
        route,
        method,
        op,
      })),
    );

  test('redocly lint reports no problem at all', async () => {
    const file = path.join(dir, 'openapi.json');
    fs.writeFileSync(file, JSON.stringify(doc));
    const result = await lint(file);
    const report = JSON.parse(result.stdout) as {
      totals: { errors: number; warnings: number };
      problems: { ruleId: string; message: string; location: { pointer: string }[] }[];
    };
    expect(report.problems.map((p) => `${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
    expect(result.code).toBe(0);
  });

  test('every operation has an operationId of its own', () => {
    const ids = operations().map((o) => o.op.operationId);
    for (const o of operations()) expect(o.op.operationId, o.name).toMatch(/^[a-z][A-Za-z]+$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  test('every error response is application/problem+json, as the service serves it', () => {
    for (const o of operations()) {
      for (const [status, response] of Object.entries(o.op.responses)) {
        if (Number(status) < 400) continue;
        expect(Object.keys(response.content ?? {}), `${o.name} ${status}`).toEqual([
          'application/problem+json',
        ]);
      }
    }
    expect(Object.keys(doc.components.responses?.MethodNotAllowed?.content ?? {})).toEqual([
      'application/problem+json',
    ]);
  });

  test('API routes document 401, 429 and 503; routes that read a body, 413 and 415 too', () => {
    const api = operations().filter((o) => o.route.startsWith('/api/v1/'));
    expect(api.length).toBeGreaterThan(10);
    for (const o of api) {
      const statuses = Object.keys(o.op.responses);
      expect(statuses, o.name).toEqual(expect.arrayContaining(['400', '401', '429', '503']));
      if (o.method === 'post' || o.method === 'delete')
        expect(statuses, o.name).toEqual(expect.arrayContaining(['413', '415']));
    }
  });

  test('documented problem responses are what the service sends: a 409 keeps its existingId', async () => {
    const body = {
      type: 'ADDRESS_TRANSACTION',
      attr: {
        address: '0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045',
        chain: 'ETH',
        url: 'http://127.0.0.1:9/x',
      },
    };
    const first = await t.request('POST', '/api/v1/subscription', { body });
    const again = await t.request('POST', '/api/v1/subscription', { body });
    expect(again.status).toBe(409);
    expect(again.headers.get('content-type')).toContain('application/problem+json');
    expect(again.body).toMatchObject({ existingId: (first.body as { id: string }).id });
  });
});
