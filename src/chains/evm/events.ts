/**
 * Contract event subscriptions (CONTRACT_LOG_EVENT, docs/subscriptions.md): which event a subscription
 * follows, its filter on indexed arguments compiled to topic values, and the decoding of a matching
 * log into JSON-ready arguments.
 *
 * viem encodes and decodes (topics, log data). What it does not offer is the topic of an indexed
 * array or struct (`encodeEventTopics` refuses them), so {@link inPlaceEncoding} follows Solidity's
 * rule for those, built on viem's encoders; the tests check it against logs emitted by
 * solc-compiled code. Signatures and types are read by our own parser (event-signature.ts), which
 * keeps nothing between requests and bounds what it reads: nesting, and the least data an event's
 * arguments take, since no log can carry more than a block can pay for.
 */
import {
  type AbiEvent,
  type AbiParameter,
  concat,
  decodeEventLog,
  type EncodeEventTopicsParameters,
  encodeAbiParameters,
  encodeEventTopics,
  getAddress,
  type Hex,
  isAddress,
  keccak256,
  padHex,
  stringToBytes,
  stringToHex,
  toEventSignature,
} from 'viem';
import type { FieldError } from '../../errors.js';
import { decodesWithinData, minimumEncodedBytes } from './abi-encoded-size.js';
import {
  arrayShape,
  canonicalElementaryType,
  elementaryTypeHint,
  type Param,
  typeDepth,
} from './abi-types.js';
import { MAX_TYPE_DEPTH, parseEventSignature, SignatureSyntaxError } from './event-signature.js';

/** A followed event as stored (JSON, in a jsonb column) and as the matcher uses it. */
export interface FollowedEvent {
  /** The event's ABI item as viem parses it; null for a bare topic0 subscription (Tatum style: nothing decoded). */
  abi: AbiEvent | null;
  /** keccak256 of the canonical signature; null for an anonymous event. */
  topic0: Hex | null;
  /** The canonical signature, `Transfer(address,address,uint256)`; null for a bare topic0. */
  signature: string | null;
  /** Topics a matching log has: 1 + indexed inputs, or the indexed inputs for an anonymous event; null for a bare topic0 (any count). */
  topicCount: number | null;
  /**
   * The filter compiled: for each indexed input in order, the allowed topic values (lower-case 0x + 64 hex), or null when any value is allowed.
   * Length = number of indexed inputs (empty array without a filter, or for a bare topic0). filter[i] constrains log.topics[i + (anonymous ? 0 : 1)].
   */
  filter: (Hex[] | null)[];
}

/** A log as a node returns it (receipts' logs): address lower or mixed case, topics and data lower-case hex. */
export interface LogLike {
  address: Hex;
  topics: readonly Hex[];
  data: Hex;
}

/** Most values one filtered argument may list. */
export const MAX_FILTER_VALUES = 1000;
/** Longest event description accepted (a signature, or a fragment's JSON). */
const MAX_EVENT_LENGTH = 4096;
/**
 * The most data an event's arguments may need at least (every array and string empty). A log's data
 * costs 8 gas a byte and its memory more: 1 MiB costs some 10 million gas, and no real event needs
 * a thousandth of it. Whatever is built from an event (a sample, a decoded log) stays within it.
 */
export const MAX_EVENT_DATA_BYTES = 1024 * 1024;
/** Longest filter accepted, as JSON: 1,000 addresses for each of three indexed arguments fit. */
const MAX_FILTER_LENGTH = 256 * 1024;

const EVENT_POINTER = ['attr', 'event'] as const;
const FILTER_POINTER = ['attr', 'filter'] as const;
const EXAMPLE =
  'e.g. "event Transfer(address indexed from, address indexed to, uint256 value)", a JSON ABI event fragment, or a topic0 (0x and 64 hex digits)';

type Segment = string | number;

// ---------------------------------------------------------------------------------------------
// Parsing the event
// ---------------------------------------------------------------------------------------------

/**
 * Parses `attr.event` and `attr.filter` of a create request: a human-readable signature, a JSON ABI
 * fragment or a bare topic0, and the filter on its indexed arguments. Returns every problem at once.
 */
