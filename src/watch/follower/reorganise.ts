/**
 * The follower's reorganisations (follower.ts): a tip replaced under the cursor, the walk back to
 * the common ancestor, the new branch read and the difference applied (see reorg-diff.ts).
 */
import type { Logger } from 'pino';
import type { BlockSource, ChainBlock, ChainTip } from '../../chains/source.js';
import { LedgerhookError } from '../../errors.js';
import type { NewNotification } from '../../notify/outbox.js';
import type { Db } from '../../store/db.js';
import type { BlockCommitter } from './commit.js';
import { type ChainState, type Cursor, KEPT_HEADERS } from './cursor.js';
import { announcedIn, applyDiff, diffBranches } from './reorg-diff.js';

/**
 * On a chain whose blocks are final, the node's block no longer links to the one processed (or
 * another block stands at its height): the node follows another chain. Nothing is notified from
 * it; the follower retries, so a node put back on the right chain is followed again.
 */
export class ChainMismatchError extends LedgerhookError {
  constructor(network: string, at: Cursor) {
    super(
      `${network}: the node's chain does not continue block ${at.height} (${at.hash}) processed before; ` +
        'its blocks are final, so the node follows another chain: nothing is notified until it is back on this one',
    );
  }
}

export function createReorgHandler<Activity>(
  db: Db,
  network: string,
  source: BlockSource<Activity>,
  state: ChainState,
  log: Logger,
  {
    notificationsOf,
    noteHeld,
    settle,
  }: Pick<BlockCommitter<Activity>, 'notificationsOf' | 'noteHeld' | 'settle'>,
) {
  /** Walks back from the cursor to the highest block the node still has, by hash. */
  async function commonAncestor(from: Cursor): Promise<Cursor> {
    let height = from.height;
    for (; height > from.height - KEPT_HEADERS && height >= 0; height--) {
      const stored = await state.storedHash(height);
      if (stored === undefined) break;
      // A chain now shorter than the cursor has no block at this height: that block left it too.
      if ((await source.hashAt(height)) === stored) return { height, hash: stored };
    }
    const hash = (await state.storedHash(height)) ?? (await source.hashAt(height));
    if (hash === undefined)
      throw new Error(`no block at height ${height} to resume from after a reorganisation`);
    return { height, hash };
  }

  /** The new branch above the ancestor, up to the old cursor's height where the node has it. */
  async function newBranch(ancestor: Cursor, through: number): Promise<ChainBlock<Activity>[]> {
    const blocks: ChainBlock<Activity>[] = [];
    let parent = ancestor.hash;
    for (let height = ancestor.height + 1; height <= through; height++) {
      const block = await source.block(height);
      if (!block) break;
      // The node switched branches again while we read: start over next round.
      if (block.parentHash !== parent)
        throw new Error(`the chain changed again at height ${height} during a reorganisation`);
      blocks.push(block);
      parent = block.hash;
    }
    return blocks;
  }

  /**
   * The chain left the blocks above the common ancestor. Reads the new branch as far as the old
   * one went and, in one transaction, withdraws what left, notifies what is new, leaves alone
   * what is on both, and moves the cursor onto the new branch.
   */
  async function reorganise(from: Cursor, head: number): Promise<Cursor> {
    if (source.final) {
      const err = new ChainMismatchError(network, from);
      log.error({ height: from.height, hash: from.hash }, err.message);
      throw err;
    }
    const ancestor = await commonAncestor(from);
    const orphaned = await state.hashesAbove(ancestor.height);
    const blocks = await newBranch(ancestor, from.height);
    const replacing: NewNotification[] = [];
    for (const block of blocks) replacing.push(...(await notificationsOf(block, head)));
    const diff = diffBranches(await announcedIn(db, network, orphaned), replacing);
    let settled: (() => void) | undefined;
    await db.transaction(async (tx) => {
      await state.rewind(tx, ancestor, from);
      await applyDiff(tx, network, diff);
      noteHeld(diff.fresh);
      settled = await settle?.(tx, blocks);
      for (const block of blocks) await state.advance(tx, block);
    });
    settled?.();
    const at = blocks.length > 0 ? blocks[blocks.length - 1]! : ancestor;
    log.warn(
      {
        from: from.height,
        ancestor: ancestor.height,
        orphaned: orphaned.length,
        kept: diff.kept.length,
        withdrawn: diff.gone.length,
        new: diff.fresh.length,
      },
      'chain reorganised',
    );
    return { height: at.height, hash: at.hash };
  }

  /**
   * Whether the node's latest block, at or below the cursor, is not the one processed at its
   * height: the tip was replaced without a taller block (anvil_reorg, a node that switched forks),
   * which no parent-hash check would see until the next block. A node merely behind us, on our
   * chain, agrees with what we stored.
   */
  async function tipReplaced(tip: ChainTip, at: Cursor): Promise<boolean> {
    if (tip.height > at.height) return false;
    if (tip.height === at.height) return tip.hash !== at.hash;
    const stored = await state.storedHash(tip.height);
    return stored !== undefined && stored !== tip.hash;
  }

  return { reorganise, tipReplaced };
}

export type ReorgHandler = ReturnType<typeof createReorgHandler>;
