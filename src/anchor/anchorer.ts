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
import { type AnchorTxRow, type Batch, batchStore } from './batches.js';
import type { AnchorChain, SignedAnchorTx } from './chain.js';
import { anchorPayload } from './receipt.js';

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

/** A node refused a transaction for good (see the family's broadcast). */
function isRejection(err: unknown): boolean {
  return (err as Error | undefined)?.name === 'AnchorTxRejectedError';
}

export function createAnchorer(deps: AnchorerDeps) {
  const { chain } = deps;
  const store = batchStore(deps.db, deps.network);
  const now = deps.now ?? (() => new Date());
  const log = deps.logger.child({ component: 'anchorer', network: deps.network });
  const sleeper = createSleeper();
  const status: AnchorerStatus = { network: deps.network, healthy: false, lastError: null, standby: false };
  let lastCutAt = 0;
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

  /** Signs and records a transaction for the batch, then sends it. */
  async function send(batch: Batch, replacing?: AnchorTxRow): Promise<void> {
    const payload = anchorPayload(Buffer.from(batch.root, 'hex'));
    let tx: SignedAnchorTx = await chain.sign(payload, replacing && asSigned(replacing));
    // The same bytes as a transaction that left the chain: resending it would not be a new
    // transaction (and its registries would never hear of it again), so outbid it instead.
    const same = (await store.transactions(batch.id)).find(
      (k) => k.txId === tx.txId && k.state === 'dropped',
    );
    if (same !== undefined) tx = await chain.sign(payload, asSigned(same));
    await store.recordSigned(batch.id, tx, now(), replacing?.txId);
    log.info(
      { batch: batch.id, txId: tx.txId, leaves: batch.leafCount, replaces: replacing?.txId },
      'anchor transaction signed',
    );
    await broadcast(tx.txId, tx);
  }

  async function broadcast(txId: string, tx: SignedAnchorTx): Promise<void> {
    try {
      await chain.broadcast(tx);
    } catch (err) {
      if (!isRejection(err)) throw err;
      log.warn({ txId, err: (err as Error).message }, 'anchor transaction refused; signing another');
      await store.markDropped([txId]);
      return;
    }
    await store.markSent(txId, now());
  }

  /** Moves a pending batch on: anchored when deep enough, else sent, resent or replaced. */
  async function advancePending(batch: Batch, tip: number): Promise<boolean> {
    const known = await store.candidates(batch.id);
    const failed: string[] = [];
    for (const tx of known) {
      const at = await chain.inclusion(tx.txId);
      if (at === undefined) continue;
      if (!at.success) {
        failed.push(tx.txId);
        continue;
      }
      if (tip - at.blockNumber + 1 < deps.confirmations) return false;
      await store.markAnchored(batch, tx.txId, at, now(), deps.receiptUrl);
      await store.markDropped(known.filter((k) => k.txId !== tx.txId).map((k) => k.txId));
      log.info(
        { batch: batch.id, txId: tx.txId, blockNumber: at.blockNumber, leaves: batch.leafCount },
        'batch anchored',
      );
      return true;
    }
    if (failed.length > 0) {
      log.warn({ batch: batch.id, failed }, 'anchor transaction failed on chain; sending again');
      await store.markDropped(failed);
    }
    const all = await store.candidates(batch.id);
    const live = all.filter((t) => t.state === 'live').at(-1);
    if (live === undefined) {
      await send(batch);
    } else if (live.sentAt === null) {
      // Signed before a restart (or refused for a while): the same bytes, never a second transaction.
      await broadcast(live.txId, asSigned(live));
    } else if (
      now().getTime() - live.sentAt.getTime() >= deps.replaceAfterMs &&
      chain.mayReplace(asSigned(live), tip)
    ) {
      await send(batch, live);
    }
    return false;
  }

  /** Watches an anchored batch until it is final; one whose transaction left the chain is resent. */
  async function watchAnchored(batch: Batch, tip: number): Promise<void> {
    const height = batch.blockNumber!;
    if ((await chain.hashAt(height)) === batch.blockHash) {
      if (tip - height + 1 >= chain.finalDepth) await store.markFinal(batch.id);
      return;
    }
    const at = await chain.inclusion(batch.txId!);
    if (at?.success) {
      await store.moveAnchor(batch.id, at);
      log.info(
        { batch: batch.id, txId: batch.txId, blockNumber: at.blockNumber },
        'anchor transaction moved to another block',
      );
      return;
    }
    log.warn(
      { batch: batch.id, txId: batch.txId, blockNumber: height },
      'anchor transaction left the chain; anchoring the batch again',
    );
    await store.unanchor(batch);
  }

  async function maybeCut(): Promise<void> {
    const waiting = await store.unbatchedCount(deps.batchSize);
    if (waiting === 0) return;
    if (waiting < deps.batchSize && Date.now() - lastCutAt < deps.intervalMs) return;
    const batch = await store.cut(deps.batchSize, now(), await chain.chainIdentity());
    lastCutAt = Date.now();
    if (batch) log.info({ batch: batch.id, leaves: batch.leafCount, root: batch.root }, 'batch cut');
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

function asSigned(row: AnchorTxRow): SignedAnchorTx {
  return { txId: row.txId, raw: row.raw, details: row.details };
}
