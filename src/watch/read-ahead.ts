import type { BlockSource, ChainBlock } from '../chains/source.js';

/**
 * Reads the next blocks while the current one is committed, at most `window` at once, and hands
 * them out in height order, so catching up is bound by the node rather than by round trips. A
 * block read ahead is checked against its parent like any other; after a reorganisation or a
 * failure, what was read ahead is dropped.
 */
export function createReadAhead<Activity>(source: BlockSource<Activity>, window: number) {
  const inFlight = new Map<number, Promise<ChainBlock<Activity> | undefined>>();
  /** Blocks whose read has completed, not yet handed out. */
  const arrived = new Map<number, ChainBlock<Activity>>();
  return {
    /** The block at `height`, starting reads up to `window` blocks ahead but never past `last`. */
    next(height: number, last: number): Promise<ChainBlock<Activity> | undefined> {
      for (let h = height; h <= Math.min(last, height + Math.max(1, window) - 1); h++) {
        if (inFlight.has(h)) continue;
        const read = source.block(h);
        // Failures surface when the block is asked for; one never asked for must not go unhandled.
        read.then(
          (block) => {
            if (block && inFlight.get(h) === read) arrived.set(h, block);
          },
          () => {},
        );
        inFlight.set(h, read);
      }
      const read = inFlight.get(height)!;
      inFlight.delete(height);
      arrived.delete(height);
      return read;
    },
    /** The block at `height` if its read has already completed (nothing is waited for). */
    arrived(height: number): ChainBlock<Activity> | undefined {
      return arrived.get(height);
    },
    discard(): void {
      inFlight.clear();
      arrived.clear();
    },
  };
}
