/**
 * Contract event subscriptions (CONTRACT_LOG_EVENT, docs/subscriptions.md): the event a create
 * request follows and its filter, parsed (event-parse.ts) and compiled (event-filter.ts) into the
 * FollowedEvent that is stored and matched (event-decode.ts decodes its logs).
 */
import { type AbiEvent, type Hex, keccak256, stringToBytes, toEventSignature } from 'viem';
import type { FieldError } from '../../errors.js';
import { inputsOf } from './abi-types.js';
import { FILTER_POINTER, isPlainObject, pointer } from './event-fields.js';
import { checkNoFilter, compileFilter, filterNotObject, MAX_FILTER_LENGTH } from './event-filter.js';
import { parseEvent } from './event-parse.js';
import type { FollowedEvent } from './followed-event.js';

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
