/**
 * The field errors of an event subscription's create request: JSON pointers into `attr.event` and
 * `attr.filter`, and the words that describe what was sent.
 */
import type { FieldError } from '../../errors.js';

export type Segment = string | number;

export const EVENT_POINTER = ['attr', 'event'] as const;
export const FILTER_POINTER = ['attr', 'filter'] as const;

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function article(noun: string): string {
  return `${/^[aeiou]/.test(noun) ? 'an' : 'a'} ${noun}`;
}

/** What was sent, in a few words, for an error's detail. */
export function describe(value: unknown): string {
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
export function pointer(segments: readonly Segment[]): string {
  return `#/${segments.map((segment) => String(segment).replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
}

export function eventError(path: readonly Segment[], detail: string): FieldError {
  return { pointer: pointer([...EVENT_POINTER, ...path]), detail };
}
