/**
 * Human-readable event signatures, read by our own parser (event-signature.ts) and checked as
 * fragments (events.ts): the same events abitype's parser reads from real signatures, and the
 * bounds on what a signature may ask for (nesting, the data its arguments need at least).
 */
import { type AbiEvent, parseAbiItem, toEventSignature } from 'viem';
import { describe, expect, test } from 'vitest';
import type { FieldError } from '../../errors.js';
import { MAX_EVENT_DATA_BYTES } from './event-parse.js';
import { MAX_TYPE_DEPTH } from './event-signature.js';
import { parseFollowedEvent } from './parse-followed-event.js';

function parsed(event: unknown): AbiEvent {
  const result = parseFollowedEvent(event);
  if ('errors' in result) throw new Error(`unexpected errors: ${JSON.stringify(result.errors)}`);
  if (!result.event.abi) throw new Error('no ABI');
  return result.event.abi;
}

function refused(event: unknown): FieldError[] {
  const result = parseFollowedEvent(event);
  if ('event' in result) throw new Error(`expected errors, got ${JSON.stringify(result.event)}`);
  return result.errors;
}

/** Names, indexed flags and types, nested, as a comparable tree. */
function shape(params: readonly unknown[]): unknown[] {
  return (params as { type: string; name?: string; indexed?: boolean; components?: unknown[] }[]).map(
    (p) => ({
      type: p.type,
      name: p.name ?? '',
      indexed: p.indexed === true,
      ...(p.components ? { components: shape(p.components) } : {}),
    }),
  );
}

describe('event signatures: read as abitype reads them', () => {
  test.each([
    'event Transfer(address indexed from, address indexed to, uint256 value)',
    'event Swap(address indexed sender, address indexed recipient, int256 amount0, int256 amount1, uint160 sqrtPriceX96, uint128 liquidity, int24 tick)',
    'event TransferBatch(address indexed operator, address indexed from, address indexed to, uint256[] ids, uint256[] values)',
    'event OrderFulfilled(bytes32 orderHash, address indexed offerer, address indexed zone, address recipient, (uint8 itemType, address token, uint256 identifier, uint256 amount)[] offer, (uint8 itemType, address token, uint256 identifier, uint256 amount, address recipient)[] consideration)',
    'event Deposit(address payable indexed who, uint amount, int delta)',
    'event Nested(((uint8 a, bytes b)[2] inner, string s)[] outer, bytes32[3][] grid)',
    'event Unnamed(uint256, address indexed, bool)',
    'event Empty()',
    'event Flags(bool indexed, bytes1 b1, bytes32 b32, uint8 u8, int256 i256, string indexed label)',
  ])('%s', (signature) => {
    const ours = parsed(signature);
    const theirs = parseAbiItem(signature) as AbiEvent;
    expect(ours.name).toBe(theirs.name);
    expect(toEventSignature(ours)).toBe(toEventSignature(theirs));
    expect(shape(ours.inputs)).toEqual(shape(theirs.inputs));
  });

  test('takes Solidity as pasted: no "event", line breaks, tuple(…), a semicolon, anonymous', () => {
    const reference = parsed('event Tagged((uint8 a, string b) pair, uint256 indexed n) anonymous');
    expect(reference.anonymous).toBe(true);
    expect(parsed('Tagged(\n  tuple(uint8 a , string b) pair,\n  uint256 indexed n\n) anonymous;')).toEqual(
      reference,
    );
    expect(parsed('event  Tagged ( tuple( uint8 a,string b )pair , uint256  indexed  n )anonymous')).toEqual(
      reference,
    );
  });
});

