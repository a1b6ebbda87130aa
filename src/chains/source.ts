/**
 * What the chain-independent follower (watch/follower.ts) needs of a chain family: its head, and
 * its block at a height with what happened in it. A family implements this once (EVM, Bitcoin,
 * …); cursors, confirmations, reorganisations, locks and status are the follower's.
 */

/** A block as the follower sees it: linked to its parent by hash, with the family's activity. */
export interface ChainBlock<Activity> {
  height: number;
  hash: string;
  parentHash: string;
  activity: Activity;
}

/** The node's latest block: its hash shows a tip replaced at the same height. */
export interface ChainTip {
  height: number;
  hash: string;
}

export interface BlockSource<Activity> {
  /**
   * Blocks once in the chain stay there (Algorand): a block that does not link to the one
   * processed before it means the node is on another chain, an error to stop at rather than a
   * reorganisation to follow.
   */
  final?: boolean;
  /** The node's latest block. */
  tip(): Promise<ChainTip>;
  /** The block at a height on the node's chain; undefined when the chain is not that tall. */
  block(height: number): Promise<ChainBlock<Activity> | undefined>;
  /** The hash of the block at a height, for walking back cheaply; undefined when there is none. */
  hashAt(height: number): Promise<string | undefined>;
  /**
   * Where the node can announce new blocks (an EVM WebSocket's newHeads, algod's long poll):
   * calls `onHead` for each, until the returned function is called. Polling stays the floor, so
   * a lost announcement only costs latency. The returned function must not wait on the node.
   * With the announced block's height and hash (when the announcement carries them), the
   * follower takes them as the tip instead of asking for it: a round trip less per block.
   */
  watchHeads?(onHead: (tip?: ChainTip) => void): () => void;
  /**
   * What the family reads beyond blocks and whether it can now, shown beside the follower's
   * status in /readyz: on EVM, whether internal transfers are read (the node has traces).
   */
  status?(): SourceStatus;
}

export interface SourceStatus {
  /** EVM: internal transfers are read from the node's traces. */
  internalTransfers?: boolean;
  /** Why they are not (off by setting, the node refuses trace methods); null while they are. */
  internalTransfersReason?: string | null;
  /**
   * EVM: blocks committed without their internal transfers because the node could not trace
   * them, still open: how many, and the first and last block.
   */
  traceGaps?: { count: number; first: number | null; last: number | null };
  /** EVM: the host (and port) of the node traces are read from, when the network names one (tracesRpc). */
  tracesNode?: string;
}

/**
 * The subscription's watched addresses as a backfill sees them: too many to hold (millions), so
 * read page by page, or asked which of a block's addresses are among them.
 */
export interface WatchedAddresses {
  /** How many there are. */
  count: number;
  /** Every watched address, `size` at a time, as stored. */
  pages(size: number): AsyncIterable<string[]>;
  /** Of `candidates`, those watched, as stored (EVM: whatever the candidates' case). */
  among(candidates: readonly string[]): Promise<string[]>;
}

/** Blocks of a range with the activity of watched addresses, and which of those were watched. */
export interface HistoryScan<Activity> {
  /** In height order; only blocks holding something of a watched address. */
  blocks: ChainBlock<Activity>[];
  /** The watched addresses found in them, as stored. */
  watched: string[];
  /** EVM: blocks of the range read without their internal transfers (the node could not trace them). */
  traceGaps?: UntracedBlock[];
}

/** A block read without its traces (a trace gap), and why. */
export interface UntracedBlock {
  height: number;
  hash: string;
  reason: string;
}

/**
 * How a family replays history for a backfill: its cheapest way to find a range's activity of
 * given addresses (logs filtered by topic, an address's history), as the follower's blocks would
 * hold it, so the follower's matcher turns it into the same notifications.
 */
export interface HistorySource<Activity> {
  /** Height of the node's latest block. */
  tip(): Promise<number>;
  /** A block's time (Unix seconds); undefined when the node has no block there. */
  timeOf(height: number): Promise<number | undefined>;
  /** Blocks a scan should cover at once (one commit each). */
  chunk: number;
  /** Said in the job's view: where its data comes from and what that costs. */
  describe: string;
  scan(from: number, to: number, watched: WatchedAddresses): Promise<HistoryScan<Activity>>;
}
