import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../../test/helpers/app.js';
import { passBody } from '../../test/helpers/registry-body.js';
import { accounts } from '../accounts/schema.js';
import { NotFoundError } from '../errors.js';
import { createIdempotency } from '../idempotency/service.js';
import { createEnvelope } from '../secrets/envelope.js';
import { createRegistryRowCache } from './row-cache.js';
import { type CreateRegistryInput, createRegistries, type RegistryCallbacks } from './service.js';

function cacheAt(ttlMs: number, maxCost?: number, keepOnSecondSet = false) {
  let clock = 1_000;
  const cache = createRegistryRowCache<{ text: string }>({
    ttlMs,
    maxCost,
    costOf: (row) => row.text.length,
    keepOnSecondSet,
    now: () => clock,
  });
  return {
    cache,
    advance: (ms: number) => {
      clock += ms;
    },
  };
}

describe('the registry row cache', () => {
  test('serves a row until its TTL has passed, then reads again', () => {
    const { cache, advance } = cacheAt(1_000);
    cache.set('a', { text: 'one' }, cache.generation());
    advance(999);
    expect(cache.get('a')).toEqual({ text: 'one' });
    advance(1);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.size()).toBe(0);
  });

  test('forget drops one row, clear every row', () => {
    const { cache } = cacheAt(60_000);
    cache.set('a', { text: 'a' }, cache.generation());
    cache.set('b', { text: 'b' }, cache.generation());
    cache.forget('a');
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')).toEqual({ text: 'b' });
    cache.clear();
    expect(cache.get('b')).toBeUndefined();
  });

  test('a read that began before a change does not keep the row it read', () => {
    const { cache } = cacheAt(60_000);
    for (const change of [() => cache.forget('other'), () => cache.clear()]) {
      const before = cache.generation();
      // The database answered with the old row while the change committed and its NOTIFY arrived.
      change();
      cache.set('a', { text: 'old' }, before);
      expect(cache.get('a')).toBeUndefined();
    }
    cache.set('a', { text: 'new' }, cache.generation());
    expect(cache.get('a')).toEqual({ text: 'new' });
  });

  test('keeps at most maxCost, oldest out first; a row over a sixteenth of it is not kept', () => {
    const { cache } = cacheAt(60_000, 160);
    for (let i = 0; i < 20; i++) cache.set(`r${i}`, { text: 'x'.repeat(10) }, cache.generation());
    expect(cache.size()).toBe(16);
    expect(cache.get('r3')).toBeUndefined();
    expect(cache.get('r4')).toEqual({ text: 'x'.repeat(10) });
    cache.set('big', { text: 'x'.repeat(11) }, cache.generation());
    expect(cache.get('big')).toBeUndefined();
    expect(cache.size()).toBe(16);
  });

  test('as the service makes it, a row is kept from its second read within the TTL, not its first', () => {
    const { cache, advance } = cacheAt(1_000, undefined, true);
    cache.set('once', { text: 'once' }, cache.generation());
    expect(cache.get('once')).toBeUndefined();
    expect(cache.size()).toBe(0);
    // Read again within the TTL: kept from now on, for the TTL.
    advance(999);
    cache.set('once', { text: 'twice' }, cache.generation());
    advance(999);
    expect(cache.get('once')).toEqual({ text: 'twice' });
    // Read again only after the TTL: a first read again.
    cache.set('late', { text: 'late' }, cache.generation());
    advance(1_000);
    cache.set('late', { text: 'late' }, cache.generation());
    expect(cache.get('late')).toBeUndefined();
    // Thousands of keys read once each keep nothing, and a key among them read twice is kept.
    for (let i = 0; i < 5_000; i++) cache.set(`read-once-${i}`, { text: 'x' }, cache.generation());
    expect(cache.size()).toBe(1);
    cache.set('late', { text: 'late' }, cache.generation());
    expect(cache.get('late')).toEqual({ text: 'late' });
  });

  test('a TTL of 0 keeps nothing', () => {
    const { cache } = cacheAt(0);
    cache.set('a', { text: 'a' }, cache.generation());
    expect(cache.get('a')).toBeUndefined();
  });
});

describe('registries kept in memory, in the process that changes them', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp('pglite');
  });
  afterAll(async () => {
    await t?.close();
  });

  // A registries service of its own on the app's database, with no NOTIFY listener: what it shows
  // after its own revocation cannot come from a notification.
  function unlistenedRegistries() {
    const envelope = createEnvelope(crypto.randomBytes(32));
    const callbacks: RegistryCallbacks = {
      checkUrl: async () => {},
      createRegistryEndpoint: async () => {
        throw new Error('not used: no callback_url here');
      },
    };
    return createRegistries({
      db: t.app.store.db,
      envelope,
      idempotency: createIdempotency({ db: t.app.store.db, envelope }),
      callbacks,
      rowCacheTtlMs: 60_000,
    });
  }

  test('its own revocation shows on its next get, though the row was kept for a minute', async () => {
    const registries = unlistenedRegistries();
    const other = unlistenedRegistries();
    const accountId = crypto.randomUUID();
    await t.app.store.db
      .insert(accounts)
      .values({ id: accountId, name: `kept-${accountId}`, createdAt: new Date() });
    const { body } = await registries.create(accountId, passBody() as unknown as CreateRegistryInput);
    const id = body.data.id;
    // Each reads it twice: a registry is kept from its second read on.
    for (const service of [registries, registries, other, other]) {
      expect((await service.get(accountId, id)).revoked_at).toBeNull();
    }

    const revoked = await registries.revoke(accountId, id.toUpperCase());
    expect(revoked.revoked_at).not.toBeNull();
    expect((await registries.get(accountId, id)).revoked_at).toBe(revoked.revoked_at);
    // Without a listener, another service keeps what it read until its TTL: what the NOTIFY is for
    // (test/e2e/registry-cache.test.ts).
    expect((await other.get(accountId, id)).revoked_at).toBeNull();
    // A kept row is its account's alone.
    await expect(registries.get(crypto.randomUUID(), id)).rejects.toBeInstanceOf(NotFoundError);
  });
});