export function parseFollowedEvent(
  event: unknown,
  filter?: unknown,
): { event: FollowedEvent } | { errors: FieldError[] } {
  const errors: FieldError[] = [];
  // The cheap check first: a filter's size bounds the hashing and the errors it can cost.
  if (isPlainObject(filter) && JSON.stringify(filter).length > MAX_FILTER_LENGTH) {
    const detail = `is too long: a filter may have at most ${MAX_FILTER_LENGTH} characters as JSON`;
    return { errors: [{ pointer: pointer(FILTER_POINTER), detail }] };
  }
  const parsed = parseEvent(event, errors);
  if (parsed === undefined) {
    if (filter !== undefined && !isPlainObject(filter)) errors.push(filterNotObject(filter));
    return { errors };
  }
  if (parsed.kind === 'topic0') {
    checkNoFilter(filter, errors);
    if (errors.length > 0) return { errors };
    return { event: { abi: null, topic0: parsed.topic0, signature: null, topicCount: null, filter: [] } };
  }
  const compiled = compileFilter(parsed.abi, filter, errors);
  if (errors.length > 0) return { errors };
  return { event: followed(parsed.abi, compiled) };
}

function followed(abi: AbiEvent, filter: (Hex[] | null)[]): FollowedEvent {
  const indexed = inputsOf(abi).filter((input) => input.indexed === true).length;
  const signature = toEventSignature(abi);
  return {
    abi,
    // Hashed here, not by toEventSelector, whose cache of signatures holds up to 8,192 of them.
    topic0: abi.anonymous ? null : keccak256(stringToBytes(signature)),
    signature,
    topicCount: indexed + (abi.anonymous ? 0 : 1),
    filter,
  };
}

type ParsedEvent = { kind: 'abi'; abi: AbiEvent } | { kind: 'topic0'; topic0: Hex };

function parseEvent(event: unknown, errors: FieldError[]): ParsedEvent | undefined {
  if (typeof event === 'string') return parseEventString(event, errors);
  if (isPlainObject(event)) {
    if (JSON.stringify(event).length > MAX_EVENT_LENGTH) {
      errors.push(
        eventError([], `is too long: an event fragment may have at most ${MAX_EVENT_LENGTH} characters`),
      );
      return undefined;
    }
    const abi = parseFragment(event, errors);
    return abi && { kind: 'abi', abi };
  }
  const hint = Array.isArray(event) ? ' (give one event fragment, not a whole ABI)' : '';
  errors.push(
    eventError(
      [],
      `must be an event signature, a JSON ABI event fragment or a topic0; got ${describe(event)}${hint}`,
    ),
  );
  return undefined;
}

const TOPIC0 = /^0x[0-9a-fA-F]{64}$/;
const OTHER_ITEM = /^(function|error|constructor|fallback|receive|struct|modifier)\b/;

function parseEventString(raw: string, errors: FieldError[]): ParsedEvent | undefined {
  if (raw.length > MAX_EVENT_LENGTH) {
    errors.push(
      eventError([], `is too long: an event signature may have at most ${MAX_EVENT_LENGTH} characters`),
    );
    return undefined;
  }
  const text = raw.trim();
  if (TOPIC0.test(text)) return { kind: 'topic0', topic0: text.toLowerCase() as Hex };
  if (/^0x[0-9a-fA-F]*$/.test(text)) {
    errors.push(eventError([], `looks like a topic0 but has ${text.length - 2} hex digits; a topic0 has 64`));
    return undefined;
  }
  const kind = OTHER_ITEM.exec(text)?.[1];
  if (kind) {
    errors.push(eventError([], `describes ${article(kind)}, not an event; ${EXAMPLE}`));
    return undefined;
  }
  const abi = parseSignature(text, errors);
  return abi && { kind: 'abi', abi };
}

/**
 * A human-readable signature, read into a fragment (event-signature.ts) and checked as one; each
 * problem is reported at #/attr/event, saying which argument it is about.
 */
function parseSignature(text: string, errors: FieldError[]): AbiEvent | undefined {
  let parsed: ReturnType<typeof parseEventSignature>;
  try {
    parsed = parseEventSignature(text);
  } catch (error) {
    if (!(error instanceof SignatureSyntaxError)) throw error;
    errors.push(eventError([], `is not a valid event signature: ${error.message}; ${EXAMPLE}`));
    return undefined;
  }
  const found: FieldError[] = [];
  const fragment = { type: 'event', name: parsed.name, inputs: parsed.inputs, anonymous: parsed.anonymous };
  const abi = parseFragment(fragment, found);
  for (const error of found) {
    const place = signaturePlace(error.pointer ?? '');
    errors.push(eventError([], place ? `${place}: ${error.detail}` : error.detail));
  }
  return abi;
}

