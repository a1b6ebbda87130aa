/**
 * The event of a create request read and checked: a human-readable signature (read by
 * event-signature.ts), a JSON ABI fragment, or a bare topic0. Every problem is reported at its own
 * pointer, at once; what is accepted is bounded (nesting, and the least data its arguments take).
 */
import type { AbiEvent, Hex } from 'viem';
import type { FieldError } from '../../errors.js';
import { minimumEncodedBytes } from './abi-encoded-size.js';
import {
  argKey,
  asAbiEvent,
  canonicalElementaryType,
  elementaryTypeHint,
  inputsOf,
  type Param,
  typeDepth,
} from './abi-types.js';
import { article, describe, EVENT_POINTER, eventError, isPlainObject, type Segment } from './event-fields.js';
import { MAX_TYPE_DEPTH, parseEventSignature, SignatureSyntaxError } from './event-signature.js';

/** Longest event description accepted (a signature, or a fragment's JSON). */
const MAX_EVENT_LENGTH = 4096;
/**
 * The most data an event's arguments may need at least (every array and string empty). A log's data
 * costs 8 gas a byte and its memory more: 1 MiB costs some 10 million gas, and no real event needs
 * a thousandth of it. Whatever is built from an event (a sample, a decoded log) stays within it.
 */
export const MAX_EVENT_DATA_BYTES = 1024 * 1024;

const EXAMPLE =
  'e.g. "event Transfer(address indexed from, address indexed to, uint256 value)", a JSON ABI event fragment, or a topic0 (0x and 64 hex digits)';

export type ParsedEvent = { kind: 'abi'; abi: AbiEvent } | { kind: 'topic0'; topic0: Hex };

export function parseEvent(event: unknown, errors: FieldError[]): ParsedEvent | undefined {
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
