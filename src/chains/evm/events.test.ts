/**
 * Contract event subscriptions: parsing what a user follows, compiling the filter, matching and
 * decoding logs. Expected values are computed here independently of the module: logs are encoded
 * with viem's encoders from values the test chose, real logs are read word by word, and indexed
 * composite values are checked against logs that solc-compiled code emitted (EventZoo.sol).
 */
import fs from 'node:fs';
import path from 'node:path';
import {
  type AbiEvent,
  type AbiParameter,
  concat,
  encodeAbiParameters,
  encodeEventTopics,
  getAddress,
  type Hex,
  keccak256,
  numberToHex,
  pad,
  parseAbiItem,
  stringToHex,
  toBytes,
} from 'viem';
import { describe, expect, test } from 'vitest';
import type { FieldError } from '../../errors.js';
import { decodeFollowedLog } from './event-decode.js';
import { MAX_FILTER_VALUES, passesFilter } from './event-filter.js';
import type { FollowedEvent, LogLike } from './followed-event.js';
import { parseFollowedEvent } from './parse-followed-event.js';

const FIXTURES = path.join(import.meta.dirname, '../../../test/fixtures/chains/ethereum');

const ERC20_TRANSFER = 'event Transfer(address indexed from, address indexed to, uint256 value)';
const ERC721_TRANSFER = 'event Transfer(address indexed from, address indexed to, uint256 indexed tokenId)';
const ERC20_APPROVAL = 'event Approval(address indexed owner, address indexed spender, uint256 value)';
const UNISWAP_V3_SWAP =
  'event Swap(address indexed sender, address indexed recipient, int256 amount0, int256 amount1, uint160 sqrtPriceX96, uint128 liquidity, int24 tick)';
const TRANSFER_TOPIC0 = keccak256(toBytes('Transfer(address,address,uint256)'));

const USDT = '0xdAC17F958D2ee523a2206206994597C13D831ec7';
const ALICE = '0x901c7c311d39e0b26257219765e71e8db3107a81';
const BOB = '0xa82f91562e1cef9dec93a4ad328d01ea7827910a';
const U256_MAX = 2n ** 256n - 1n;
const I256_MIN = -(2n ** 255n);

// --- helpers -----------------------------------------------------------------------------------

function followed(event: unknown, filter?: unknown): FollowedEvent {
  const result = parseFollowedEvent(event, filter);
  if ('errors' in result) throw new Error(`unexpected errors: ${JSON.stringify(result.errors)}`);
  return result.event;
}

function errorsOf(event: unknown, filter?: unknown): FieldError[] {
  const result = parseFollowedEvent(event, filter);
  if ('event' in result) throw new Error(`expected errors, got ${JSON.stringify(result.event)}`);
  return result.errors;
}

function pointers(errors: FieldError[]): (string | undefined)[] {
  return errors.map((error) => error.pointer);
}

/** The 32-byte topic of a static value, as a node stores it. */
function word(value: bigint): Hex {
  return numberToHex(BigInt.asUintN(256, value), { size: 32 });
}

function addressTopic(address: string): Hex {
  return pad(address.toLowerCase() as Hex, { size: 32 });
}

/**
 * A log of `signature` with these argument values, encoded by viem independently of the module:
 * topics by encodeEventTopics (static, string and bytes indexed values), data by encodeAbiParameters.
 */
function encodeLog(signature: string, args: readonly unknown[], anonymous = false): LogLike {
  const parsed = parseAbiItem(signature) as AbiEvent;
  const abi: AbiEvent = anonymous ? { ...parsed, anonymous: true } : parsed;
  const indexedArgs = abi.inputs.flatMap((input, i) => (input.indexed ? [args[i]] : []));
  const dataInputs = abi.inputs.filter((input) => !input.indexed) as readonly AbiParameter[];
  const dataArgs = abi.inputs.flatMap((input, i) => (input.indexed ? [] : [args[i]]));
  const topics = encodeEventTopics({ abi: [abi], args: indexedArgs } as never) as Hex[];
  const data = dataInputs.length > 0 ? encodeAbiParameters(dataInputs, dataArgs as readonly unknown[]) : '0x';
  return { address: USDT, topics, data };
}

function upperHex(hex: Hex): Hex {
  return `0x${hex.slice(2).toUpperCase()}`;
}

/** A two's-complement 256-bit word read as a signed integer (int256, and int24 sign-extended). */
function signedWord(hex: string): bigint {
  return BigInt.asIntN(256, BigInt(`0x${hex}`));
}

/** The i-th 32-byte word of a log's data, as hex digits. */
function dataWord(data: Hex, i: number): string {
  return data.slice(2 + 64 * i, 2 + 64 * (i + 1));
}

function topicAddress(topic: Hex): string {
  return getAddress(`0x${topic.slice(26)}`);
}

function readJson<T>(...segments: string[]): T {
  return JSON.parse(fs.readFileSync(path.join(FIXTURES, ...segments), 'utf8')) as T;
}

interface RpcLog {
  address: Hex;
  topics: Hex[];
  data: Hex;
}

// --- parsing the event -------------------------------------------------------------------------

