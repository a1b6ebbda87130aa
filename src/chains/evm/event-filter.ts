/**
 * An event subscription's filter on indexed arguments: compiled from the values a create request
 * gives to the topics a matching log has, and a log's topics checked against it.
 *
 * viem encodes topics, but not the topic of an indexed array or struct (`encodeEventTopics` refuses
 * them): {@link inPlaceEncoding} follows Solidity's rule for those, built on viem's encoders; the
 * tests check it against logs emitted by solc-compiled code.
 */
import {
  type AbiEvent,
  type AbiParameter,
  concat,
  type EncodeEventTopicsParameters,
  encodeAbiParameters,
  encodeEventTopics,
  type Hex,
  isAddress,
  keccak256,
  padHex,
  stringToHex,
  toEventSignature,
} from 'viem';
import type { FieldError } from '../../errors.js';
import {
  argKey,
  arrayShape,
  asAbiEvent,
  FIXED_BYTES_TYPE,
  INTEGER_TYPE,
  inputsOf,
  type Param,
} from './abi-types.js';
import { describe, FILTER_POINTER, isPlainObject, pointer, type Segment } from './event-fields.js';
import type { FollowedEvent } from './followed-event.js';

/** Most values one filtered argument may list. */
export const MAX_FILTER_VALUES = 1000;
/** Longest filter accepted, as JSON: 1,000 addresses for each of three indexed arguments fit. */
export const MAX_FILTER_LENGTH = 256 * 1024;

// ---------------------------------------------------------------------------------------------
// Compiling the filter
// ---------------------------------------------------------------------------------------------

export function checkNoFilter(filter: unknown, errors: FieldError[]): void {
  if (filter === undefined) return;
  if (!isPlainObject(filter)) errors.push(filterNotObject(filter));
  else if (Object.keys(filter).length > 0) {
    errors.push({
      pointer: pointer(FILTER_POINTER),
      detail:
        'cannot be used with a bare topic0: without the event ABI there are no argument names; give the event signature instead',
    });
  }
}

export function filterNotObject(filter: unknown): FieldError {
  return {
    pointer: pointer(FILTER_POINTER),
    detail: `must be an object mapping indexed argument names to a value or a list of values; got ${describe(filter)}`,
  };
}

export function compileFilter(abi: AbiEvent, filter: unknown, errors: FieldError[]): (Hex[] | null)[] {
  const inputs = inputsOf(abi);
  const indexed = inputs.map((input, position) => ({ input, position })).filter(({ input }) => input.indexed);
  const compiled: (Hex[] | null)[] = indexed.map(() => null);
  if (filter === undefined) return compiled;
  if (!isPlainObject(filter)) {
    errors.push(filterNotObject(filter));
    return compiled;
  }
  for (const [key, raw] of Object.entries(filter)) {
    const path = [...FILTER_POINTER, key];
    const slot = indexed.findIndex(({ input, position }) => argKey(input, position) === key);
    const at = slot >= 0 ? indexed[slot] : undefined;
    if (at === undefined) {
      errors.push({ pointer: pointer(path), detail: unknownArgument(abi, inputs, key) });
      continue;
    }
    const topics = filterTopics(at.input, raw, path, errors);
    if (topics) compiled[slot] = topics;
  }
  return compiled;
}

function unknownArgument(abi: AbiEvent, inputs: readonly Param[], key: string): string {
  const signature = toEventSignature(abi);
  const position = inputs.findIndex((input, i) => argKey(input, i) === key);
  if (position >= 0) {
    const indexed = inputs.flatMap((input, i) => (input.indexed ? [argKey(input, i)] : []));
    const which = indexed.length > 0 ? `its indexed ones are ${indexed.join(', ')}` : 'this event has none';
    return `is not indexed in ${signature}: only indexed arguments can be filtered, and ${which}`;
  }
  const names = inputs.map((input, i) => argKey(input, i));
  const list = names.length > 0 ? `its arguments are ${names.join(', ')}` : 'it has no arguments';
  return `is not an argument of ${signature}; ${list}`;
}

/**
 * One value or a list of values (any of them matches). For an array-typed argument (`uint256[]`,
 * `tuple(…)[]`) a value is itself a JSON array, so a list is a JSON array whose first element is an
 * array: `[1, 2]` is the one value [1, 2], `[[1, 2], [3]]` two values, and `[]` the empty array.
 */
function valuesOf(param: Param, raw: unknown): { list: boolean; items: unknown[] } {
  if (!Array.isArray(raw)) return { list: false, items: [raw] };
  if (arrayShape(param.type) && !(raw.length > 0 && Array.isArray(raw[0])))
    return { list: false, items: [raw] };
  return { list: true, items: raw };
}

