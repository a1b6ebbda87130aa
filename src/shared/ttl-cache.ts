/**
 * Values kept in memory for `ttlMs` after they were read from the database, for the caches that
 * spare a request its round trip (tokens, registry rows). A change announced by NOTIFY `forget`s
 * what it touched, or `clear`s everything when it cannot say (a listener reconnected); the TTL only
 * bounds how long a change whose NOTIFY was lost goes unseen.
 *
 * Every change bumps a generation: a read that began before it may hold the old value, so `set`
 * takes the generation read before the database was asked and keeps nothing if it moved.
 */
export function createTtlCache<V>(options: {
  ttlMs: number;
  /** What the cache may hold in all, in the units of `costOf` (entries, when it is not given). */
  maxCost: number;
  costOf?: (value: V) => number;
  /** A value costing more is not kept, so that one huge value cannot push out the rest. */
  maxValueCost?: number;
  now?: () => number;
}) {
  const { ttlMs, maxCost } = options;
  const costOf = options.costOf ?? (() => 1);
  const maxValueCost = options.maxValueCost ?? maxCost;
  const now = options.now ?? Date.now;
  const entries = new Map<string, { value: V; cost: number; expiresAt: number }>();
  let cost = 0;
  let generation = 0;

  function drop(key: string): void {
    const entry = entries.get(key);
    if (!entry) return;
    entries.delete(key);
    cost -= entry.cost;
  }

  return {
    /** Read before asking the database; passed back to `set`. */
    generation: () => generation,
    get(key: string): V | undefined {
      const entry = entries.get(key);
      if (!entry) return undefined;
      if (entry.expiresAt <= now()) {
        drop(key);
        return undefined;
      }
      return entry.value;
    },
    set(key: string, value: V, readAtGeneration: number): void {
      if (ttlMs <= 0 || readAtGeneration !== generation) return;
      const valueCost = costOf(value);
      if (valueCost > maxValueCost) return;
      drop(key);
      // Oldest first out: a Map iterates in insertion order, and a refreshed value is re-inserted.
      // Only when over budget: an iterator per set cost a cache-missing registry get 3% of its CPU.
      if (cost + valueCost > maxCost) {
        for (const oldest of entries.keys()) {
          if (cost + valueCost <= maxCost) break;
          drop(oldest);
        }
      }
      entries.set(key, { value, cost: valueCost, expiresAt: now() + ttlMs });
      cost += valueCost;
    },
    /** One key changed. */
    forget(key: string): void {
      generation++;
      drop(key);
    },
    /** Every value `changed` picks changed; a scan, for changes that are rare. */
    forgetWhere(changed: (value: V) => boolean): void {
      generation++;
      for (const [key, entry] of entries) if (changed(entry.value)) drop(key);
    },
    /** Anything may have changed. */
    clear(): void {
      generation++;
      entries.clear();
      cost = 0;
    },
    size: () => entries.size,
  };
}

export type TtlCache<V> = ReturnType<typeof createTtlCache<V>>;
