/**
 * The key encoding of the watch tables (watch-tables.ts): how an address or a subscription id
 * becomes the bytes its key table holds, and how those bytes read back as text.
 *
 * An EVM address `0x` + 40 hex digits is its 20 bytes, matched whatever its case, its case kept
 * apart in 40 bits (`caseLow`, `caseHigh`); every other address is its UTF-8 bytes, on EVM
 * networks lower-cased first. A lower-case UUID is its 16 bytes, any other id its UTF-8.
 */

/** First byte of a key: the bytes that follow are decoded (hex, UUID) or the string's UTF-8. */
const DECODED = 0;
const RAW = 1;

const HEX_VALUE = new Int8Array(128).fill(-1);
for (let c = 0; c < 10; c++) HEX_VALUE[48 + c] = c;
for (let c = 0; c < 6; c++) HEX_VALUE[97 + c] = HEX_VALUE[65 + c] = 10 + c;
const HEX_DIGITS = '0123456789abcdef';

/**
 * The key last encoded, one per set of watch tables: its bytes (`bytes`, replaced by a longer
 * array when a key does not fit, so read it where it is used) and an EVM address's case.
 */
export interface KeyScratch {
  bytes: Uint8Array;
  caseLow: number;
  caseHigh: number;
}

export function createKeyScratch(): KeyScratch {
  return { bytes: new Uint8Array(256), caseLow: 0, caseHigh: 0 };
}

/**
 * Writes the key of `text[start..end)` into `key.bytes` and returns its length; an EVM address's
 * case goes to `key.caseLow`/`key.caseHigh`. Taking a range lets `load` parse addresses out of one
 * long string without a string per address.
 */
export function addressKey(key: KeyScratch, text: string, start: number, end: number, evm: boolean): number {
  if (
    evm &&
    end - start === 42 &&
    text.charCodeAt(start) === 48 &&
    (text.charCodeAt(start + 1) | 32) === 120
  ) {
    let low = 0;
    let high = 0;
    let ok = true;
    for (let i = 0; i < 20; i++) {
      const a = text.charCodeAt(start + 2 + 2 * i);
      const b = text.charCodeAt(start + 3 + 2 * i);
      const hi = a < 128 ? HEX_VALUE[a]! : -1;
      const lo = b < 128 ? HEX_VALUE[b]! : -1;
      if (hi < 0 || lo < 0) {
        ok = false;
        break;
      }
      key.bytes[1 + i] = (hi << 4) | lo;
      // Upper-case letters are 65-70; digits and lower case have bit 32 set.
      const upperA = (a & 32) === 0 ? 1 : 0;
      const upperB = (b & 32) === 0 ? 1 : 0;
      if (i < 16) low |= (upperA | (upperB << 1)) << (2 * i);
      else high |= (upperA | (upperB << 1)) << (2 * (i - 16));
    }
    if (ok) {
      key.bytes[0] = DECODED;
      key.caseLow = low >>> 0;
      key.caseHigh = high;
      return 21;
    }
  }
  key.caseLow = 0;
  key.caseHigh = 0;
  const value = start === 0 && end === text.length ? text : text.slice(start, end);
  return rawKey(key, evm ? value.toLowerCase() : value);
}

function rawKey(key: KeyScratch, value: string): number {
  if (key.bytes.length < 1 + value.length * 3) key.bytes = new Uint8Array(1 + value.length * 3);
  key.bytes[0] = RAW;
  let length = 1;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c >= 128) return 1 + new TextEncoder().encodeInto(value, key.bytes.subarray(1)).written;
    key.bytes[length++] = c;
  }
  return length;
}

/** An address as stored: `key` its key's bytes, `low`/`high` the case its watch keeps (EVM). */
export function addressText(key: Uint8Array, low: number, high: number): string {
  if (key[0] === RAW) return Buffer.from(key.buffer, key.byteOffset + 1, key.length - 1).toString('utf8');
  let out = '0x';
  for (let d = 0; d < 40; d++) {
    const byte = key[1 + (d >> 1)]!;
    const digit = HEX_DIGITS[(d & 1) === 0 ? byte >> 4 : byte & 15]!;
    const upper = d < 32 ? (low >>> d) & 1 : (high >>> (d - 32)) & 1;
    out += upper ? digit.toUpperCase() : digit;
  }
  return out;
}

/** A canonical (lower-case) UUID is its 16 bytes; any other id its UTF-8. */
export function idKey(key: KeyScratch, id: string): number {
  if (id.length === 36 && id.charCodeAt(8) === 45 && id.charCodeAt(13) === 45) {
    let length = 1;
    for (let i = 0; i < 36 && length <= 16; ) {
      if (i === 8 || i === 13 || i === 18 || i === 23) {
        if (id.charCodeAt(i) !== 45) break;
        i++;
        continue;
      }
      const a = id.charCodeAt(i);
      const b = id.charCodeAt(i + 1);
      const hi = a < 128 && (a < 65 || a > 70) ? HEX_VALUE[a]! : -1;
      const lo = b < 128 && (b < 65 || b > 70) ? HEX_VALUE[b]! : -1;
      if (hi < 0 || lo < 0) break;
      key.bytes[length++] = (hi << 4) | lo;
      i += 2;
    }
    if (length === 17) {
      key.bytes[0] = DECODED;
      return 17;
    }
  }
  return rawKey(key, id);
}

/** A subscription id as given, from its key's bytes. */
export function idText(key: Uint8Array): string {
  if (key[0] === RAW) return Buffer.from(key.buffer, key.byteOffset + 1, key.length - 1).toString('utf8');
  const hex = Buffer.from(key.buffer, key.byteOffset + 1, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
