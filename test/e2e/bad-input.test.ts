import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ADDRESS_LIST_BODY_LIMIT } from '../../src/subscriptions/route-schemas.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import { sampleRegistryBody } from '../helpers/registry-body.js';
import { snapshotDatabase } from '../helpers/snapshot.js';

/**
 * Hostile requests against every operation of the served OpenAPI document (routes added later are
 * swept without a change here): never a 5xx, every error a problem document with a 4xx status that
 * names the field at fault, and nothing stored.
 */

interface JsonSchema {
  type?: string | string[];
  format?: string;
  enum?: unknown[];
  maxLength?: number;
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  $ref?: string;
}

interface Parameter {
  in: 'path' | 'query' | 'header' | 'cookie';
  name: string;
  schema?: JsonSchema;
}

interface Operation {
  method: string;
  path: string;
  parameters: Parameter[];
  body: JsonSchema | undefined;
  secured: boolean;
}

interface OpenApi {
  paths: Record<string, Record<string, Record<string, unknown>>>;
  components?: { schemas?: Record<string, JsonSchema> };
}

type Where = { pointer: string } | { parameter: string } | { header: string };

interface Sent {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  token?: string | null;
}

/** What a hostile request must get: a status, and the fields the problem must name. */
interface Expected {
  /** `accepted`: the body was taken (whatever the resource says); `any`: any 4xx or success. */
  status: number | 'accepted' | 'any';
  names?: Where[];
}

interface Case {
  name: string;
  request: Sent;
  expected: Expected;
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const JSON_TYPE = { 'content-type': 'application/json' };
const BODY_LIMIT = 1_048_576;
/** The routes that take address lists (100,000 of them) have a larger limit of their own. */
const bodyLimitOf = (op: { method: string; path: string }) =>
  op.method === 'POST' &&
  (op.path === '/api/v1/subscription' || op.path === '/api/v1/subscription/{id}/addresses')
    ? ADDRESS_LIST_BODY_LIMIT
    : BODY_LIMIT;

function operationsOf(doc: OpenApi): Operation[] {
  const resolve = (schema: JsonSchema | undefined): JsonSchema | undefined => {
    const ref = schema?.$ref?.replace(/^#\/components\/schemas\//, '');
    return ref === undefined ? schema : doc.components?.schemas?.[ref];
  };
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, raw] of Object.entries(methods)) {
      const op = raw as {
        parameters?: Parameter[];
        requestBody?: { content?: Record<string, { schema?: JsonSchema }> };
        security?: unknown[];
      };
      ops.push({
        method: method.toUpperCase(),
        path,
        parameters: op.parameters ?? [],
        body: resolve(op.requestBody?.content?.['application/json']?.schema),
        // Operations marked `security: []` are open; the rest inherit the document's bearer scheme.
        secured: !(Array.isArray(op.security) && op.security.length === 0),
      });
    }
  }
  return ops;
}

const typesOf = (schema: JsonSchema): string[] => (schema.type === undefined ? [] : [schema.type].flat());

/** Every path to a string leaf of a body schema, following array items through index 0. */
function stringPaths(
  schema: JsonSchema | undefined,
  prefix: (string | number)[] = [],
): (string | number)[][] {
  if (!schema) return [];
  const types = typesOf(schema);
  if (types.includes('string')) return [prefix];
  if (types.includes('array')) return stringPaths(schema.items, [...prefix, 0]);
  return Object.entries(schema.properties ?? {}).flatMap(([name, child]) =>
    stringPaths(child, [...prefix, name]),
  );
}

