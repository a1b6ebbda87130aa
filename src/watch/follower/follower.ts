import type { Logger } from 'pino';
import type { Network } from '../../chains/networks.js';
import { isNodeError } from '../../chains/node-errors.js';
import type { BlockSource, ChainTip, SourceStatus } from '../../chains/source.js';
import type { OutboxHandoff } from '../../notify/outbox.js';
import { createSleeper } from '../../shared/sleeper.js';
import type { Db, HeldLock } from '../../store/db.js';
import { createCatchUp } from './catch-up.js';
import { type BlockMatcher, type BlockSettler, createBlockCommitter } from './commit.js';
import { type Cursor, chainState } from './cursor.js';
import { describeWatchError, runPolling } from './polling.js';
import { createReleaser } from './release.js';
import { createReorgHandler } from './reorganise.js';

export {
  type BlockMatch,
  type BlockMatcher,
  type BlockSettler,
  blockNotifications,
} from './commit.js';
export { ChainMismatchError } from './reorganise.js';

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
  /** What committed blocks settle besides their notifications (the pending lifecycle). */
  settle?: BlockSettler<Activity>;
  /** The dispatcher of this process, if it has one: it takes the new rows as they commit. */
  handoff?: OutboxHandoff;
  /**
   * Awaited each time this process takes the network's lead, before it follows (state another
   * process may have changed is read anew); a failure fails the round, and it is tried again.
   */
  onLead?: () => Promise<void> | void;
}

/**
 * Follows one network of any family (docs/watching-chains.md): processes each new block once, in
 * order, writing its notifications and the new cursor in one transaction, reading the next blocks
 * meanwhile; when the chain reorganises it walks back to the common ancestor, reads the new branch
 * and applies the difference (reorg-diff.ts). Its parts: the commit of blocks (commit.ts), the
 * reorganisations (reorganise.ts) and the round that catches up with the head (catch-up.ts); here
 * are the status, the loop, the lock and the lifecycle.
 */
export function createFollower<Activity>(deps: FollowerDeps<Activity>) {
  const { db, network, source } = deps;
  const log = deps.logger.child({ component: 'follower', network: network.name });
  const state = chainState(db, network.name);
  const releaser = createReleaser(network.name);
  /** The latest head announced (newHeads) and not yet taken by a round. */
  let announced: ChainTip | undefined;
  /**
   * The cursor as this process last left it, while it has held the network's lock since: the next
   * round starts from it without reading it. Forgotten after any failure and whenever the lock is
   * taken (anew), as another process may have moved it meanwhile.
   */
  let cursor: Cursor | undefined;
  /**
   * The head the node reported as the follower started (at the first subscription's arrival, or
   * the devnet's start): where a network new to the database begins, so a subscription is watched
   * from the block after it however long the first round takes to get going (the lock, a busy
   * database). Undefined when the node did not answer: the first round's head is taken instead.
   */
  let startedAt: Promise<ChainTip | undefined> | undefined;
  const lock = networkLock(deps, log, () => {
    cursor = undefined;
  });
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

  const committer = createBlockCommitter(
    db,
    network.name,
    deps.match,
    state,
    releaser,
    log,
    deps.settle,
    deps.handoff,
  );
  const reorgs = createReorgHandler(db, network.name, source, state, log, committer);
  const catchUp = createCatchUp({
    db,
    source,
    fetchAhead: deps.fetchAhead,
    state,
    releaser,
    status,
    following: () => running && !lock.lost(),
    commit: committer.commit,
    reorgs,
  });

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
        if (!held) {
          // Old by the time this process takes over: it would only send it looking back.
          announced = undefined;
          return deps.lockRetryMs ?? 2_000;
        }
        // Both are taken: a round that fails leaves no cursor, so the next one reads it.
        const start = { announced, cursor, startedAt };
        announced = undefined;
        cursor = undefined;
        cursor = await catchUp(start);
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
      cursor = undefined;
      startedAt = source.tip().catch(() => undefined);
      loopDone = loop();
      stopHeads = source.watchHeads?.((tip) => {
        if (tip) announced = tip;
        sleeper.wake();
      });
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
 * The network's follower lock across processes, when there is one (PostgreSQL): taken on the
 * first round and held while the connection lives; lost, the follower stands by and retries.
 */
function networkLock(
  deps: Pick<FollowerDeps<unknown>, 'acquireLock' | 'onLead'>,
  log: Logger,
  onTaken: () => void,
) {
  let lock: HeldLock | undefined;
  let lost = false;
  /** The lead was taken and onLead has not completed since. */
  let leading = true;
  async function lead(): Promise<true> {
    if (leading) {
      await deps.onLead?.();
      leading = false;
    }
    return true;
  }
  return {
    /** True while this process may follow the network. */
    async hold(): Promise<boolean> {
      if (!deps.acquireLock) return lead();
      if (lock && !lost) return lead();
      lock = await deps.acquireLock();
      if (!lock) return false;
      onTaken();
      lost = false;
      leading = true;
      const held = lock;
      void held.lost.then(() => {
        if (lock !== held) return;
        lost = true;
        log.warn('lost the follower lock; standing by');
      });
      log.info('following (holds the network lock)');
      return lead();
    },
    lost: () => lost,
    async release(): Promise<void> {
      const held = lock;
      lock = undefined;
      await held?.release();
    },
  };
}
