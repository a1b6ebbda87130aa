import { type FieldError, LedgerhookError, ValidationError } from '../errors.js';
import { escapePointerToken } from '../http-kit/validation.js';

declare global {
  interface String {
    /** ES2024, in Node since 20: false when the string holds an unpaired UTF-16 surrogate. */
    isWellFormed(): boolean;
  }
}

/** Deeper than any body the API takes by far, shallow enough that no walk can exhaust the stack. */
export const MAX_JSON_DEPTH = 64;
/** Beyond this many field errors, one more tells the client nothing new. */
const MAX_ERRORS = 20;

/** A client error that is about the body as a whole (problem type `bad_request`, pointer `#`). */
export class MalformedBodyError extends LedgerhookError {
  readonly statusCode = 400;
}

const NOT_JSON = 'The body is not valid JSON';
const POISONED = 'The body has a "__proto__" key or a "constructor.prototype" key, which are refused';

/** What is wrong with one string, or undefined; NUL cannot be stored by PostgreSQL. */
function stringProblem(value: string): string | undefined {
  if (value.includes('\u0000')) return 'contains a NUL character (\\u0000)';
  if (!value.isWellFormed()) return 'contains an unpaired UTF-16 surrogate (such as \\ud800)';
  return undefined;
}

/**
 * One pass over the text, outside strings: how deep it nests and how many object members it has.
 * JSON.parse keeps the last of duplicate keys, so fewer keys in its result than members here
 * means a duplicate.
 */
function scan(text: string): { members: number; tooDeep: boolean } {
  let depth = 0;
  let members = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // Strings are skipped natively: to the next quote not escaped by an odd run of backslashes.
      for (;;) {
        const end = text.indexOf('"', i + 1);
        if (end < 0) return { members, tooDeep: false };
        let backslashes = 0;
        while (text.charCodeAt(end - 1 - backslashes) === 0x5c) backslashes++;
        i = end;
        if (backslashes % 2 === 0) break;
      }
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > MAX_JSON_DEPTH) return { members, tooDeep: true };
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    } else if (c === 0x3a) {
      members++;
    }
  }
  return { members, tooDeep: false };
}

/**
 * Counts the keys of a parsed value (its depth is bounded by `scan`), or returns -1 at the first
 * string, key or prototype-poisoning key that must be refused: `locate` then says where. Strings
 * are looked at only when the text could hold a bad one (`checkStrings`).
 */
function countKeys(value: unknown, checkStrings: boolean): number {
  if (typeof value === 'string') return checkStrings && stringProblem(value) !== undefined ? -1 : 0;
  if (value === null || typeof value !== 'object') return 0;
  let count = 0;
  if (Array.isArray(value)) {
    for (const item of value) {
      const n = countKeys(item, checkStrings);
      if (n < 0) return -1;
      count += n;
    }
    return count;
  }
  for (const key in value) {
    if (key === '__proto__' || (checkStrings && stringProblem(key) !== undefined)) return -1;
    const child = (value as Record<string, unknown>)[key];
    if (
      key === 'constructor' &&
      child !== null &&
      typeof child === 'object' &&
      Object.hasOwn(child, 'prototype')
    )
      return -1;
    const n = countKeys(child, checkStrings);
    if (n < 0) return -1;
    count += n + 1;
  }
  return count;
}

const LITERAL = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/y;
const WHITESPACE = /[ \t\n\r]*/y;

class Stop extends LedgerhookError {}

/**
 * The slow path, taken only when the fast checks found something: a recursive descent over the
 * text that names each offending place by its JSON pointer. Its depth is bounded by
 * MAX_JSON_DEPTH, so a hostile nesting cannot overflow the stack.
 */