describe('parseFollowedEvent: the event', () => {
  test('parses a human-readable signature into topic0, canonical signature and topic count', () => {
    const event = followed(ERC20_TRANSFER);
    expect(event.topic0).toBe(TRANSFER_TOPIC0);
    expect(event.topic0).toBe('0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef');
    expect(event.signature).toBe('Transfer(address,address,uint256)');
    expect(event.topicCount).toBe(3);
    expect(event.filter).toEqual([null, null]);
    expect(event.abi?.inputs.map((input) => input.name)).toEqual(['from', 'to', 'value']);
  });

  test('accepts the signature without "event", with spaces, line breaks and a trailing semicolon', () => {
    const reference = followed(ERC20_TRANSFER);
    for (const variant of [
      'Transfer(address indexed from, address indexed to, uint256 value)',
      `  ${ERC20_TRANSFER}\n`,
      'event Transfer(\n  address indexed from,\n  address  indexed to ,\n  uint256 value\n);',
      'event Transfer (address indexed from,address indexed to,uint256 value)',
    ]) {
      expect(followed(variant)).toEqual(reference);
    }
  });

  test('normalises uint to uint256, as the canonical signature requires', () => {
    expect(followed('event Deposit(address indexed who, uint amount)').signature).toBe(
      'Deposit(address,uint256)',
    );
  });

  test('parses a JSON ABI fragment, as a compiler emits it, to the same event as its human-readable form', () => {
    const fragment = {
      anonymous: false,
      inputs: [
        { indexed: true, internalType: 'address', name: 'from', type: 'address' },
        { indexed: true, internalType: 'address', name: 'to', type: 'address' },
        { indexed: false, internalType: 'uint256', name: 'value', type: 'uint256' },
      ],
      name: 'Transfer',
      type: 'event',
    };
    const event = followed(fragment);
    expect(event).toEqual(followed(ERC20_TRANSFER));
    expect(event.topic0).toBe(TRANSFER_TOPIC0);
  });

  test('parses tuples and nested tuples, in both forms, to the same canonical signature', () => {
    const signature =
      'event Order((uint256 id, (address who, uint8[] levels) inner, string label) order, uint256 n)';
    const event = followed(signature);
    expect(event.signature).toBe('Order((uint256,(address,uint8[]),string),uint256)');
    expect(event.topic0).toBe(keccak256(toBytes('Order((uint256,(address,uint8[]),string),uint256)')));
    const fragment = {
      type: 'event',
      name: 'Order',
      anonymous: false,
      inputs: [
        {
          name: 'order',
          type: 'tuple',
          internalType: 'struct Book.Order',
          indexed: false,
          components: [
            { name: 'id', type: 'uint256' },
            {
              name: 'inner',
              type: 'tuple',
              components: [
                { name: 'who', type: 'address' },
                { name: 'levels', type: 'uint8[]' },
              ],
            },
            { name: 'label', type: 'string' },
          ],
        },
        { name: 'n', type: 'uint256', indexed: false },
      ],
    };
    expect(followed(fragment)).toEqual(event);
    expect(
      followed(
        'event Order(tuple(uint256 id, tuple(address who, uint8[] levels) inner, string label) order, uint256 n)',
      ),
    ).toEqual(event);
  });

  test('parses fixed and dynamic arrays, counting indexed ones as topics', () => {
    const event = followed(
      'event Batch(uint256[3] amounts, address[] indexed holders, (uint256 a, bool b)[2][] grid)',
    );
    expect(event.signature).toBe('Batch(uint256[3],address[],(uint256,bool)[2][])');
    expect(event.topicCount).toBe(2);
  });

  test('parses an anonymous event: no topic0, and only its indexed inputs as topics', () => {
    const event = followed('event Tagged(bytes32 indexed tag, uint256 indexed n, string note) anonymous');
    expect(event.topic0).toBeNull();
    expect(event.signature).toBe('Tagged(bytes32,uint256,string)');
    expect(event.topicCount).toBe(2);
    expect(event.abi?.anonymous).toBe(true);
    const fragment = {
      type: 'event',
      name: 'Tagged',
      anonymous: true,
      inputs: [
        { name: 'tag', type: 'bytes32', indexed: true },
        { name: 'n', type: 'uint256', indexed: true },
        { name: 'note', type: 'string', indexed: false },
      ],
    };
    expect(followed(fragment)).toEqual(event);
  });

  test('allows four indexed inputs on an anonymous event, three otherwise', () => {
    expect(
      followed('event Four(uint8 indexed a, uint8 indexed b, uint8 indexed c, uint8 indexed d) anonymous')
        .topicCount,
    ).toBe(4);
    const errors = errorsOf('event Four(uint8 indexed a, uint8 indexed b, uint8 indexed c, uint8 indexed d)');
    expect(pointers(errors)).toEqual(['#/attr/event']);
    expect(errors[0]?.detail).toMatch(/4 indexed arguments.*at most 3/);
  });

  test('takes a bare topic0 in any case, stores it lower-case and decodes nothing', () => {
    const event = followed(upperHex(TRANSFER_TOPIC0));
    expect(event).toEqual({
      abi: null,
      topic0: TRANSFER_TOPIC0,
      signature: null,
      topicCount: null,
      filter: [],
    });
    expect(followed(`  ${TRANSFER_TOPIC0} `, {}).topic0).toBe(TRANSFER_TOPIC0);
  });

  test('keeps a parsed event usable after a JSON round trip (it is stored in a jsonb column)', () => {
    const event = followed(ERC20_TRANSFER, { to: ALICE });
    const stored = JSON.parse(JSON.stringify(event)) as FollowedEvent;
    const log = encodeLog(ERC20_TRANSFER, [BOB, ALICE, 5n]);
    expect(passesFilter(stored, log.topics)).toBe(true);
    expect(decodeFollowedLog(stored, log)).toEqual(decodeFollowedLog(event, log));
  });
});

