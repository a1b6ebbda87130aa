/**
 * The Merkle tree of a batch, in the shape Chainpoint v2 receipts use: a parent is SHA-256 of its
 * left child's 32 bytes followed by its right child's; a node without a sibling at the end of a
 * level is carried up unchanged (never paired with itself, which would let two different leaf lists
 * share a root).
 */
import { createHash } from 'node:crypto';

/** One step of a path from a leaf to the root: the sibling's hash and the side it is on. */
export type ProofStep = { left: string } | { right: string };

export function sha256(...parts: Uint8Array[]): Buffer {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return hash.digest();
}

function parent(left: Buffer, right: Buffer): Buffer {
  return sha256(left, right);
}

function nextLevel(level: Buffer[]): Buffer[] {
  const up: Buffer[] = [];
  for (let i = 0; i < level.length; i += 2) {
    const right = level[i + 1];
    up.push(right === undefined ? level[i]! : parent(level[i]!, right));
  }
  return up;
}

/** The root of leaves (32-byte hashes, in their order in the batch). */
export function merkleRoot(leaves: Buffer[]): Buffer {
  if (leaves.length === 0) throw new RangeError('a Merkle tree needs at least one leaf');
  let level = leaves;
  while (level.length > 1) level = nextLevel(level);
  return level[0]!;
}

/** Every level of the tree, leaves first, root last: built once, it answers every leaf's path. */
export function merkleLevels(leaves: Buffer[]): Buffer[][] {
  if (leaves.length === 0) throw new RangeError('a Merkle tree needs at least one leaf');
  const levels = [leaves];
  while (levels.at(-1)!.length > 1) levels.push(nextLevel(levels.at(-1)!));
  return levels;
}

/** The path from the leaf at `position` to the root. */
export function merklePath(levels: Buffer[][], position: number): ProofStep[] {
  const path: ProofStep[] = [];
  let index = position;
  for (const level of levels.slice(0, -1)) {
    const sibling = index ^ 1;
    if (sibling < level.length) {
      const hex = level[sibling]!.toString('hex');
      path.push(sibling < index ? { left: hex } : { right: hex });
    }
    index >>= 1;
  }
  return path;
}

/** Where a path leads from a leaf: the root it proves, or undefined for a malformed step. */
export function applyPath(leaf: Buffer, path: ProofStep[]): Buffer | undefined {
  let node = leaf;
  for (const step of path) {
    const hex = 'left' in step ? step.left : step.right;
    if (typeof hex !== 'string' || !/^[0-9a-f]{64}$/i.test(hex)) return undefined;
    const sibling = Buffer.from(hex, 'hex');
    node = 'left' in step ? parent(sibling, node) : parent(node, sibling);
  }
  return node;
}
