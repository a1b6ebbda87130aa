/**
 * The anchorer's sending: a batch's transaction signed and recorded before it is sent, then
 * broadcast; a replacement takes over from the transaction it outbids.
 */
import type { Logger } from 'pino';
import type { AnchorTxRow, Batch, BatchStore } from './batches.js';
import type { AnchorChain, SignedAnchorTx } from './chain.js';
import { anchorPayload } from './receipt.js';

/** What every part of an anchorer works with: its chain, its tables, its clock and its log. */
export interface AnchorerParts {
  chain: AnchorChain;
  store: BatchStore;
  now: () => Date;
  log: Logger;
}

/** A node refused a transaction for good (see the family's broadcast). */
function isRejection(err: unknown): boolean {
  return (err as Error | undefined)?.name === 'AnchorTxRejectedError';
}

export function createAnchorSender({ chain, store, now, log }: AnchorerParts) {
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

  return { send, broadcast };
}

export type AnchorSender = ReturnType<typeof createAnchorSender>;

export function asSigned(row: AnchorTxRow): SignedAnchorTx {
  return { txId: row.txId, raw: row.raw, details: row.details };
}
