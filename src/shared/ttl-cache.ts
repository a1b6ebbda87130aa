/**
 * Values kept in memory for `ttlMs` after they were read from the database, for the caches that
 * spare a request its round trip (tokens, registry rows). A change announced by NOTIFY `forget`s
 * what it touched, or `clear`s everything when it cannot say (a listener reconnected); the TTL only
 * bounds how long a change whose NOTIFY was lost goes unseen.
 *
 * Every change bumps a generation: a read that began before it may hold the old value, so `set`
 * takes the generation read before the database was asked and keeps nothing if it moved.
 *
 * With `keepOnSecondSet`, a value is kept only when its key was set once before within the TTL: a
 * key read once (a registry among thousands read at random) is not kept, since keeping it costs
 * more than its rare second read saves (bench/README.md, "Issue 33: registries read once are not
 * kept"), while a key read again soon is kept from its second read on.
 */
export function createTtlCache<V>(options: {
  ttlMs: number;
  /** What the cache may hold in all, in the units of `costOf` (entries, when it is not given). */
  maxCost: number;
  costOf?: (value: V) => number;
  /** A value costing more is not kept, so that one huge value cannot push out the rest. */
  maxValueCost?: number;
  /** Keep a value only from the second `set` of its key within the TTL (see above). */
  keepOnSecondSet?: boolean;
  now?: () => number;
}) {
  const { ttlMs, maxCost } = options;
  const costOf = options.costOf ?? (() => 1);
  const maxValueCost = options.maxValueCost ?? maxCost;
  const now = options.now ?? Date.now;
  const entries = new Map<string, { value: V; cost: number; expiresAt: number }>();
  let cost = 0;
  let generation = 0;
  const firstSets = options.keepOnSecondSet ? createFirstSets(ttlMs) : undefined;

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
      const at = now();
      if (firstSets && !entries.has(key) && !firstSets.seenBefore(key, at)) return;
      drop(key);
      // Oldest first out: a Map iterates in insertion order, and a refreshed value is re-inserted.
      // Only when over budget: an iterator per set cost a cache-missing registry get 3% of its CPU.
      if (cost + valueCost > maxCost) {
        for (const oldest of entries.keys()) {
          if (cost + valueCost <= maxCost) break;
          drop(oldest);
        }
      }
      entries.set(key, { value, cost: valueCost, expiresAt: at + ttlMs });
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

/** Slots of the first-set table: a power of two, 768 KB. */
const FIRST_SET_SLOTS = 1 << 16;

/**
 * Which keys were set within the last `windowMs`: a fixed table of each slot's last key (as a 32-bit
 * FNV-1a hash) and when, so remembering a key allocates nothing the garbage collector must trace
 * (a Map of keys would itself be the churn it spares). Two keys sharing a slot forget each other,
 * and two sharing a hash count as one: either only changes whether a value is kept.
 */
function createFirstSets(windowMs: number) {
  const hashes = new Int32Array(FIRST_SET_SLOTS);
  const times = new Float64Array(FIRST_SET_SLOTS).fill(Number.NEGATIVE_INFINITY);
  return {
    /** Whether `key` was set within the window before `at`; remembers this set either way. */
    seenBefore(key: string, at: number): boolean {
      let hash = 0x811c9dc5;
      for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
      const slot = hash & (FIRST_SET_SLOTS - 1);
      const seen = hashes[slot] === hash && at - times[slot]! < windowMs;
      hashes[slot] = hash;
      times[slot] = at;
      return seen;
    },
  };
}
