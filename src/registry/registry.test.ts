import { eq } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../../test/helpers/app.js';
import { backends } from '../../test/helpers/env.js';
import { waitFor } from '../../test/helpers/process.js';
import { startReceiver } from '../../test/helpers/receiver.js';
import { sampleRegistryBody as sampleBody } from '../../test/helpers/registry-body.js';
import { snapshotDatabase } from '../../test/helpers/snapshot.js';
import { runStatement } from '../store/db.js';
import { registries } from './schema.js';

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

interface Created {
  message: string;
  data: { id: string; title: string; created_at: string };
}

describe.each(backends)('registry API on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(backend);
  });
  afterAll(async () => {
    await t?.close();
  });

  test('create returns 201 with the documented shape, and get returns the whole registry', async () => {
    const body = sampleBody();
    const before = Date.now();
    const created = await t.request('POST', '/api/v1/registry/create', { body });
    expect(created.status).toBe(201);
    const c = created.body as Created;
    expect(Object.keys(c).sort()).toEqual(['data', 'message']);
    expect(c.message).toBe('Registry created successfully');
    expect(Object.keys(c.data).sort()).toEqual(['created_at', 'id', 'title']);
    expect(c.data.title).toBe(body.title);
    expect(c.data.created_at).toMatch(ISO_UTC);
    expect(Date.parse(c.data.created_at)).toBeGreaterThanOrEqual(before - 5);

    const got = await t.request('GET', `/api/v1/registry/${c.data.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({
      data: {
        id: c.data.id,
        title: body.title,
        description: 'Quarterly audit',
        folder_id: 'warehouses',
        template: 'STORAGE',
        metadata: body.metadata,
        callback_url: null,
        data_encrypted: false,
        created_at: c.data.created_at,
        // Anchoring is off in this app: nothing will anchor it.
        anchor: null,
        revoked_at: null,
      },
    });
  });

  test('a callback_url gets a signed registry.created event through the outbox', async () => {
    const receiver = await startReceiver();
    try {
      const body = sampleBody({
        callback_url: receiver.url,
        data_encrypted: true,
        folder_id: 'with-callback',
      });
      const headers = { 'idempotency-key': 'callback-1' };
      const created = await t.request('POST', '/api/v1/registry/create', { body, headers });
      expect(created.status).toBe(201);
      const data = (created.body as { data: Record<string, string> }).data;
      expect(Object.keys(data).sort()).toEqual([
        'callback_token',
        'created_at',
        'id',
        'secret',
        'subscription_id',
        'title',
      ]);
      expect(data.secret).toMatch(/^whsec_/);

      const [delivery] = await receiver.waitForRequests(1);
      expect(delivery!.method).toBe('POST');
      expect(delivery!.headers['content-type']).toBe('application/json');
      expect(delivery!.headers.authorization).toBe(`Bearer ${data.callback_token}`);
      const event = new Webhook(data.secret!).verify(delivery!.body, {
        'webhook-id': delivery!.headers['webhook-id'] as string,
        'webhook-timestamp': delivery!.headers['webhook-timestamp'] as string,
        'webhook-signature': delivery!.headers['webhook-signature'] as string,
      }) as Record<string, unknown>;
      expect(event).toEqual({
        type: 'registry.created',
        id: delivery!.headers['webhook-id'],
        subscriptionId: data.subscription_id,
        registry: {
          id: data.id,
          title: body.title,
          folder_id: 'with-callback',
          template: 'STORAGE',
          data_encrypted: true,
          created_at: data.created_at,
        },
      });
      // The event carries no metadata: encrypted data never travels through the outbox in clear.
      expect(delivery!.body).not.toContain('Ada Lovelace');

      // A retry with the same Idempotency-Key returns the same (once-shown) secret, and sends nothing new.
      const replay = await t.request('POST', '/api/v1/registry/create', { body, headers });
      expect(replay.body).toEqual(created.body);
      // The dispatcher records results in batches, a few milliseconds after the receiver answered.
      const log = await waitFor(
        async () => {
          const r = await t.request('GET', `/api/v1/subscription/${data.subscription_id}/notifications`);
          const [first] = (r.body as { data: { state: string }[] }).data;
          return first?.state === 'pending' ? undefined : r;
        },
        'the delivery recorded',
        5_000,
      );
      expect(log.body).toMatchObject({
        data: [{ id: event.id, eventType: 'registry.created', state: 'delivered', attemptCount: 1 }],
      });
    } finally {
      await receiver.close();
    }
  });

  test('an empty metadata list is accepted and optional fields come back null', async () => {
    const created = await t.request('POST', '/api/v1/registry/create', {
      body: { title: 'Bare', metadata: [], folder_id: 'bare', template: 'PASS' },
    });
    expect(created.status).toBe(201);
    const got = await t.request('GET', `/api/v1/registry/${(created.body as Created).data.id}`);
    expect(got.body).toMatchObject({
      data: { metadata: [], description: null, callback_url: null, template: 'PASS', data_encrypted: false },
    });
  });

  test('a new folder_id creates the folder; the folder list counts its registries', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await t.request('POST', '/api/v1/registry/create', {
        body: sampleBody({ folder_id: 'counted-a', title: `a${i}` }),
      });
      expect(r.status).toBe(201);
    }
    await t.request('POST', '/api/v1/registry/create', { body: sampleBody({ folder_id: 'counted-b' }) });
    const folders = await t.request('GET', '/api/v1/folder?limit=100');
    expect(folders.status).toBe(200);
    const list = (
      folders.body as { data: { folder_id: string; registry_count: number; created_at: string }[] }
    ).data;
    expect(list.find((f) => f.folder_id === 'counted-a')).toMatchObject({ registry_count: 3 });
    expect(list.find((f) => f.folder_id === 'counted-b')).toMatchObject({ registry_count: 1 });
    expect(list.find((f) => f.folder_id === 'counted-a')?.created_at).toMatch(ISO_UTC);
    const names = list.map((f) => f.folder_id);
    expect(names).toEqual([...names].sort());
  });

  test('concurrent creates (written together) each get their registry, folder and leaf, per account', async () => {
    const tokenB = await t.tokenFor('concurrent-b');
    // Forty at once: most wait for the statement in flight and are written in one statement,
    // several naming the same new folder, two accounts in one batch.
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        t.request('POST', '/api/v1/registry/create', {
          ...(i % 4 === 3 ? { token: tokenB } : {}),
          body: sampleBody({ folder_id: `together-${i % 2}`, title: `together ${i}` }),
        }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 201));
    const ids = answers.map((a) => (a.body as Created).data.id);
    expect(new Set(ids).size).toBe(40);
    for (const [i, id] of ids.entries()) {
      const got = await t.request('GET', `/api/v1/registry/${id}`, i % 4 === 3 ? { token: tokenB } : {});
      expect(got.status).toBe(200);
      expect(got.body).toMatchObject({
        data: { id, title: `together ${i}`, folder_id: `together-${i % 2}`, metadata: sampleBody().metadata },
      });
    }
    const counts = async (token?: string) =>
      (
        (await t.request('GET', '/api/v1/folder?limit=100', token ? { token } : {})).body as {
          data: { folder_id: string; registry_count: number }[];
        }
      ).data.filter((f) => f.folder_id.startsWith('together-'));
    expect(await counts()).toMatchObject([
      { folder_id: 'together-0', registry_count: 20 },
      { folder_id: 'together-1', registry_count: 10 },
    ]);
    expect(await counts(tokenB)).toMatchObject([{ folder_id: 'together-1', registry_count: 10 }]);
    // Each has its leaf, waiting for anchoring.
    const [leaves] = await runStatement<{ n: number }>(
      t.app.store.db,
      {
        name: 'test_unbatched_leaves',
        text: 'SELECT count(*)::int AS n FROM anchor_leaves WHERE registry_id = ANY($1::uuid[]) AND batch_id IS NULL',
      },
      [ids],
    );
    expect(leaves?.n).toBe(40);
  });

  test("concurrent gets (read together) each answer their own registry; another account's is 404 in the same statement", async () => {
    const tokenB = await t.tokenFor('read-together-b');
    const create = async (token?: string) =>
      (
        (
          await t.request('POST', '/api/v1/registry/create', {
            ...(token ? { token } : {}),
            body: sampleBody({ folder_id: 'read-together', title: `of ${token ? 'B' : 'A'}` }),
          })
        ).body as Created
      ).data.id;
    const ofA = await Promise.all(Array.from({ length: 10 }, () => create()));
    const ofB = await Promise.all(Array.from({ length: 10 }, () => create(tokenB)));
    // Each registry asked by its owner (in upper case for some) and by the other account, all at once.
    const asks = [...ofA, ...ofB].flatMap((id, i) => {
      const owner = i < 10 ? undefined : tokenB;
      const other = i < 10 ? tokenB : undefined;
      return [
        { id, token: owner, expect: 200, path: i % 3 === 0 ? id.toUpperCase() : id },
        { id, token: other, expect: 404, path: id },
      ];
    });
    const answers = await Promise.all(
      asks.map((a) => t.request('GET', `/api/v1/registry/${a.path}`, a.token ? { token: a.token } : {})),
    );
    expect(answers.map((a) => a.status)).toEqual(asks.map((a) => a.expect));
    for (const [i, a] of asks.entries()) {
      if (a.expect !== 200) continue;
      expect(answers[i]!.body).toMatchObject({ data: { id: a.id, title: a.token ? 'of B' : 'of A' } });
    }
  });

  test('a get (its own statement, rows read as JSON) shows each registry as the list (drizzle) does', async () => {
    const folder = 'as-listed';
    const make = async (extra: Record<string, unknown>) =>
      (
        (
          await t.request('POST', '/api/v1/registry/create', {
            body: sampleBody({ folder_id: folder, ...extra }),
          })
        ).body as Created
      ).data.id;
    const plain = await make({ callback_url: undefined });
    const encrypted = await make({ data_encrypted: true, description: 'sealed "quotes" and ünïcode' });
    const pass = await make({ template: 'PASS', metadata: [] });
    expect((await t.request('POST', `/api/v1/registry/${pass}/revoke`)).status).toBe(200);
    const listed = (await t.request('GET', `/api/v1/registry?folder_id=${folder}&limit=10`)).body as {
      data: { id: string }[];
    };
    expect(listed.data.map((r) => r.id).sort()).toEqual([plain, encrypted, pass].sort());
    // Several at once, so that they share a statement.
    const got = await Promise.all(listed.data.map((r) => t.request('GET', `/api/v1/registry/${r.id}`)));
    expect(got.map((g) => (g.body as { data: unknown }).data)).toEqual(listed.data);
    expect(listed.data.find((r) => r.id === pass)).toMatchObject({
      revoked_at: expect.stringMatching(ISO_UTC),
    });
  });

  test('the list pages with a cursor, newest first, filtered by folder', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await t.request('POST', '/api/v1/registry/create', {
        body: sampleBody({ folder_id: 'paged', title: `p${i}` }),
      });
      ids.push((r.body as Created).data.id);
    }
    await t.request('POST', '/api/v1/registry/create', { body: sampleBody({ folder_id: 'elsewhere' }) });
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = `/api/v1/registry?folder_id=paged&limit=2${cursor ? `&cursor=${cursor}` : ''}`;
      const page = await t.request('GET', query);
      expect(page.status).toBe(200);
      const p = page.body as {
        data: { id: string; folder_id: string; title: string }[];
        next_cursor: string | null;
      };
      expect(p.data.length).toBeLessThanOrEqual(2);
      for (const r of p.data) expect(r.folder_id).toBe('paged');
      seen.push(...p.data.map((r) => r.id));
      cursor = p.next_cursor;
      pages++;
    } while (cursor && pages < 10);
    expect(pages).toBe(3);
    expect(seen).toEqual([...ids].reverse());
  });

  test('Idempotency-Key: the same key and body replay the first response; another body is 409', async () => {
    const body = sampleBody({ folder_id: 'idem', title: 'once' });
    const headers = { 'idempotency-key': 'order-4711' };
    const first = await t.request('POST', '/api/v1/registry/create', { body, headers });
    expect(first.status).toBe(201);
    // Same content, keys in another order: still the same request.
    const reordered = Object.fromEntries(Object.entries(body).reverse());
    const second = await t.request('POST', '/api/v1/registry/create', { body: reordered, headers });
    expect(second.status).toBe(201);
    expect(second.body).toEqual(first.body);
    expect(second.headers.get('idempotent-replayed')).toBe('true');

    const before = await snapshotDatabase(t.app.store);
    const conflict = await t.request('POST', '/api/v1/registry/create', {
      body: { ...body, title: 'twice' },
      headers,
    });
    expect(conflict.status).toBe(409);
    expect(conflict.headers.get('content-type')).toContain('application/problem+json');
    expect(conflict.body).toMatchObject({ status: 409, type: 'urn:ledgerhook:problem:conflict' });
    expect(await snapshotDatabase(t.app.store)).toEqual(before);

    const inFolder = await t.request('GET', '/api/v1/registry?folder_id=idem');
    expect((inFolder.body as { data: unknown[] }).data).toHaveLength(1);
  });

  test('Idempotency-Key: concurrent retries create one registry', async () => {
    const body = sampleBody({ folder_id: 'idem-race', title: 'race' });
    const headers = { 'idempotency-key': 'race-1' };
    const results = await Promise.all(
      Array.from({ length: 5 }, () => t.request('POST', '/api/v1/registry/create', { body, headers })),
    );
    for (const r of results) expect(r.status).toBe(201);
    const ids = new Set(results.map((r) => (r.body as Created).data.id));
    expect(ids.size).toBe(1);
    const inFolder = await t.request('GET', '/api/v1/registry?folder_id=idem-race');
    expect((inFolder.body as { data: unknown[] }).data).toHaveLength(1);
  });

  test('tenant isolation: another account sees none of it', async () => {
    const created = await t.request('POST', '/api/v1/registry/create', {
      body: sampleBody({ folder_id: 'private-a' }),
    });
    const id = (created.body as Created).data.id;
    const tokenB = await t.tokenFor('tenant-b');

    const asB = await t.request('GET', `/api/v1/registry/${id}`, { token: tokenB });
    expect(asB.status).toBe(404);
    expect(asB.body).toMatchObject({ status: 404 });
    // Read twice by its owner, the registry is kept in memory (LEDGERHOOK_REGISTRY_CACHE_TTL): B
    // asking for it now is answered from there, and still does not find it.
    for (let i = 0; i < 2; i++) expect((await t.request('GET', `/api/v1/registry/${id}`)).status).toBe(200);
    const asBKept = await t.request('GET', `/api/v1/registry/${id.toUpperCase()}`, { token: tokenB });
    expect(asBKept.status).toBe(404);
    expect(asBKept.text).not.toContain('private-a');

    const foldersB = await t.request('GET', '/api/v1/folder', { token: tokenB });
    expect((foldersB.body as { data: unknown[] }).data).toEqual([]);
    const listB = await t.request('GET', '/api/v1/registry?folder_id=private-a', { token: tokenB });
    expect((listB.body as { data: unknown[] }).data).toEqual([]);

    // B may use the same folder name; it is B's own folder, A's count is unchanged.
    const mine = await t.request('POST', '/api/v1/registry/create', {
      token: tokenB,
      body: sampleBody({ folder_id: 'private-a' }),
    });
    expect(mine.status).toBe(201);
    const foldersA = await t.request('GET', '/api/v1/folder?limit=100');
    const a = (foldersA.body as { data: { folder_id: string; registry_count: number }[] }).data;
    expect(a.find((f) => f.folder_id === 'private-a')?.registry_count).toBe(1);
    const listA = await t.request('GET', '/api/v1/registry?folder_id=private-a');
    expect((listA.body as { data: { id: string }[] }).data.map((r) => r.id)).toEqual([id]);
  });

  test('data_encrypted stores only ciphertext and returns the plaintext to its owner', async () => {
    const body = sampleBody({ data_encrypted: true, description: 'vault description', folder_id: 'vault' });
    const created = await t.request('POST', '/api/v1/registry/create', { body });
    expect(created.status).toBe(201);
    const id = (created.body as Created).data.id;

    const [row] = await t.app.store.db.select().from(registries).where(eq(registries.id, id));
    expect(row?.metadata).toBeNull();
    expect(row?.description).toBeNull();
    expect(row?.title).toBe(body.title);
    expect(row?.ciphertext).toBeTruthy();
    expect(row?.wrappedKey).toBeTruthy();
    expect(JSON.stringify(row)).not.toContain('Ada Lovelace');
    expect(JSON.stringify(row)).not.toContain('vault description');

    const got = await t.request('GET', `/api/v1/registry/${id}`);
    expect(got.body).toMatchObject({
      data: { metadata: body.metadata, description: 'vault description', data_encrypted: true },
    });
    const listed = await t.request('GET', '/api/v1/registry?folder_id=vault');
    expect(listed.body).toMatchObject({
      data: [{ id, metadata: body.metadata, description: 'vault description' }],
    });
  });

  test('an unknown registry id is 404, a malformed one 400 naming the parameter', async () => {
    const missing = await t.request('GET', '/api/v1/registry/01a1ffc2-3a39-75cc-aff5-245fafbb1e9b');
    expect(missing.status).toBe(404);
    const malformed = await t.request('GET', '/api/v1/registry/not-a-uuid');
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatchObject({ errors: [{ parameter: 'id' }] });
  });
});
