import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { putLeafInBatch } from '../../test/helpers/anchoring.js';
import { startTestApp, type TestApp } from '../../test/helpers/app.js';
import { backends } from '../../test/helpers/env.js';
import { type PassView, passBody, sampleRegistryBody } from '../../test/helpers/registry-body.js';
import { loadConfig } from '../config.js';
import { asksForHtml, prefersJson } from './pass-routes.js';

const JSON_ACCEPT = { accept: 'application/json' };
const BROWSER_ACCEPT = {
  accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8',
};

async function create(t: TestApp, body: Record<string, unknown>, token?: string): Promise<string> {
  const r = await t.request('POST', '/api/v1/registry/create', { body, token });
  expect(r.status, r.text).toBe(201);
  return (r.body as { data: { id: string } }).data.id;
}

/** The headers every answer of the public page carries, whatever its status. */
function expectPageHeaders(headers: Headers): void {
  expect(headers.get('content-security-policy')).toMatch(/^default-src 'none'; style-src 'sha256-/);
  expect(headers.get('content-security-policy')).not.toContain('script-src');
  expect(headers.get('x-content-type-options')).toBe('nosniff');
  expect(headers.get('referrer-policy')).toBe('no-referrer');
  expect(headers.get('cache-control')).toBe('no-cache');
  expect(headers.get('vary')).toMatch(/\bAccept\b/i);
}

describe.each(backends)('the public pass page on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(backend, { LEDGERHOOK_PASS_RATE_LIMIT: 'off' });
  });
  afterAll(async () => {
    await t?.close();
  });

  test('the public page as JSON: a valid PASS with its issuer, metadata and description', async () => {
    const token = await t.tokenFor('acme-tickets');
    const body = passBody({ folder_id: 'public' });
    const id = await create(t, body, token);
    const created = (await t.request('GET', `/api/v1/registry/${id}`, { token })).body as {
      data: { created_at: string };
    };
    const r = await t.request('GET', `/pass/${id}`, { token: null, headers: JSON_ACCEPT });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^application\/json/);
    expectPageHeaders(r.headers);
    expect(r.body).toEqual({
      data: {
        id,
        title: 'Concert ticket, row 7',
        description: 'Quarterly audit',
        issuer: 'acme-tickets',
        created_at: created.data.created_at,
        status: 'valid',
        revoked_at: null,
        data_encrypted: false,
        metadata: body.metadata,
        anchor: null,
      },
    });
    // Nothing private: no folder, no callback.
    expect(r.text).not.toContain('folder_id');
    expect(r.text).not.toContain('callback_url');
    // Query parameters (tracking on a shared link, say) change nothing.
    const tracked = await t.request('GET', `/pass/${id}?utm_source=qr&x=%3Cscript%3E`, {
      token: null,
      headers: JSON_ACCEPT,
    });
    expect(tracked.status).toBe(200);
    expect(tracked.body).toEqual(r.body);
  });

  test('the public page of a revoked PASS says so, in JSON and in HTML', async () => {
    const id = await create(t, passBody({ folder_id: 'public-revoked' }));
    const revoked = await t.request('POST', `/api/v1/registry/${id}/revoke`);
    const revokedAt = (revoked.body as { data: PassView }).data.revoked_at!;

    const json = await t.request('GET', `/pass/${id}`, { token: null, headers: JSON_ACCEPT });
    expect(json.body).toMatchObject({ data: { status: 'revoked', revoked_at: revokedAt } });

    const page = await t.request('GET', `/pass/${id}`, { token: null, headers: BROWSER_ACCEPT });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expectPageHeaders(page.headers);
    expect(page.text).toContain('class="status revoked"');
    expect(page.text).toContain(`Revoked on <time datetime="${revokedAt}">`);
    expect(page.text).not.toContain('class="status valid"');
  });

  test('an encrypted PASS shows neither metadata nor description publicly', async () => {
    const body = passBody({
      folder_id: 'public-sealed',
      data_encrypted: true,
      description: 'row 7, seat 12',
    });
    const id = await create(t, body);
    const json = await t.request('GET', `/pass/${id}`, { token: null, headers: JSON_ACCEPT });
    expect(json.status).toBe(200);
    expect(json.body).toMatchObject({
      data: { title: 'Concert ticket, row 7', issuer: 'default', status: 'valid', data_encrypted: true },
    });
    expect((json.body as { data: Record<string, unknown> }).data.metadata).toBeNull();
    expect((json.body as { data: Record<string, unknown> }).data.description).toBeNull();
    const page = await t.request('GET', `/pass/${id}`, { token: null });
    expect(page.status).toBe(200);
    for (const secret of ['Ada Lovelace', 'row 7, seat 12', 'ada@example.com', 'pallets']) {
      expect(json.text).not.toContain(secret);
      expect(page.text).not.toContain(secret);
    }
    expect(page.text).toContain('encrypted; only its issuer can read them');
  });

  test('the public page shows anchoring: pending, then the network, transaction and block', async () => {
    const id = await create(t, passBody({ folder_id: 'public-anchored' }));
    const json = async () =>
      (
        (await t.request('GET', `/pass/${id}`, { token: null, headers: JSON_ACCEPT })).body as {
          data: { anchor: unknown };
        }
      ).data.anchor;
    // This service anchors nothing: the leaf waits in no batch.
    expect(await json()).toBeNull();
    expect((await t.request('GET', `/pass/${id}`, { token: null })).text).toContain('Not anchored');

    const txId = `0x${'ab'.repeat(32)}`;
    const anchoredAt = new Date('2026-11-21T20:18:01.401Z');
    const root = await putLeafInBatch(t.app.store.db, id, {
      state: 'anchored',
      network: 'DEVNET',
      txId,
      blockNumber: 4711,
      anchoredAt,
    });
    expect(await json()).toEqual({
      status: 'anchored',
      network: 'DEVNET',
      txId,
      blockNumber: 4711,
      root,
      anchored_at: anchoredAt.toISOString(),
    });
    const page = (await t.request('GET', `/pass/${id}`, { token: null })).text;
    const anchor = /<dd id="anchor">([\s\S]*?)<\/dd>/.exec(page)![1]!;
    expect(anchor).toContain(
      'Anchored on DEVNET at <time datetime="2026-11-21T20:18:01.401Z">2026-11-21 20:18:01 UTC</time>',
    );
    expect(anchor).toContain(`<code>${txId}</code>`);
    expect(anchor).toContain('4711');
    expect(anchor).toContain(root);
  });

  test('a pending batch shows as pending on its network', async () => {
    const id = await create(t, passBody({ folder_id: 'public-pending' }));
    await putLeafInBatch(t.app.store.db, id, { state: 'pending', network: 'ALGO' });
    const r = await t.request('GET', `/pass/${id}`, { token: null, headers: JSON_ACCEPT });
    expect((r.body as { data: { anchor: unknown } }).data.anchor).toEqual({
      status: 'pending',
      network: 'ALGO',
      txId: null,
      blockNumber: null,
      root: null,
      anchored_at: null,
    });
    const page = (await t.request('GET', `/pass/${id}`, { token: null })).text;
    expect(page).toContain('<dd id="anchor">Pending on ALGO: waiting for the next batch</dd>');
  });

  test('unknown, malformed and STORAGE ids get the same 404: problem details, or a page for browsers', async () => {
    const storage = await create(t, sampleRegistryBody({ folder_id: 'not-a-pass' }));
    const outsider = await t.tokenFor('pass-storage-owner');
    const othersStorage = await create(t, sampleRegistryBody({ folder_id: 'theirs' }), outsider);
    const ids = [
      crypto.randomUUID(),
      'not-a-uuid',
      storage,
      othersStorage,
      '1',
      storage.toUpperCase(),
      'x'.repeat(64),
      '<script>',
    ];
    const answers = [];
    for (const id of ids) {
      const path = `/pass/${encodeURIComponent(id)}`;
      const json = await t.request('GET', path, { token: null, headers: JSON_ACCEPT });
      const page = await t.request('GET', path, { token: null, headers: BROWSER_ACCEPT });
      // Without a preference an error is problem details, as everywhere in the API.
      const plain = await t.request('GET', path, { token: null });
      expect([json.status, page.status, plain.status], id).toEqual([404, 404, 404]);
      expectPageHeaders(json.headers);
      expectPageHeaders(page.headers);
      expect(plain.text).toBe(json.text);
      answers.push({
        json: json.text,
        jsonType: json.headers.get('content-type'),
        page: page.text,
        pageType: page.headers.get('content-type'),
      });
    }
    expect(answers[0]!.jsonType).toContain('application/problem+json');
    expect(JSON.parse(answers[0]!.json)).toMatchObject({
      status: 404,
      type: 'urn:ledgerhook:problem:not_found',
    });
    expect(answers[0]!.pageType).toBe('text/html; charset=utf-8');
    expect(answers[0]!.page).toContain('Pass not found');
    for (const answer of answers) expect(answer).toEqual(answers[0]);
    expect(answers[0]!.json).not.toContain(storage);
    // Even with the owner's token: the public page never looks at who asks.
    const withToken = await t.request('GET', `/pass/${storage}`, { headers: JSON_ACCEPT });
    expect(withToken.text).toBe(answers[0]!.json);
  });

  test('what no id can hold (a control character, more than 64 characters) is 400 naming the parameter', async () => {
    for (const raw of ['a%01b', 'a%00b', 'x'.repeat(65)]) {
      const r = await t.request('GET', `/pass/${raw}`, { token: null, headers: BROWSER_ACCEPT });
      expect(r.status, raw).toBe(400);
      expect(r.headers.get('content-type')).toContain('application/problem+json');
      expect(r.body).toMatchObject({ errors: [{ parameter: 'id' }] });
      expectPageHeaders(r.headers);
    }
  });

  test('user content is escaped: a script in the title or metadata is text, and nothing links to data: or javascript:', async () => {
    const id = await create(
      t,
      passBody({
        folder_id: 'hostile',
        title: '<script>window.__pwned=1</script>Ticket "VIP" & co',
        description: '</p><img src=x onerror="alert(1)">',
        metadata: [
          { type: 'TEXT', key: 'note', value: '<script>alert("meta")</script>', title: "<b>o'clock</b>" },
          { type: 'TEXT', key: 'js', value: 'javascript:alert(1)' },
          { type: 'URL', key: 'site', value: 'https://example.com/a?b=1&c="2"' },
          { type: 'FILE', key: 'payload', file: 'data:text/html,<script>alert(2)</script>' },
          { type: 'FILE', key: 'doc', value: 'data:image/png;base64,iVBORw0KGgo=' },
        ],
      }),
    );
    const page = await t.request('GET', `/pass/${id}`, { token: null });
    expect(page.status).toBe(200);
    const text = page.text;
    expect(text.match(/<script/gi)).toBeNull();
    expect(text).not.toMatch(/<img/i);
    expect(text).not.toMatch(/<b>/);
    expect(text).toContain('&lt;script&gt;window.__pwned=1&lt;/script&gt;Ticket &quot;VIP&quot; &amp; co');
    expect(text).toContain('&lt;/p&gt;&lt;img src=x onerror=&quot;alert(1)&quot;&gt;');
    expect(text).toContain('&lt;b&gt;o&#39;clock&lt;/b&gt;');
    // The only link is the http(s) one, its attribute escaped.
    expect([...text.matchAll(/href="([^"]*)"/g)].map((m) => m[1])).toEqual([
      'https://example.com/a?b=1&amp;c=&quot;2&quot;',
    ]);
    expect(text).not.toContain('data:text/html');
    expect(text).toContain('embedded file (text/html');
    expect(text).toContain('embedded file (image/png');
    // The style the page carries is exactly the one its policy allows by hash.
    const style = /<style>([\s\S]*?)<\/style>/.exec(text)![1]!;
    const hash = crypto.createHash('sha256').update(style).digest('base64');
    expect(page.headers.get('content-security-policy')).toContain(`style-src 'sha256-${hash}'`);
  });
});