function locate(text: string): { errors: FieldError[]; poisoned: boolean } {
  const errors: FieldError[] = [];
  let poisoned = false;
  let i = 0;

  const pointer = (path: string[]) => `#${path.map((t) => `/${escapePointerToken(t)}`).join('')}`;
  const report = (path: string[], detail: string) => {
    errors.push({ pointer: pointer(path), detail });
    if (errors.length >= MAX_ERRORS) throw new Stop();
  };
  const skipWhitespace = () => {
    WHITESPACE.lastIndex = i;
    WHITESPACE.test(text);
    i = WHITESPACE.lastIndex;
  };
  const expect = (char: string) => {
    skipWhitespace();
    if (text[i] !== char) throw new MalformedBodyError(NOT_JSON);
    i++;
  };
  const string = (): string => {
    const start = i;
    for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
    if (i >= text.length) throw new MalformedBodyError(NOT_JSON);
    i++;
    try {
      return JSON.parse(text.slice(start, i)) as string;
    } catch {
      throw new MalformedBodyError(NOT_JSON);
    }
  };
  const value = (path: string[]): void => {
    skipWhitespace();
    const c = text[i];
    if (c === '"') {
      const problem = stringProblem(string());
      if (problem) report(path, problem);
    } else if (c === '{' || c === '[') {
      if (path.length >= MAX_JSON_DEPTH) {
        report(path, `nests deeper than ${MAX_JSON_DEPTH} levels`);
        throw new Stop();
      }
      i++;
      if (c === '{') members(path);
      else items(path);
    } else {
      LITERAL.lastIndex = i;
      if (!LITERAL.test(text)) throw new MalformedBodyError(NOT_JSON);
      i = LITERAL.lastIndex;
    }
  };
  const members = (path: string[]) => {
    const seen = new Set<string>();
    skipWhitespace();
    if (text[i] === '}') {
      i++;
      return;
    }
    for (;;) {
      skipWhitespace();
      if (text[i] !== '"') throw new MalformedBodyError(NOT_JSON);
      const key = string();
      const at = [...path, key];
      const problem = stringProblem(key);
      if (problem) report(at, `${problem} in its name`);
      if (seen.has(key)) report(at, 'is a duplicate key: each key may appear once in an object');
      seen.add(key);
      if (key === '__proto__' || (key === 'prototype' && path.at(-1) === 'constructor')) poisoned = true;
      expect(':');
      value(at);
      skipWhitespace();
      if (text[i] === ',') {
        i++;
        continue;
      }
      expect('}');
      return;
    }
  };
  const items = (path: string[]) => {
    skipWhitespace();
    if (text[i] === ']') {
      i++;
      return;
    }
    for (let index = 0; ; index++) {
      value([...path, String(index)]);
      skipWhitespace();
      if (text[i] === ',') {
        i++;
        continue;
      }
      expect(']');
      return;
    }
  };

  try {
    value([]);
  } catch (err) {
    if (!(err instanceof Stop)) throw err;
  }
  return { errors, poisoned };
}

function refuse(text: string): never {
  const { errors, poisoned } = locate(text);
  if (errors.length > 0) throw new ValidationError('Invalid JSON body', errors);
  if (poisoned) throw new MalformedBodyError(POISONED);
  // The fast checks disagree with the slow one: refuse rather than guess.
  throw new MalformedBodyError('The body could not be checked');
}

/**
 * Parses a request body strictly: besides JSON syntax, refuses duplicate keys, NUL characters and
 * unpaired surrogates in keys and strings, nesting deeper than MAX_JSON_DEPTH, and the keys of
 * prototype poisoning (as Fastify's own parser does). Field errors carry the JSON pointer of the
 * offending place.
 */
export function parseJsonBody(text: string): unknown {
  // JSON.parse is fast and already in native code; the checks it lacks cost one scan of the text
  // and one walk of the result, and only a refused body pays for the pointer-finding slow path.
  const { members, tooDeep } = scan(text);
  if (tooDeep) refuse(text);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new MalformedBodyError(NOT_JSON);
  }
  // A raw NUL is a syntax error and decoded UTF-8 is always well-formed: without a \u escape (or a
  // raw surrogate, possible only in a string handed in by JavaScript) no string can be refused.
  const checkStrings = text.includes('\\u') || !text.isWellFormed();
  if (countKeys(value, checkStrings) !== members) refuse(text);
  return value;
}