describe('parseFollowedEvent: an invalid event', () => {
  test.each([
    [
      'an unparsable signature',
      'event Transfer(address indexed from, address to',
      /not a valid event signature/,
    ],
    [
      'a function',
      'function transfer(address to, uint256 amount) returns (bool)',
      /describes a function, not an event/,
    ],
    ['an error', 'error InsufficientBalance(uint256 available)', /describes an error, not an event/],
    ['an unknown type uint7', 'event Foo(uint7 a)', /uint7.*not a valid ABI type/],
    ['a misspelt type', 'event Foo(addres indexed a)', /addres.*not a valid ABI type/],
    ['duplicate argument names', 'event Foo(uint256 a, address a)', /"a".*unique/],
    ['a function-typed argument', 'event Foo(function f)', /function-typed/],
    ['a keyword as a name', 'event Foo(uint256 default)', /protected Solidity keyword/],
    ['a short hex string', '0x1234', /looks like a topic0 but has 4 hex digits/],
    ['an empty string', '', /not a valid event signature/],
  ])('rejects %s at #/attr/event', (_what, event, detail) => {
    const errors = errorsOf(event);
    expect(pointers(errors)).toEqual(['#/attr/event']);
    expect(errors[0]?.detail).toMatch(detail);
  });

  test.each([
    ['a number', 42, /got number 42/],
    ['null', null, /got null/],
    ['a boolean', true, /got boolean true/],
    ['nothing', undefined, /got nothing/],
    ['a whole ABI array', [{ type: 'event', name: 'A', inputs: [] }], /not a whole ABI/],
  ])('rejects %s at #/attr/event', (_what, event, detail) => {
    const errors = errorsOf(event);
    expect(pointers(errors)).toEqual(['#/attr/event']);
    expect(errors[0]?.detail).toMatch(detail);
  });

  test('rejects a signature or a fragment longer than 4096 characters', () => {
    const long = `event Long(${Array.from({ length: 400 }, (_, i) => `uint256 a${i}`).join(', ')})`;
    expect(long.length).toBeGreaterThan(4096);
    expect(errorsOf(long)[0]?.detail).toMatch(/too long/);
    const fragment = {
      type: 'event',
      name: 'Long',
      inputs: Array.from({ length: 200 }, (_, i) => ({ name: `a${i}`, type: 'uint256' })),
    };
    expect(errorsOf(fragment)).toEqual([
      { pointer: '#/attr/event', detail: expect.stringMatching(/too long/) },
    ]);
  });

  test('locates each problem of a fragment at its own pointer, all at once', () => {
    const errors = errorsOf({
      type: 'function',
      name: 'transfer',
      inputs: [
        { name: 'to', type: 'address' },
        { name: 'amount', type: 'uint7' },
        { name: 'pair', type: 'tuple', components: [{ name: 'x', type: 'addres' }] },
      ],
      outputs: [],
    });
    expect(errors).toEqual([
      { pointer: '#/attr/event/outputs', detail: expect.stringMatching(/not a member/) },
      { pointer: '#/attr/event/type', detail: expect.stringMatching(/must be "event".*function/) },
      {
        pointer: '#/attr/event/inputs/1/type',
        detail: expect.stringMatching(/"uint7".*not a valid ABI type/),
      },
      { pointer: '#/attr/event/inputs/2/components/0/type', detail: expect.stringMatching(/"addres"/) },
    ]);
  });

  test('rejects a fragment with too many indexed inputs, duplicate names or a bad shape', () => {
    const indexed = (name: string) => ({ name, type: 'uint256', indexed: true });
    expect(errorsOf({ type: 'event', name: 'E', inputs: ['a', 'b', 'c', 'd'].map(indexed) })).toEqual([
      { pointer: '#/attr/event/inputs', detail: expect.stringMatching(/4 indexed.*at most 3/) },
    ]);
    expect(
      errorsOf({ type: 'event', name: 'E', inputs: [indexed('a'), { name: 'a', type: 'bool' }] }),
    ).toEqual([{ pointer: '#/attr/event/inputs/1/name', detail: expect.stringMatching(/"a".*unique/) }]);
    const nested = {
      type: 'event',
      name: 'E',
      inputs: [
        {
          name: 't',
          type: 'tuple',
          components: [
            { name: 'x', type: 'bool' },
            { name: 'x', type: 'bool' },
          ],
        },
      ],
    };
    expect(pointers(errorsOf(nested))).toEqual(['#/attr/event/inputs/0/components/1/name']);
    expect(pointers(errorsOf({ type: 'event', name: '1bad', inputs: 'none' }))).toEqual([
      '#/attr/event/name',
      '#/attr/event/inputs',
    ]);
    expect(pointers(errorsOf({ type: 'event', name: 'E', inputs: [{ name: 't', type: 'tuple' }] }))).toEqual([
      '#/attr/event/inputs/0/components',
    ]);
    expect(pointers(errorsOf({ type: 'event', name: 'E', inputs: [{ type: 'uint256 x' }, 7] }))).toEqual([
      '#/attr/event/inputs/0/type',
      '#/attr/event/inputs/1',
    ]);
  });

  test('rejects a positional name that an unnamed input would also take', () => {
    expect(errorsOf('event E(uint256, uint256 arg0)')[0]?.detail).toMatch(/"arg0".*unique/);
  });
});

// --- the filter: errors ------------------------------------------------------------------------

