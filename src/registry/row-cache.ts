import { createTtlCache, type TtlCache } from '../shared/ttl-cache.js';

/**
 * Registry rows read by id, kept for `ttlMs` so a get of a registry read a moment ago costs no
 * database round trip (bench/README.md, bench:api: a get on PostgreSQL waited on its round trip,
 * on PGlite on the statement's parse and plan).
 *
 * A registry's row changes only when it is revoked, and what its anchor columns show when its
 * batch is cut, anchored, moved or unanchored. Each of those commits with a NOTIFY
 * (REGISTRY_CHANGED_CHANNEL) that reaches every process sharing the database, which calls `forget`
 * (revocation, one id) or `clear` (anchoring, every row); a revoking process also forgets the row
 * itself after the commit, so its answer and its next read show it. The TTL bounds how long a
 * change goes unseen when its NOTIFY was lost (a listener reconnecting clears everything too).
 * Rows are kept as read, sealed content still sealed: plaintext of an encrypted registry is not
 * held longer than a request. The cache itself is src/shared/ttl-cache.ts.
 *
 * A row is kept from its second read within the TTL on (`keepOnSecondSet`, unless turned off): of
 * thousands of registries read at random, each read once, keeping every row cost more CPU (the
 * garbage of rows kept a second and dropped) than the few second reads it answered saved.
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
