/**
 * The fallback history of every family whose node indexes no addresses (Bitcoin Core, algod
 * alone) or whose addresses are too many to ask about one by one: every block of the range, read
 * through the live follower's own source, kept to the transactions of watched addresses.
 */

import { UpstreamUnavailableError } from '../errors.js';
import type { Throttle } from '../shared/throttle.js';
import type { BlockSource, ChainBlock, HistoryScan, WatchedAddresses } from './source.js';

/** Blocks read at once. */
const BLOCKS_IN_FLIGHT = 4;

export interface BlockScanOptions<Tx> {
  source: Pick<BlockSource<Tx[]>, 'block'>;
  throttle: Throttle;
  /** The addresses a transaction touches (any of which may be watched). */
  addressesOf(tx: Tx): Iterable<string>;
  /** The node, for messages. */
  where: string;
}

export async function scanBlocks<Tx>(
  options: BlockScanOptions<Tx>,
  from: number,
  to: number,
  watched: WatchedAddresses,
): Promise<HistoryScan<Tx[]>> {
  const { source, throttle, addressesOf, where } = options;
  const changed = (what: string) =>
    new UpstreamUnavailableError(`The node at ${where} ${what}: the chain changed while reading`);
  const read = new Array<ChainBlock<Tx[]>>(to - from + 1);
  let next = from;
  const worker = async () => {
    while (next <= to) {
      const height = next++;
      await throttle.take();
      const block = await source.block(height);
      if (!block) throw changed(`has no block ${height}`);
      read[height - from] = block;
    }
  };
  await Promise.all(Array.from({ length: Math.min(BLOCKS_IN_FLIGHT, to - from + 1) }, worker));
  // One chain from end to end, as the follower would have read it.
  read.forEach((block, i) => {
    const parent = read[i - 1];
    if (parent && block.parentHash !== parent.hash)
      throw changed(`served block ${block.hash}, which does not follow ${parent.hash}`);
  });
  const candidates = new Set<string>();
  for (const block of read)
    for (const tx of block.activity) for (const a of addressesOf(tx)) candidates.add(a);
  const found = await watched.among([...candidates]);
  const isWatched = new Set(found);
  const blocks: ChainBlock<Tx[]>[] = [];
  for (const block of read) {
    const activity = block.activity.filter((tx) => [...addressesOf(tx)].some((a) => isWatched.has(a)));
    if (activity.length > 0) blocks.push({ ...block, activity });
  }
  return { blocks, watched: found };
}
