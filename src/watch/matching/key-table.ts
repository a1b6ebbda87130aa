/**
 * A hash set of short byte strings (addresses, ids) that numbers its keys with small integers, the
 * "entries", so callers keep what goes with a key in typed arrays of their own indexed by entry.
 * Keys live end to end in one byte arena; the table is open addressing with linear probing over a
 * Uint32Array: no JavaScript object per key, so millions of keys cost a few tens of bytes each and
 * nothing for the garbage collector to trace. A slot holds entry + 1 (0: empty) in its low bits and
 * the key's hash above: a probe passing other keys compares slots alone, without reading their keys
 * (three cache misses each).
 */
export interface KeyTable {
  /** The entry of `key[0..length)`, or -1. */
  find(key: Uint8Array, length: number): number;
  /** The entry of the key, added if absent (then `added` is true until the next `add`). */
  add(key: Uint8Array, length: number): number;
  /** Whether the last `add` added its key (rather than finding it). */
  readonly added: boolean;
  /** Room for `more` keys beyond those held, so adding them grows nothing (and rehashes once). */
  reserve(more: number): void;
  /** Forgets the entry's key; the entry number is reused by a later `add`. */
  remove(entry: number): void;
  /** The key's bytes, valid until the next `add` or `remove`. */
  keyOf(entry: number): Uint8Array;
  /** Keys held. */
  readonly size: number;
  /** Entries numbered so far (every entry is below it): the length side arrays need. */
  readonly entries: number;
  /** Visits every live entry. */
  forEach(visit: (entry: number) => void): void;
}

const MAX_LOAD = 0.75;
/** Up to 64 KiB of the arena may be garbage before compaction is worth it. */
const MIN_COMPACTED = 1 << 16;

/** A per-process seed, so nobody can choose addresses that collide in our table in advance. */
const SEED = (Math.random() * 2 ** 32) >>> 0;

