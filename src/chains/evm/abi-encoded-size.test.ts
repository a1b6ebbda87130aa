/**
 * What an ABI encoding takes and yields, measured without decoding (abi-encoded-size.ts), checked
 * against viem's encoder: the least bytes of a type are those of its encoded empty value, and every
 * encoding viem (as Solidity) makes passes the decode bound, while offsets that point many values
 * at one tail do not.
 */
import {
  type AbiParameter,
  concat,
  encodeAbiParameters,
  type Hex,
  numberToHex,
  parseAbiParameter,
  size,
  stringToHex,
} from 'viem';
import { describe, expect, test } from 'vitest';
import { decodesWithinData, minimumEncodedBytes } from './abi-encoded-size.js';
import type { Param } from './abi-types.js';

const word = (n: number | bigint): Hex => numberToHex(n, { size: 32 });

/** The empty value of a type: zeros, empty strings, empty dynamic arrays, full fixed ones. */
function emptyValue(param: Param): unknown {
  const array = /^(.*)\[(\d*)\]$/.exec(param.type);
  if (array) {
    const element = { ...param, type: array[1] ?? '' };
    return array[2] === '' ? [] : Array.from({ length: Number(array[2]) }, () => emptyValue(element));
  }
  if (param.type === 'tuple') return (param.components ?? []).map(emptyValue);
  if (param.type === 'address') return '0x0000000000000000000000000000000000000000';
  if (param.type === 'bool') return false;
  if (param.type === 'string') return '';
  if (param.type === 'bytes') return '0x';
  if (param.type.startsWith('bytes')) return `0x${'00'.repeat(Number(param.type.slice(5)))}`;
  return 0n;
}

/** A deterministic pseudo-random source, so a failure can be replayed. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

/** A random type, at most `depth` levels of tuples and arrays deep. */
function randomParam(next: () => number, depth: number): Param {
  const pick = next();
  if (depth > 0 && pick < 0.2) {
    const count = 1 + Math.floor(next() * 3);
    return { type: 'tuple', components: Array.from({ length: count }, () => randomParam(next, depth - 1)) };
  }
  if (depth > 0 && pick < 0.45) {
    const element = randomParam(next, depth - 1);
    const fixed = next() < 0.5 ? String(1 + Math.floor(next() * 3)) : '';
    return { ...element, type: `${element.type}[${fixed}]` };
  }
  return {
    type: ['uint256', 'int8', 'address', 'bool', 'bytes32', 'bytes4', 'string', 'bytes'][
      Math.floor(next() * 8)
    ]!,
  };
}

/** A random value of a type: dynamic arrays of 0-3 elements, strings and bytes of 0-80 bytes. */
function randomValue(param: Param, next: () => number): unknown {
  const array = /^(.*)\[(\d*)\]$/.exec(param.type);
  if (array) {
    const element = { ...param, type: array[1] ?? '' };
    const length = array[2] === '' ? Math.floor(next() * 4) : Number(array[2]);
    return Array.from({ length }, () => randomValue(element, next));
  }
  if (param.type === 'tuple') return (param.components ?? []).map((c) => randomValue(c, next));
  if (param.type === 'string') return 'é'.repeat(Math.floor(next() * 40));
  if (param.type === 'bytes') return `0x${'ab'.repeat(Math.floor(next() * 80))}`;
  if (param.type === 'bool') return next() < 0.5;
  if (param.type === 'int8') return -5n;
  return emptyValue(param);
}

