/**
 * The receipt of an anchored registry: everything needed to check, without Ledgerhook, that the
 * registry's leaf is in a Merkle tree whose root a named transaction carries. Its shape follows
 * Chainpoint v2 (`targetHash`, `merkleRoot`, `proof` as a list of `{left}` / `{right}` siblings,
 * `anchors` with a `type` and `sourceId`), with our own `type` because the leaf and the anchor
 * encoding are ours, and with the salt so that the content can be checked too.
 */
import type { AnchorKind } from '../chains/anchor-chain.js';
import type { ProofStep } from './merkle.js';

export const RECEIPT_TYPE = 'LedgerhookReceipt/1';

/** What precedes the 32-byte root in the anchoring transaction's input data or note: "LHK1". */
export const ANCHOR_PREFIX = Buffer.from('LHK1', 'ascii');

/** How the root sits in its transaction. */
export type { AnchorKind };

export interface ReceiptAnchor {
  type: AnchorKind;
  /** The Ledgerhook network name (DEVNET, ETH, ALGO, …). */
  network: string;
  /** The chain the network is: `eip155:<chain id>` on EVM, the genesis hash (base64) on Algorand. */
  chain: string;
  /** The transaction id (Chainpoint's name). */
  sourceId: string;
  blockNumber: number;
  /** The bytes the transaction carries, hex: ANCHOR_PREFIX followed by the root. */
  payload: string;
}

export interface Receipt {
  type: typeof RECEIPT_TYPE;
  registryId: string;
  /** SHA-256(salt ‖ RFC 8785 JSON of the registry's anchored fields), hex. */
  targetHash: string;
  /** 32 random bytes, hex. */
  salt: string;
  proof: ProofStep[];
  merkleRoot: string;
  anchors: ReceiptAnchor[];
}

export function anchorPayload(root: Buffer): Buffer {
  return Buffer.concat([ANCHOR_PREFIX, root]);
}

/** The root a payload carries, or undefined when it is not an anchor payload. */
export function rootInPayload(payload: Buffer): Buffer | undefined {
  if (payload.length !== ANCHOR_PREFIX.length + 32) return undefined;
  if (!payload.subarray(0, ANCHOR_PREFIX.length).equals(ANCHOR_PREFIX)) return undefined;
  return payload.subarray(ANCHOR_PREFIX.length);
}
