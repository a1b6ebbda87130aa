import type { Principal } from './service.js';

/** NOTIFY channel on which a revoked token's id reaches every process sharing the database. */
export const TOKEN_REVOKED_CHANNEL = 'ledgerhook_token_revoked';

/**
 * Token hash → principal, for `ttlMs`, so a request does not cost a database round trip to
 * authenticate. The TTL bounds how long a revocation can go unseen when its NOTIFY was lost (a
 * listener reconnecting, a token revoked by hand in SQL); a revocation that arrives, from this
 * process or by NOTIFY, takes its token out at once. Unknown tokens are never cached: a flood of
 * made-up tokens must not fill memory (the rate limit bounds their round trips).
 */
export function createPrincipalCache(options: { ttlMs: number; maxEntries?: number; now?: () => number }) {
  const { ttlMs } = options;
  const maxEntries = options.maxEntries ?? 10_000;
  const now = options.now ?? Date.now;
  const entries = new Map<string, { principal: Principal; expiresAt: number }>();
  // Bumped by every revocation: a lookup that began before one may have read the revoked token as
  // live, and must not put it back.
  let generation = 0;

  return {
    /** Read before looking a token up in the database; passed back to `set`. */
    generation: () => generation,
    get(tokenHash: string): Principal | undefined {
      const entry = entries.get(tokenHash);
      if (!entry) return undefined;
      if (entry.expiresAt <= now()) {
        entries.delete(tokenHash);
        return undefined;
      }
      return entry.principal;
    },
    set(tokenHash: string, principal: Principal, readAtGeneration: number): void {
      if (ttlMs <= 0 || readAtGeneration !== generation) return;
      // Oldest first out: a Map iterates in insertion order, and a refreshed entry is re-inserted.
      entries.delete(tokenHash);
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value as string);
      entries.set(tokenHash, { principal, expiresAt: now() + ttlMs });
    },
    /** Takes out every entry of a revoked token. Revocations are rare; a scan is enough. */
    forgetToken(tokenId: string): void {
      generation++;
      for (const [hash, entry] of entries) if (entry.principal.tokenId === tokenId) entries.delete(hash);
    },
    clear(): void {
      generation++;
      entries.clear();
    },
    size: () => entries.size,
  };
}

export type PrincipalCache = ReturnType<typeof createPrincipalCache>;
