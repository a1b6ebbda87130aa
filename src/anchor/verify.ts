/**
 * Checks a receipt without trusting whoever issued it: the content (when given) hashes to the
 * leaf under the salt, the path leads from the leaf to the root, and the named transaction on the
 * named chain carries that root. The chain is read through a reader of the caller's choosing: the
 * service's configured nodes, or a node URL given on the command line.
 */
import { AnchoredDocumentError, anchoredDocument, leafOf } from './leaf.js';
import { applyPath } from './merkle.js';
import type { Receipt } from './receipt.js';
import { rootInPayload } from './receipt.js';

export interface AnchorReader {
  /** The transaction as the node reports it; undefined when the node does not know it. */
  transaction(txId: string): Promise<
    | {
        /** The bytes it carries: input data on EVM, the note on Algorand (null when none). */
        payload: Buffer | null;
        /** Null while it is not in a block. */
        blockNumber: number | null;
        /** The chain it is on, named as receipts name it (`eip155:<id>`, genesis hash). */
        chain: string | null;
      }
    | undefined
  >;
  tip(): Promise<number>;
}

export interface Verification {
  /** All checks passed: the content (if given) existed, unchanged, when the block was made. */
  verified: boolean;
  checks: {
    /** The content hashes to the receipt's leaf; null when no content was given. */
    content: boolean | null;
    /** The path leads from the leaf to the Merkle root. */
    path: boolean;
    /** The named transaction, on the named chain, carries the root. */
    transaction: boolean;
  };
  /** Where the transaction is now (null when it is not in a block). */
  blockNumber: number | null;
  /** Blocks from the transaction's to the tip, its own included. */
  confirmations: number | null;
  /** What failed, one line each. */
  problems: string[];
}

function checkContent(receipt: Receipt, content: unknown, problems: string[]): boolean {
  if (content === null || typeof content !== 'object' || Array.isArray(content)) {
    problems.push('the content is not a JSON object');
    return false;
  }
  let document: ReturnType<typeof anchoredDocument>;
  try {
    document = anchoredDocument(content as Record<string, unknown>);
  } catch (err) {
    if (!(err instanceof AnchoredDocumentError)) throw err;
    problems.push(err.message);
    return false;
  }
  if (document.id !== receipt.registryId) {
    problems.push(`the content is registry ${String(document.id)}, the receipt is of ${receipt.registryId}`);
    return false;
  }
  let leaf: string;
  try {
    leaf = leafOf(receipt.salt, document);
  } catch {
    problems.push('the content has no canonical JSON form');
    return false;
  }
  if (leaf !== receipt.targetHash) {
    problems.push(
      "the content and salt do not hash to the receipt's leaf: the content differs from what was anchored",
    );
    return false;
  }
  return true;
}

export async function verifyReceipt(
  receipt: Receipt,
  content: unknown,
  reader: AnchorReader,
): Promise<Verification> {
  const problems: string[] = [];
  const contentOk = content === undefined ? null : checkContent(receipt, content, problems);
  const root = applyPath(Buffer.from(receipt.targetHash, 'hex'), receipt.proof);
  const pathOk = root !== undefined && root.toString('hex') === receipt.merkleRoot;
  if (!pathOk) problems.push('the proof does not lead from the leaf to the Merkle root');

  const anchor = receipt.anchors[0]!;
  let transactionOk = false;
  let blockNumber: number | null = null;
  let confirmations: number | null = null;
  const tx = await reader.transaction(anchor.sourceId);
  if (tx === undefined) {
    problems.push(`transaction ${anchor.sourceId} is not on ${anchor.network}`);
  } else if (tx.chain !== null && tx.chain !== anchor.chain) {
    problems.push(`the node is on chain ${tx.chain}, the receipt names ${anchor.chain}`);
  } else {
    const carried = tx.payload === null ? undefined : rootInPayload(tx.payload);
    if (carried === undefined) {
      problems.push(`transaction ${anchor.sourceId} carries no anchor payload`);
    } else if (carried.toString('hex') !== receipt.merkleRoot) {
      problems.push(`transaction ${anchor.sourceId} carries another root (${carried.toString('hex')})`);
    } else if (tx.blockNumber === null) {
      problems.push(`transaction ${anchor.sourceId} is not in a block yet`);
    } else {
      transactionOk = true;
      blockNumber = tx.blockNumber;
      confirmations = Math.max(0, (await reader.tip()) - tx.blockNumber + 1);
    }
  }
  return {
    verified: pathOk && transactionOk && contentOk !== false,
    checks: { content: contentOk, path: pathOk, transaction: transactionOk },
    blockNumber,
    confirmations,
    problems,
  };
}
