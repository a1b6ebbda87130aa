/**
 * The anchorer: cuts waiting leaves into batches, puts each batch's root on chain, and reports it
 * anchored once its transaction is deep enough, watching it until it can no longer leave the
 * chain. It knows no chain (see chain.ts). One process anchors a network at a time (its lock).
 *
 * At most one batch is in flight: new leaves wait for the next batch while one is pending, so a
 * node that refuses or stalls costs one batch, not a queue of them, and nonces never race.
 */
import type { Logger } from 'pino';
import { describeNodeError } from '../chains/node-errors.js';
import { createSleeper } from '../shared/sleeper.js';
import type { Db, HeldLock } from '../store/db.js';
import { batchStore } from './batches.js';
import type { AnchorChain } from './chain.js';
import { createInclusionFollower } from './inclusion.js';
import { type AnchorerParts, createAnchorSender } from './sending.js';

export interface AnchorerDeps {
  db: Db;
  network: string;
  chain: AnchorChain;
  logger: Logger;
  /** Leaves per batch at most; a batch is cut at once when this many wait. */
  batchSize: number;
  /** A batch is cut at least this often while leaves wait. */
  intervalMs: number;
  /** Depth at which a batch counts as anchored. */
  confirmations: number;
  /** A transaction not included after this long is replaced (when the chain allows). */
  replaceAfterMs: number;
  /** How often the chain is checked. */
  pollIntervalMs: number;
  /** Where a registry's receipt is served, for `registry.anchored`. */
  receiptUrl(registryId: string): string;
  /** One anchorer per network across processes. */
  acquireLock?: () => Promise<HeldLock | undefined>;
  now?: () => Date;
}

export interface AnchorerStatus {
  network: string;
  healthy: boolean;
  lastError: string | null;
  standby: boolean;
}

export function createAnchorer(deps: AnchorerDeps) {
  const { chain } = deps;
  const store = batchStore(deps.db, deps.network);
  const now = deps.now ?? (() => new Date());
  const log = deps.logger.child({ component: 'anchorer', network: deps.network });
  const parts: AnchorerParts = { chain, store, now, log };
  const { advancePending, watchAnchored } = createInclusionFollower(deps, parts, createAnchorSender(parts));
  const { maybeCut } = createBatchCutter(deps, parts);
  const sleeper = createSleeper();
  const status: AnchorerStatus = { network: deps.network, healthy: false, lastError: null, standby: false };
  let lock: HeldLock | undefined;
  let lockLost = false;
  let running: Promise<void> | undefined;
  let stopping = false;

  async function holdLock(): Promise<boolean> {
    if (!deps.acquireLock) return true;
    if (lock && !lockLost) return true;
    lock = await deps.acquireLock();
    if (!lock) return false;
    lockLost = false;
    const held = lock;
    void held.lost.then(() => {
      if (lock === held) lockLost = true;
    });
    return true;
  }

  /** One round: every open batch moved on, then a new batch cut if none is in flight. */
  async function tick(): Promise<void> {
    if (!(await holdLock())) {
      status.standby = true;
      return;
    }
    status.standby = false;
    const tip = await chain.tip();
    let inFlight = false;
    for (const batch of await store.open()) {
      if (batch.state === 'anchored') await watchAnchored(batch, tip);
      else if (batch.state === 'pending' && !(await advancePending(batch, tip))) inFlight = true;
    }
    if (!inFlight) {
      await maybeCut();
      // A batch just cut is sent at once rather than a poll later.
      const [fresh] = (await store.open()).filter((b) => b.state === 'pending');
      if (fresh) await advancePending(fresh, tip);
    }
  }

  async function loop(): Promise<void> {
    while (!stopping) {
      try {
        await tick();
        status.healthy = true;
        status.lastError = null;
      } catch (err) {
        status.healthy = false;
        // Which node and how, in one line: never a library's message, which may quote the node's URL.
        status.lastError = describeNodeError(err);
        log.warn({ err }, 'anchoring round failed; retrying');
      }
      if (stopping) break;
      await sleeper.sleep(Math.min(deps.pollIntervalMs, deps.intervalMs));
    }
  }

  return {
    status: (): AnchorerStatus => ({ ...status }),
    /** One round, for tests that drive the anchorer step by step. */
    tick,
    start(): void {
      running ??= loop();
    },
    /** Wakes the loop (a registry was created, a test mined a block). */
    wake: () => sleeper.wake(),
    async stop(): Promise<void> {
      stopping = true;
      sleeper.wake();
      await running;
      await lock?.release();
      await chain.close?.();
    },
  };
}

export type Anchorer = ReturnType<typeof createAnchorer>;

/** Cutting waiting leaves into a batch: at once when a batch's worth waits, else every `intervalMs`. */
function createBatchCutter(
  deps: Pick<AnchorerDeps, 'batchSize' | 'intervalMs'>,
  { chain, store, now, log }: AnchorerParts,
) {
  let lastCutAt = 0;

  async function maybeCut(): Promise<void> {
    const waiting = await store.unbatchedCount(deps.batchSize);
    if (waiting === 0) return;
    if (waiting < deps.batchSize && Date.now() - lastCutAt < deps.intervalMs) return;
    const batch = await store.cut(deps.batchSize, now(), await chain.chainIdentity());
    lastCutAt = Date.now();
    if (batch) log.info({ batch: batch.id, leaves: batch.leafCount, root: batch.root }, 'batch cut');
  }

  return { maybeCut };
}
