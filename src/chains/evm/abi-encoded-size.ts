/**
 * What an ABI encoding takes and yields, sized without decoding it. A declared type can promise
 * far more than any log holds (`uint256[4294967295]`), and a log's data can make a decoder yield far
 * more than it holds (many offsets pointing at one long string): both are bounded here first, so
 * that what is built from an event is bounded by the data a log can carry.
 */
import { arrayShape, isDynamic, type Param } from './abi-types.js';

const WORD = 32;

/** A parameter's type reduced to what its encoding's layout depends on, built once per event. */
interface Shape {
  dynamic: boolean;
  /** The bytes it takes in its parent's head: its whole encoding when static, an offset when dynamic. */
  headBytes: number;
  /** How its tail (or, when static, its value) is laid out. */
  kind: 'word' | 'bytes' | 'array' | 'tuple';
  /** An array's element. */
  element?: Shape;
  /** A fixed-size array's length; undefined for `T[]`. */
  length?: number;
  /** A tuple's members. */
  members?: Shape[];
}

function shapeOf(param: Param): Shape {
  const dynamic = isDynamic(param);
  const array = arrayShape(param.type);
  if (array) {
    const element = shapeOf({ ...param, type: array.element });
    const headBytes = dynamic ? WORD : (array.length ?? 0) * element.headBytes;
    return { dynamic, headBytes, kind: 'array', element, length: array.length };
  }
  if (param.type === 'tuple') {
    const members = (param.components ?? []).map(shapeOf);
    const headBytes = dynamic ? WORD : members.reduce((sum, member) => sum + member.headBytes, 0);
    return { dynamic, headBytes, kind: 'tuple', members };
  }
  return { dynamic, headBytes: WORD, kind: dynamic ? 'bytes' : 'word' };
}

/** The fewest bytes a shape's tail takes: a length word, or what its elements or members take at least. */
function minimumTailBytes(shape: Shape): number {
  if (shape.kind === 'bytes' || (shape.kind === 'array' && shape.length === undefined)) return WORD;
  if (shape.kind === 'array') return (shape.length ?? 0) * minimumBytes(shape.element!);
  return (shape.members ?? []).reduce((sum, member) => sum + minimumBytes(member), 0);
}

/** The fewest bytes a value of this shape takes where it is encoded: its head part and its tail. */
function minimumBytes(shape: Shape): number {
  return shape.dynamic ? WORD + minimumTailBytes(shape) : shape.headBytes;
}

/**
 * The fewest bytes the encoding of these parameters, one after the other, can take (every dynamic
 * array empty, every string and bytes empty). A float: a declared length may be astronomically large.
 */
export function minimumEncodedBytes(params: readonly Param[]): number {
  return params.reduce((sum, param) => sum + minimumBytes(shapeOf(param)), 0);
}

const shapes = new WeakMap<readonly Param[], Shape[]>();

/**
 * Whether decoding `data` as the event's unindexed inputs yields no more than the data holds: each static
 * value counts a word, each string or bytes its length word and contents, each array its length
 * word, and the sum may not pass the data's size. An encoding made by Solidity always passes (it
 * also holds the offsets); one whose offsets point many values at the same long tail does not.
 * The walk stops as soon as the sum passes, so it costs at most a step per word of data.
 */
export function decodesWithinData(inputs: readonly Param[], data: string): boolean {
  let shaped = shapes.get(inputs);
  if (!shaped) {
    shaped = inputs.filter((input) => !input.indexed).map(shapeOf);
    shapes.set(inputs, shaped);
  }
  if (!shaped.some((shape) => shape.dynamic)) return true;
  const size = (data.length - 2) / 2;
  let budget = size;

  /** The word at a byte position as a safe integer, or undefined when it is past the data or too large. */
  const wordAt = (position: number): number | undefined => {
    if (!Number.isSafeInteger(position) || position < 0 || position + WORD > size) return undefined;
    const digits = data.slice(2 + 2 * position, 2 + 2 * (position + WORD));
    if (!/^0{50}/.test(digits)) return undefined;
    return Number.parseInt(digits.slice(50), 16);
  };

  /** Values laid out from `start`, the ith of shape `shapeAt(i)`: heads in order, tails at their offsets. */
  const sequence = (count: number, shapeAt: (i: number) => Shape, start: number): boolean => {
    let head = start;
    for (let i = 0; i < count; i++) {
      const shape = shapeAt(i);
      if (!shape.dynamic) {
        budget -= shape.headBytes;
        if (budget < 0) return false;
      } else {
        const offset = wordAt(head);
        if (offset === undefined || !tail(shape, start + offset)) return false;
      }
      head += shape.headBytes;
    }
    return true;
  };

  const tail = (shape: Shape, position: number): boolean => {
    if (shape.kind === 'tuple') {
      const members = shape.members ?? [];
      return sequence(members.length, (i) => members[i]!, position);
    }
    const element = shape.element!;
    if (shape.kind === 'array' && shape.length !== undefined)
      return elements(element, shape.length, position);
    const length = wordAt(position);
    if (length === undefined) return false;
    budget -= WORD;
    if (shape.kind === 'bytes') {
      budget -= length;
      return budget >= 0 && position + WORD + length <= size;
    }
    return budget >= 0 && elements(element, length, position + WORD);
  };

  /** `count` elements from `start`: static ones are counted at once, dynamic ones walked. */
  const elements = (element: Shape, count: number, start: number): boolean => {
    if (!element.dynamic) {
      budget -= count * element.headBytes;
      return budget >= 0;
    }
    // Each dynamic element spends at least a word, so this loop ends within the budget.
    return sequence(count, () => element, start);
  };

  const layout = shaped;
  return sequence(layout.length, (i) => layout[i]!, 0);
}
