/**
 * The anchorer following its transactions on chain: a pending batch anchored once its transaction
 * is deep enough (else sent, resent or replaced), an anchored one watched until it is final.
 */
import type { Batch } from './batches.js';
import { type AnchorerParts, type AnchorSender, asSigned } from './sending.js';

/** The anchorer's settings this part reads (its AnchorerDeps). */
export interface InclusionDeps {
  /** Depth at which a batch counts as anchored. */
  confirmations: number;
  /** A transaction not included after this long is replaced (when the chain allows). */
  replaceAfterMs: number;
  /** Where a registry's receipt is served, for `registry.anchored`. */
  receiptUrl(registryId: string): string;
}

export function createInclusionFollower(
  deps: InclusionDeps,
  { chain, store, now, log }: AnchorerParts,
  { send, broadcast }: AnchorSender,
) {
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

  return { advancePending, watchAnchored };
}