describe('parseFollowedEvent: an invalid filter', () => {
  const EVENT =
    'event Mixed(address indexed who, uint256 indexed amount, string indexed label, uint256 plain)';
  const filterError = (filter: unknown, event: string = EVENT) => errorsOf(event, filter);

  test('rejects an unknown argument, listing the arguments (names are case-sensitive)', () => {
    expect(filterError({ From: ALICE }, ERC20_TRANSFER)).toEqual([
      {
        pointer: '#/attr/filter/From',
        detail: 'is not an argument of Transfer(address,address,uint256); its arguments are from, to, value',
      },
    ]);
  });

  test('rejects a non-indexed argument, saying only indexed ones can be filtered', () => {
    const [error] = filterError({ value: '1' }, ERC20_TRANSFER);
    expect(error?.pointer).toBe('#/attr/filter/value');
    expect(error?.detail).toMatch(/only indexed arguments can be filtered.*from, to/);
  });

  test.each([
    ['a bad address', { who: '0x1234' }, '#/attr/filter/who', /must be an address/],
    [
      'an address with a wrong checksum',
      { who: '0xdac17F958D2ee523a2206206994597C13D831ec7' },
      '#/attr/filter/who',
      /checksum/,
    ],
    ['"1.5" for uint256', { amount: '1.5' }, '#/attr/filter/amount', /integer from 0 to 2\^256-1/],
    ['2^256 for uint256', { amount: (2n ** 256n).toString() }, '#/attr/filter/amount', /out of range/],
    ['a negative uint256', { amount: '-1' }, '#/attr/filter/amount', /out of range/],
    ['a JSON number past 2^53', { amount: 2 ** 60 }, '#/attr/filter/amount', /loses precision/],
    ['true for a string', { label: true }, '#/attr/filter/label', /must be a string; got boolean true/],
    ['an empty list', { who: [] }, '#/attr/filter/who', /empty list/],
  ])('rejects %s', (_what, filter, pointer, detail) => {
    const errors = filterError(filter);
    expect(pointers(errors)).toEqual([pointer]);
    expect(errors[0]?.detail).toMatch(detail);
  });

  test('checks integers against the range of their width', () => {
    expect(pointers(filterError({ n: '-1' }, 'event E(uint8 indexed n)'))).toEqual(['#/attr/filter/n']);
    expect(pointers(filterError({ n: '256' }, 'event E(uint8 indexed n)'))).toEqual(['#/attr/filter/n']);
    expect(followed('event E(uint8 indexed n)', { n: '255' }).filter).toEqual([[word(255n)]]);
    expect(errorsOf('event E(int256 indexed n)', { n: (2n ** 255n).toString() })[0]?.detail).toMatch(
      /out of range.*-2\^255 to 2\^255-1/,
    );
    expect(followed('event E(int256 indexed n)', { n: I256_MIN.toString() }).filter).toEqual([
      [word(I256_MIN)],
    ]);
    expect(pointers(filterError({ n: '-129' }, 'event E(int8 indexed n)'))).toEqual(['#/attr/filter/n']);
  });

  test('rejects a bytes32 of 31 bytes and odd hex for bytes', () => {
    const errors = errorsOf('event E(bytes32 indexed h, bytes indexed b)', {
      h: `0x${'ab'.repeat(31)}`,
      b: '0xabc',
    });
    expect(errors).toEqual([
      {
        pointer: '#/attr/filter/h',
        detail: expect.stringMatching(/64 hex digits \(bytes32\); got 31 bytes/),
      },
      { pointer: '#/attr/filter/b', detail: expect.stringMatching(/even number of hex digits/) },
    ]);
  });

  test('locates a wrong list element by its index, and reports every problem at once', () => {
    const errors = filterError({ who: [ALICE, 'nope', BOB, 12], amount: '1.5', missing: 1 });
    expect(pointers(errors)).toEqual([
      '#/attr/filter/who/1',
      '#/attr/filter/who/3',
      '#/attr/filter/amount',
      '#/attr/filter/missing',
    ]);
  });

  test(`rejects a list of more than ${MAX_FILTER_VALUES} values and takes exactly ${MAX_FILTER_VALUES}`, () => {
    const values = (n: number) => Array.from({ length: n }, (_, i) => String(i));
    expect(filterError({ amount: values(MAX_FILTER_VALUES + 1) })).toEqual([
      { pointer: '#/attr/filter/amount', detail: expect.stringMatching(/1001 values; at most 1000/) },
    ]);
    expect(followed(EVENT, { amount: values(MAX_FILTER_VALUES) }).filter[1]).toHaveLength(MAX_FILTER_VALUES);
  });

  test('rejects a filter that is not an object', () => {
    for (const filter of ['who', [ALICE], null, 3]) {
      expect(pointers(filterError(filter))).toEqual(['#/attr/filter']);
    }
  });

  test('rejects a filter on a bare topic0, which has no argument names', () => {
    const errors = errorsOf(TRANSFER_TOPIC0, { from: ALICE });
    expect(pointers(errors)).toEqual(['#/attr/filter']);
    expect(errors[0]?.detail).toMatch(/bare topic0/);
  });

  test('reports both an invalid event and a filter that is not an object', () => {
    expect(pointers(errorsOf('event Foo(uint7 a)', 'x'))).toEqual(['#/attr/event', '#/attr/filter']);
  });

  test('escapes user-given names in pointers (RFC 6901: ~ as ~0, / as ~1)', () => {
    expect(pointers(filterError({ 'a/b': 1, 'c~d': 2 }))).toEqual([
      '#/attr/filter/a~1b',
      '#/attr/filter/c~0d',
    ]);
  });

  test('points into array and tuple values', () => {
    const event = 'event E(uint8[] indexed levels, (address who, uint8 n) indexed pair)';
    expect(pointers(errorsOf(event, { levels: [1, 300], pair: { who: ALICE, n: -1 } }))).toEqual([
      '#/attr/filter/levels/1',
      '#/attr/filter/pair/n',
    ]);
    expect(pointers(errorsOf(event, { pair: { who: ALICE, extra: 1 } }))).toEqual([
      '#/attr/filter/pair/extra',
      '#/attr/filter/pair',
    ]);
    expect(pointers(errorsOf('event E(uint8[2] indexed p)', { p: [1, 2, 3] }))).toEqual(['#/attr/filter/p']);
  });
});

// --- the filter: compiled topics ---------------------------------------------------------------

describe('parseFollowedEvent: the compiled filter', () => {
  test('compiles an address in any case to its padded topic, one slot per indexed input', () => {
    const event = followed(ERC20_TRANSFER, { to: USDT.toUpperCase().replace('0X', '0x') });
    expect(event.filter).toEqual([null, [addressTopic(USDT)]]);
    expect(followed(ERC20_TRANSFER, { from: USDT.toLowerCase() }).filter).toEqual([
      [addressTopic(USDT)],
      null,
    ]);
    expect(followed(ERC20_TRANSFER, { from: USDT }).filter).toEqual([[addressTopic(USDT)], null]);
  });

  test('compiles integers, booleans and fixed bytes to their 32-byte words', () => {
    const event = followed('event E(uint256 indexed a, int256 indexed b, bool indexed c) anonymous', {
      a: U256_MAX.toString(),
      b: ['-1', 5],
      c: true,
    });
    expect(event.filter).toEqual([[word(U256_MAX)], [`0x${'f'.repeat(64)}`, word(5n)], [word(1n)]]);
    const hash = keccak256(toBytes('zoo'));
    expect(
      followed('event H(bytes32 indexed h, bytes4 indexed sel)', { h: upperHex(hash), sel: '0xA9059CBB' })
        .filter,
    ).toEqual([[hash], [`0xa9059cbb${'0'.repeat(56)}`]]);
  });

  test('compiles an indexed string or bytes to the keccak256 of its raw bytes, as Solidity does', () => {
    const text = 'héllo 🦊 世界';
    const event = followed('event S(string indexed s, bytes indexed b)', { s: text, b: ['0xC0FFEE', '0x'] });
    expect(event.filter).toEqual([[keccak256(toBytes(text))], [keccak256('0xc0ffee'), keccak256('0x')]]);
  });

  test('compiles a list to all its values, once each', () => {
    const event = followed(ERC20_TRANSFER, { from: [ALICE, BOB, ALICE.toUpperCase().replace('0X', '0x')] });
    expect(event.filter).toEqual([[addressTopic(ALICE), addressTopic(BOB)], null]);
  });

  test('reads a JSON array as one value of an array-typed argument, and an array of arrays as a list', () => {
    const hashOf = (...values: bigint[]) => keccak256(concat(values.map(word)));
    const event = 'event E(uint256[] indexed nums)';
    expect(followed(event, { nums: [1, 2] }).filter).toEqual([[hashOf(1n, 2n)]]);
    expect(followed(event, { nums: [[1, 2], ['3']] }).filter).toEqual([[hashOf(1n, 2n), hashOf(3n)]]);
    expect(followed(event, { nums: [] }).filter).toEqual([[keccak256('0x')]]);
  });

  test('accepts positional names for unnamed indexed inputs, as decoded args use them', () => {
    expect(followed('event U(address indexed, uint256 indexed n)', { arg0: ALICE, n: 1 }).filter).toEqual([
      [addressTopic(ALICE)],
      [word(1n)],
    ]);
  });
});

