/**
 * A log decoded against a followed event's ABI into the notification's JSON-ready arguments, or
 * found not to be that event. Decoding is viem's; what it may yield is first bounded by the log's
 * data (abi-encoded-size.ts).
 */
import { decodeEventLog, getAddress, type Hex } from 'viem';
import { decodesWithinData } from './abi-encoded-size.js';
import { argKey, arrayShape, FIXED_BYTES_TYPE, INTEGER_TYPE, inputsOf, type Param } from './abi-types.js';
import { isPlainObject } from './event-fields.js';
import type { FollowedEvent, LogLike } from './followed-event.js';

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

/** Indexed values of these types are stored as a hash in their topic, so the log holds only that. */
function isHashedWhenIndexed(type: string): boolean {
  return type === 'string' || type === 'bytes' || type === 'tuple' || arrayShape(type) !== undefined;
}
