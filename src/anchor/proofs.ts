/**
 * Receipts of anchored registries: the leaf's path to its batch's root, with where the root sits.
 * A batch's tree is rebuilt from its leaves (at most a batch's size of hashes) and kept for the
 * next registry of the same batch, as receipts tend to be asked for a batch at a time.
 */
import { asc, eq } from 'drizzle-orm';
import type { Db } from '../store/db.js';
import { merkleLevels, merklePath } from './merkle.js';
import { anchorPayload, RECEIPT_TYPE, type Receipt } from './receipt.js';
import { anchorBatches, anchorLeaves } from './schema.js';

const TREES_KEPT = 8;

export type ReceiptAnswer =
  | { state: 'anchored'; receipt: Receipt }
  | { state: 'pending' }
  | { state: 'none' };

export function createProofs(db: Db) {
  const trees = new Map<string, Buffer[][]>();

  async function treeOf(batchId: string): Promise<Buffer[][]> {
    const kept = trees.get(batchId);
    if (kept) return kept;
    const leaves = await db
      .select({ leaf: anchorLeaves.leaf })
      .from(anchorLeaves)
      .where(eq(anchorLeaves.batchId, batchId))
      .orderBy(asc(anchorLeaves.position));
    const levels = merkleLevels(leaves.map((l) => Buffer.from(l.leaf, 'hex')));
    if (trees.size >= TREES_KEPT) trees.delete(trees.keys().next().value!);
    trees.set(batchId, levels);
    return levels;
  }

  return {
    /** The stored salt of a registry's leaf (null when it is sealed with the registry). */
    async leafOf(registryId: string) {
      const [row] = await db.select().from(anchorLeaves).where(eq(anchorLeaves.registryId, registryId));
      return row;
    },

    /** The receipt of a registry whose salt the caller supplies (opened from its seal if need be). */
    async receipt(registryId: string, salt: string): Promise<ReceiptAnswer> {
      const [row] = await db
        .select({ leaf: anchorLeaves, batch: anchorBatches })
        .from(anchorLeaves)
        .leftJoin(anchorBatches, eq(anchorBatches.id, anchorLeaves.batchId))
        .where(eq(anchorLeaves.registryId, registryId));
      if (!row) return { state: 'none' };
      const { leaf, batch } = row;
      if (!batch || (batch.state !== 'anchored' && batch.state !== 'final') || leaf.position === null) {
        return { state: 'pending' };
      }
      const levels = await treeOf(batch.id);
      return {
        state: 'anchored',
        receipt: {
          type: RECEIPT_TYPE,
          registryId,
          targetHash: leaf.leaf,
          salt,
          proof: merklePath(levels, leaf.position),
          merkleRoot: batch.root,
          anchors: [
            {
              type: batch.chain.startsWith('eip155:') ? 'evm-input' : 'algorand-note',
              network: batch.network,
              chain: batch.chain,
              sourceId: batch.txId!,
              blockNumber: batch.blockNumber!,
              payload: anchorPayload(Buffer.from(batch.root, 'hex')).toString('hex'),
            },
          ],
        },
      };
    },
  };
}

export type Proofs = ReturnType<typeof createProofs>;