/** Where a fragment's pointer is in the signature it was read from, in words: "argument 2, member 1". */
function signaturePlace(at: string): string {
  const segments = at.split('/').slice(EVENT_POINTER.length + 1);
  const place: string[] = [];
  for (let i = 0; i + 1 < segments.length; i++) {
    const position = Number(segments[i + 1]) + 1;
    if (segments[i] === 'inputs') place.push(`argument ${position}`);
    else if (segments[i] === 'components') place.push(`member ${position}`);
  }
  return place.join(', ');
}

// --- JSON ABI fragments ------------------------------------------------------------------------

const IDENTIFIER = /^[a-zA-Z$_][a-zA-Z0-9$_]*$/;
const FRAGMENT_KEYS = new Set(['type', 'name', 'inputs', 'anonymous']);
const INPUT_KEYS = new Set(['name', 'type', 'indexed', 'components', 'internalType']);

/**
 * A JSON ABI event fragment, as in a compiler's ABI array, validated strictly: each leaf type goes
 * through viem's parser, so what viem rejects (`uint7`, `addres`) is rejected at its own pointer.
 * Unknown keys are rejected as everywhere in the API (`internalType`, which solc emits, is allowed).
 */
function parseFragment(fragment: Record<string, unknown>, errors: FieldError[]): AbiEvent | undefined {
  const before = errors.length;
  for (const key of Object.keys(fragment)) {
    if (!FRAGMENT_KEYS.has(key)) errors.push(eventError([key], 'is not a member of an ABI event fragment'));
  }
  if (fragment.type !== 'event') {
    const detail =
      typeof fragment.type === 'string'
        ? `must be "event": this fragment describes ${article(fragment.type)}`
        : 'must be "event"';
    errors.push(eventError(['type'], detail));
  }
  if (typeof fragment.name !== 'string' || !IDENTIFIER.test(fragment.name)) {
    errors.push(
      eventError(['name'], `must be the event's name, an identifier; got ${describe(fragment.name)}`),
    );
  }
  if (fragment.anonymous !== undefined && typeof fragment.anonymous !== 'boolean') {
    errors.push(eventError(['anonymous'], `must be true or false; got ${describe(fragment.anonymous)}`));
  }
  let inputs: Param[] = [];
  if (Array.isArray(fragment.inputs)) inputs = fragmentParams(fragment.inputs, ['inputs'], true, errors);
  else
    errors.push(eventError(['inputs'], `must be an array of parameters; got ${describe(fragment.inputs)}`));
  if (errors.length > before) return undefined;
  const abi = asAbiEvent(String(fragment.name), inputs, fragment.anonymous === true);
  checkEvent(abi, errors);
  return errors.length === before ? abi : undefined;
}

function asAbiEvent(name: string, inputs: Param[], anonymous: boolean): AbiEvent {
  const abi = { type: 'event', name, inputs } as unknown as AbiEvent;
  if (anonymous) abi.anonymous = true;
  return abi;
}

function fragmentParams(list: unknown[], path: Segment[], topLevel: boolean, errors: FieldError[]): Param[] {
  const params: Param[] = [];
  list.forEach((item, i) => {
    const param = fragmentParam(item, [...path, i], topLevel, errors);
    if (param) params.push(param);
  });
  return params;
}

const TUPLE_TYPE = /^tuple((?:\[\d*\])*)$/;
const PLAIN_TYPE = /^[a-z][a-z0-9]*(?:\[\d*\])*$/;

function fragmentParam(
  item: unknown,
  path: Segment[],
  topLevel: boolean,
  errors: FieldError[],
): Param | undefined {
  if (!isPlainObject(item)) {
    errors.push(eventError(path, `must be a parameter object {name, type, indexed}; got ${describe(item)}`));
    return undefined;
  }
  const before = errors.length;
  for (const key of Object.keys(item)) {
    if (!INPUT_KEYS.has(key) || (key === 'indexed' && !topLevel)) {
      errors.push(eventError([...path, key], 'is not a member of an ABI parameter here'));
    }
  }
  const name = item.name ?? '';
  if (typeof name !== 'string' || (name !== '' && !IDENTIFIER.test(name))) {
    errors.push(
      eventError([...path, 'name'], `must be an identifier (or empty); got ${describe(item.name)}`),
    );
  }
  if (item.indexed !== undefined && typeof item.indexed !== 'boolean') {
    errors.push(eventError([...path, 'indexed'], `must be true or false; got ${describe(item.indexed)}`));
  }
  if (item.internalType !== undefined && typeof item.internalType !== 'string') {
    errors.push(
      eventError([...path, 'internalType'], `must be a string; got ${describe(item.internalType)}`),
    );
  }
  const typed = fragmentType(item, path, errors);
  if (typed === undefined || errors.length > before) return undefined;
  return {
    ...typed,
    ...(name !== '' ? { name: String(name) } : {}),
    ...(item.indexed === true ? { indexed: true } : {}),
  };
}