function filterTopics(param: Param, raw: unknown, path: Segment[], errors: FieldError[]): Hex[] | undefined {
  const { list, items } = valuesOf(param, raw);
  if (list && items.length === 0) {
    errors.push({
      pointer: pointer(path),
      detail: 'is an empty list, which would match nothing; give at least one value',
    });
    return undefined;
  }
  if (items.length > MAX_FILTER_VALUES) {
    const detail = `lists ${items.length} values; at most ${MAX_FILTER_VALUES} are allowed per argument`;
    errors.push({ pointer: pointer(path), detail });
    return undefined;
  }
  const before = errors.length;
  const topics = items.map((item, i) => {
    const value = abiValue(param, item, list ? [...path, i] : path, errors);
    return value === undefined ? undefined : indexedTopic(param, value);
  });
  if (errors.length > before) return undefined;
  return [...new Set(topics.filter((topic): topic is Hex => topic !== undefined))];
}

// --- Filter values: JSON → viem values --------------------------------------------------------

const HEX = /^0x[0-9a-fA-F]*$/;

/** A filter value as viem encodes it, or undefined (with the reason in `errors`). */
function abiValue(param: Param, raw: unknown, path: Segment[], errors: FieldError[]): unknown {
  const array = arrayShape(param.type);
  if (array) return arrayValue({ ...param, type: array.element }, array.length, raw, path, errors);
  if (param.type === 'tuple') return tupleValue(param.components ?? [], raw, path, errors);
  const value = leafValue(param.type, raw);
  if (typeof value === 'object' && value !== null && 'error' in value) {
    errors.push({ pointer: pointer(path), detail: value.error });
    return undefined;
  }
  return value;
}

function arrayValue(
  element: Param,
  length: number | undefined,
  raw: unknown,
  path: Segment[],
  errors: FieldError[],
): unknown[] | undefined {
  const type = `${element.type}[${length ?? ''}]`;
  if (!Array.isArray(raw) || (length !== undefined && raw.length !== length)) {
    const size = length === undefined ? '' : ` of ${length} elements`;
    errors.push({
      pointer: pointer(path),
      detail: `must be a JSON array${size} (${type}); got ${describe(raw)}`,
    });
    return undefined;
  }
  const before = errors.length;
  const values = raw.map((item, i) => abiValue(element, item, [...path, i], errors));
  return errors.length === before ? values : undefined;
}

/** A tuple value: a JSON object by component name ("arg0"… for unnamed ones), passed to viem positionally. */
function tupleValue(
  components: readonly Param[],
  raw: unknown,
  path: Segment[],
  errors: FieldError[],
): unknown[] | undefined {
  const keys = components.map((component, i) => argKey(component, i));
  if (!isPlainObject(raw)) {
    errors.push({
      pointer: pointer(path),
      detail: `must be an object with members ${keys.join(', ')}; got ${describe(raw)}`,
    });
    return undefined;
  }
  const before = errors.length;
  for (const key of Object.keys(raw)) {
    if (!keys.includes(key)) {
      errors.push({
        pointer: pointer([...path, key]),
        detail: `is not a member of this tuple; its members are ${keys.join(', ')}`,
      });
    }
  }
  const values = components.map((component, i) => {
    const key = keys[i] ?? '';
    if (!Object.hasOwn(raw, key)) {
      errors.push({ pointer: pointer(path), detail: `lacks member "${key}" (${component.type})` });
      return undefined;
    }
    return abiValue(component, raw[key], [...path, key], errors);
  });
  return errors.length === before ? values : undefined;
}

type Leaf = string | bigint | boolean | { error: string };

function leafValue(type: string, raw: unknown): Leaf {
  const integer = INTEGER_TYPE.exec(type);
  if (integer) return integerValue(integer[1] === '', Number(integer[2]), raw);
  const fixed = FIXED_BYTES_TYPE.exec(type);
  if (fixed) return bytesValue(type, Number(fixed[1]), raw);
  switch (type) {
    case 'address':
      return addressValue(raw);
    case 'bool':
      return typeof raw === 'boolean' ? raw : { error: `must be true or false (bool); got ${describe(raw)}` };
    case 'string':
      return typeof raw === 'string' ? raw : { error: `must be a string; got ${describe(raw)}` };
    case 'bytes':
      return bytesValue(type, undefined, raw);
    default:
      return { error: `cannot be filtered: type ${type} is not supported` };
  }
}

function addressValue(raw: unknown): Leaf {
  if (typeof raw !== 'string' || !isAddress(raw, { strict: false })) {
    return { error: `must be an address (0x and 40 hex digits); got ${describe(raw)}` };
  }
  const digits = raw.slice(2);
  // Mixed case carries an EIP-55 checksum: a wrong one is most likely a typo. One case carries none.
  const oneCase = digits === digits.toLowerCase() || digits === digits.toUpperCase();
  if (!oneCase && !isAddress(raw, { strict: true })) {
    return { error: `has an invalid EIP-55 checksum: ${raw} (give it in lower case to skip the check)` };
  }
  return raw.toLowerCase();
}