describe('passesFilter', () => {
  const log = encodeLog(ERC20_TRANSFER, [ALICE, BOB, 10n]);

  test('passes a log whose filtered topics are among the allowed values, any value elsewhere', () => {
    expect(passesFilter(followed(ERC20_TRANSFER), log.topics)).toBe(true);
    expect(passesFilter(followed(ERC20_TRANSFER, { from: ALICE }), log.topics)).toBe(true);
    expect(passesFilter(followed(ERC20_TRANSFER, { from: [USDT, ALICE], to: BOB }), log.topics)).toBe(true);
  });

  test('rejects a log with another value in a filtered topic', () => {
    expect(passesFilter(followed(ERC20_TRANSFER, { from: BOB }), log.topics)).toBe(false);
    expect(passesFilter(followed(ERC20_TRANSFER, { from: ALICE, to: ALICE }), log.topics)).toBe(false);
  });

  test('compares topics case-insensitively', () => {
    expect(passesFilter(followed(ERC20_TRANSFER, { to: BOB }), log.topics.map(upperHex))).toBe(true);
  });

  test('rejects a log that lacks the filtered topic', () => {
    expect(passesFilter(followed(ERC20_TRANSFER, { to: BOB }), log.topics.slice(0, 2))).toBe(false);
  });

  test('reads an anonymous event filter from the first topic', () => {
    const event = followed('event Tagged(bytes32 indexed tag, uint256 indexed n, string note) anonymous', {
      n: 7,
    });
    const tagged = encodeLog(
      'event Tagged(bytes32 indexed tag, uint256 indexed n, string note)',
      [keccak256('0x'), 7n, ''],
      true,
    );
    expect(tagged.topics).toHaveLength(2);
    expect(passesFilter(event, tagged.topics)).toBe(true);
    expect(passesFilter(event, [tagged.topics[0] as Hex, word(8n)])).toBe(false);
  });

  test('matches against a long list of allowed values', () => {
    const many = Array.from({ length: 500 }, (_, i) => `0x${(i + 1).toString(16).padStart(40, '0')}`);
    const event = followed(ERC20_TRANSFER, { to: [...many, BOB] });
    expect(passesFilter(event, log.topics)).toBe(true);
    expect(passesFilter(event, encodeLog(ERC20_TRANSFER, [ALICE, USDT, 1n]).topics)).toBe(false);
  });
});

// --- decoding ----------------------------------------------------------------------------------

describe('decodeFollowedLog: every ABI type', () => {
  test('decodes integers of every width as decimal strings, extremes included', () => {
    const signature =
      'event Ints(uint8 a, uint16 b, uint32 c, uint64 d, uint128 e, uint256 f, int8 g, int24 h, int256 i, int256 j, uint256 k)';
    const values = [
      255,
      65535,
      4294967295,
      2n ** 64n - 1n,
      2n ** 128n - 1n,
      U256_MAX,
      -128,
      -8388608,
      -1n,
      I256_MIN,
      0n,
    ];
    const args = decodeFollowedLog(followed(signature), encodeLog(signature, values));
    expect(args).toEqual({
      a: '255',
      b: '65535',
      c: '4294967295',
      d: '18446744073709551615',
      e: '340282366920938463463374607431768211455',
      f: '115792089237316195423570985008687907853269984665640564039457584007913129639935',
      g: '-128',
      h: '-8388608',
      i: '-1',
      j: '-57896044618658097711785492504343953926634992332820282019728792003956564819968',
      k: '0',
    });
  });

  test('decodes addresses checksummed, booleans, fixed bytes and bytes as lower-case hex', () => {
    const signature =
      'event Misc(address indexed who, bool yes, bool no, bytes32 h, bytes4 sel, bytes empty, bytes some)';
    const hash = keccak256(toBytes('zoo'));
    const log = encodeLog(signature, [USDT.toLowerCase(), true, false, hash, '0xa9059cbb', '0x', '0x00ff10']);
    expect(decodeFollowedLog(followed(signature), log)).toEqual({
      who: USDT,
      yes: true,
      no: false,
      h: hash,
      sel: '0xa9059cbb',
      empty: '0x',
      some: '0x00ff10',
    });
  });

  test('decodes strings: empty, and Unicode with emoji and CJK', () => {
    const signature = 'event Texts(string empty, string text)';
    const log = encodeLog(signature, ['', 'héllo 🦊 世界 — ✓']);
    expect(decodeFollowedLog(followed(signature), log)).toEqual({ empty: '', text: 'héllo 🦊 世界 — ✓' });
  });

  test('decodes fixed and dynamic arrays as JSON arrays of converted elements', () => {
    const signature = 'event Arrays(uint256[3] amounts, address[] holders, string[] words, int8[2][] grid)';
    const holders = [USDT.toLowerCase(), ALICE];
    const log = encodeLog(signature, [
      [1n, 2n, U256_MAX],
      holders,
      ['', 'x'],
      [
        [-1, 2],
        [3, -4],
      ],
    ]);
    expect(decodeFollowedLog(followed(signature), log)).toEqual({
      amounts: ['1', '2', U256_MAX.toString()],
      holders: [USDT, getAddress(ALICE)],
      words: ['', 'x'],
      grid: [
        ['-1', '2'],
        ['3', '-4'],
      ],
    });
  });

  test('decodes nested tuples, with a tuple and an array inside, as objects by component name', () => {
    const signature =
      'event Order((uint256 id, (address who, uint8[] levels) inner, string label) order, (uint256 id, (address who, uint8[] levels) inner, string label)[] list)';
    const order = { id: 7n, inner: { who: USDT, levels: [1, 2, 255] }, label: 'zoo' };
    const other = { id: 8n, inner: { who: ALICE, levels: [] }, label: '' };
    const log = encodeLog(signature, [order, [order, other]]);
    const orderJson = { id: '7', inner: { who: USDT, levels: ['1', '2', '255'] }, label: 'zoo' };
    expect(decodeFollowedLog(followed(signature), log)).toEqual({
      order: orderJson,
      list: [orderJson, { id: '8', inner: { who: getAddress(ALICE), levels: [] }, label: '' }],
    });
  });

  test('gives an indexed string, bytes, array or tuple as its topic hash (the value is not in the log)', () => {
    const signature = 'event S(string indexed s, bytes indexed b, uint256 n)';
    const log = encodeLog(signature, ['héllo 🦊', '0xc0ffee', 1n]);
    expect(decodeFollowedLog(followed(signature), log)).toEqual({
      s: keccak256(toBytes('héllo 🦊')),
      b: keccak256('0xc0ffee'),
      n: '1',
    });
    const composite = followed('event C(uint256[] indexed nums, (uint256 a) indexed t)');
    const topics: Hex[] = [composite.topic0 as Hex, keccak256('0x01'), keccak256('0x02')];
    expect(decodeFollowedLog(composite, { address: USDT, topics, data: '0x' })).toEqual({
      nums: topics[1],
      t: topics[2],
    });
  });

  test('names unnamed inputs and tuple components by position: arg0, arg1, …', () => {
    const signature = 'event U(address indexed, uint256 amount, (uint256, address who) pair, string)';
    const log = encodeLog(signature, [ALICE, 5n, [6n, USDT], 'note']);
    expect(decodeFollowedLog(followed(signature), log)).toEqual({
      arg0: getAddress(ALICE),
      amount: '5',
      pair: { arg0: '6', who: USDT },
      arg3: 'note',
    });
  });

  test('decodes an event without arguments to an empty object', () => {
    const signature = 'event Paused()';
    expect(decodeFollowedLog(followed(signature), encodeLog(signature, []))).toEqual({});
  });

  test('decodes upper-case topics and data the same (node output is not relied upon to be lower case)', () => {
    const log = encodeLog(ERC20_TRANSFER, [ALICE, BOB, 10n]);
    const shouting = { address: log.address, topics: log.topics.map(upperHex), data: upperHex(log.data) };
    expect(decodeFollowedLog(followed(ERC20_TRANSFER), shouting)).toEqual({
      from: getAddress(ALICE),
      to: getAddress(BOB),
      value: '10',
    });
  });
});

