import { createTtlCache, type TtlCache } from '../shared/ttl-cache.js';

/**
 * Registry rows read by id, kept for `ttlMs` so a get of one read a moment ago costs no database
 * round trip (the cache is src/shared/ttl-cache.ts). A row changes only when revoked, or when its
 * batch is cut, anchored, moved or unanchored; each commits with a NOTIFY (REGISTRY_CHANGED_CHANNEL)
 * on which every process sharing the database `forget`s the row (revocation) or `clear`s all
 * (anchoring), and a revoking process forgets it after its commit too. Rows are kept as read,
 * sealed content sealed: an encrypted registry's plaintext lives no longer than a request. A row is
 * kept from its second read within the TTL on (`keepOnSecondSet`, see ttl-cache.ts).
 */
export function createRegistryRowCache<R>(options: {
  ttlMs: number;
  /** What a row costs (about its characters), against `maxCost`. */
  costOf: (row: R) => number;
  maxCost?: number;
  keepOnSecondSet?: boolean;
  now?: () => number;
}): TtlCache<R> {
  const maxCost = options.maxCost ?? 8 * 1024 * 1024;
  return createTtlCache<R>({
    ...options,
    maxCost,
    maxValueCost: maxCost / 16,
    keepOnSecondSet: options.keepOnSecondSet ?? true,
  });
}
