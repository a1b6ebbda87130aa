/**
 * A human-readable event signature (`event Transfer(address indexed from, …)`) read into the
 * parameters of a JSON ABI fragment. It is read here, not by abitype's parser, because that parser
 * keeps every parameter string it has seen in a module-level map that never shrinks (a refused
 * create request grew it too) and recurses once per character of its input.
 *
 * Tuple nesting depth is checked before anything is read, so the recursive descent below stays shallow.
 */

import { LedgerhookError } from '../../errors.js';
import { canonicalElementaryType } from './abi-types.js';

/** A parameter as a JSON ABI fragment has it. */
export interface SignatureParam {
  type: string;
  name?: string;
  indexed?: true;
  components?: SignatureParam[];
}

export interface ParsedSignature {
  name: string;
  inputs: SignatureParam[];
  anonymous: boolean;
}

/** Levels of tuples and array dimensions one argument may nest, in either form of an event. */
export const MAX_TYPE_DEPTH = 16;

/** Why a signature cannot be read; the caller adds where it came from. */
export class SignatureSyntaxError extends LedgerhookError {}

const IDENTIFIER = /^[a-zA-Z$_][a-zA-Z0-9$_]*$/;
const DATA_LOCATIONS = new Set(['calldata', 'memory', 'storage']);

/**
 * Words a parameter may not be named: Solidity's keywords and type names, and the words it
 * reserves for the future. A name pasted from source that compiled is never one of them.
 */
const RESERVED_NAMES = new Set(
  (
    'abstract after alias anonymous apply assembly auto break byte calldata case catch constant ' +
    'constructor continue contract copyof default define delete do else emit enum error event ' +
    'external fallback false final for function if immutable implements import in indexed inline ' +
    'interface internal is let library macro mapping match memory modifier mutable new null of ' +
    'override partial payable pragma private promise public pure receive reference relocatable ' +
    'return returns sealed sizeof static storage struct super supports switch this true try type ' +
    'typedef typeof unchecked using var view virtual while'
  ).split(' '),
);

function isReservedName(name: string): boolean {
  return RESERVED_NAMES.has(name) || canonicalElementaryType(name) !== undefined;
}

/**
 * Cleans up what people paste: no leading "event", free whitespace and line breaks, a trailing
 * ";", `tuple(…)` for a tuple, and Solidity's trailing "anonymous".
 */
function normalise(text: string): { body: string; anonymous: boolean } {
  let body = text
    .replace(/;\s*$/, '')
    .replace(/\s+/g, ' ')
    .replace(/\s*([()[\],])\s*/g, '$1')
    .replace(/\btuple\(/g, '(')
    .trim();
  const anonymous = /\)\s*anonymous$/.test(body);
  if (anonymous) body = body.replace(/\s*anonymous$/, '');
  body = body.replace(/^event\s+/, '');
  return { body, anonymous };
}

/** How deep parentheses nest, read in one pass; Infinity when they do not balance. */
function parenthesesDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  for (const char of text) {
    if (char === '(') deepest = Math.max(deepest, ++depth);
    else if (char === ')' && --depth < 0) return Number.POSITIVE_INFINITY;
  }
  return depth === 0 ? deepest : Number.POSITIVE_INFINITY;
}

type Token = '(' | ')' | ',' | { dimension: string } | { word: string };

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  const pattern = /\s*(\(|\)|,|\[\d*\]|[a-zA-Z$_][a-zA-Z0-9$_]*|\S)/y;
  for (;;) {
    const start = pattern.lastIndex;
    const match = pattern.exec(text);
    if (!match) {
      if (text.slice(start).trim() !== '')
        throw new SignatureSyntaxError(`unexpected "${text.slice(start)}"`);
      return tokens;
    }
    const token = match[1] ?? '';
    if (token === '(' || token === ')' || token === ',') tokens.push(token);
    else if (token.startsWith('[')) tokens.push({ dimension: token });
    else if (IDENTIFIER.test(token)) tokens.push({ word: token });
    else throw new SignatureSyntaxError(`unexpected "${token}"`);
  }
}

