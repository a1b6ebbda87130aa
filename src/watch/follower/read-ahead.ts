import type { BlockSource, ChainBlock } from '../../chains/source.js';

/**
 * Reads the next blocks while the current ones are committed, `window` requests at once (what a
 * node serves at once), and hands them out in height order, so catching up is bound by the node
 * rather than by round trips. A read that completes starts the next one at once, so the node
 * always has `window` requests while the follower writes; blocks read and not yet handed out are
 * kept up to twice the window ahead. A block read ahead is checked against its parent like any
 * other; after a reorganisation or a failure, what was read ahead is dropped.
 */
export function createReadAhead<Activity>(source: BlockSource<Activity>, window: number) {
  const inFlight = Math.max(1, window);
  const reads = new Map<number, Promise<ChainBlock<Activity> | undefined>>();
  /** Blocks whose read has completed, not yet handed out. */
  const arrived = new Map<number, ChainBlock<Activity>>();
  let pending = 0;
  /** The next height handed out, and the last one to read (the head of the round). */
  let wanted = 0;
  let last = -1;
  /** Bumped by discard: reads started before it no longer count. */
  let generation = 0;

  function start(height: number): void {
    const started = generation;
    const read = source.block(height);
    reads.set(height, read);
    pending++;
    read.then(
      (block) => {
        if (started !== generation) return;
        pending--;
        if (block && reads.get(height) === read) arrived.set(height, block);
        fill();
      },
      // Failures surface when the block is asked for; one never asked for must not go unhandled.
      // Nothing more is started after one: the follower fails the round and starts over.
      () => {
        if (started === generation) pending--;
      },
    );
  }

  function fill(): void {
    const until = Math.min(last, wanted + 2 * inFlight - 1);
    for (let h = wanted; h <= until && pending < inFlight; h++) if (!reads.has(h)) start(h);
  }

  return {
    /** The block at `height`, keeping reads going up to twice the window ahead, never past `last`. */
    next(height: number, lastHeight: number): Promise<ChainBlock<Activity> | undefined> {
      wanted = height;
      last = lastHeight;
      if (!reads.has(height)) start(height);
      const read = reads.get(height)!;
      reads.delete(height);
      arrived.delete(height);
      wanted = height + 1;
      fill();
      return read;
    },
    /** The block at `height` if its read has already completed (nothing is waited for). */
    arrived(height: number): ChainBlock<Activity> | undefined {
      return arrived.get(height);
    },
    discard(): void {
      generation++;
      pending = 0;
      reads.clear();
      arrived.clear();
    },
  };
}
