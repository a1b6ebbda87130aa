import { describe, expect, test } from 'vitest';
import { sampleRegistryBody } from '../../test/helpers/registry-body.js';
import { ValidationError } from '../errors.js';
import { MAX_JSON_DEPTH, MalformedBodyError, parseJsonBody } from './json-body.js';

/** The pointers a refused body is reported at. */
function pointersOf(text: string): string[] {
  try {
    parseJsonBody(text);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return (err as ValidationError).errors.map((e) => e.pointer ?? '');
  }
  throw new Error(`accepted: ${text.slice(0, 80)}`);
}

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

describe('parseJsonBody', () => {
  test('gives what JSON.parse gives for ordinary bodies', () => {
    for (const text of [
      JSON.stringify(sampleRegistryBody()),
      '{}',
      '[]',
      '{"a": [1, 2.5e3, -0, true, false, null, "x", {"b": {}}], "c": ""}',
      ' \n{"emoji": "\\ud83d\\ude00 😀", "escaped": "\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9"}\t',
      '{"":1,"a/b~c":2,"constructor":{"name":"x"},"prototype":1}',
    ])
      expect(parseJsonBody(text)).toEqual(JSON.parse(text));
  });

  test('duplicate keys are refused at the pointer of the repeated key, wherever they are', () => {
    expect(pointersOf('{"title":"a","title":"b"}')).toEqual(['#/title']);
    expect(pointersOf('{"title":"a","title":"a"}')).toEqual(['#/title']);
    expect(pointersOf('{"a":{"b":[{"k":1},{"k":1,"k":2}]}}')).toEqual(['#/a/b/1/k']);
    expect(pointersOf('{"zz":1,"\\u007a\\u007a":2}')).toEqual(['#/zz']);
    expect(pointersOf('{"a/b~c":1,"a/b~c":2}')).toEqual(['#/a~1b~0c']);
    expect(pointersOf('{"a":1,"b":2,"a":3,"b":4}')).toEqual(['#/a', '#/b']);
  });

  test('NUL characters are refused in strings and keys', () => {
    expect(pointersOf('{"title":"a\\u0000b"}')).toEqual(['#/title']);
    expect(pointersOf('{"metadata":[{"key":"k","value":"\\u0000"}]}')).toEqual(['#/metadata/0/value']);
    expect(pointersOf('{"a\\u0000b":1}')).toEqual(['#/a\u0000b']);
    expect(pointersOf('["ok","\\u0000"]')).toEqual(['#/1']);
  });

  test('unpaired surrogates are refused; pairs are not', () => {
    expect(pointersOf('{"title":"a\\ud800b"}')).toEqual(['#/title']);
    expect(pointersOf('{"title":"\\udc00"}')).toEqual(['#/title']);
    expect(pointersOf('{"title":"\\ude00\\ud83d"}')).toEqual(['#/title']);
    expect(pointersOf('{"\\ud800":1}')).toEqual(['#/\ud800']);
    // A JavaScript string can hold one raw, though a UTF-8 body cannot.
    expect(pointersOf('{"title":"a\ud800"}')).toEqual(['#/title']);
    expect(parseJsonBody('"\\ud83d\\ude00"')).toBe('😀');
  });

  test('every problem is reported, up to 20', () => {
    expect(pointersOf('{"a":"\\u0000","b":"\\ud800","a":1}')).toEqual(['#/a', '#/b', '#/a']);
    const many = `[${Array.from({ length: 100 }, () => '"\\u0000"').join(',')}]`;
    expect(pointersOf(many)).toHaveLength(20);
  });

  test(`nesting up to ${MAX_JSON_DEPTH} levels is taken; deeper is refused where it goes too deep`, () => {
    expect(parseJsonBody(nested(MAX_JSON_DEPTH))).toEqual(JSON.parse(nested(MAX_JSON_DEPTH)));
    const tooDeep = `#${'/0'.repeat(MAX_JSON_DEPTH)}`;
    expect(pointersOf(nested(MAX_JSON_DEPTH + 1))).toEqual([tooDeep]);
    expect(pointersOf(nested(5000))).toEqual([tooDeep]);
    expect(pointersOf(`{"a":${nested(5000)}}`)).toEqual([`#/a${'/0'.repeat(MAX_JSON_DEPTH - 1)}`]);
    expect(pointersOf(`${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`)).toEqual([
      `#${'/a'.repeat(MAX_JSON_DEPTH)}`,
    ]);
    // A million levels (what fits in the default 1 MiB body limit) neither overflows nor hangs.
    expect(pointersOf(nested(1_000_000))).toEqual([tooDeep]);
    expect(pointersOf(`${'['.repeat(1_000_000)}`)).toEqual([tooDeep]);
  });

  test('malformed JSON is refused as a whole', () => {
    for (const text of [
      '',
      ' ',
      '{',
      '{"a":}',
      '{"a" 1}',
      "{'a':1}",
      '{"a":1,}',
      '[1,]',
      '{} x',
      'nul',
      '"\\x"',
      '"a\u0001"',
    ])
      expect(() => parseJsonBody(text), JSON.stringify(text)).toThrow(MalformedBodyError);
    // Too deep and malformed before the depth is reached: malformed.
    expect(() => parseJsonBody(`[x${nested(100)}]`)).toThrow(MalformedBodyError);
  });

  test('prototype poisoning is refused as Fastify refuses it', () => {
    for (const text of [
      '{"__proto__":{"isAdmin":true}}',
      '{"a":[{"__proto__":{}}]}',
      '{"constructor":{"prototype":{"isAdmin":true}}}',
      '{"\\u005f_proto__":{}}',
    ])
      expect(() => parseJsonBody(text), text).toThrow(MalformedBodyError);
  });
});
