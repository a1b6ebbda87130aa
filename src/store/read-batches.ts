/**
 * Group reads: the reads asked for in one turn of the event loop (the requests parsed from the
 * sockets that were readable together) go out together, at the end of that turn (setImmediate), as
 * one statement of many keys; those arriving while `maxInFlight` statements are in flight wait, and
 * then go together too. Under load each statement then serves many requests (its round trip, its
 * planning, and on PGlite its parsing, cost more than a row), and with no load a read waits only for
 * the end of its turn. Each read settles with its statement.
 */
export function createReadBatches<K, R>(options: {
  /** Reads the rows of `keys` (in any order; a key without a row has none). */
  read(keys: K[]): Promise<R[]>;
  /** Whether `row` is the answer to `key`. */
  matches(key: K, row: R): boolean;
  /** Keys per statement at most. */
  maxBatch?: number;
  /**
   * Statements in flight at most: a second lets a batch be sent while the first waits for its
   * answer, so the throughput is not one batch per round trip.
   */
  maxInFlight?: number;
}) {
  const maxBatch = options.maxBatch ?? 128;
  const maxInFlight = options.maxInFlight ?? 2;
  let waiting: Array<{ key: K; resolve(row: R | undefined): void; reject(err: unknown): void }> = [];
  let inFlight = 0;
  let scheduled = false;

  function start(): void {
    scheduled = false;
    if (inFlight < maxInFlight && waiting.length > 0) void flush();
  }

  async function flush(): Promise<void> {
    inFlight++;
    while (waiting.length > 0) {
      const batch = waiting.length <= maxBatch ? waiting : waiting.slice(0, maxBatch);
      waiting = batch === waiting ? [] : waiting.slice(batch.length);
      try {
        const rows = await options.read(batch.map((w) => w.key));
        for (const w of batch) w.resolve(rows.find((row) => options.matches(w.key, row)));
      } catch (err) {
        for (const w of batch) w.reject(err);
      }
    }
    inFlight--;
  }

  return {
    /** The row of `key`, or undefined. */
    get(key: K): Promise<R | undefined> {
      return new Promise<R | undefined>((resolve, reject) => {
        waiting.push({ key, resolve, reject });
        if (inFlight < maxInFlight && !scheduled) {
          scheduled = true;
          setImmediate(start);
        }
      });
    },
  };
}
