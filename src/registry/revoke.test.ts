import crypto from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../../test/helpers/app.js';
import { backends } from '../../test/helpers/env.js';
import { waitFor } from '../../test/helpers/process.js';
import { startReceiver } from '../../test/helpers/receiver.js';
import { type PassView, passBody, sampleRegistryBody } from '../../test/helpers/registry-body.js';
import { snapshotDatabase } from '../../test/helpers/snapshot.js';

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

async function create(t: TestApp, body: Record<string, unknown>, token?: string): Promise<string> {
  const r = await t.request('POST', '/api/v1/registry/create', { body, token });
  expect(r.status, r.text).toBe(201);
  return (r.body as { data: { id: string } }).data.id;
}

describe.each(backends)('revoking a PASS on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    // Registries read by id are kept for a minute: a revocation must drop them itself.
    t = await startTestApp(backend, { LEDGERHOOK_REGISTRY_CACHE_TTL: '1m' });
  });
  afterAll(async () => {
    await t?.close();
  });

  test('revoking a PASS sets revoked_at; revoking again answers the same', async () => {
    const id = await create(t, passBody());
    // Read twice: kept in memory from the second read, so the revocation must drop it itself.
    for (let i = 0; i < 2; i++) {
      const valid = await t.request('GET', `/api/v1/registry/${id}`);
      expect((valid.body as { data: PassView }).data.revoked_at).toBeNull();
    }
    const before = Date.now();
    const revoked = await t.request('POST', `/api/v1/registry/${id}/revoke`);
    expect(revoked.status, revoked.text).toBe(200);
    const view = (revoked.body as { data: PassView }).data;
    expect(view).toMatchObject({ id, template: 'PASS', title: 'Concert ticket, row 7' });
    expect(view.revoked_at).toMatch(ISO_UTC);
    expect(Date.parse(view.revoked_at!)).toBeGreaterThanOrEqual(before - 5);

    const got = await t.request('GET', `/api/v1/registry/${id}`);
    expect(got.body).toEqual(revoked.body);
    const listed = await t.request('GET', '/api/v1/registry?folder_id=tickets&limit=100');
    expect((listed.body as { data: PassView[] }).data.find((r) => r.id === id)?.revoked_at).toBe(
      view.revoked_at,
    );

    const again = await t.request('POST', `/api/v1/registry/${id}/revoke`, { body: {} });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(revoked.body);
  });

  test('revoking an encrypted PASS: its owner still reads it decrypted, now revoked', async () => {
    const body = passBody({ data_encrypted: true, description: 'sealed seat' });
    const id = await create(t, body);
    const revoked = await t.request('POST', `/api/v1/registry/${id}/revoke`);
    expect(revoked.status).toBe(200);
    expect((revoked.body as { data: PassView }).data).toMatchObject({
      metadata: body.metadata,
      description: 'sealed seat',
      revoked_at: expect.stringMatching(ISO_UTC),
    });
  });

  test('a STORAGE registry cannot be revoked: 409 naming why, and nothing changes', async () => {
    const id = await create(t, sampleRegistryBody({ folder_id: 'kept' }));
    const before = await snapshotDatabase(t.app.store);
    const r = await t.request('POST', `/api/v1/registry/${id}/revoke`);
    expect(r.status).toBe(409);
    expect(r.headers.get('content-type')).toContain('application/problem+json');
    expect(r.body).toMatchObject({ status: 409, type: 'urn:ledgerhook:problem:conflict' });
    expect((r.body as { detail: string }).detail).toMatch(/STORAGE.*only a PASS/);
    expect(await snapshotDatabase(t.app.store)).toEqual(before);
    const got = await t.request('GET', `/api/v1/registry/${id}`);
    expect((got.body as { data: PassView }).data.revoked_at).toBeNull();
  });

  test("another account's PASS is 404 and stays valid; no token is 401; a body is refused", async () => {
    const id = await create(t, passBody({ folder_id: 'not-yours' }));
    const other = await t.tokenFor('pass-outsider');
    const asOther = await t.request('POST', `/api/v1/registry/${id}/revoke`, { token: other });
    expect(asOther.status).toBe(404);
    expect(asOther.body).toMatchObject({ status: 404, type: 'urn:ledgerhook:problem:not_found' });
    // The same answer as for an id nobody has.
    const nobody = await t.request('POST', `/api/v1/registry/${crypto.randomUUID()}/revoke`, {
      token: other,
    });
    expect(nobody.status).toBe(404);

    const anonymous = await t.request('POST', `/api/v1/registry/${id}/revoke`, { token: null });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer');

    const malformed = await t.request('POST', '/api/v1/registry/not-a-uuid/revoke');
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatchObject({ errors: [{ parameter: 'id' }] });

    const withBody = await t.request('POST', `/api/v1/registry/${id}/revoke`, { body: { reason: 'x' } });
    expect(withBody.status).toBe(400);
    expect(withBody.body).toMatchObject({ errors: [{ pointer: '#/reason' }] });

    const got = await t.request('GET', `/api/v1/registry/${id}`);
    expect((got.body as { data: PassView }).data.revoked_at).toBeNull();
  });

  test('registry.revoked reaches the callback once, signed, thin', async () => {
    const receiver = await startReceiver();
    try {
      const created = await t.request('POST', '/api/v1/registry/create', {
        body: passBody({ callback_url: receiver.url, folder_id: 'hooked', data_encrypted: true }),
      });
      expect(created.status).toBe(201);
      const data = (created.body as { data: Record<string, string> }).data;
      await receiver.waitForRequests(1);

      // Revoked three times, two of them at once: one revocation, one event.
      const first = await t.request('POST', `/api/v1/registry/${data.id}/revoke`);
      expect(first.status).toBe(200);
      const revokedAt = (first.body as { data: PassView }).data.revoked_at;
      const more = await Promise.all([
        t.request('POST', `/api/v1/registry/${data.id}/revoke`),
        t.request('POST', `/api/v1/registry/${data.id}/revoke`),
      ]);
      for (const r of more) expect((r.body as { data: PassView }).data.revoked_at).toBe(revokedAt);

      const [, delivery] = await receiver.waitForRequests(2);
      const event = new Webhook(data.secret!).verify(delivery!.body, {
        'webhook-id': delivery!.headers['webhook-id'] as string,
        'webhook-timestamp': delivery!.headers['webhook-timestamp'] as string,
        'webhook-signature': delivery!.headers['webhook-signature'] as string,
      }) as Record<string, unknown>;
      expect(event).toEqual({
        type: 'registry.revoked',
        id: delivery!.headers['webhook-id'],
        subscriptionId: data.subscription_id,
        registry: {
          id: data.id,
          title: 'Concert ticket, row 7',
          folder_id: 'hooked',
          template: 'PASS',
          revoked_at: revokedAt,
        },
      });
      expect(delivery!.headers['ledgerhook-event-type']).toBe('registry.revoked');
      expect(delivery!.headers.authorization).toBe(`Bearer ${data.callback_token}`);
      expect(delivery!.body).not.toContain('Ada Lovelace');

      // The outbox holds exactly one registry.revoked, delivered at the first attempt; so the
      // receiver has had exactly the two requests and will get no more.
      const log = await waitFor(
        async () => {
          const r = await t.request('GET', `/api/v1/subscription/${data.subscription_id}/notifications`);
          const items = (r.body as { data: { eventType: string; state: string }[] }).data;
          return items.every((n) => n.state === 'delivered') ? items : undefined;
        },
        'both notifications delivered',
        15_000,
      );
      expect(log.map((n) => n.eventType).sort()).toEqual(['registry.created', 'registry.revoked']);
      expect(log.find((n) => n.eventType === 'registry.revoked')).toMatchObject({
        id: event.id,
        attemptCount: 1,
      });
      expect(receiver.requests).toHaveLength(2);
    } finally {
      await receiver.close();
    }
  });
});