describe('choosing JSON or HTML by Accept', () => {
  test('application/json preferred over text/html gets JSON; browsers and wildcards get the page', () => {
    expect(prefersJson('application/json')).toBe(true);
    expect(prefersJson('application/json, text/plain, */*')).toBe(true);
    expect(prefersJson('text/html;q=0.5, application/json')).toBe(true);
    expect(prefersJson('application/json, text/html')).toBe(true);
    expect(prefersJson(undefined)).toBe(false);
    expect(prefersJson('*/*')).toBe(false);
    expect(prefersJson(BROWSER_ACCEPT.accept)).toBe(false);
    expect(prefersJson('text/html, application/json')).toBe(false);
    expect(prefersJson('text/html, application/json;q=0.9')).toBe(false);
    expect(prefersJson('application/json;q=0')).toBe(false);
    expect(prefersJson('application/json;q=abc')).toBe(false);
  });

  test('only a client naming text/html (a browser) gets the not-found page; the rest problem details', () => {
    expect(asksForHtml(BROWSER_ACCEPT.accept)).toBe(true);
    expect(asksForHtml('text/html')).toBe(true);
    expect(asksForHtml('text/html, application/json;q=0.9')).toBe(true);
    expect(asksForHtml(undefined)).toBe(false);
    expect(asksForHtml('*/*')).toBe(false);
    expect(asksForHtml('application/json')).toBe(false);
    expect(asksForHtml('application/json, text/html')).toBe(false);
    expect(asksForHtml('text/html;q=0')).toBe(false);
  });
});

