/**
 * The anchoring tables, one SQL operation per step, each durable on its own: a restart anywhere
 * between two steps resumes from what the tables say.
 */
import { and, asc, eq, inArray, isNull, ne, sql } from 'drizzle-orm';
import { v7 as uuidv7 } from 'uuid';
import { enqueueNotifications, newNotificationId } from '../notify/outbox.js';
import type { Db } from '../store/db.js';
import type { AnchorInclusion, SignedAnchorTx } from './chain.js';
import { REGISTRY_CHANGED_CHANNEL } from './leaves.js';
import { merkleRoot } from './merkle.js';
import { anchorBatches, anchorLeaves, anchorTransactions } from './schema.js';

export type Batch = typeof anchorBatches.$inferSelect;
export type AnchorTxRow = typeof anchorTransactions.$inferSelect;

const ROWS_PER_UPDATE = 1_000;

/** Tells every process, with the transaction, that registries' `anchor` may show something new. */
const announceChange = (tx: Db) => tx.execute(sql`SELECT pg_notify(${REGISTRY_CHANGED_CHANNEL}, '')`);

/**
 * The anchoring tables of one network: batches cut from waiting leaves, the transactions signed
 * for them, and the batches' states, each part below.
 */
export function batchStore(db: Db, network: string) {
  return {
    ...batchCutting(db, network),
    ...anchorTransactionRows(db, network),
    ...batchStates(db),
  };
}

export type BatchStore = ReturnType<typeof batchStore>;

/** Cutting waiting leaves into batches, and the batches not yet final. */
function batchCutting(db: Db, network: string) {
  return {
    /** Leaves waiting for a batch, counted up to `limit`. */
    async unbatchedCount(limit: number): Promise<number> {
      const result = await db.execute(
        sql`SELECT count(*) AS n FROM (SELECT 1 FROM ${anchorLeaves} WHERE ${anchorLeaves.batchId} IS NULL LIMIT ${limit}) AS waiting`,
      );
      return Number(rowsOf<{ n: number | string }>(result)[0]?.n ?? 0);
    },

    /**
     * Puts up to `size` waiting leaves, oldest first, into a new batch with their tree's root, in
     * one transaction: a leaf is in exactly one batch, and the positions are those the root covers.
     */
    async cut(size: number, now: Date, chain: string): Promise<Batch | undefined> {
      return db.transaction(async (tx) => {
        const leaves = await tx
          .select({ registryId: anchorLeaves.registryId, leaf: anchorLeaves.leaf })
          .from(anchorLeaves)
          .where(isNull(anchorLeaves.batchId))
          .orderBy(asc(anchorLeaves.registryId))
          .limit(size)
          .for('update', { skipLocked: true });
        if (leaves.length === 0) return undefined;
        const root = merkleRoot(leaves.map((l) => Buffer.from(l.leaf, 'hex'))).toString('hex');
        const [batch] = await tx
          .insert(anchorBatches)
          .values({
            id: uuidv7(),
            network,
            chain,
            root,
            leafCount: leaves.length,
            state: 'pending',
            createdAt: now,
          })
          .returning();
        for (let start = 0; start < leaves.length; start += ROWS_PER_UPDATE) {
          const rows = leaves
            .slice(start, start + ROWS_PER_UPDATE)
            .map((l, i) => sql`(${l.registryId}::uuid, ${start + i}::integer)`);
          await tx.execute(
            sql`UPDATE ${anchorLeaves} SET batch_id = ${batch!.id}, position = v.position
                FROM (VALUES ${sql.join(rows, sql`, `)}) AS v(registry_id, position)
                WHERE ${anchorLeaves.registryId} = v.registry_id`,
          );
        }
        await announceChange(tx);
        return batch!;
      });
    },

    /** Batches not yet final on this network, oldest first. */
    async open(): Promise<Batch[]> {
      return db
        .select()
        .from(anchorBatches)
        .where(and(eq(anchorBatches.network, network), ne(anchorBatches.state, 'final')))
        .orderBy(asc(anchorBatches.createdAt), asc(anchorBatches.id));
    },
  };
}

/** The transactions signed for a batch: recorded before they are sent, then sent or dropped. */
function anchorTransactionRows(db: Db, network: string) {
  return {
    /** The transactions of a batch that may still be included, oldest first. */
    async candidates(batchId: string): Promise<AnchorTxRow[]> {
      return db
        .select()
        .from(anchorTransactions)
        .where(and(eq(anchorTransactions.batchId, batchId), ne(anchorTransactions.state, 'dropped')))
        .orderBy(asc(anchorTransactions.createdAt));
    },

    /** Every transaction signed for a batch, dropped ones too. */
    async transactions(batchId: string): Promise<AnchorTxRow[]> {
      return db.select().from(anchorTransactions).where(eq(anchorTransactions.batchId, batchId));
    },

    /** Records a signed transaction before it is sent; `replaced` is the one it takes over from. */
    async recordSigned(batchId: string, tx: SignedAnchorTx, now: Date, replaced?: string): Promise<void> {
      await db.transaction(async (t) => {
        if (replaced !== undefined) {
          await t
            .update(anchorTransactions)
            .set({ state: 'replaced' })
            .where(eq(anchorTransactions.txId, replaced));
        }
        await t
          .insert(anchorTransactions)
          .values({
            txId: tx.txId,
            batchId,
            network,
            raw: tx.raw,
            details: tx.details,
            state: 'live',
            createdAt: now,
          })
          // Signing the same transaction again (same nonce and fees) gives the same id.
          .onConflictDoUpdate({ target: anchorTransactions.txId, set: { state: 'live' } });
      });
    },

    async markSent(txId: string, now: Date): Promise<void> {
      await db.update(anchorTransactions).set({ sentAt: now }).where(eq(anchorTransactions.txId, txId));
    },

    async markDropped(txIds: string[]): Promise<void> {
      if (txIds.length === 0) return;
      await db
        .update(anchorTransactions)
        .set({ state: 'dropped' })
        .where(inArray(anchorTransactions.txId, txIds));
    },
  };
}

