/**
 * Sending a blob transaction (EIP-4844, type 3) takes the KZG commitment and proof of each blob,
 * and anvil verifies them (a wrong proof is refused: "invalid KZG proof"). For the all-zero blob
 * both are the point at infinity of BLS12-381's G1, compressed (0xc0 and 47 zero bytes): the
 * commitment to the zero polynomial, and the proof of its value, 0, at any point. c-kzg-4844
 * computes exactly these for it. So tests send that blob and need no KZG library: kzg-wasm installs
 * from the npm registry, but building its tables at load took some 40 s here.
 */
import { type ByteArray, bytesToHex, defineKzg, type Hex } from 'viem';

/** 4096 field elements of 32 bytes, all zero. */
export const ZERO_BLOB: Hex = `0x${'00'.repeat(4096 * 32)}`;

const POINT_AT_INFINITY = new Uint8Array(48);
POINT_AT_INFINITY[0] = 0xc0; // compressed-form flag and infinity flag

function zeroOnly(blob: ByteArray): void {
  if (bytesToHex(blob) !== ZERO_BLOB) throw new Error('zeroBlobKzg knows only the all-zero blob');
}

/** viem's KZG interface for ZERO_BLOB alone. */
export const zeroBlobKzg = defineKzg({
  blobToKzgCommitment(blob) {
    zeroOnly(blob);
    return POINT_AT_INFINITY;
  },
  computeBlobKzgProof(blob) {
    zeroOnly(blob);
    return POINT_AT_INFINITY;
  },
});