describe.each(backends)('the public page rate limit on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(backend, { LEDGERHOOK_PASS_RATE_LIMIT: '3/1m' });
  });
  afterAll(async () => {
    await t?.close();
  });

  test('past the limit per address the page answers 429; the API keeps its own limit', async () => {
    const id = await create(t, passBody());
    const statuses: number[] = [];
    for (const path of [`/pass/${id}`, `/pass/${crypto.randomUUID()}`, `/pass/${id}`])
      statuses.push((await t.request('GET', path, { token: null, headers: JSON_ACCEPT })).status);
    expect(statuses).toEqual([200, 404, 200]);
    const over = await t.request('GET', `/pass/${id}`, { token: null, headers: JSON_ACCEPT });
    expect(over.status).toBe(429);
    expect(over.headers.get('content-type')).toContain('application/problem+json');
    expect(over.body).toMatchObject({ status: 429, type: 'urn:ledgerhook:problem:rate_limited' });
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(over.headers.get('ratelimit-limit')).toBe('3');
    expectPageHeaders(over.headers);
    // Pages for people are limited too, and the authenticated API is not touched by it.
    expect((await t.request('GET', `/pass/${id}`, { token: null })).status).toBe(429);
    expect((await t.request('GET', `/api/v1/registry/${id}`)).status).toBe(200);
  });
});

describe('LEDGERHOOK_PASS_RATE_LIMIT', () => {
  test('60 a minute by default; off, or <requests>/<duration>; anything else is refused naming it', () => {
    expect(loadConfig({}).passRateLimit).toEqual({ max: 60, windowMs: 60_000 });
    expect(loadConfig({ LEDGERHOOK_PASS_RATE_LIMIT: 'off' }).passRateLimit).toBeUndefined();
    expect(loadConfig({ LEDGERHOOK_PASS_RATE_LIMIT: '10/1s' }).passRateLimit).toEqual({
      max: 10,
      windowMs: 1_000,
    });
    expect(() => loadConfig({ LEDGERHOOK_PASS_RATE_LIMIT: 'lots' })).toThrow(/^LEDGERHOOK_PASS_RATE_LIMIT /);
  });
});
