import type { Logger } from 'pino';
import type { Network } from '../chains/networks.js';
import { isNodeError } from '../chains/node-errors.js';
import type { BlockSource, ChainBlock, ChainTip, SourceStatus } from '../chains/source.js';
import { enqueueNotifications, type NewNotification, newNotificationId } from '../notify/outbox.js';
import { createSleeper } from '../shared/sleeper.js';
import type { Db, HeldLock } from '../store/db.js';
import type { WatchedSubscription } from '../subscriptions/events.js';
import { type Cursor, chainState, KEPT_HEADERS } from './chain-state.js';
import { describeWatchError, runPolling } from './polling.js';
import { createReadAhead } from './read-ahead.js';
import { createReleaser } from './release.js';
import { announcedIn, applyDiff, blockDedupeKey, diffBranches } from './reorg.js';

/** Most blocks written in one transaction while catching up (as many as are read ahead). */
const MAX_BLOCKS_PER_COMMIT = 8;

/** A transfer in a block that a subscription watches: what a family's matcher finds. */
export interface BlockMatch {
  subscription: WatchedSubscription;
  /**
   * The transfer's identity on its chain, independent of the block holding it (transaction and
   * position), so that a reorganisation sees the same transfer on both branches.
   */
  key: string;
  /** The notification body of DESIGN §6, given the notification's id. */
  body: (id: string) => Record<string, unknown>;
  /**
   * The addresses the watched address dealt with in the transaction (the other side of the
   * movement), which a risk provider scores for `addressesRiskRatio` (watch/risk/).
   */
  counterparties: string[];
}

/**
 * The outbox rows of a block's matches: due at once, or held until the head is deep enough. The
 * dedupe key (block hash and transfer key) is what makes a backfill's notification of a transfer
 * and the follower's one row; `extra` adds fields to each body (a backfill's `backfill: true`).
 */
export function blockNotifications(
  network: string,
  block: { height: number; hash: string },
  matches: readonly BlockMatch[],
  head: number,
  extra?: Record<string, unknown>,
): NewNotification[] {
  return matches.map(({ subscription, key, body }) => {
    const id = newNotificationId();
    const releaseHeight = block.height + Math.max(1, subscription.confirmations) - 1;
    return {
      id,
      accountId: subscription.accountId,
      subscriptionId: subscription.id,
      eventType: 'address.transaction',
      body: JSON.stringify(extra ? { ...body(id), ...extra } : body(id)),
      dedupeKey: blockDedupeKey(block.hash, key),
      state: head >= releaseHeight ? 'pending' : 'held',
      chain: network,
      blockNumber: block.height,
      blockHash: block.hash,
      releaseHeight,
    };
  });
}

/** How a family's block activity becomes notifications for the watched addresses. */
export type BlockMatcher<Activity> = (block: ChainBlock<Activity>) => Promise<BlockMatch[]>;

export interface FollowerBaseStatus {
  network: string;
  /** Last block processed. */
  height: number | null;
  /** Last head the node reported. */
  head: number | null;
  healthy: boolean;
  lastError: string | null;
  /** Another process holds this network's follower lock; this one waits to take over. */
  standby: boolean;
  /** Rounds that failed (node or database errors) since the process started. */
  errors: number;
}

/** A follower's status with what its source adds (EVM: whether internal transfers are read). */
export type FollowerStatus = FollowerBaseStatus & SourceStatus;

export interface FollowerDeps<Activity> {
  db: Db;
  network: Network;
  source: BlockSource<Activity>;
  match: BlockMatcher<Activity>;
  logger: Logger;
  pollIntervalMs: number;
  /** Longest wait between retries while the node is unreachable. */
  maxBackoffMs?: number;
  /** Blocks read ahead of the one being committed (default 8: what a node serves at once). */
  fetchAhead?: number;
  /**
   * One process at a time follows a network (PostgreSQL advisory lock); the others stand by and
   * take over from the cursor when the holder's connection goes away.
   */
  acquireLock?: () => Promise<HeldLock | undefined>;
  /** How often a standby tries to take the lock. */
  lockRetryMs?: number;
}

/**
 * Follows one network of any family: processes each new block once, in order, writing its
 * notifications and the new cursor in one transaction, reading the next blocks meanwhile. When
 * the chain reorganises it walks back to the common ancestor, reads the new branch and applies
 * the difference (see reorg.ts).
 */