const escapeToken = (token: string | number) => String(token).replace(/~/g, '~0').replace(/\//g, '~1');
const pointerOf = (path: (string | number)[]) => `#${path.map((t) => `/${escapeToken(t)}`).join('')}`;

/**
 * JSON text with `leaf` (JSON text) at `path`; with `duplicate`, the innermost object carries the
 * key twice (first with another value), which JSON.stringify cannot produce.
 */
function nest(path: (string | number)[], leaf: string, duplicate = false): string {
  let text = leaf;
  for (let i = path.length - 1; i >= 0; i--) {
    const token = path[i]!;
    if (typeof token === 'number') {
      text = `[${text}]`;
    } else {
      const key = JSON.stringify(token);
      text = duplicate && i === path.length - 1 ? `{${key}:"first",${key}:${text}}` : `{${key}:${text}}`;
    }
  }
  return text;
}

/** A JSON value of another type than the schema declares. */
function wrongTypeFor(schema: JsonSchema): string {
  const types = typesOf(schema);
  if (types.includes('string')) return '12345';
  if (types.includes('integer') || types.includes('number')) return '"1"';
  if (types.includes('boolean')) return '"true"';
  if (types.includes('array')) return '{}';
  if (types.includes('object')) return '[]';
  return '{"unexpected": []}';
}

const deepArray = `${'['.repeat(5000)}${']'.repeat(5000)}`;
const deepObject = `${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`;

describe.each(backends)('hostile requests to every documented operation on %s', (backend) => {
  let t: TestApp;
  let receiver: Receiver;
  let operations: Operation[];
  /** Ids of real resources, by the path segment that names their kind. */
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    receiver = await startReceiver();
    t = await startTestApp(backend);
    const registry = await t.request('POST', '/api/v1/registry/create', { body: sampleRegistryBody() });
    expect(registry.status, registry.text).toBe(201);
    ids.registry = (registry.body as { data: { id: string } }).data.id;
    const subscription = await t.request('POST', '/api/v1/subscription', {
      body: {
        type: 'ADDRESS_TRANSACTION',
        attr: { address: '0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045', chain: 'ETH', url: receiver.url },
      },
    });
    expect(subscription.status, subscription.text).toBe(201);
    ids.subscription = (subscription.body as { id: string }).id;
    const sent = await t.request('POST', `/api/v1/subscription/${ids.subscription}/test`);
    expect(sent.status, sent.text).toBe(202);
    ids.notification = (sent.body as { notificationId: string }).notificationId;
    // Delivered and settled, so the database holds still while the sweep compares it.
    await waitFor(async () => {
      const log = await t.request('GET', `/api/v1/subscription/${ids.subscription}/notifications`);
      const data = (log.body as { data: { state: string }[] }).data;
      return data.length === 1 && data[0]?.state === 'delivered' ? true : undefined;
    }, 'the test notification to be delivered');

    const doc = await t.request('GET', '/openapi.json', { token: null });
    expect(doc.status).toBe(200);
    operations = operationsOf(doc.body as OpenApi);
    // The sweep reaches at least these (so a document it cannot read fails rather than sweeps nothing).
    const listed = operations.map((op) => `${op.method} ${op.path}`);
    expect(listed).toEqual(
      expect.arrayContaining([
        'POST /api/v1/registry/create',
        'POST /api/v1/subscription',
        'DELETE /api/v1/subscription/{id}',
        'POST /api/v1/subscription/{id}/test',
        'POST /api/v1/subscription/{id}/enable',
        'POST /api/v1/subscription/{id}/rotate-secret',
        'POST /api/v1/notification/{id}/resend',
        'GET /api/v1/transaction/{network}/{txId}',
      ]),
    );
    expect(stringPaths(operations.find((op) => op.path === '/api/v1/registry/create')?.body)).toContainEqual([
      'metadata',
      0,
      'value',
    ]);
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
  });

  async function send(request: Sent): Promise<{ status: number; contentType: string; text: string }> {
    const headers: Record<string, string> = { ...request.headers };
    const token = request.token === undefined ? t.token : request.token;
    if (token !== null) headers.authorization = `Bearer ${token}`;
    const response = await fetch(`${t.app.url}${request.path}`, {
      method: request.method,
      headers,
      body: typeof request.body === 'string' ? Buffer.from(request.body, 'utf8') : request.body,
    });
    return {
      status: response.status,
      contentType: response.headers.get('content-type') ?? '',
      text: await response.text(),
    };
  }

  /** Whatever is at fault, the answer is a 4xx problem document; returns what went wrong, if anything. */
  function judge(c: Case, r: { status: number; contentType: string; text: string }): string | undefined {
    const where = `${c.request.method} ${c.request.path.slice(0, 120)} — ${c.name}: ${r.status} ${r.text.slice(0, 300)}`;
    if (r.status >= 500) return `5xx: ${where}`;
    if (r.status >= 400) {
      if (!r.contentType.startsWith('application/problem+json')) return `not a problem document: ${where}`;
      let problem: { type?: unknown; title?: unknown; status?: unknown; detail?: unknown; errors?: unknown };
      try {
        problem = JSON.parse(r.text);
      } catch {
        return `problem is not JSON: ${where}`;
      }
      if (
        problem.status !== r.status ||
        typeof problem.type !== 'string' ||
        typeof problem.title !== 'string'
      )
        return `malformed problem: ${where}`;
      if (typeof problem.detail !== 'string' || problem.detail === '')
        return `problem without detail: ${where}`;
      for (const e of (problem.errors ?? []) as Record<string, unknown>[]) {
        const located = ['pointer', 'parameter', 'header'].filter((k) => typeof e[k] === 'string');
        if (located.length !== 1 || typeof e.detail !== 'string') return `malformed field error: ${where}`;
      }
    }
    const { status, names } = c.expected;
    if (status === 'any') return undefined;
    if (status === 'accepted') {
      // The body was taken: whatever follows is about the resource, not the body.
      if ([400, 413, 415].includes(r.status)) return `body refused: ${where}`;
      return undefined;
    }
    if (r.status !== status) return `expected ${status}: ${where}`;
    const errors = (JSON.parse(r.text).errors ?? []) as Record<string, unknown>[];
    for (const name of names ?? []) {
      const [kind, value] = Object.entries(name)[0]!;
      if (!errors.some((e) => e[kind] === value))
        return `does not name ${kind} ${JSON.stringify(value)}: ${where}`;
    }
    return undefined;
  }

  /** Sends every case (a few at a time), and returns every failure at once, to read as a list. */
  async function sweep(cases: Case[]): Promise<string[]> {
    const failures: string[] = [];
    for (let i = 0; i < cases.length; i += 8) {
      const batch = cases.slice(i, i + 8);
      const responses = await Promise.all(batch.map((c) => send(c.request)));
      batch.forEach((c, j) => {
        const failure = judge(c, responses[j]!);
        if (failure) failures.push(failure);
      });
    }
    return failures;
  }

  /** A path with its parameters filled: real ids where the kind is known, `override` for one. */
  function fill(op: Operation, override?: { name: string; raw: string }, real = true): string {
    return op.path.replace(/\{(\w+)\}/g, (_, name: string) => {
      if (override?.name === name) return override.raw;
      const schema = op.parameters.find((p) => p.in === 'path' && p.name === name)?.schema;
      if (schema?.format !== 'uuid') return 'x';
      const kind = op.path.split('/').at(op.path.split('/').indexOf(`{${name}}`) - 1) ?? '';
      return (real ? ids[kind] : undefined) ?? randomUUID();
    });
  }

  const bodyOperations = () => operations.filter((op) => BODY_METHODS.has(op.method));

  test('hostile bodies are refused with the field named, before anything is stored', async () => {
    const cases: Case[] = [];
    for (const op of bodyOperations()) {
      const path = fill(op);
      const at = (pointer: string): Expected => ({ status: 400, names: [{ pointer }] });
      const add = (name: string, body: string | Uint8Array, expected: Expected, headers = JSON_TYPE) =>
        cases.push({ name, request: { method: op.method, path, headers, body }, expected });

      // Every string the schema declares, and an unknown field for operations that take no body.
      const strings = op.body ? stringPaths(op.body) : [['x']];
      for (const field of strings) {
        const pointer = pointerOf(field);
        add(`NUL in ${pointer}`, nest(field, '"a\\u0000b"'), at(pointer));
        add(`lone high surrogate in ${pointer}`, nest(field, '"a\\ud800b"'), at(pointer));
        // An array's item has no key to repeat.
        if (typeof field.at(-1) !== 'number')
          add(`duplicate key ${pointer}`, nest(field, '"second"', true), at(pointer));
      }
      add('a lone low surrogate', '{"zz": "\\udc00"}', at('#/zz'));
      add('NUL in a key', '{"a\\u0000b": 1}', at('#/a\u0000b'));
      add('lone surrogate in a key', '{"\\ud800": 1}', at('#/\ud800'));
      add('duplicate keys at the top', '{"zz":1,"zz":1}', at('#/zz'));
      add('a duplicate key written with an escape', '{"zz":1,"\\u007a\\u007a":2}', at('#/zz'));
      for (const [name, schema] of Object.entries(op.body?.properties ?? {}))
        add(`wrong type for ${name}`, nest([name], wrongTypeFor(schema)), at(pointerOf([name])));
      add('an unknown field', '{"zz_unknown": 1}', at('#/zz_unknown'));
      add('malformed JSON', '{"a": ', at('#'));
      add('JSON followed by garbage', '{} x', at('#'));
      add('null', 'null', at('#'));
      add('an array', '[]', at('#'));
      add('a number', '42', at('#'));
      add('a string', '"text"', at('#'));
      add('a 5,000-deep array', deepArray, { status: 400 });
      add('5,000 nested objects', deepObject, { status: 400 });
      add('a 5,000-deep array under a field', `{"zz":${deepArray}}`, { status: 400 });
      add('__proto__', '{"__proto__": {"isAdmin": true}}', { status: 400 });
      add('constructor.prototype', '{"constructor": {"prototype": {"isAdmin": true}}}', { status: 400 });
      add('invalid UTF-8', Buffer.from('{"zz": "\xff\xfe"}', 'latin1'), { status: 400 });
      add('UTF-8 of a lone surrogate (CESU-8)', Buffer.from('{"zz": "\xed\xa0\x80"}', 'latin1'), {
        status: 400,
      });
      add('a body over the limit', `{"zz": "${'x'.repeat(bodyLimitOf(op))}"}`, { status: 413 });
      add('non-empty text/plain', '{}', { status: 415 }, { 'content-type': 'text/plain' });
      add(
        'a non-empty form',
        'a=1',
        { status: 415 },
        { 'content-type': 'application/x-www-form-urlencoded' },
      );
      if (op.secured) {
        for (const [name, body] of [
          ['without a token: an unknown field', '{"zz_unknown": 1}'],
          ['without a token: a 5,000-deep array', deepArray],
        ] as const)
          cases.push({
            name,
            request: { method: op.method, path, headers: JSON_TYPE, body, token: null },
            expected: { status: 401 },
          });
      }
    }
    const before = await snapshotDatabase(t.app.store);
    expect(await sweep(cases)).toEqual([]);
    expect(await snapshotDatabase(t.app.store)).toEqual(before);
  });

  test('an empty body is no body under any content type; {} is no body either', async () => {
    const cases: Case[] = [];
    for (const op of bodyOperations()) {
      // A route that takes no body is sent an unknown id: accepting the body must not act on anything.
      const hasParams = op.parameters.some((p) => p.in === 'path');
      if (!op.body && !hasParams) continue;
      const path = fill(op, undefined, false);
      const expected: Expected = op.body
        ? { status: 400, names: [{ pointer: '#' }] }
        : { status: 'accepted' };
      for (const type of [
        'application/json',
        'application/json; charset=utf-8',
        'application/x-www-form-urlencoded',
        'text/plain',
        'application/octet-stream',
        undefined,
      ]) {
        cases.push({
          name: `empty body as ${type ?? 'no content type'}`,
          request: { method: op.method, path, headers: type ? { 'content-type': type } : {}, body: '' },
          expected,
        });
      }
      if (!op.body)
        cases.push({
          name: '{}',
          request: { method: op.method, path, headers: JSON_TYPE, body: '{}' },
          expected: { status: 'accepted' },
        });
    }
    const before = await snapshotDatabase(t.app.store);
    expect(await sweep(cases)).toEqual([]);
    expect(await snapshotDatabase(t.app.store)).toEqual(before);
  });

  test('hostile path parameters are refused with the parameter named', async () => {
    const cases: Case[] = [];
    for (const op of operations) {
      for (const param of op.parameters.filter((p) => p.in === 'path')) {
        const add = (name: string, raw: string, expected: Expected) =>
          cases.push({
            name: `${param.name}: ${name}`,
            request: { method: op.method, path: fill(op, { name: param.name, raw }) },
            expected,
          });
        const named: Expected = { status: 400, names: [{ parameter: param.name }] };
        add('NUL', 'a%00b', named);
        add('only NUL', '%00', named);
        add('a control character', 'a%01b', { status: 400 });
        if (param.schema?.format === 'uuid') add('not a uuid', 'not-a-uuid', named);
        if (param.schema?.maxLength !== undefined)
          add('one character too long', 'x'.repeat(param.schema.maxLength + 1), named);
        add('5,000 characters', 'x'.repeat(5000), { status: 400 });
        add('broken percent-encoding', 'a%E0%A4%A', { status: 400 });
        add('UTF-8 of a lone surrogate', '%ED%A0%80', { status: 400 });
        add('invalid UTF-8', '%FF', { status: 400 });
      }
    }
    expect(cases.length).toBeGreaterThan(0);
    const before = await snapshotDatabase(t.app.store);
    expect(await sweep(cases)).toEqual([]);
    expect(await snapshotDatabase(t.app.store)).toEqual(before);
  });

  test('hostile and unknown query parameters are refused with the parameter named', async () => {
    const cases: Case[] = [];
    for (const op of operations) {
      const path = fill(op);
      const add = (name: string, query: string, expected: Expected) =>
        cases.push({ name, request: { method: op.method, path: `${path}?${query}` }, expected });
      // The API refuses what it does not know; the service endpoints (health, metrics) may ignore it.
      // Where a body is required and missing, that is reported first: the query need not be named.
      const named = (parameter: string): Expected =>
        !op.secured ? { status: 'any' } : op.body ? { status: 400 } : { status: 400, names: [{ parameter }] };
      add('an unknown parameter', 'zz_unknown=1', named('zz_unknown'));
      add('an unknown parameter with NUL in its value', 'zz_unknown=%00', named('zz_unknown'));
      for (const param of op.parameters.filter((p) => p.in === 'query')) {
        const { name } = param;
        add(`${name}: NUL`, `${name}=a%00b`, named(name));
        add(`${name}: only NUL`, `${name}=%00`, named(name));
        add(`${name}: a cursor-like value decoding to NUL`, `${name}=AA`, { status: 'any' });
        add(`${name}: UTF-8 of a lone surrogate`, `${name}=%ED%A0%80`, { status: 'any' });
        add(`${name}: invalid UTF-8`, `${name}=%FF`, { status: 'any' });
        add(`${name}: broken percent-encoding`, `${name}=%E0%A4%A`, { status: 'any' });
        add(`${name}: given twice`, `${name}=1&${name}=2`, { status: 'any' });
        add(`${name}: 10,000 characters`, `${name}=${'x'.repeat(10_000)}`, { status: 'any' });
        const types = typesOf(param.schema ?? {});
        if (types.includes('integer')) {
          add(`${name}: not a number`, `${name}=abc`, named(name));
          add(`${name}: a fraction`, `${name}=1.5`, named(name));
          add(`${name}: huge`, `${name}=${'9'.repeat(400)}`, named(name));
        }
        if (param.schema?.enum) add(`${name}: not in the enum`, `${name}=zz`, named(name));
      }
    }
    const before = await snapshotDatabase(t.app.store);
    expect(await sweep(cases)).toEqual([]);
    expect(await snapshotDatabase(t.app.store)).toEqual(before);
  });

  test('a cursor that decodes to NUL is 400 naming cursor on every list', async () => {
    const lists = operations.filter((op) =>
      op.parameters.some((p) => p.in === 'query' && p.name === 'cursor'),
    );
    expect(lists.length).toBeGreaterThanOrEqual(4);
    const cases: Case[] = lists.flatMap((op) =>
      ['AA', 'AAAA', 'YQBi', '7aCA'].map((cursor) => ({
        name: `cursor=${cursor}`,
        request: { method: op.method, path: `${fill(op)}?cursor=${cursor}` },
        expected: { status: 400, names: [{ parameter: 'cursor' }] },
      })),
    );
    expect(await sweep(cases)).toEqual([]);
  });

  test('a NUL in a header is a 400 problem document, before any route runs', async () => {
    // No HTTP client sends this, so it goes over a raw socket.
    const { port } = new URL(t.app.url);
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), '127.0.0.1', () => {
        socket.write(
          `POST /api/v1/registry/create HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.token}\r\nIdempotency-Key: a\0b\r\nContent-Length: 2\r\n\r\n{}`,
        );
      });
      let data = '';
      socket.on('data', (chunk) => {
        data += chunk.toString('latin1');
      });
      socket.on('end', () => resolve(data));
      socket.on('close', () => resolve(data));
      socket.on('error', reject);
    });
    const [head = '', body = ''] = raw.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(head.toLowerCase()).toContain('content-type: application/problem+json');
    expect(JSON.parse(body)).toMatchObject({
      status: 400,
      type: expect.any(String),
      detail: expect.any(String),
    });
  });

  test('a path no route serves is 404 whatever its body', async () => {
    for (const [type, body] of [
      ['text/plain', 'hello'],
      ['application/json', '{"a":1,"a":2}'],
      ['application/json', '{'],
      ['application/octet-stream', '\u0000'],
    ] as const) {
      const r = await send({
        method: 'POST',
        path: '/api/v1/nothing-here',
        headers: { 'content-type': type },
        body,
      });
      expect(r.status, `${type} ${r.text}`).toBe(404);
      expect(r.contentType).toContain('application/problem+json');
    }
  });

  test('action routes take an empty body under any content type, and refuse any other', async () => {
    const id = ids.subscription!;
    const base = `/api/v1/subscription/${id}`;
    // rotate-secret with an empty JSON body and with curl -d '' (a form) both work.
    const rotated = await send({
      method: 'POST',
      path: `${base}/rotate-secret`,
      headers: JSON_TYPE,
      body: '',
    });
    expect(rotated.status, rotated.text).toBe(200);
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const again = await send({ method: 'POST', path: `${base}/rotate-secret`, headers: form, body: '' });
    expect(again.status, again.text).toBe(200);
    const enabled = await send({ method: 'POST', path: `${base}/enable`, headers: JSON_TYPE, body: '{}' });
    expect(enabled.status, enabled.text).toBe(200);

    // Bodies these routes do not take change nothing: no test notification is enqueued.
    const before = await snapshotDatabase(t.app.store);
    for (const [body, pointer] of [
      ['{"x":1}', '#/x'],
      ['null', '#'],
      ['[]', '#'],
      ['"go"', '#'],
    ] as const) {
      const r = await send({ method: 'POST', path: `${base}/test`, headers: JSON_TYPE, body });
      expect(r.status, r.text).toBe(400);
      expect(JSON.parse(r.text).errors).toContainEqual(expect.objectContaining({ pointer }));
      const d = await send({ method: 'DELETE', path: base, headers: JSON_TYPE, body });
      expect(d.status, d.text).toBe(400);
    }
    expect(await snapshotDatabase(t.app.store)).toEqual(before);
    expect((await t.request('GET', base)).status).toBe(200);

    // An empty JSON body on DELETE deletes.
    const deleted = await send({ method: 'DELETE', path: base, headers: JSON_TYPE, body: '' });
    expect(deleted.status, deleted.text).toBe(204);
  });
});