describe('decodeFollowedLog: a log that is not the event', () => {
  const erc721Log = encodeLog(ERC721_TRANSFER, [ALICE, BOB, 42n]);
  const erc20Log = encodeLog(ERC20_TRANSFER, [ALICE, BOB, 42n]);

  test('shares topic0 between ERC-20 and ERC-721 Transfer: the topic count tells them apart', () => {
    expect(erc721Log.topics[0]).toBe(erc20Log.topics[0]);
    expect(decodeFollowedLog(followed(ERC20_TRANSFER), erc721Log)).toBeUndefined();
    expect(decodeFollowedLog(followed(ERC721_TRANSFER), erc20Log)).toBeUndefined();
    expect(decodeFollowedLog(followed(ERC721_TRANSFER), erc721Log)).toEqual({
      from: getAddress(ALICE),
      to: getAddress(BOB),
      tokenId: '42',
    });
  });

  test('rejects a log whose data is too short or missing', () => {
    const event = followed(ERC20_TRANSFER);
    expect(decodeFollowedLog(event, { ...erc20Log, data: '0x1234' })).toBeUndefined();
    expect(decodeFollowedLog(event, { ...erc20Log, data: '0x' })).toBeUndefined();
  });

  test('rejects a string whose offset points outside the data', () => {
    const signature = 'event Note(string text)';
    const log = encodeLog(signature, ['hello']);
    const badOffset = `0x${word(4096n).slice(2)}${log.data.slice(66)}` as Hex;
    expect(decodeFollowedLog(followed(signature), { ...log, data: badOffset })).toBeUndefined();
  });

  test('rejects a log of another event with the same topic count', () => {
    const approval = encodeLog(ERC20_APPROVAL, [ALICE, BOB, 1n]);
    expect(decodeFollowedLog(followed(ERC20_TRANSFER), approval)).toBeUndefined();
  });

  test('rejects a log with the wrong topic count for an anonymous event', () => {
    const event = followed('event Tagged(bytes32 indexed tag, uint256 indexed n, string note) anonymous');
    const log = encodeLog(
      'event Tagged(bytes32 indexed tag, uint256 indexed n, string note)',
      [keccak256('0x'), 7n, 'x'],
      true,
    );
    expect(decodeFollowedLog(event, log)).toEqual({ tag: keccak256('0x'), n: '7', note: 'x' });
    expect(decodeFollowedLog(event, { ...log, topics: [...log.topics, word(1n)] })).toBeUndefined();
    expect(decodeFollowedLog(event, { ...log, topics: log.topics.slice(0, 1) })).toBeUndefined();
  });

  test('decodes nothing for a bare topic0 subscription', () => {
    expect(decodeFollowedLog(followed(TRANSFER_TOPIC0), erc20Log)).toBeUndefined();
  });
});

// --- real chain data ---------------------------------------------------------------------------