export function createFollower<Activity>(deps: FollowerDeps<Activity>) {
  const { db, network, source } = deps;
  const log = deps.logger.child({ component: 'follower', network: network.name });
  const state = chainState(db, network.name);
  const releaser = createReleaser(network.name);
  const lock = networkLock(deps, log);
  const status: FollowerBaseStatus = {
    network: network.name,
    height: null,
    head: null,
    healthy: false,
    lastError: null,
    standby: false,
    errors: 0,
  };
  const sleeper = createSleeper();
  let running = false;
  let loopDone: Promise<void> | undefined;
  let stopHeads: (() => void) | undefined;

  /** The block's notifications: due at once, or held until the head is deep enough. */
  async function notificationsOf(block: ChainBlock<Activity>, head: number): Promise<NewNotification[]> {
    return blockNotifications(network.name, block, await deps.match(block), head);
  }

  function noteHeld(items: NewNotification[]): void {
    releaser.held(items.filter((n) => n.state === 'held').map((n) => n.releaseHeight!));
  }

  /**
   * Consecutive blocks (one, unless more had already been read) in one transaction: their
   * notifications, their headers and the cursor, so a block costs a share of one commit.
   */
  async function commit(blocks: ChainBlock<Activity>[], head: number): Promise<void> {
    const items: NewNotification[] = [];
    for (const block of blocks) items.push(...(await notificationsOf(block, head)));
    await db.transaction(async (tx) => {
      await enqueueNotifications(tx, items);
      noteHeld(items);
      await state.advanceThrough(tx, blocks);
      await releaser.release(tx, head);
    });
    if (items.length > 0) {
      const through = blocks[blocks.length - 1]!.height;
      log.debug({ block: blocks[0]!.height, through, notifications: items.length }, 'blocks processed');
    }
  }

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
      const err = new ChainMismatchError(network.name, from);
      log.error({ height: from.height, hash: from.hash }, err.message);
      throw err;
    }
    const ancestor = await commonAncestor(from);
    const orphaned = await state.hashesAbove(ancestor.height);
    const blocks = await newBranch(ancestor, from.height);
    const replacing: NewNotification[] = [];
    for (const block of blocks) replacing.push(...(await notificationsOf(block, head)));
    const diff = diffBranches(await announcedIn(db, network.name, orphaned), replacing);
    await db.transaction(async (tx) => {
      await state.rewind(tx, ancestor);
      await applyDiff(tx, network.name, diff);
      noteHeld(diff.fresh);
      for (const block of blocks) await state.advance(tx, block);
    });
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

  /** A new network starts at the current head: history before the first start is not replayed. */
  async function initialise(tip: ChainTip): Promise<Cursor> {
    const block = await source.block(tip.height);
    if (!block) throw new Error(`the node reported block ${tip.height} as its tip but does not serve it`);
    return state.initialise(block);
  }

  /** Processes every block up to the node's head, reading ahead while it commits. */
  async function catchUp(): Promise<void> {
    const tip = await source.tip();
    const head = tip.height;
    status.head = head;
    let at = (await state.cursor()) ?? (await initialise(tip));
    if (await tipReplaced(tip, at)) at = await reorganise(at, head);
    const ahead = createReadAhead(source, deps.fetchAhead ?? 8);
    try {
      while (running && !lock.lost() && at.height < head) {
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
    // Confirmations count from the head, which may move without a block of ours to process.
    await db.transaction((tx) => releaser.release(tx, head));
  }

  function loop(): Promise<void> {
    return runPolling({
      intervalMs: deps.pollIntervalMs,
      maxBackoffMs: deps.maxBackoffMs ?? 30_000,
      sleeper,
      isRunning: () => running,
      status,
      round: async () => {
        const held = await lock.hold();
        status.standby = !held;
        if (!held) return deps.lockRetryMs ?? 2_000;
        await catchUp();
        return undefined;
      },
      describe: (err) => describeWatchError(network, err),
      onError: (reason, retryInMs, err) => {
        releaser.forget();
        const what = isNodeError(err) ? 'node unreachable or failing' : 'round failed';
        log.warn({ reason, err, retryInMs }, `${what}; retrying`);
      },
    });
  }

  return {
    network: network.name,
    status: (): FollowerStatus => ({
      ...status,
      standby: status.standby || lock.lost(),
      ...source.status?.(),
    }),
    start(): void {
      if (running) return;
      running = true;
      loopDone = loop();
      stopHeads = source.watchHeads?.(sleeper.wake);
    },
    /** Checks for a new head now (e.g. on a WebSocket newHeads message). */
    wake: sleeper.wake,
    async stop(): Promise<void> {
      running = false;
      stopHeads?.();
      stopHeads = undefined;
      sleeper.wake();
      await loopDone;
      await lock.release();
    },
  };
}

export type Follower = ReturnType<typeof createFollower>;

/**
 * On a chain whose blocks are final, the node's block no longer links to the one processed (or
 * another block stands at its height): the node follows another chain. Nothing is notified from
 * it; the follower retries, so a node put back on the right chain is followed again.
 */
export class ChainMismatchError extends Error {
  constructor(network: string, at: Cursor) {
    super(
      `${network}: the node's chain does not continue block ${at.height} (${at.hash}) processed before; ` +
        'its blocks are final, so the node follows another chain: nothing is notified until it is back on this one',
    );
    this.name = 'ChainMismatchError';
  }
}

/**
 * The network's follower lock across processes, when there is one (PostgreSQL): taken on the
 * first round and held while the connection lives; lost, the follower stands by and retries.
 */
function networkLock(deps: Pick<FollowerDeps<unknown>, 'acquireLock'>, log: Logger) {
  let lock: HeldLock | undefined;
  let lost = false;
  return {
    /** True while this process may follow the network. */
    async hold(): Promise<boolean> {
      if (!deps.acquireLock) return true;
      if (lock && !lost) return true;
      lock = await deps.acquireLock();
      if (!lock) return false;
      lost = false;
      const held = lock;
      void held.lost.then(() => {
        if (lock !== held) return;
        lost = true;
        log.warn('lost the follower lock; standing by');
      });
      log.info('following (holds the network lock)');
      return true;
    },
    lost: () => lost,
    async release(): Promise<void> {
      const held = lock;
      lock = undefined;
      await held?.release();
    },
  };
}
