/**
 * Remembering which notifications were handled, by `webhook-id`: Ledgerhook delivers at least
 * once (a retry after a lost acknowledgement, a resend), and the id is the same every time.
 */

/** What a store knows of an id: never seen (now claimed), being handled, or handled. */
export type DeliveryState = 'new' | 'in-progress' | 'done';

/**
 * Where handled ids are kept. The default keeps them in memory (one process); a store shared by
 * several processes (Redis `SET NX PX`, a database row) must make `begin` atomic.
 */
export interface DeliveryStore {
  /** If `id` is unknown or expired, claims it as in progress for `leaseMs` and answers 'new'. */
  begin(id: string, leaseMs: number): DeliveryState | Promise<DeliveryState>;
  /** The handler succeeded: remember `id` as done for `windowMs`. */
  done(id: string, windowMs: number): void | Promise<void>;
  /** The handler failed: forget `id`, so that the retry reaches the handler again. */
  forget(id: string): void | Promise<void>;
}

export interface MemoryStoreOptions {
  /** Ids kept at most; past it the oldest are forgotten first (default 100,000, some 15 MB). */
  maxEntries?: number;
  /** The current time in milliseconds (default `Date.now`). */
  now?: () => number;
}

/** A DeliveryStore in this process's memory, bounded in size and time. */
export function createMemoryStore(options: MemoryStoreOptions = {}): DeliveryStore & { size(): number } {
  const maxEntries = options.maxEntries ?? 100_000;
  if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new RangeError('maxEntries must be at least 1');
  const now = options.now ?? Date.now;
  // Insertion order is age order: entries are re-inserted whenever their expiry is set.
  const entries = new Map<string, { state: 'in-progress' | 'done'; expires: number }>();

  const set = (id: string, state: 'in-progress' | 'done', ms: number) => {
    entries.delete(id);
    entries.set(id, { state, expires: now() + ms });
    while (entries.size > maxEntries) entries.delete(entries.keys().next().value as string);
  };

  return {
    begin(id, leaseMs) {
      const at = now();
      // Drop what expired from the old end, so memory follows the window, not the peak.
      for (const [key, entry] of entries) {
        if (entry.expires > at) break;
        entries.delete(key);
      }
      const entry = entries.get(id);
      if (entry && entry.expires > at) return entry.state;
      set(id, 'in-progress', leaseMs);
      return 'new';
    },
    done(id, windowMs) {
      set(id, 'done', windowMs);
    },
    forget(id) {
      entries.delete(id);
    },
    size: () => entries.size,
  };
}
