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
 * change goes unseen when its NOTIFY was lost (a listener reconnecting clears everything too). Rows are kept as read, sealed content still sealed:
 * plaintext of an encrypted registry is not held longer than a request.
 */
export function createRegistryRowCache<R>(options: {
  ttlMs: number;
  /** What a row costs (about its characters), against `maxCost`. */
  costOf: (row: R) => number;
  maxCost?: number;
  now?: () => number;
}) {
  const { ttlMs, costOf } = options;
  const maxCost = options.maxCost ?? 8 * 1024 * 1024;
  const now = options.now ?? Date.now;
  const entries = new Map<string, { row: R; cost: number; expiresAt: number }>();
  let cost = 0;
  // Bumped by every change: a read that began before one may hold the old row, and must not keep it.
  let generation = 0;

  function drop(id: string): void {
    const entry = entries.get(id);
    if (!entry) return;
    entries.delete(id);
    cost -= entry.cost;
  }

  return {
    /** Read before reading rows from the database; passed back to `set`. */
    generation: () => generation,
    get(id: string): R | undefined {
      const entry = entries.get(id);
      if (!entry) return undefined;
      if (entry.expiresAt <= now()) {
        drop(id);
        return undefined;
      }
      return entry.row;
    },
    set(id: string, row: R, readAtGeneration: number): void {
      if (ttlMs <= 0 || readAtGeneration !== generation) return;
      const rowCost = costOf(row);
      if (rowCost > maxCost / 16) return; // one huge registry must not push out the rest
      drop(id);
      // Oldest first out: a Map iterates in insertion order, and a refreshed row is re-inserted.
      for (const oldest of entries.keys()) {
        if (cost + rowCost <= maxCost) break;
        drop(oldest);
      }
      entries.set(id, { row, cost: rowCost, expiresAt: now() + ttlMs });
      cost += rowCost;
    },
    /** One registry changed. */
    forget(id: string): void {
      generation++;
      drop(id);
    },
    /** Any registry may have changed (anchoring, or notifications possibly missed). */
    clear(): void {
      generation++;
      entries.clear();
      cost = 0;
    },
    size: () => entries.size,
  };
}

export type RegistryRowCache<R> = ReturnType<typeof createRegistryRowCache<R>>;