/** The parameter's type (and components for a tuple), validated by viem's parser. */
function fragmentType(
  item: Record<string, unknown>,
  path: Segment[],
  errors: FieldError[],
): { type: string; components?: Param[] } | undefined {
  const { type, components } = item;
  if (typeof type !== 'string') {
    errors.push(
      eventError([...path, 'type'], `must be a Solidity type such as "uint256"; got ${describe(type)}`),
    );
    return undefined;
  }
  const tuple = TUPLE_TYPE.exec(type);
  if (tuple) {
    if (!Array.isArray(components) || components.length === 0) {
      errors.push(eventError([...path, 'components'], `must list the members of ${type}`));
      return undefined;
    }
    return { type, components: fragmentParams(components, [...path, 'components'], false, errors) };
  }
  if (components !== undefined) {
    errors.push(eventError([...path, 'components'], `is only for tuple types, not ${type}`));
    return undefined;
  }
  const leaf = leafType(type);
  if ('error' in leaf) {
    errors.push(eventError([...path, 'type'], leaf.error));
    return undefined;
  }
  return { type: leaf.type };
}

function leafType(type: string): { type: string } | { error: string } {
  const base = type.replace(/(\[\d*\])+$/, '');
  const canonical = PLAIN_TYPE.test(type) ? canonicalElementaryType(base) : undefined;
  if (canonical === undefined) {
    const hint = elementaryTypeHint(base);
    return { error: `${JSON.stringify(type)} is not a valid ABI type${hint ? ` (${hint})` : ''}` };
  }
  return { type: canonical + type.slice(base.length) };
}

// --- Checks common to both forms --------------------------------------------------------------

/**
 * Rules Solidity enforces that the parsers do not (indexed count, unique names, no function types),
 * and the bounds of what can be built from the event: its nesting and the least data it takes.
 */
function checkEvent(abi: AbiEvent, errors: FieldError[]): void {
  const inputs = inputsOf(abi);
  const limit = abi.anonymous ? 4 : 3;
  const indexed = inputs.filter((input) => input.indexed === true).length;
  if (indexed > limit) {
    const detail = `has ${indexed} indexed arguments; an ${abi.anonymous ? 'anonymous ' : ''}event can have at most ${limit}`;
    errors.push(eventError(['inputs'], detail));
  }
  const before = errors.length;
  checkParams(inputs, ['inputs'], errors);
  if (errors.length > before) return;
  const bytes = minimumEncodedBytes(inputs);
  if (bytes > MAX_EVENT_DATA_BYTES) {
    const least =
      Number.isFinite(bytes) && bytes < 1e15 ? `${bytes} bytes` : 'more bytes than can be counted';
    const detail = `takes at least ${least} encoded, more than a log can carry (at most ${MAX_EVENT_DATA_BYTES} bytes are allowed): look at its fixed-size arrays`;
    errors.push(eventError(['inputs'], detail));
  }
}