describe('minimumEncodedBytes', () => {
  test.each([
    'uint256',
    'string',
    'bytes',
    'uint8[3]',
    'uint8[]',
    'string[3]',
    'string[]',
    'bytes[2][3]',
    '(uint8 a, string b)[2]',
    '((uint8 a, bytes32 b)[2] inner, string s)',
    '((uint8 a, bytes b)[2] inner, string s)[3]',
  ])('of %s is the size of its empty value encoded by viem', (text) => {
    const param = parseAbiParameter(text) as Param;
    const encoded = encodeAbiParameters([param as AbiParameter], [emptyValue(param)]);
    expect(minimumEncodedBytes([param])).toBe(size(encoded));
  });

  test('counts what no encoder could build as a number, not an allocation', () => {
    expect(minimumEncodedBytes([{ type: 'uint256[4294967295]' }])).toBe(32 * 4_294_967_295);
    expect(minimumEncodedBytes([{ type: `uint8[${'9'.repeat(400)}]` }])).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('decodesWithinData', () => {
  test('passes every encoding viem makes: 300 random types and values', () => {
    const next = random(43);
    for (let i = 0; i < 300; i++) {
      const inputs = Array.from({ length: 1 + Math.floor(next() * 3) }, () => randomParam(next, 3));
      const values = inputs.map((input) => randomValue(input, next));
      const data = encodeAbiParameters(inputs as AbiParameter[], values);
      expect(decodesWithinData(inputs, data), JSON.stringify(inputs)).toBe(true);
    }
  });

  test('leaves indexed inputs out: they are topics, not data', () => {
    const inputs: Param[] = [{ type: 'string', indexed: true }, { type: 'uint256' }];
    expect(decodesWithinData(inputs, word(7))).toBe(true);
  });

  const longString = (bytes: number): Hex[] => [
    word(bytes),
    concat([stringToHex('z'.repeat(bytes)), `0x${'00'.repeat((32 - (bytes % 32)) % 32)}`]),
  ];

  test('refuses strings that share one tail: 30 offsets to one 20,000-byte string', () => {
    const copies = 30;
    const data = concat([
      word(32),
      word(copies),
      ...Array.from({ length: copies }, () => word(32 * copies)),
      ...longString(20_000),
    ]);
    expect(decodesWithinData([{ type: 'string[]' }], data)).toBe(false);
    // The same with each string its own: what a compiler would emit for 2 of them.
    const honest = encodeAbiParameters([{ type: 'string[]' }], [['z'.repeat(20_000), 'z'.repeat(20_000)]]);
    expect(decodesWithinData([{ type: 'string[]' }], honest)).toBe(true);
  });

  test('refuses arrays that share one tail: 100 inner arrays at one of 1,000 words', () => {
    const inner = [word(1000), ...Array.from({ length: 1000 }, (_, i) => word(i))];
    const data = concat([
      word(32),
      word(100),
      ...Array.from({ length: 100 }, () => word(32 * 100)),
      ...inner,
    ]);
    expect(decodesWithinData([{ type: 'uint256[][]' }], data)).toBe(false);
  });

  test('refuses a tuple member, two arguments or a fixed-size array pointing at one tail', () => {
    const tail = longString(4_000);
    // Two string arguments, both at the one tail.
    expect(
      decodesWithinData(
        [{ type: 'string' }, { type: 'string' }, { type: 'string' }],
        concat([word(96), word(96), word(96), ...tail]),
      ),
    ).toBe(false);
    // bytes[3]: three offsets, relative to the array, to one tail.
    expect(
      decodesWithinData([{ type: 'bytes[3]' }], concat([word(32), word(96), word(96), word(96), ...tail])),
    ).toBe(false);
  });

  test('refuses offsets and lengths past the data, and words too large for a position', () => {
    expect(decodesWithinData([{ type: 'string' }], concat([word(64)]))).toBe(false);
    expect(decodesWithinData([{ type: 'string' }], concat([word(32), word(1_000)]))).toBe(false);
    expect(decodesWithinData([{ type: 'uint8[]' }], concat([word(32), word(2n ** 200n)]))).toBe(false);
    expect(decodesWithinData([{ type: 'uint8[]' }], concat([word(32), word(5)]))).toBe(false);
  });

  test('counts a claimed length of static elements at once: 2^40 words are refused without a walk', () => {
    expect(
      decodesWithinData(
        [{ type: 'uint256[]' }, { type: 'string' }],
        concat([word(64), word(128), word(2 ** 40), word(0), word(0)]),
      ),
    ).toBe(false);
  });
});
