// The interface each chain family implements for anchoring lives in src/chains/anchor-chain.ts.
export type { AnchorChain, AnchorInclusion, AnchorKind, SignedAnchorTx } from '../chains/anchor-chain.js';
