import fs from 'node:fs';
import { TronWeb } from 'tronweb';
import { describe, expect, test } from 'vitest';
import { normalizeAddress } from '../addresses.js';
import { tronFromHex, tronToHex } from './address.js';

interface Vector {
  base58: string;
  hex?: string;
  valid: boolean;
}

const vectors = (
  JSON.parse(
    fs.readFileSync(
      new URL('../../../test/fixtures/chains/tron/addresses/tron-address-vectors.json', import.meta.url),
      'utf8',
    ),
  ) as { vectors: Vector[] }
).vectors;

describe('Tron addresses, on real vectors (gotron-sdk, tronpy, Blockbook, recorded data)', () => {
  const valid = vectors.filter((v) => v.valid && v.hex);
  const invalid = vectors.filter((v) => !v.valid);

  test('there are vectors of both kinds', () => {
    expect(valid.length).toBeGreaterThanOrEqual(4);
    expect(invalid.length).toBeGreaterThanOrEqual(1);
  });

  test.each(valid)('$base58 is kept as written, and its hex form becomes it', ({ base58, hex }) => {
    expect(TronWeb.isAddress(base58)).toBe(true);
    expect(normalizeAddress('tron', base58)).toEqual({ ok: true, address: base58 });
    expect(normalizeAddress('tron', hex!)).toEqual({ ok: true, address: TronWeb.address.fromHex(hex!) });
    expect(normalizeAddress('tron', hex!.toUpperCase())).toEqual({
      ok: true,
      address: base58,
    });
    expect(tronToHex(base58)).toBe(TronWeb.address.toHex(base58).toLowerCase());
    expect(tronFromHex(hex!.slice(2))).toBe(base58);
  });

  test.each(invalid)('$base58 is refused with a reason', ({ base58 }) => {
    expect(TronWeb.isAddress(base58)).toBe(false);
    const check = normalizeAddress('tron', base58);
    expect(check.ok).toBe(false);
  });

  test('other chains’ addresses and look-alikes are refused', () => {
    for (const input of [
      '0xa614f803b6fd780986a42c78ec9c7f77e6ded13c', // EVM form of USDT's contract
      '1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2', // Bitcoin P2PKH: base58check, version 0
      '42a614f803b6fd780986a42c78ec9c7f77e6ded13c', // hex with another version byte
      '41a614f803b6fd780986a42c78ec9c7f77e6ded1', // hex one byte short
      'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6', // one character short
    ]) {
      expect(normalizeAddress('tron', input).ok, input).toBe(false);
    }
  });
});