describe('event signatures: refused, saying why, at #/attr/event', () => {
  test.each([
    ['a keyword as a name', 'event E(uint256 default)', /"default" is a protected Solidity keyword/],
    ['a type name as a name', 'event E(uint256 address)', /"address" is a protected Solidity keyword/],
    ['a data location', 'event E(bytes memory data)', /"memory" is a data location/],
    [
      'indexed inside a tuple',
      'event E((uint256 indexed a) t)',
      /"indexed" is for the event's own arguments/,
    ],
    ['an empty tuple', 'event E(() t)', /a tuple "\(\)" has no members/],
    ['unbalanced parentheses', 'event E((uint256 a) t', /parentheses do not balance/],
    ['a stray character', 'event E(uint256 a; uint256 b)', /unexpected ";"/],
    ['text after the arguments', 'event E(uint256 a) extra', /unexpected "extra" after the arguments/],
    ['two names', 'event E(uint256 a b)', /expected "," or "\)" but found "b"/],
    ['no type', 'event E(, uint256 a)', /expected a type but found ","/],
    ['a struct name', 'event E(Order o)', /argument 1: "Order" is not a valid ABI type/],
    [
      'uint7',
      'event E(uint7 a)',
      /argument 1: "uint7" is not a valid ABI type \(an integer type has 8 to 256 bits/,
    ],
    [
      'bytes33',
      'event E(bytes33 a)',
      /"bytes33" is not a valid ABI type \(a fixed-size bytes type has 1 to 32/,
    ],
    ['a fixed-point type', 'event E(fixed128x18 a)', /"fixed128x18" is not a valid ABI type/],
    [
      'a zero-length array',
      'event E(uint256[0] a)',
      /argument 1: "uint256\[0\]": a fixed-size array has at least one/,
    ],
    ['a length with a leading zero', 'event E(uint256[02] a)', /without leading zeros/],
    [
      'a member of a tuple',
      'event E((bool ok, uint9 n) t)',
      /argument 1, member 2: "uint9" is not a valid ABI type/,
    ],
  ])('%s', (_what, signature, detail) => {
    const errors = refused(signature);
    expect(errors.map((e) => e.pointer)).toEqual(errors.map(() => '#/attr/event'));
    expect(errors.map((e) => e.detail).join(' | ')).toMatch(detail);
  });
});

describe('event signatures and fragments: bounded', () => {
  const tuple = (levels: number) => {
    let type = 'uint256';
    for (let i = 0; i < levels; i++) type = `(${type})`;
    return type;
  };
  const fragmentTuple = (levels: number): Record<string, unknown> =>
    levels === 0
      ? { type: 'uint256', name: 'v' }
      : { type: 'tuple', name: 'v', components: [fragmentTuple(levels - 1)] };

  test(`takes ${MAX_TYPE_DEPTH} levels of tuples and arrays, in both forms, and refuses one more`, () => {
    expect(parsed(`event E(${tuple(MAX_TYPE_DEPTH)} x)`).inputs).toHaveLength(1);
    expect(refused(`event E(${tuple(MAX_TYPE_DEPTH + 1)} x)`)[0]?.detail).toMatch(
      /nests tuples 17 deep; at most 16/,
    );
    expect(parsed(`event E(uint8${'[]'.repeat(MAX_TYPE_DEPTH)} x)`).inputs).toHaveLength(1);
    expect(refused(`event E(uint8${'[]'.repeat(MAX_TYPE_DEPTH + 1)} x)`)[0]?.detail).toMatch(
      /nests tuples and arrays 17 levels deep; at most 16/,
    );
    expect(refused(`event E(${tuple(8)}${'[2]'.repeat(9)} x)`)[0]?.detail).toMatch(/17 levels deep/);
    const fragment = (levels: number) => ({ type: 'event', name: 'E', inputs: [fragmentTuple(levels)] });
    expect(parsed(fragment(MAX_TYPE_DEPTH)).inputs).toHaveLength(1);
    expect(refused(fragment(MAX_TYPE_DEPTH + 1))).toEqual([
      { pointer: '#/attr/event/inputs/0/type', detail: expect.stringMatching(/17 levels deep/) },
    ]);
  });

  test('refuses 2,000 nested tuples (4,008 characters) before reading them: no stack is exhausted', () => {
    const signature = `event E(${tuple(2000)} x)`;
    expect(signature.length).toBeLessThanOrEqual(4096);
    expect(refused(signature)[0]?.detail).toMatch(/nests tuples 2000 deep/);
    expect(refused(`event E(uint8${'[1]'.repeat(1300)} x)`)[0]?.detail).toMatch(/1300 levels deep/);
  });

  test(`refuses arguments that need more than ${MAX_EVENT_DATA_BYTES} bytes of data at least, whatever their form`, () => {
    const words = MAX_EVENT_DATA_BYTES / 32;
    expect(parsed(`event E(uint8[${words}] x)`).inputs).toHaveLength(1);
    expect(parsed(`event E(uint8[${words / 2}] x, bytes32[${words / 2}] y)`).inputs).toHaveLength(2);
    for (const event of [
      `event E(uint8[${words + 1}] x)`,
      `event E(uint8[${words / 2}] x, bytes32[${words / 2}] y, bool z)`,
      'event E(uint256[4294967295] x)',
      'event E(uint8[1000][1000][1000] x)',
      'event E(string[16384] x)',
      `event E(uint256[${'9'.repeat(400)}] x)`,
      { type: 'event', name: 'E', inputs: [{ name: 'x', type: 'uint8[4294967295]' }] },
      {
        type: 'event',
        name: 'E',
        inputs: [{ name: 'x', type: 'tuple[65536]', components: [{ type: 'uint8' }] }],
      },
    ]) {
      const errors = refused(event);
      expect(errors).toHaveLength(1);
      expect(errors[0]?.detail).toMatch(/more than a log can carry/);
    }
    expect(parsed('event E(string[16383] x)').inputs).toHaveLength(1);
  });

  test('refuses a filter longer than 256 KiB as JSON before looking at the event', () => {
    const values = Array.from({ length: 1000 }, () => 'x'.repeat(300));
    const result = parseFollowedEvent('event E(string indexed label)', { label: values });
    expect(result).toEqual({
      errors: [{ pointer: '#/attr/filter', detail: expect.stringMatching(/at most 262144 characters/) }],
    });
  });
});
