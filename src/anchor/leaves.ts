/**
 * The leaves' side of anchoring, used by the registry when it creates one and when it shows one.
 */
import { eq } from 'drizzle-orm';
import type { Db } from '../store/db.js';
import { anchorBatches, anchorLeaves } from './schema.js';

export interface NewLeaf {
  registryId: string;
  accountId: string;
  leaf: string;
  /** Null when the registry is encrypted: its salt is sealed with its content. */
  salt: string | null;
  subscriptionId: string | null;
  createdAt: Date;
}

/** Records a registry's leaf in the caller's transaction: it is anchored with the next batch. */
export async function recordLeaf(tx: Db, leaf: NewLeaf): Promise<void> {
  await tx.insert(anchorLeaves).values({ ...leaf, batchId: null, position: null });
}

export interface AnchorView {
  status: 'pending' | 'anchored';
  network: string | null;
  txId: string | null;
  blockNumber: number | null;
  root: string | null;
  anchored_at: string | null;
}

/** What a joined leaf and batch say of a registry's anchoring (see {@link anchorColumns}). */
export function toAnchorView(
  row: {
    leaf: string | null;
    network: string | null;
    state: string | null;
    txId: string | null;
    blockNumber: number | null;
    root: string | null;
    anchoredAt: Date | null;
  },
  anchorNetwork: string | undefined,
): AnchorView | null {
  if (row.leaf === null) return null;
  if (row.state === 'anchored' || row.state === 'final') {
    return {
      status: 'anchored',
      network: row.network,
      txId: row.txId,
      blockNumber: row.blockNumber,
      root: row.root,
      anchored_at: row.anchoredAt?.toISOString() ?? null,
    };
  }
  // Not in a batch and anchoring is off: nothing will anchor it.
  if (row.state === null && anchorNetwork === undefined) return null;
  return {
    status: 'pending',
    network: row.network ?? anchorNetwork ?? null,
    txId: null,
    blockNumber: null,
    root: null,
    anchored_at: null,
  };
}

/**
 * NOTIFY channel of changes to what `GET /api/v1/registry/{id}` shows, sent in the transaction that
 * makes them, so every process drops the registry rows it keeps (src/registry/row-cache.ts). The
 * payload is a registry's id (revoked), or empty when a batch was cut, anchored, moved or
 * unanchored (any registry's `anchor` may have changed). One channel: a listener costs each process
 * a connection of its own on PostgreSQL.
 */
export const REGISTRY_CHANGED_CHANNEL = 'ledgerhook_registry_changed';

/** The columns {@link toAnchorView} reads, for a query that left-joins leaf and batch. */
export const anchorColumns = {
  leaf: anchorLeaves.leaf,
  network: anchorBatches.network,
  state: anchorBatches.state,
  txId: anchorBatches.txId,
  blockNumber: anchorBatches.blockNumber,
  root: anchorBatches.root,
  anchoredAt: anchorBatches.anchoredAt,
};

export const leafJoin = {
  leaves: anchorLeaves,
  batches: anchorBatches,
  leafOn: (registryId: Parameters<typeof eq>[0]) => eq(anchorLeaves.registryId, registryId),
  batchOn: eq(anchorBatches.id, anchorLeaves.batchId),
};
