import { createTtlCache } from '../shared/ttl-cache.js';

/** Who a request's token belongs to. */
export interface Principal {
  accountId: string;
  tokenId: string;
}

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
  const cache = createTtlCache<Principal>({
    ttlMs: options.ttlMs,
    maxCost: options.maxEntries ?? 10_000,
    now: options.now,
  });
  return {
    generation: cache.generation,
    get: cache.get,
    set: cache.set,
    /** Takes out every entry of a revoked token. */
    forgetToken: (tokenId: string) => cache.forgetWhere((p) => p.tokenId === tokenId),
    clear: cache.clear,
    size: cache.size,
  };
}

export type PrincipalCache = ReturnType<typeof createPrincipalCache>;