/** A batch's state: anchored (and its registries told), moved, unanchored, final. */
function batchStates(db: Db) {
  return {
    /**
     * The batch is anchored by `txId`: recorded with a `registry.anchored` event for every registry
     * of the batch that has a callback, in one transaction.
     */
    async markAnchored(
      batch: Batch,
      txId: string,
      at: AnchorInclusion,
      now: Date,
      receiptUrl: (registryId: string) => string,
    ): Promise<void> {
      await db.transaction(async (tx) => {
        await tx
          .update(anchorBatches)
          .set({
            state: 'anchored',
            txId,
            blockNumber: at.blockNumber,
            blockHash: at.blockHash,
            anchoredAt: now,
          })
          .where(eq(anchorBatches.id, batch.id));
        const callbacks = await tx
          .select({
            registryId: anchorLeaves.registryId,
            accountId: anchorLeaves.accountId,
            subscriptionId: anchorLeaves.subscriptionId,
          })
          .from(anchorLeaves)
          .where(and(eq(anchorLeaves.batchId, batch.id), sql`${anchorLeaves.subscriptionId} IS NOT NULL`));
        await announceChange(tx);
        const anchoredAt = now.toISOString();
        await enqueueNotifications(
          tx,
          callbacks.map((c) => {
            const id = newNotificationId();
            return {
              id,
              accountId: c.accountId,
              subscriptionId: c.subscriptionId!,
              eventType: 'registry.anchored',
              // Once per registry and transaction: anchored again in another transaction, told again.
              dedupeKey: `registry.anchored:${c.registryId}:${txId}`,
              body: JSON.stringify({
                type: 'registry.anchored',
                id,
                subscriptionId: c.subscriptionId,
                registry: { id: c.registryId },
                anchor: {
                  network: batch.network,
                  txId,
                  blockNumber: at.blockNumber,
                  root: batch.root,
                  anchored_at: anchoredAt,
                },
                receipt_url: receiptUrl(c.registryId),
              }),
            };
          }),
          now,
        );
      });
    },

    /** The anchored block moved (same transaction, another block of the new branch). */
    async moveAnchor(batchId: string, at: AnchorInclusion): Promise<void> {
      await db.transaction(async (tx) => {
        await tx
          .update(anchorBatches)
          .set({ blockNumber: at.blockNumber, blockHash: at.blockHash })
          .where(eq(anchorBatches.id, batchId));
        await announceChange(tx);
      });
    },

    /** The anchoring transaction left the chain: the batch is pending again and will be resent. */
    async unanchor(batch: Batch): Promise<void> {
      await db.transaction(async (tx) => {
        await tx
          .update(anchorBatches)
          .set({ state: 'pending', txId: null, blockNumber: null, blockHash: null, anchoredAt: null })
          .where(eq(anchorBatches.id, batch.id));
        await tx
          .update(anchorTransactions)
          .set({ state: 'dropped' })
          .where(eq(anchorTransactions.batchId, batch.id));
        await announceChange(tx);
      });
    },

    // Not announced: a final batch shows as the anchored one did (toAnchorView).
    async markFinal(batchId: string): Promise<void> {
      await db.update(anchorBatches).set({ state: 'final' }).where(eq(anchorBatches.id, batchId));
    },
  };
}

const rowsOf = <T>(result: unknown): T[] => (result as { rows: T[] }).rows;

export interface AnchorStats {
  /** Leaves no batch holds yet. */
  waiting: number;
  /** Batches by state: pending, anchored, final. */
  batches: Record<string, number>;
}

/** For /metrics: how much waits to be anchored, and where the batches stand. */
export async function anchorStats(db: Db): Promise<AnchorStats> {
  const [waiting] = rowsOf<{ n: number }>(
    await db.execute(
      sql`SELECT count(*)::int AS n FROM ${anchorLeaves} WHERE ${anchorLeaves.batchId} IS NULL`,
    ),
  );
  const batches: Record<string, number> = { pending: 0, anchored: 0, final: 0 };
  for (const row of rowsOf<{ state: string; n: number }>(
    await db.execute(sql`SELECT state, count(*)::int AS n FROM ${anchorBatches} GROUP BY state`),
  )) {
    batches[row.state] = row.n;
  }
  return { waiting: waiting?.n ?? 0, batches };
}
