/**
 * A follower's round (follower.ts): every block up to the node's head processed in order, read
 * ahead while the ones before commit, a reorganisation handled where the chain no longer links.
 */
import type { BlockSource, ChainTip } from '../../chains/source.js';
import type { Db } from '../../store/db.js';
import type { BlockCommitter } from './commit.js';
import type { ChainState, Cursor } from './cursor.js';
import { createReadAhead } from './read-ahead.js';
import type { Releaser } from './release.js';
import type { ReorgHandler } from './reorganise.js';

/** Most blocks written in one transaction while catching up (as many as are read ahead). */
const MAX_BLOCKS_PER_COMMIT = 8;

export interface CatchUpDeps<Activity> {
  db: Db;
  source: BlockSource<Activity>;
  /** Blocks read ahead of the one being committed (default 8: what a node serves at once). */
  fetchAhead?: number;
  state: ChainState;
  releaser: Releaser;
  /** The follower's status: the head seen and the last block processed are set here. */
  status: { height: number | null; head: number | null };
  /** False once the follower stops or loses its lock: the round ends after the block at hand. */
  following: () => boolean;
  commit: BlockCommitter<Activity>['commit'];
  reorgs: ReorgHandler;
}

/**
 * What a round may start from without asking: the head announced since the last round, and the
 * cursor as this process last wrote it (only while it has held the network's lock since).
 */
export interface RoundStart {
  announced?: ChainTip;
  cursor?: Cursor;
  /** The head when the follower started: a network without a cursor begins there (follower.ts). */
  startedAt?: Promise<ChainTip | undefined>;
}

/**
 * The round: processes every block up to the node's head, reading ahead while it commits;
 * resolves with the cursor it leaves.
 */
export function createCatchUp<Activity>(
  deps: CatchUpDeps<Activity>,
): (start?: RoundStart) => Promise<Cursor> {
  const { db, source, state, releaser, status, following, commit } = deps;
  const { reorganise, tipReplaced } = deps.reorgs;

  /**
   * A new network starts at the head of when its follower started, or the current one if that is
   * lower (the node switched to a shorter branch) or unknown: history before is not replayed.
   */
  async function initialise(current: ChainTip, startedAt: ChainTip | undefined): Promise<Cursor> {
    const tip = startedAt && startedAt.height <= current.height ? startedAt : current;
    const block = await source.block(tip.height);
    if (!block) throw new Error(`the node reported block ${tip.height} as its tip but does not serve it`);
    return state.initialise(block);
  }

  /**
   * Processes every block up to the head, reading ahead while it commits. An announced head may
   * be one the node's HTTP side does not serve yet: the round then ends below it (as when the
   * node is switching branches), and the next asks the node for its tip or takes a newer
   * announcement, so no block is skipped.
   */
  async function catchUp(start: RoundStart = {}): Promise<Cursor> {
    // The head and our cursor, each asked for unless known, at once: both are on the path from a
    // block to its notification.
    let [tip, cursor] = await Promise.all([start.announced ?? source.tip(), start.cursor ?? state.cursor()]);
    if (!cursor) {
      // A new network starts at a head the node serves: its own, not one announced ahead of it.
      if (start.announced) tip = await source.tip();
      cursor = await initialise(tip, await start.startedAt);
    }
    const head = tip.height;
    status.head = head;
    let at = cursor;
    if (await tipReplaced(tip, at)) at = await reorganise(at, head);
    const ahead = createReadAhead(source, deps.fetchAhead ?? 8);
    try {
      while (following() && at.height < head) {
        const block = await ahead.next(at.height + 1, head);
        // Shorter than the head it reported: the node is switching branches; look again next round.
        if (!block) break;
        if (block.parentHash !== at.hash) {
          ahead.discard();
          at = await reorganise(at, head);
          continue;
        }
        // Blocks read ahead and already there that continue it are written with it; none is
        // waited for, so a block is never held back for the next one.
        const blocks = [block];
        for (let last = block; blocks.length < MAX_BLOCKS_PER_COMMIT && last.height < head; ) {
          const next = ahead.arrived(last.height + 1);
          if (!next || next.parentHash !== last.hash) break;
          blocks.push((await ahead.next(next.height, head))!);
          last = next;
        }
        await commit(blocks, head);
        const last = blocks[blocks.length - 1]!;
        at = { height: last.height, hash: last.hash };
        status.height = at.height;
      }
    } finally {
      ahead.discard();
    }
    status.height = at.height;
    // Confirmations count from the head, which may move without a block of ours to process; no
    // transaction when nothing held can be due.
    if (releaser.due(head)) await db.transaction((tx) => releaser.release(tx, head));
    return at;
  }

  return catchUp;
}