function checkParams(params: readonly Param[], path: Segment[], errors: FieldError[]): void {
  const seen = new Set<string>();
  params.forEach((param, i) => {
    const key = argKey(param, i);
    if (seen.has(key)) {
      errors.push(
        eventError([...path, i, 'name'], `names two arguments "${key}"; argument names must be unique`),
      );
    }
    seen.add(key);
    const type = (detail: string) =>
      errors.push(eventError([...path, i, 'type'], `"${param.type}": ${detail}`));
    const depth = typeDepth(param);
    if (depth > MAX_TYPE_DEPTH) {
      type(`nests tuples and arrays ${depth} levels deep; at most ${MAX_TYPE_DEPTH} are allowed`);
      return;
    }
    if (param.type.replace(/\[.*$/, '') === 'function') type('function-typed arguments are not supported');
    if (/\[0+\]/.test(param.type)) type('a fixed-size array has at least one element');
    else if (/\[0\d/.test(param.type)) type('an array length is written without leading zeros');
    if (param.components) checkParams(param.components, [...path, i, 'components'], errors);
  });
}

// ---------------------------------------------------------------------------------------------
// Compiling the filter
// ---------------------------------------------------------------------------------------------

function checkNoFilter(filter: unknown, errors: FieldError[]): void {
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

function filterNotObject(filter: unknown): FieldError {
  return {
    pointer: pointer(FILTER_POINTER),
    detail: `must be an object mapping indexed argument names to a value or a list of values; got ${describe(filter)}`,
  };
}

function compileFilter(abi: AbiEvent, filter: unknown, errors: FieldError[]): (Hex[] | null)[] {
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

const INTEGER_TYPE = /^(u?)int(\d+)$/;
const FIXED_BYTES_TYPE = /^bytes(\d+)$/;
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
export function decodeFollowedLog(event: FollowedEvent, log: LogLike): Record<string, unknown> | undefined {
  const abi = event.abi;
  if (abi === null || log.topics.length !== event.topicCount) return undefined;
  // Offsets that point many values at one long tail would decode to far more than the log holds.
  if (!decodesWithinData(inputsOf(abi), log.data)) return undefined;
  const topics = log.topics.map((topic) => topic.toLowerCase() as Hex);
  let decoded: { args?: unknown };
  try {
    decoded = decodeEventLog({
      abi: [abi],
      eventName: abi.name,
      topics: topics as [Hex, ...Hex[]],
      data: log.data.toLowerCase() as Hex,
      strict: true,
    });
  } catch {
    return undefined;
  }
  const args = decoded.args;
  const inputs = inputsOf(abi);
  // viem keys the args by name, or by position as soon as one input is unnamed.
  const byPosition = inputs.some((input) => !input.name);
  const out: Record<string, unknown> = {};
  inputs.forEach((input, i) => {
    const value = valueAt(args, byPosition ? i : (input.name ?? ''));
    out[argKey(input, i)] = input.indexed && isHashedWhenIndexed(input.type) ? value : toJson(input, value);
  });
  return out;
}

function valueAt(container: unknown, key: string | number): unknown {
  if (Array.isArray(container)) return typeof key === 'number' ? container[key] : undefined;
  if (isPlainObject(container) && typeof key === 'string') return container[key];
  return undefined;
}

/** A decoded value in the notification's JSON shape (integers as decimal strings, addresses checksummed…). */
function toJson(param: Param, value: unknown): unknown {
  const array = arrayShape(param.type);
  if (array) {
    const element = { ...param, type: array.element };
    return Array.isArray(value) ? value.map((item) => toJson(element, item)) : value;
  }
  if (param.type === 'tuple') {
    const components = param.components ?? [];
    // viem decodes a tuple to an array when a component is unnamed, else to an object by name.
    const byPosition = components.some((component) => !component.name);
    return Object.fromEntries(
      components.map((component, i) => [
        argKey(component, i),
        toJson(component, valueAt(value, byPosition ? i : (component.name ?? ''))),
      ]),
    );
  }
  if (INTEGER_TYPE.test(param.type))
    return typeof value === 'bigint' || typeof value === 'number' ? String(value) : value;
  if (param.type === 'address') return typeof value === 'string' ? getAddress(value) : value;
  if (param.type === 'bytes' || FIXED_BYTES_TYPE.test(param.type))
    return typeof value === 'string' ? value.toLowerCase() : value;
  return value;
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

function inputsOf(abi: AbiEvent): readonly Param[] {
  return abi.inputs as readonly Param[];
}

/** An argument's key in filters and decoded args: its name, or "arg<position>" when it has none. */
function argKey(param: Param, position: number): string {
  return param.name ? param.name : `arg${position}`;
}

/** Indexed values of these types are stored as a hash in their topic, so the log holds only that. */
function isHashedWhenIndexed(type: string): boolean {
  return type === 'string' || type === 'bytes' || type === 'tuple' || arrayShape(type) !== undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function article(noun: string): string {
  return `${/^[aeiou]/.test(noun) ? 'an' : 'a'} ${noun}`;
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  if (typeof value === 'string')
    return JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value);
  if (typeof value === 'bigint') return String(value);
  return `${typeof value} ${JSON.stringify(value)}`;
}

/** A JSON Pointer (RFC 6901) into the request body; segments may come from users, so escape them. */
function pointer(segments: readonly Segment[]): string {
  return `#/${segments.map((segment) => String(segment).replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
}

function eventError(path: readonly Segment[], detail: string): FieldError {
  return { pointer: pointer([...EVENT_POINTER, ...path]), detail };
}