/** murmur3's 32-bit mix over the key, 4 bytes at a time. */
export function hashBytes(key: Uint8Array, offset: number, length: number): number {
  let h = SEED ^ length;
  const end = offset + length;
  let i = offset;
  for (; i + 4 <= end; i += 4) {
    let k = key[i]! | (key[i + 1]! << 8) | (key[i + 2]! << 16) | (key[i + 3]! << 24);
    k = Math.imul(k, 0xcc9e2d51);
    k = (k << 15) | (k >>> 17);
    h ^= Math.imul(k, 0x1b873593);
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  let k = 0;
  for (let shift = 0; i < end; i++, shift += 8) k |= key[i]! << shift;
  k = Math.imul(k, 0xcc9e2d51);
  k = (k << 15) | (k >>> 17);
  h ^= Math.imul(k, 0x1b873593);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** A copy of `array` with room for `length` elements (zeros beyond the old ones). */
export function grown<T extends Uint8Array | Uint16Array | Uint32Array | Int32Array>(
  array: T,
  length: number,
): T {
  const next = new (array.constructor as new (n: number) => T)(length);
  next.set(array);
  return next;
}

/** 1.5 times, so a full table wastes at most a third of its arrays (not half, as doubling would). */
export const nextCapacity = (needed: number, current: number) =>
  Math.max(needed, Math.ceil(current * 1.5), 1024);

/**
 * @param onEntries called when the number of entries grows past the side arrays' length, with the
 *   new length; the caller grows its arrays indexed by entry to it.
 * @param hashOf the hash of a key; a custom one lets tests force collisions.
 */
export function createKeyTable(
  onEntries: (length: number) => void = () => {},
  hashOf: (key: Uint8Array, offset: number, length: number) => number = hashBytes,
  expected = 0,
): KeyTable {
  let entryCapacity = 0;
  let keyStart = new Uint32Array(0);
  /** 0 for a free entry; every key has at least one byte. */
  let keyLength = new Uint16Array(0);
  let arena = new Uint8Array(0);
  let arenaUsed = 0;
  let arenaGarbage = 0;
  let slots = new Uint32Array(0);
  let mask = -1;
  /** The bits of a slot that hold entry + 1; the bits above hold the hash's. */
  let entryMask = 0;
  let size = 0;
  let entries = 0;
  /** Freed entries, reused before new ones. */
  let free = new Int32Array(0);
  let freeCount = 0;
  let added = false;

  function ensureEntries(needed: number): void {
    if (needed <= entryCapacity) return;
    entryCapacity = nextCapacity(needed, entryCapacity);
    keyStart = grown(keyStart, entryCapacity);
    keyLength = grown(keyLength, entryCapacity);
    onEntries(entryCapacity);
    if (entryCapacity > entryMask) rebuild(slots.length);
  }

  function ensureSlots(needed: number): void {
    if (needed <= slots.length * MAX_LOAD) return;
    rebuild(slotCount(needed, slots.length));
  }

  /** Slots of `length` for the keys held, with as many hash bits as entries leave free. */
  function rebuild(length: number): void {
    const entryBits = Math.min(31, 32 - Math.clz32(entryCapacity));
    entryMask = 2 ** entryBits - 1;
    slots = new Uint32Array(length);
    mask = length - 1;
    placeKeys(slots, mask, entryMask, entries, keyStart, keyLength, arena, hashOf);
  }

  function ensureArena(extra: number): void {
    if (arenaUsed + extra <= arena.length) return;
    if (arenaGarbage >= MIN_COMPACTED && arenaGarbage * 2 >= arenaUsed) compact();
    if (arenaUsed + extra <= arena.length) return;
    arena = grown(arena, nextCapacity(arenaUsed + extra, arena.length));
  }

  /** Moves the live keys end to end, dropping the bytes of removed ones. */
  function compact(): void {
    const next = new Uint8Array(Math.max(arena.length, 1024));
    const used = packKeys(arena, next, entries, keyStart, keyLength);
    arena = next;
    arenaUsed = used;
    arenaGarbage = 0;
  }

  function equals(entry: number, key: Uint8Array, length: number): boolean {
    if (keyLength[entry] !== length) return false;
    const start = keyStart[entry]!;
    for (let i = 0; i < length; i++) if (arena[start + i] !== key[i]) return false;
    return true;
  }

  function find(key: Uint8Array, length: number): number {
    if (size === 0) return -1;
    const hash = hashOf(key, 0, length);
    const tag = hash & ~entryMask;
    let slot = hash & mask;
    for (;;) {
      const held = slots[slot]!;
      if (held === 0) return -1;
      if ((held & ~entryMask) === tag && equals((held & entryMask) - 1, key, length))
        return (held & entryMask) - 1;
      slot = (slot + 1) & mask;
    }
  }

  if (expected > 0) {
    ensureEntries(expected);
    ensureSlots(expected);
  }

  return {
    find,
    add(key, length) {
      if (length === 0 || length > 0xffff) throw new RangeError(`a key of ${length} bytes`);
      // Room first, so the empty slot that ends the probe is where the key goes.
      ensureSlots(size + 1);
      ensureEntries(entries + 1);
      const hash = hashOf(key, 0, length);
      const tag = hash & ~entryMask;
      let slot = hash & mask;
      for (let held = slots[slot]!; held !== 0; held = slots[slot]!) {
        if ((held & ~entryMask) === tag && equals((held & entryMask) - 1, key, length)) {
          added = false;
          return (held & entryMask) - 1;
        }
        slot = (slot + 1) & mask;
      }
      ensureArena(length);
      const entry = freeCount > 0 ? free[--freeCount]! : entries++;
      keyStart[entry] = arenaUsed;
      keyLength[entry] = length;
      for (let i = 0; i < length; i++) arena[arenaUsed + i] = key[i]!;
      arenaUsed += length;
      slots[slot] = tag | (entry + 1);
      size++;
      added = true;
      return entry;
    },
    get added() {
      return added;
    },
    reserve(more) {
      // Entries first: growing them may widen the entry bits, which rebuilds the slots; on an
      // empty table (a load) that rebuild is free and the slots' one then sizes them for good.
      ensureEntries(entries + Math.max(0, more - freeCount));
      ensureSlots(size + more);
    },
    remove(entry) {
      const length = keyLength[entry]!;
      if (length === 0) return;
      unslot(slots, mask, entryMask, entry, keyStart, keyLength, arena, hashOf);
      keyLength[entry] = 0;
      arenaGarbage += length;
      if (freeCount === free.length) free = grown(free, nextCapacity(freeCount + 1, free.length));
      free[freeCount++] = entry;
      size--;
    },
    keyOf(entry) {
      return arena.subarray(keyStart[entry]!, keyStart[entry]! + keyLength[entry]!);
    },
    get size() {
      return size;
    },
    get entries() {
      return entries;
    },
    forEach(visit) {
      for (let entry = 0; entry < entries; entry++) if (keyLength[entry] !== 0) visit(entry);
    },
  };
}

/*
 * The table's bulk work on its slots and arena, apart from the closure that owns them: each is
 * given the arrays as they are at the call (they are replaced when they grow), and keeps none.
 */

/** Puts every live entry into `slots`, new and empty: the table rehashed, as `rebuild` sized it. */
function placeKeys(
  slots: Uint32Array,
  mask: number,
  entryMask: number,
  entries: number,
  keyStart: Uint32Array,
  keyLength: Uint16Array,
  arena: Uint8Array,
  hashOf: (key: Uint8Array, offset: number, length: number) => number,
): void {
  for (let entry = 0; entry < entries; entry++) {
    if (keyLength[entry] === 0) continue;
    const hash = hashOf(arena, keyStart[entry]!, keyLength[entry]!);
    let slot = hash & mask;
    while (slots[slot] !== 0) slot = (slot + 1) & mask;
    slots[slot] = (hash & ~entryMask) | (entry + 1);
  }
}

/** Copies the live keys of `arena` end to end into `next`, moving their starts; the bytes used. */
function packKeys(
  arena: Uint8Array,
  next: Uint8Array,
  entries: number,
  keyStart: Uint32Array,
  keyLength: Uint16Array,
): number {
  let used = 0;
  for (let entry = 0; entry < entries; entry++) {
    const length = keyLength[entry]!;
    if (length === 0) continue;
    next.set(arena.subarray(keyStart[entry]!, keyStart[entry]! + length), used);
    keyStart[entry] = used;
    used += length;
  }
  return used;
}

/** Slots for `needed` keys: a power of two from `current` (1024 at least) loaded to MAX_LOAD at most. */
function slotCount(needed: number, current: number): number {
  let length = Math.max(1024, current);
  while (needed > length * MAX_LOAD) length *= 2;
  return length;
}

/** Takes a live entry out of the slots (its key is still in the arena). */
function unslot(
  slots: Uint32Array,
  mask: number,
  entryMask: number,
  entry: number,
  keyStart: Uint32Array,
  keyLength: Uint16Array,
  arena: Uint8Array,
  hashOf: (key: Uint8Array, offset: number, length: number) => number,
): void {
  let slot = hashOf(arena, keyStart[entry]!, keyLength[entry]!) & mask;
  while ((slots[slot]! & entryMask) !== entry + 1) slot = (slot + 1) & mask;
  // Backward-shift deletion: pull later keys of the probe run into the hole, so lookups need
  // no tombstones and stay as short as if the key had never been there.
  let hole = slot;
  for (let next = (hole + 1) & mask; slots[next] !== 0; next = (next + 1) & mask) {
    const moved = (slots[next]! & entryMask) - 1;
    const home = hashOf(arena, keyStart[moved]!, keyLength[moved]!) & mask;
    // Movable unless its home lies cyclically in (hole, next].
    const inRange = hole <= next ? home > hole && home <= next : home > hole || home <= next;
    if (inRange) continue;
    slots[hole] = slots[next]!;
    hole = next;
  }
  slots[hole] = 0;
}
