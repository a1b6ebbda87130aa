import crypto from 'node:crypto';
import { getAddress } from 'viem';
import { describe, expect, test } from 'vitest';
import { normalizeAddress } from './addresses.js';

describe('EVM addresses', () => {
  const lower = Array.from({ length: 5_000 }, () => `0x${crypto.randomBytes(20).toString('hex')}`);

  test('are stored EIP-55 checksummed exactly as viem spells them, from lower, upper or checksummed case', () => {
    for (const address of lower) {
      const want = getAddress(address);
      for (const spelling of [address, `0x${address.slice(2).toUpperCase()}`, want])
        expect(normalizeAddress('evm', spelling)).toEqual({ ok: true, address: want });
    }
  });

  test('in mixed case with one letter flipped are refused as a wrong checksum', () => {
    let tried = 0;
    for (const address of lower) {
      const good = getAddress(address);
      const at = [...good].findIndex((c, i) => i > 1 && /[a-fA-F]/.test(c));
      if (at < 0) continue;
      const c = good[at]!;
      const flipped =
        good.slice(0, at) + (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase()) + good.slice(at + 1);
      // Flipping the only letter can leave one case throughout, which carries no checksum.
      const body = flipped.slice(2);
      if (body === body.toLowerCase() || body === body.toUpperCase()) continue;
      tried++;
      expect(normalizeAddress('evm', flipped)).toEqual({ ok: false, reason: 'has a wrong EIP-55 checksum' });
    }
    expect(tried).toBeGreaterThan(4_000);
  });

  test('that are not 40 hex characters are refused, whatever else they hold', () => {
    for (const input of [
      '0x',
      `0x${'g'.repeat(40)}`,
      `0x${'a'.repeat(39)}`,
      `0x${'a'.repeat(41)}`,
      `${'a'.repeat(42)}`,
      '0x\u0000',
    ])
      expect(normalizeAddress('evm', input).ok).toBe(false);
  });
});
