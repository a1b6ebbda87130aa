import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../../test/helpers/app.js';
import { backends } from '../../test/helpers/env.js';
import { sampleRegistryBody } from '../../test/helpers/registry-body.js';
import { snapshotDatabase } from '../../test/helpers/snapshot.js';
import { validateMetadata } from './metadata.js';

/**
 * Every malformed request is refused with a problem document that names the offending field, and
 * leaves no trace in the database.
 */

const CREATE = '/api/v1/registry/create';

/** Where a field error points: a body field by JSON pointer, a parameter or a header by name. */
type Where = { pointer: string } | { parameter: string } | { header: string };

interface Case {
  name: string;
  method?: 'GET' | 'POST';
  path?: string;
  /** Serialised as JSON. */
  body?: unknown;
  /** Sent as is. */
  rawBody?: string;
  headers?: Record<string, string>;
  status?: 400 | 413 | 415;
  /** The problem `type`; by default the validation problem for a 400. */
  type?: string;
  /** Every field the `errors` array must name, and nothing else (400 only). */
  errors?: Where[];
}

const VALIDATION = 'urn:ledgerhook:problem:validation';
const OK_ITEM = { type: 'TEXT', key: 'owner', value: 'Ada Lovelace', title: 'Owner' };

function validBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return sampleRegistryBody({
    data_encrypted: false,
    ...overrides,
  });
}

function without(field: string): Record<string, unknown> {
  const body = validBody();
  delete body[field];
  return body;
}

/** A body whose metadata is a valid item followed by `item`, so the bad one is at index 1. */
function withItem(item: Record<string, unknown>): Record<string, unknown> {
  return validBody({ metadata: [OK_ITEM, item] });
}

const at = (pointer: string): Where => ({ pointer });
const param = (parameter: string): Where => ({ parameter });

