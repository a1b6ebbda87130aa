import { describe, expect, test } from 'vitest';
import { createPrincipalCache } from './principal-cache.js';

const alice = { accountId: 'account-a', tokenId: 'token-a' };
const bob = { accountId: 'account-b', tokenId: 'token-b' };

function cacheAt(ttlMs: number, maxEntries?: number) {
  let clock = 1_000;
  const cache = createPrincipalCache({ ttlMs, maxEntries, now: () => clock });
  const advance = (ms: number) => {
    clock += ms;
  };
  return { cache, advance };
}

describe('the principal cache', () => {
  test('serves a principal until its TTL has passed, then asks again', () => {
    const { cache, advance } = cacheAt(1_000);
    cache.set('hash-a', alice, cache.generation());
    advance(999);
    expect(cache.get('hash-a')).toEqual(alice);
    advance(1);
    expect(cache.get('hash-a')).toBeUndefined();
    expect(cache.size()).toBe(0);
  });

  test('a revoked token is forgotten at once, and only it', () => {
    const { cache } = cacheAt(60_000);
    cache.set('hash-a', alice, cache.generation());
    cache.set('hash-b', bob, cache.generation());
    cache.forgetToken('token-a');
    expect(cache.get('hash-a')).toBeUndefined();
    expect(cache.get('hash-b')).toEqual(bob);
  });

  test('a lookup that began before a revocation does not put the token back', () => {
    const { cache } = cacheAt(60_000);
    const before = cache.generation();
    // The database answered "live" while the revocation committed and its NOTIFY arrived.
    cache.forgetToken('token-a');
    cache.set('hash-a', alice, before);
    expect(cache.get('hash-a')).toBeUndefined();
    cache.set('hash-a', alice, cache.generation());
    expect(cache.get('hash-a')).toEqual(alice);
  });

  test('after the listener reconnected (revocations may have been missed), nothing cached is trusted', () => {
    const { cache } = cacheAt(60_000);
    cache.set('hash-a', alice, cache.generation());
    cache.set('hash-b', bob, cache.generation());
    cache.clear();
    expect([cache.get('hash-a'), cache.get('hash-b'), cache.size()]).toEqual([undefined, undefined, 0]);
  });

  test('holds at most maxEntries, dropping the oldest', () => {
    const { cache } = cacheAt(60_000, 2);
    cache.set('hash-1', { accountId: 'a', tokenId: '1' }, cache.generation());
    cache.set('hash-2', { accountId: 'a', tokenId: '2' }, cache.generation());
    cache.set('hash-3', { accountId: 'a', tokenId: '3' }, cache.generation());
    expect(cache.size()).toBe(2);
    expect(cache.get('hash-1')).toBeUndefined();
    expect(cache.get('hash-3')).toEqual({ accountId: 'a', tokenId: '3' });
  });

  test('a TTL of 0 caches nothing', () => {
    const { cache } = cacheAt(0);
    cache.set('hash-a', alice, cache.generation());
    expect(cache.get('hash-a')).toBeUndefined();
  });
});