describe('decodeFollowedLog: real mainnet receipt 0xcd718a69 (USDT transfer, approval, Uniswap V3 swap)', () => {
  const receipt = readJson<{ result: { logs: RpcLog[] } }>(
    'eth_getTransactionReceipt-mainnet-0xcd718a69.json',
  );
  const [usdt, approval, transfer, swap] = receipt.result.logs as [RpcLog, RpcLog, RpcLog, RpcLog];

  test('decodes the USDT Transfer, word by word', () => {
    const args = decodeFollowedLog(followed(ERC20_TRANSFER), usdt);
    expect(args).toEqual({
      from: topicAddress(usdt.topics[1] as Hex),
      to: topicAddress(usdt.topics[2] as Hex),
      value: BigInt(`0x${dataWord(usdt.data, 0)}`).toString(),
    });
    expect(args?.value).toBe('4361142255');
    expect(args?.to).toBe(getAddress(ALICE));
  });

  test('decodes the Approval and the Transfer of token 0xb7135877', () => {
    expect(decodeFollowedLog(followed(ERC20_APPROVAL), approval)).toEqual({
      owner: topicAddress(approval.topics[1] as Hex),
      spender: topicAddress(approval.topics[2] as Hex),
      value: BigInt(`0x${dataWord(approval.data, 0)}`).toString(),
    });
    expect(decodeFollowedLog(followed(ERC20_TRANSFER), transfer)).toEqual({
      from: topicAddress(transfer.topics[1] as Hex),
      to: topicAddress(transfer.topics[2] as Hex),
      value: BigInt(`0x${dataWord(transfer.data, 0)}`).toString(),
    });
    // An Approval is not a Transfer, nor the reverse.
    expect(decodeFollowedLog(followed(ERC20_TRANSFER), approval)).toBeUndefined();
    expect(decodeFollowedLog(followed(ERC20_APPROVAL), transfer)).toBeUndefined();
  });

  test('decodes the Uniswap V3 Swap, signed amounts and tick in two’s complement', () => {
    const event = followed(UNISWAP_V3_SWAP);
    expect(event.topic0).toBe(swap.topics[0]);
    const args = decodeFollowedLog(event, swap);
    expect(args).toEqual({
      sender: topicAddress(swap.topics[1] as Hex),
      recipient: topicAddress(swap.topics[2] as Hex),
      amount0: signedWord(dataWord(swap.data, 0)).toString(),
      amount1: signedWord(dataWord(swap.data, 1)).toString(),
      sqrtPriceX96: BigInt(`0x${dataWord(swap.data, 2)}`).toString(),
      liquidity: BigInt(`0x${dataWord(swap.data, 3)}`).toString(),
      tick: signedWord(dataWord(swap.data, 4)).toString(),
    });
    // The pool paid out USDT (amount1 < 0) and took in the token: the same amounts as the transfers.
    expect(args?.amount0).toBe(BigInt(`0x${dataWord(transfer.data, 0)}`).toString());
    expect(args?.amount1).toBe((-BigInt(`0x${dataWord(usdt.data, 0)}`)).toString());
    expect(args?.tick).toBe('-300671');
  });

  test('filters the real logs by an indexed argument', () => {
    const toAlice = followed(ERC20_TRANSFER, { to: getAddress(ALICE) });
    expect(
      receipt.result.logs.filter(
        (log) => log.topics[0] === toAlice.topic0 && passesFilter(toAlice, log.topics),
      ),
    ).toEqual([usdt]);
  });
});

describe('decodeFollowedLog: other real receipts', () => {
  const receiptsDir = 'receipts';

  test.each([['arbitrum-one-receipt-0x5aeca744.json'], ['op-mainnet-ecotone-receipt-0x2bc7cb46.json']])(
    'decodes the token Transfer of %s',
    (file) => {
      const receipt = readJson<{ logs: RpcLog[] }>(receiptsDir, file);
      const [log] = receipt.logs as [RpcLog];
      expect(decodeFollowedLog(followed(ERC20_TRANSFER), log)).toEqual({
        from: topicAddress(log.topics[1] as Hex),
        to: topicAddress(log.topics[2] as Hex),
        value: BigInt(`0x${dataWord(log.data, 0)}`).toString(),
      });
    },
  );

  test('decodes the OP Stack L2ToL1MessagePasser MessagePassed of an operator-fee devnet receipt', () => {
    const receipt = readJson<{ logs: RpcLog[] }>(
      receiptsDir,
      'op-devnet-isthmus-operator-fee-receipt-0x1d851a54.json',
    );
    const [log] = receipt.logs as [RpcLog];
    const event = followed(
      'event MessagePassed(uint256 indexed nonce, address indexed sender, address indexed target, uint256 value, uint256 gasLimit, bytes data, bytes32 withdrawalHash)',
    );
    expect(event.topic0).toBe(log.topics[0]);
    expect(decodeFollowedLog(event, log)).toEqual({
      nonce: BigInt(log.topics[1] as Hex).toString(),
      sender: topicAddress(log.topics[2] as Hex),
      target: topicAddress(log.topics[3] as Hex),
      value: '10000000000000000', // 0.01 ETH, the test's withdrawal amount
      gasLimit: BigInt(`0x${dataWord(log.data, 1)}`).toString(),
      data: '0x', // word 2 is the offset (0x80) of an empty byte string (word 4, length 0)
      withdrawalHash: `0x${dataWord(log.data, 3)}`,
    });
    expect(BigInt(`0x${dataWord(log.data, 2)}`)).toBe(128n);
    expect(BigInt(`0x${dataWord(log.data, 4)}`)).toBe(0n);
  });

  test('decodes the hive test chain log as the anonymous event hive’s emit.eas contract emits', () => {
    // ethereum/hive cmd/hivechain/contracts/emit.eas: LOG2 with topics "emit" and keccak256(calldata),
    // and the call counter as data. No Solidity event, so it reads as an anonymous one.
    const receipt = readJson<{ result: { logs: RpcLog[] } }>(
      'events',
      'eth_getTransactionReceipt-hive-testchain-0x20540574.json',
    );
    const tx = readJson<{ result: { input: Hex } }>(
      'events',
      'eth_getTransactionByHash-hive-testchain-0x20540574.json',
    );
    const [log] = receipt.result.logs as [RpcLog];
    const event = followed(
      'event Emit(bytes32 indexed tag, bytes32 indexed calldataHash, uint256 counter) anonymous',
    );
    expect(decodeFollowedLog(event, log)).toEqual({
      tag: pad(stringToHex('emit'), { size: 32 }),
      calldataHash: keccak256(tx.result.input),
      counter: BigInt(`0x${dataWord(log.data, 0)}`).toString(),
    });
    expect(passesFilter(followed(event.abi, { calldataHash: keccak256(tx.result.input) }), log.topics)).toBe(
      true,
    );
  });
});

// --- logs emitted by solc-compiled code --------------------------------------------------------