const cases: Case[] = [
  // The body as a whole
  {
    name: 'malformed JSON',
    rawBody: '{"title": "x", ',
    errors: [at('#')],
    type: 'urn:ledgerhook:problem:bad_request',
  },
  {
    name: 'empty body with a JSON content type',
    rawBody: '',
    errors: [at('#')],
    type: 'urn:ledgerhook:problem:bad_request',
  },
  { name: 'a JSON array as body', body: [validBody()], errors: [at('#')] },
  { name: 'a JSON string as body', rawBody: '"Warehouse 7"', errors: [at('#')] },
  { name: 'JSON null as body', rawBody: 'null', errors: [at('#')] },
  { name: 'a JSON number as body', rawBody: '42', errors: [at('#')] },
  {
    name: 'a __proto__ key (prototype poisoning)',
    rawBody: JSON.stringify(validBody()).replace('{', '{"__proto__": {"isAdmin": true}, '),
    errors: [at('#')],
    type: 'urn:ledgerhook:problem:bad_request',
  },
  {
    name: 'body over 1 MiB',
    body: validBody({ description: 'x'.repeat(1024 * 1024 + 1) }),
    status: 413,
    type: 'urn:ledgerhook:problem:body_too_large',
  },
  {
    name: 'content-type text/plain',
    rawBody: JSON.stringify(validBody()),
    headers: { 'content-type': 'text/plain' },
    status: 415,
    type: 'urn:ledgerhook:problem:unsupported_media_type',
  },
  {
    name: 'content-type text/plain with a charset',
    rawBody: JSON.stringify(validBody()),
    headers: { 'content-type': 'text/plain; charset=utf-8' },
    status: 415,
    type: 'urn:ledgerhook:problem:unsupported_media_type',
  },
  {
    name: 'content-type application/x-www-form-urlencoded',
    rawBody: 'title=Warehouse&folder_id=warehouses',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    status: 415,
    type: 'urn:ledgerhook:problem:unsupported_media_type',
  },

  // Wrong types for every top-level field
  { name: 'title is a number', body: validBody({ title: 7 }), errors: [at('#/title')] },
  { name: 'metadata is an object', body: validBody({ metadata: OK_ITEM }), errors: [at('#/metadata')] },
  { name: 'folder_id is a number', body: validBody({ folder_id: 12 }), errors: [at('#/folder_id')] },
  { name: 'template is a number', body: validBody({ template: 1 }), errors: [at('#/template')] },
  { name: 'callback_url is a number', body: validBody({ callback_url: 80 }), errors: [at('#/callback_url')] },
  {
    name: 'data_encrypted is the string "true"',
    body: validBody({ data_encrypted: 'true' }),
    errors: [at('#/data_encrypted')],
  },
  {
    name: 'description is an array',
    body: validBody({ description: ['Quarterly', 'audit'] }),
    errors: [at('#/description')],
  },

  // Required fields and top-level constraints
  { name: 'title missing', body: without('title'), errors: [at('#/title')] },
  { name: 'metadata missing', body: without('metadata'), errors: [at('#/metadata')] },
  { name: 'folder_id missing', body: without('folder_id'), errors: [at('#/folder_id')] },
  { name: 'template missing', body: without('template'), errors: [at('#/template')] },
  {
    name: 'all four required fields missing at once',
    body: { description: 'only this' },
    errors: [at('#/title'), at('#/metadata'), at('#/folder_id'), at('#/template')],
  },
  {
    name: 'more than 1000 metadata items',
    body: validBody({
      metadata: Array.from({ length: 1001 }, (_, i) => ({ type: 'TEXT', key: `k${i}`, value: 'v' })),
    }),
    errors: [at('#/metadata')],
  },
  { name: 'empty title', body: validBody({ title: '' }), errors: [at('#/title')] },
  { name: 'title over 256 characters', body: validBody({ title: 't'.repeat(257) }), errors: [at('#/title')] },
  { name: 'template not in the enum', body: validBody({ template: 'ARCHIVE' }), errors: [at('#/template')] },
  { name: 'template in lower case', body: validBody({ template: 'storage' }), errors: [at('#/template')] },
  { name: 'unknown top-level field', body: validBody({ colour: 'red' }), errors: [at('#/colour')] },
  {
    name: 'unknown top-level field with "/" and "~" in its name is escaped in the pointer',
    body: validBody({ 'a/b~c': 1 }),
    errors: [at('#/a~1b~0c')],
  },
  {
    name: 'folder_id with a space',
    body: validBody({ folder_id: 'my folder' }),
    errors: [at('#/folder_id')],
  },
  { name: 'folder_id with a "/"', body: validBody({ folder_id: 'a/b' }), errors: [at('#/folder_id')] },
  { name: 'empty folder_id', body: validBody({ folder_id: '' }), errors: [at('#/folder_id')] },
  {
    name: 'callback_url javascript:alert(1)',
    body: validBody({ callback_url: 'javascript:alert(1)' }),
    errors: [at('#/callback_url')],
  },
  {
    name: 'callback_url not-a-url',
    body: validBody({ callback_url: 'not-a-url' }),
    errors: [at('#/callback_url')],
  },

  // Metadata items: shape
  {
    name: 'metadata item type not in the enum',
    body: withItem({ type: 'STRING', key: 'k', value: 'v' }),
    errors: [at('#/metadata/1/type')],
  },
  {
    name: 'metadata item type missing',
    body: withItem({ key: 'k', value: 'v' }),
    errors: [at('#/metadata/1/type')],
  },
  {
    name: 'metadata item key missing',
    body: withItem({ type: 'TEXT', value: 'v' }),
    errors: [at('#/metadata/1/key')],
  },
  {
    name: 'metadata item key empty',
    body: withItem({ type: 'TEXT', key: '', value: 'v' }),
    errors: [at('#/metadata/1/key')],
  },
  {
    name: 'metadata item value is a number',
    body: withItem({ type: 'NUMBER', key: 'n', value: 5 }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'metadata item is a string',
    body: validBody({ metadata: [OK_ITEM, 'TEXT'] }),
    errors: [at('#/metadata/1')],
  },
  {
    name: 'unknown metadata item field',
    body: withItem({ type: 'TEXT', key: 'k', value: 'v', colour: 'red' }),
    errors: [at('#/metadata/1/colour')],
  },

  // Metadata items: values that do not parse as their type
  {
    name: 'NUMBER "12abc"',
    body: withItem({ type: 'NUMBER', key: 'n', value: '12abc' }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'NUMBER ""',
    body: withItem({ type: 'NUMBER', key: 'n', value: '' }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'NUMBER "1e999" (not finite)',
    body: withItem({ type: 'NUMBER', key: 'n', value: '1e999' }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'DATE "2026-02-30"',
    body: withItem({ type: 'DATE', key: 'd', value: '2026-02-30' }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'DATE "yesterday"',
    body: withItem({ type: 'DATE', key: 'd', value: 'yesterday' }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'DATE-time without an offset',
    body: withItem({ type: 'DATE', key: 'd', value: '2026-11-21T10:00:00' }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'BOOLEAN "yes"',
    body: withItem({ type: 'BOOLEAN', key: 'b', value: 'yes' }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'URL "ftp://x"',
    body: withItem({ type: 'URL', key: 'u', value: 'ftp://x' }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'URL "not a url"',
    body: withItem({ type: 'URL', key: 'u', value: 'not a url' }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'EMAIL "no-at-sign"',
    body: withItem({ type: 'EMAIL', key: 'e', value: 'no-at-sign' }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'FILE value "just text"',
    body: withItem({ type: 'FILE', key: 'f', value: 'just text' }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'file field "hello"',
    body: withItem({ type: 'FILE', key: 'f', file: 'hello' }),
    errors: [at('#/metadata/1/file')],
  },
  {
    name: 'duplicate metadata key',
    body: withItem({ type: 'TEXT', key: OK_ITEM.key, value: 'Grace Hopper' }),
    errors: [at('#/metadata/1/key')],
  },
  {
    name: 'several bad items are all reported',
    body: validBody({
      metadata: [
        { type: 'NUMBER', key: 'n', value: 'twelve' },
        OK_ITEM,
        { type: 'EMAIL', key: 'e', value: 'nobody' },
      ],
    }),
    errors: [at('#/metadata/0/value'), at('#/metadata/2/value')],
  },

  // Text no column can hold, and JSON that parses to something other than what was sent
  { name: 'NUL in title', body: validBody({ title: 'a\u0000b' }), errors: [at('#/title')] },
  {
    name: 'NUL in description',
    body: validBody({ description: 'a\u0000b' }),
    errors: [at('#/description')],
  },
  {
    name: 'NUL in a metadata key',
    body: withItem({ type: 'TEXT', key: 'k\u0000', value: 'v' }),
    errors: [at('#/metadata/1/key')],
  },
  {
    name: 'NUL in a metadata value',
    body: withItem({ type: 'TEXT', key: 'k', value: 'v\u0000' }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'NUL in a metadata title',
    body: withItem({ type: 'TEXT', key: 'k', value: 'v', title: '\u0000' }),
    errors: [at('#/metadata/1/title')],
  },
  {
    name: 'NUL in a metadata file',
    body: withItem({ type: 'FILE', key: 'k', file: 'https://example.com/\u0000' }),
    errors: [at('#/metadata/1/file')],
  },
  {
    name: 'NUL in an EMAIL value',
    body: withItem({ type: 'EMAIL', key: 'e', value: 'a\u0000@b.co' }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'NUL in callback_url',
    body: validBody({ callback_url: 'https://example.com/\u0000' }),
    errors: [at('#/callback_url')],
  },
  { name: 'lone surrogate in title', body: validBody({ title: 'a\ud800b' }), errors: [at('#/title')] },
  {
    name: 'lone low surrogate in a metadata value',
    body: withItem({ type: 'TEXT', key: 'k', value: '\udc00' }),
    errors: [at('#/metadata/1/value')],
  },
  {
    name: 'duplicate key title',
    rawBody: JSON.stringify(validBody()).replace('{', '{"title": "first", '),
    errors: [at('#/title')],
  },
  {
    name: 'duplicate key in a metadata item',
    rawBody: JSON.stringify(validBody({ metadata: [OK_ITEM] })).replace(
      '{"type":"TEXT"',
      '{"type":"TEXT","type":"URL"',
    ),
    errors: [at('#/metadata/0/type')],
  },
  {
    name: 'a 5,000-deep array as body',
    rawBody: `${'['.repeat(5000)}${']'.repeat(5000)}`,
    errors: [at(`#${'/0'.repeat(64)}`)],
  },
  {
    name: 'a 5,000-deep array as metadata',
    rawBody: JSON.stringify(validBody({ metadata: [] })).replace(
      '"metadata":[]',
      `"metadata":${'['.repeat(5000)}${']'.repeat(5000)}`,
    ),
    errors: [at(`#/metadata${'/0'.repeat(63)}`)],
  },

  // Headers
  {
    name: 'Idempotency-Key with a space',
    body: validBody(),
    headers: { 'idempotency-key': 'has space' },
    errors: [{ header: 'idempotency-key' }],
  },
  {
    name: 'Idempotency-Key over 255 characters',
    body: validBody(),
    headers: { 'idempotency-key': 'k'.repeat(256) },
    errors: [{ header: 'idempotency-key' }],
  },

  // Query strings and path parameters
  {
    name: 'registry list limit=0',
    method: 'GET',
    path: '/api/v1/registry?limit=0',
    errors: [param('limit')],
  },
  {
    name: 'registry list limit=1000',
    method: 'GET',
    path: '/api/v1/registry?limit=1000',
    errors: [param('limit')],
  },
  {
    name: 'registry list limit=abc',
    method: 'GET',
    path: '/api/v1/registry?limit=abc',
    errors: [param('limit')],
  },
  {
    name: 'registry list limit=2.5',
    method: 'GET',
    path: '/api/v1/registry?limit=2.5',
    errors: [param('limit')],
  },
  {
    name: 'registry list unknown query parameter',
    method: 'GET',
    path: '/api/v1/registry?colour=red',
    errors: [param('colour')],
  },
  {
    name: 'registry list cursor=!!!',
    method: 'GET',
    path: '/api/v1/registry?cursor=!!!',
    errors: [param('cursor')],
  },
  {
    name: 'registry list cursor that decodes to something other than an id',
    method: 'GET',
    path: `/api/v1/registry?cursor=${Buffer.from('warehouses').toString('base64url')}`,
    errors: [param('cursor')],
  },
  {
    name: 'registry list folder_id with a space',
    method: 'GET',
    path: '/api/v1/registry?folder_id=my%20folder',
    errors: [param('folder_id')],
  },
  { name: 'folder list limit=0', method: 'GET', path: '/api/v1/folder?limit=0', errors: [param('limit')] },
  {
    name: 'folder list limit=abc',
    method: 'GET',
    path: '/api/v1/folder?limit=abc',
    errors: [param('limit')],
  },
  {
    name: 'folder list unknown query parameter',
    method: 'GET',
    path: '/api/v1/folder?folder_id=warehouses',
    errors: [param('folder_id')],
  },
  {
    name: 'folder list cursor that decodes to NUL',
    method: 'GET',
    path: '/api/v1/folder?cursor=AA',
    errors: [param('cursor')],
  },
  {
    name: 'folder list cursor that decodes to broken UTF-8',
    method: 'GET',
    path: `/api/v1/folder?cursor=${Buffer.from([0xed, 0xa0, 0x80]).toString('base64url')}`,
    errors: [param('cursor')],
  },
  {
    name: 'folder list cursor with NUL',
    method: 'GET',
    path: '/api/v1/folder?cursor=a%00b',
    errors: [param('cursor')],
  },
  {
    name: 'folder list cursor=!!!',
    method: 'GET',
    path: '/api/v1/folder?cursor=!!!',
    errors: [param('cursor')],
  },
  {
    name: 'GET /registry/not-a-uuid',
    method: 'GET',
    path: '/api/v1/registry/not-a-uuid',
    errors: [param('id')],
  },
];

interface ProblemBody {
  type: unknown;
  title: unknown;
  status: unknown;
  detail: unknown;
  errors?: unknown;
}

function whereOf(error: Record<string, unknown>): Where {
  const located = (['pointer', 'parameter', 'header'] as const).filter((k) => error[k] !== undefined);
  // Each error names its field in exactly one way.
  expect(located).toHaveLength(1);
  const kind = located[0]!;
  return { [kind]: error[kind] } as Where;
}

const sortKey = (w: Where) => JSON.stringify(w);

describe.each(backends)('registry validation on %s', (backend) => {
  let t: TestApp;
  let folders: unknown;
  let registries: unknown;

  const lists = async () => {
    const f = await t.request('GET', '/api/v1/folder?limit=100');
    const r = await t.request('GET', '/api/v1/registry?limit=100');
    expect(f.status).toBe(200);
    expect(r.status).toBe(200);
    return { folders: f.body, registries: r.body };
  };

  beforeAll(async () => {
    t = await startTestApp(backend);
    // The body every case corrupts is itself accepted, so each refusal is down to its one defect.
    const control = await t.request('POST', CREATE, { body: validBody() });
    expect(control.status, control.text).toBe(201);
    ({ folders, registries } = await lists());
    expect((folders as { data: unknown[] }).data).toHaveLength(1);
    expect((registries as { data: unknown[] }).data).toHaveLength(1);
  });
  afterAll(async () => {
    await t?.close();
  });

  test('the table has distinct cases', () => {
    expect(new Set(cases.map((c) => c.name)).size).toBe(cases.length);
    expect(cases.length).toBeGreaterThanOrEqual(35);
  });

  test.each(cases)('$name', async (c) => {
    const status = c.status ?? 400;
    const before = await snapshotDatabase(t.app.store);

    const res = await t.request(c.method ?? 'POST', c.path ?? CREATE, {
      ...(c.body !== undefined ? { body: c.body } : {}),
      ...(c.rawBody !== undefined ? { rawBody: c.rawBody } : {}),
      ...(c.headers ? { headers: c.headers } : {}),
    });

    expect(res.status, res.text).toBe(status);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    const problem = res.body as ProblemBody;
    expect(typeof problem, res.text).toBe('object');
    expect(problem.type).toBe(c.type ?? VALIDATION);
    expect(problem.title).toEqual(expect.any(String));
    expect(problem.title).not.toBe('');
    expect(problem.status).toBe(status);
    expect(problem.detail).toEqual(expect.any(String));
    expect(problem.detail).not.toBe('');

    if (c.errors) {
      expect(Array.isArray(problem.errors), res.text).toBe(true);
      const errors = problem.errors as Record<string, unknown>[];
      for (const e of errors) {
        expect(e.detail).toEqual(expect.any(String));
        expect(e.detail).not.toBe('');
      }
      const named = [...new Map(errors.map((e) => whereOf(e)).map((w) => [sortKey(w), w])).values()];
      expect(named.sort((a, b) => sortKey(a).localeCompare(sortKey(b)))).toEqual(
        [...c.errors].sort((a, b) => sortKey(a).localeCompare(sortKey(b))),
      );
    }

    expect(await snapshotDatabase(t.app.store)).toEqual(before);
    expect(await lists()).toEqual({ folders, registries });
  });
});

describe('metadata values', () => {
  test('an EMAIL value with a control character is not an email address', () => {
    for (const value of ['a\u0000@b.co', 'a\u0001b@b.co', 'a\u007f@b.co'])
      expect(validateMetadata([{ type: 'EMAIL', key: 'e', value }]), JSON.stringify(value)).toEqual([
        { pointer: '#/metadata/0/value', detail: 'must be an email address for type EMAIL' },
      ]);
    expect(validateMetadata([{ type: 'EMAIL', key: 'e', value: 'ada@example.com' }])).toEqual([]);
  });
});
