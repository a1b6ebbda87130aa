/**
 * What anchoring needs of a chain: put a payload in a transaction signed by the anchor key, send
 * it, and tell whether and where it was included. The anchorer (src/anchor/) knows no chain; each
 * family (src/chains/<family>/anchor.ts) implements this, so it lives here, below both.
 */

/** Where a family's anchor transaction carries the root: EVM input data, or an Algorand note. */
export type AnchorKind = 'evm-input' | 'algorand-note';

/** A signed transaction, kept in the database before it is sent. */
export interface SignedAnchorTx {
  txId: string;
  /** The signed bytes as the node's submit call takes them (hex on EVM, base64 on Algorand). */
  raw: string;
  /** Family details needed to replace it: nonce and fees on EVM, validity window on Algorand. */
  details: Record<string, string | number>;
}

export interface AnchorInclusion {
  blockNumber: number;
  blockHash: string;
  /** False for a transaction included but failed (reverted): it anchors nothing. */
  success: boolean;
}

export interface AnchorChain {
  kind: AnchorKind;
  /** The chain the network is, read from the node: `eip155:<chain id>` on EVM, the genesis hash (base64) on Algorand. */
  chainIdentity(): Promise<string>;
  /**
   * Signs a transaction carrying `payload`. With `replacing`, a transaction that takes its place
   * (on EVM the same nonce with higher fees, so only one of the two can ever be included).
   */
  sign(payload: Buffer, replacing?: SignedAnchorTx): Promise<SignedAnchorTx>;
  /** Sends it; sending a transaction the node already has (or has included) is not an error. */
  broadcast(tx: SignedAnchorTx): Promise<void>;
  /** Where the transaction is included in the current chain; undefined when it is not. */
  inclusion(txId: string): Promise<AnchorInclusion | undefined>;
  tip(): Promise<number>;
  /** The hash of the block at a height of the current chain. */
  hashAt(height: number): Promise<string | undefined>;
  /**
   * Whether a transaction not included after the replacement timeout may be replaced now: always
   * on EVM (the replacement shares its nonce), on Algorand only once its validity window has passed
   * (two different transactions could otherwise both be included).
   */
  mayReplace(tx: SignedAnchorTx, tip: number): boolean;
  /** Depth from which an included transaction can no longer leave the chain. */
  finalDepth: number;
  close?(): Promise<void>;
}
