import { createHash } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { applyPath, merkleLevels, merklePath, merkleRoot } from './merkle.js';

const h = (...parts: Buffer[]) => createHash('sha256').update(Buffer.concat(parts)).digest();
const leaves = (n: number) => Array.from({ length: n }, (_, i) => h(Buffer.from(`leaf ${i}`)));

describe('Merkle tree of a batch', () => {
  test('roots worked out by hand: one leaf is its own root; a lone node is carried up, never paired with itself', () => {
    const [a, b, c, d, e] = leaves(5) as [Buffer, Buffer, Buffer, Buffer, Buffer];
    expect(merkleRoot([a])).toEqual(a);
    expect(merkleRoot([a, b])).toEqual(h(a, b));
    expect(merkleRoot([a, b, c])).toEqual(h(h(a, b), c));
    expect(merkleRoot([a, b, c, d])).toEqual(h(h(a, b), h(c, d)));
    expect(merkleRoot([a, b, c, d, e])).toEqual(h(h(h(a, b), h(c, d)), e));
    // Duplicating the last leaf (as Bitcoin does) would give [a, b, c] the root of [a, b, c, c].
    expect(merkleRoot([a, b, c])).not.toEqual(merkleRoot([a, b, c, c]));
  });

  test.each([1, 2, 3, 7, 8, 9, 100, 1025])(
    'every path of %i leaves leads to the root, and no other leaf follows it',
    (n) => {
      const all = leaves(n);
      const levels = merkleLevels(all);
      const root = merkleRoot(all);
      expect(levels.at(-1)![0]).toEqual(root);
      for (let i = 0; i < n; i++) {
        const path = merklePath(levels, i);
        expect(path.length).toBeLessThanOrEqual(Math.ceil(Math.log2(n)));
        expect(applyPath(all[i]!, path)).toEqual(root);
        if (n > 1) expect(applyPath(all[(i + 1) % n]!, path)).not.toEqual(root);
      }
    },
  );

  test('a malformed step leads nowhere', () => {
    expect(applyPath(leaves(1)[0]!, [{ left: 'zz' }])).toBeUndefined();
    expect(() => merkleRoot([])).toThrow(RangeError);
  });
});