describe('EventZoo: logs emitted by solc-compiled code', () => {
  const zoo = readJson<{ abi: { type: string; name?: string }[]; receipt: { status: Hex; logs: RpcLog[] } }>(
    'events',
    'event-zoo-receipt.json',
  );
  const fragment = (name: string) => {
    const item = zoo.abi.find((entry) => entry.type === 'event' && entry.name === name);
    if (!item) throw new Error(`no event ${name} in the zoo ABI`);
    return item;
  };
  const logs = zoo.receipt.logs;
  const logAt = (i: number) => logs[i] as RpcLog;
  const WORDS = ['', 'exactly thirty-two bytes long!!!', 'more than 32 bytes, with a 🦊 inside'];
  const inner = { who: USDT, levels: ['1', '2', '255'] };

  test('recorded a successful call with one log per emit', () => {
    expect(zoo.receipt.status).toBe('0x1');
    expect(logs).toHaveLength(10);
    expect(Buffer.byteLength(WORDS[1] as string)).toBe(32);
  });

  test('parses every compiler-emitted fragment (with internalType) like its human-readable form', () => {
    expect(followed(fragment('Nested'))).toEqual(
      followed(
        'event Nested((uint256 id, (address who, uint8[] levels) inner, string label) o, (uint256 id, (address who, uint8[] levels) inner, string label)[] list)',
      ),
    );
    expect(followed(fragment('Tagged'))).toEqual(
      followed('event Tagged(bytes32 indexed tag, uint256 indexed n, string note) anonymous'),
    );
    for (const [i, name] of [
      'Scalars',
      'Scalars',
      'Dynamic',
      'Arrays',
      'Nested',
      'IndexedDynamic',
      'IndexedComposite',
      'IndexedStatic',
      'Unnamed',
    ].entries()) {
      expect(followed(fragment(name)).topic0).toBe(logAt(i).topics[0]);
    }
  });

  test('decodes scalars at their extremes', () => {
    expect(decodeFollowedLog(followed(fragment('Scalars')), logAt(0))).toEqual({
      a: '255',
      b: U256_MAX.toString(),
      c: I256_MIN.toString(),
      d: '-8388608',
      e: USDT,
      f: true,
      g: keccak256(toBytes('zoo')),
      h: '0xa9059cbb',
    });
    expect(decodeFollowedLog(followed(fragment('Scalars')), logAt(1))).toEqual({
      a: '0',
      b: '0',
      c: '-1',
      d: '-1',
      e: '0x0000000000000000000000000000000000000000',
      f: false,
      g: `0x${'0'.repeat(64)}`,
      h: '0x00000000',
    });
  });

  test('decodes bytes, strings, arrays and nested structs', () => {
    expect(decodeFollowedLog(followed(fragment('Dynamic')), logAt(2))).toEqual({
      empty: '0x',
      some: '0x00ff10',
      emptyText: '',
      text: 'héllo 🦊 世界',
    });
    expect(decodeFollowedLog(followed(fragment('Arrays')), logAt(3))).toEqual({
      fixedNums: ['1', '2', U256_MAX.toString()],
      addrs: [USDT, '0x000000000000000000000000000000000000dEaD'],
      words: WORDS,
    });
    expect(decodeFollowedLog(followed(fragment('Nested')), logAt(4))).toEqual({
      o: { id: '7', inner, label: 'zoo' },
      list: [
        { id: '1', inner, label: 'one' },
        { id: '2', inner, label: '' },
      ],
    });
  });

  test('hashes indexed string, bytes and uint256[] filter values to the topics solc emitted', () => {
    const log = logAt(5);
    expect(log.topics.slice(1)).toEqual([
      keccak256(toBytes('héllo 🦊')),
      keccak256('0xc0ffee'),
      keccak256(concat([word(1n), word(2n ** 255n)])),
    ]);
    const event = followed(fragment('IndexedDynamic'), {
      text: 'héllo 🦊',
      blob: '0xc0ffee',
      nums: [1, (2n ** 255n).toString()],
    });
    expect(event.filter).toEqual(log.topics.slice(1).map((topic) => [topic]));
    expect(passesFilter(event, log.topics)).toBe(true);
    expect(decodeFollowedLog(event, log)).toEqual({
      text: log.topics[1],
      blob: log.topics[2],
      nums: log.topics[3],
    });
  });

  test('hashes an indexed struct, string[] and bytes32[2] to the topics solc emitted', () => {
    const log = logAt(6);
    const paddedString = (text: string) => {
      const bytes = toBytes(text);
      return bytes.length === 0
        ? []
        : [pad(stringToHex(text), { dir: 'right', size: Math.ceil(bytes.length / 32) * 32 })];
    };
    // Solidity's rule, computed here on its own: members in place, each padded, no offsets or lengths.
    expect(log.topics[1]).toBe(
      keccak256(
        concat([word(7n), addressTopic(USDT), word(1n), word(2n), word(255n), ...paddedString('zoo')]),
      ),
    );
    expect(log.topics[2]).toBe(keccak256(concat(WORDS.flatMap(paddedString))));
    const pair = [keccak256(toBytes('a')), keccak256(toBytes('b'))];
    expect(log.topics[3]).toBe(keccak256(concat(pair)));
    const event = followed(fragment('IndexedComposite'), {
      o: { id: '7', inner: { who: USDT, levels: [1, 2, 255] }, label: 'zoo' },
      words: WORDS,
      pair,
    });
    expect(event.filter).toEqual(log.topics.slice(1).map((topic) => [topic]));
    expect(passesFilter(event, log.topics)).toBe(true);
  });

  test('compiles indexed static values to the topics solc emitted, and decodes them back', () => {
    const log = logAt(7);
    const event = followed(fragment('IndexedStatic'), { on: true, tick: -1, sel: '0xA9059CBB' });
    expect(event.filter).toEqual(log.topics.slice(1).map((topic) => [topic]));
    expect(decodeFollowedLog(event, log)).toEqual({ on: true, tick: '-1', sel: '0xa9059cbb' });
    expect(passesFilter(followed(fragment('IndexedStatic'), { tick: ['0', '1'] }), log.topics)).toBe(false);
  });

  test('decodes unnamed arguments by position and filters on them', () => {
    const log = logAt(8);
    const event = followed(fragment('Unnamed'), { arg0: USDT });
    expect(passesFilter(event, log.topics)).toBe(true);
    expect(decodeFollowedLog(event, log)).toEqual({ arg0: USDT, arg1: '42', arg2: 'unnamed' });
  });

  test('decodes the anonymous event and filters it from its first topic', () => {
    const log = logAt(9);
    const tag = pad(stringToHex('zoo'), { dir: 'right', size: 32 });
    const event = followed(fragment('Tagged'), { tag, n: '7' });
    expect(event.topic0).toBeNull();
    expect(passesFilter(event, log.topics)).toBe(true);
    expect(decodeFollowedLog(event, log)).toEqual({ tag, n: '7', note: 'anon' });
    // Nothing identifies an anonymous event but its topic count: logs with another count are not it.
    for (const other of logs.filter((candidate) => candidate.topics.length !== 2)) {
      expect(decodeFollowedLog(event, other)).toBeUndefined();
    }
  });
});