function integerValue(signed: boolean, bits: number, raw: unknown): Leaf {
  const min = signed ? -(1n << BigInt(bits - 1)) : 0n;
  const max = signed ? (1n << BigInt(bits - 1)) - 1n : (1n << BigInt(bits)) - 1n;
  const range = signed ? `-2^${bits - 1} to 2^${bits - 1}-1` : `0 to 2^${bits}-1`;
  const expected = `must be an integer from ${range} (${signed ? '' : 'u'}int${bits}) as a decimal string`;
  let value: bigint | undefined;
  if (typeof raw === 'number' && Number.isSafeInteger(raw)) value = BigInt(raw);
  else if (typeof raw === 'string' && /^-?\d{1,100}$/.test(raw)) value = BigInt(raw);
  else if (typeof raw === 'bigint') value = raw;
  if (value === undefined) {
    // A JSON number past 2^53 has already lost digits when it reaches us: say so rather than guess.
    const unsafe =
      typeof raw === 'number' && Number.isInteger(raw) ? ' (a JSON number this large loses precision)' : '';
    return { error: `${expected}; got ${describe(raw)}${unsafe}` };
  }
  if (value < min || value > max) return { error: `is out of range: ${expected}; got ${String(raw)}` };
  return value;
}

function bytesValue(type: string, size: number | undefined, raw: unknown): Leaf {
  const expected =
    size === undefined
      ? 'must be 0x and an even number of hex digits (bytes)'
      : `must be 0x and ${size * 2} hex digits (${type})`;
  if (typeof raw !== 'string' || !HEX.test(raw) || raw.length % 2 !== 0)
    return { error: `${expected}; got ${describe(raw)}` };
  const bytes = (raw.length - 2) / 2;
  if (size !== undefined && bytes !== size) return { error: `${expected}; got ${bytes} bytes` };
  return raw.toLowerCase();
}

// --- Filter values → topics -------------------------------------------------------------------

/**
 * The topic an indexed argument with this value has: the 32-byte word of a static value, or the
 * keccak256 of a dynamic one's encoding as Solidity defines it for indexed arguments.
 */
function indexedTopic(param: Param, value: unknown): Hex {
  if (param.type === 'tuple' || arrayShape(param.type))
    return keccak256(concat(inPlaceEncoding(param, value)));
  // An anonymous one-argument event: viem returns just the argument's topic, no selector.
  const only = asAbiEvent('Filter', [{ ...param, name: 'value', indexed: true }], true);
  const [topic] = encodeEventTopics({ abi: [only], args: [value] } as unknown as EncodeEventTopicsParameters);
  if (typeof topic !== 'string') throw new Error(`no topic for a ${param.type} value`);
  return topic.toLowerCase() as Hex;
}

/**
 * Solidity's encoding of an indexed array or struct before hashing (the "Events" section of its ABI
 * specification): the concatenation of its elements' encodings, each padded to a multiple of 32
 * bytes, with no offsets and no length prefixes; a string or bytes inside is its raw bytes padded.
 * viem's encodeEventTopics refuses these types, so this is built here from viem's encoders.
 */
function inPlaceEncoding(param: Param, value: unknown): Hex[] {
  const array = arrayShape(param.type);
  if (array) {
    const element = { ...param, type: array.element };
    return (value as readonly unknown[]).flatMap((item) => inPlaceEncoding(element, item));
  }
  if (param.type === 'tuple') {
    const items = value as readonly unknown[];
    return (param.components ?? []).flatMap((component, i) => inPlaceEncoding(component, items[i]));
  }
  if (param.type === 'string' || param.type === 'bytes') {
    const hex = param.type === 'string' ? stringToHex(value as string) : (value as Hex);
    const size = (hex.length - 2) / 2;
    return size === 0 ? [] : [padHex(hex, { dir: 'right', size: Math.ceil(size / 32) * 32 })];
  }
  const params: readonly AbiParameter[] = [param as unknown as AbiParameter];
  return [encodeAbiParameters(params, [value] as readonly unknown[])];
}

// ---------------------------------------------------------------------------------------------
// Matching and decoding logs
// ---------------------------------------------------------------------------------------------

/** Large allowed-value lists as sets, built once per stored list (events are long-lived). */
const allowedSets = new WeakMap<readonly Hex[], ReadonlySet<string>>();

function allows(allowed: readonly Hex[], topic: Hex): boolean {
  const value = topic.toLowerCase();
  if (allowed.length <= 8) return allowed.some((candidate) => candidate.toLowerCase() === value);
  let set = allowedSets.get(allowed);
  if (!set) {
    set = new Set(allowed.map((candidate) => candidate.toLowerCase()));
    allowedSets.set(allowed, set);
  }
  return set.has(value);
}

/** Whether the log passes the compiled filter. Does not check topic0 or the contract. */
export function passesFilter(event: FollowedEvent, topics: readonly Hex[]): boolean {
  const offset = event.abi?.anonymous ? 0 : 1;
  return event.filter.every((allowed, i) => {
    if (allowed === null) return true;
    const topic = topics[i + offset];
    return topic !== undefined && allows(allowed, topic);
  });
}

/**
 * Decodes a log against the followed event's ABI into JSON-ready arguments by input name ("arg0"…
 * by position where the ABI has none), or undefined when the log is not that event: another topic
 * count, another topic0, or data that does not decode.
 */