/** Recursive descent over the tokens; its depth is that of the signature's nesting, already bounded. */
function createReader(tokens: Token[]) {
  let at = 0;
  const peek = () => tokens[at];
  const describe = (token: Token | undefined) =>
    token === undefined
      ? 'the end'
      : typeof token === 'string'
        ? `"${token}"`
        : 'word' in token
          ? `"${token.word}"`
          : `"${token.dimension}"`;
  const expect = (wanted: '(' | ')') => {
    const token = tokens[at++];
    if (token !== wanted) throw new SignatureSyntaxError(`expected "${wanted}" but found ${describe(token)}`);
  };
  const word = (): string | undefined => {
    const token = peek();
    if (token === undefined || typeof token === 'string' || !('word' in token)) return undefined;
    at++;
    return token.word;
  };

  function dimensions(): string {
    let suffix = '';
    for (let token = peek(); token !== undefined && typeof token !== 'string' && 'dimension' in token; ) {
      suffix += token.dimension;
      at++;
      token = peek();
    }
    return suffix;
  }

  function param(topLevel: boolean): SignatureParam {
    let param: SignatureParam;
    if (peek() === '(') {
      at++;
      const components = list();
      if (components.length === 0) throw new SignatureSyntaxError('a tuple "()" has no members');
      expect(')');
      param = { type: `tuple${dimensions()}`, components };
    } else {
      const base = word();
      if (base === undefined) throw new SignatureSyntaxError(`expected a type but found ${describe(peek())}`);
      const next = peek();
      if (base === 'address' && typeof next === 'object' && 'word' in next && next.word === 'payable') at++;
      param = { type: `${base}${dimensions()}` };
    }
    let name = word();
    if (name === 'indexed') {
      if (!topLevel)
        throw new SignatureSyntaxError('"indexed" is for the event\'s own arguments, not tuple members');
      param.indexed = true;
      name = word();
    } else if (name !== undefined && DATA_LOCATIONS.has(name)) {
      throw new SignatureSyntaxError(`"${name}" is a data location, which an event's arguments do not have`);
    }
    if (name !== undefined) {
      if (isReservedName(name))
        throw new SignatureSyntaxError(
          `"${name}" is a protected Solidity keyword and cannot name an argument`,
        );
      param.name = name;
    }
    const next = peek();
    if (next !== undefined && next !== ',' && next !== ')')
      throw new SignatureSyntaxError(`expected "," or ")" but found ${describe(next)}`);
    return param;
  }

  function list(topLevel = false): SignatureParam[] {
    const params: SignatureParam[] = [];
    if (peek() === ')') return params;
    for (;;) {
      params.push(param(topLevel));
      if (peek() !== ',') return params;
      at++;
    }
  }

  return {
    event(): { name: string; inputs: SignatureParam[] } {
      const name = word();
      if (name === undefined)
        throw new SignatureSyntaxError(`expected the event's name but found ${describe(peek())}`);
      expect('(');
      const inputs = list(true);
      expect(')');
      if (at < tokens.length)
        throw new SignatureSyntaxError(`unexpected ${describe(peek())} after the arguments`);
      return { name, inputs };
    },
  };
}

/**
 * Reads a signature into an event's name and parameters (types as written: the caller checks them).
 * Throws SignatureSyntaxError saying what is wrong.
 */
export function parseEventSignature(text: string): ParsedSignature {
  const { body, anonymous } = normalise(text);
  const depth = parenthesesDepth(body);
  if (depth === Number.POSITIVE_INFINITY) throw new SignatureSyntaxError('its parentheses do not balance');
  // The first level is the argument list itself. Array dimensions are counted once it is read.
  if (depth - 1 > MAX_TYPE_DEPTH)
    throw new SignatureSyntaxError(
      `it nests tuples ${depth - 1} deep; at most ${MAX_TYPE_DEPTH} levels are allowed`,
    );
  const { name, inputs } = createReader(tokenize(body)).event();
  return { name, inputs, anonymous };
}
