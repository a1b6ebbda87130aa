import type { AbiEvent } from 'viem';
/**
 * What an ABI type is, read from its text: elementary types by Solidity's grammar, arrays split at
 * their last dimension, and how deep a parameter nests. Elementary types are recognised here rather
 * than by abitype's parser, which keeps every distinct string it is given in a map that never
 * shrinks (`uint8[1]`, `uint8[2]`… each a new entry).
 */

/** An ABI parameter as the event code walks it (viem's types are unions too narrow to build or walk generically). */
export interface Param {
  type: string;
  name?: string;
  indexed?: boolean;
  components?: readonly Param[];
}

/** Integer and fixed-size bytes types, by their size: `uint256` is ('', '256'), `bytes32` is ('32'). */
export const INTEGER_TYPE = /^(u?)int(\d{1,3})$/;
export const FIXED_BYTES_TYPE = /^bytes(\d{1,2})$/;

/**
 * The canonical spelling of an elementary type (`uint` is `uint256`), or undefined when the text
 * names none. Sizes follow Solidity: integers of 8 to 256 bits in steps of 8, bytes1 to bytes32.
 * Fixed-point types are not among them: no compiler emits them and viem cannot decode them.
 */
export function canonicalElementaryType(type: string): string | undefined {
  switch (type) {
    case 'address':
    case 'bool':
    case 'string':
    case 'bytes':
    case 'function':
      return type;
    case 'uint':
    case 'int':
      return `${type}256`;
  }
  const integer = INTEGER_TYPE.exec(type);
  if (integer) {
    const bits = Number(integer[2]);
    return bits >= 8 && bits <= 256 && bits % 8 === 0 && !integer[2]?.startsWith('0') ? type : undefined;
  }
  const bytes = FIXED_BYTES_TYPE.exec(type);
  if (bytes) {
    const size = Number(bytes[1]);
    return size >= 1 && size <= 32 && !bytes[1]?.startsWith('0') ? type : undefined;
  }
  return undefined;
}

/** Why a text that looks like an elementary type is not one, for an error message. */
export function elementaryTypeHint(type: string): string | undefined {
  if (INTEGER_TYPE.test(type)) return 'an integer type has 8 to 256 bits, in steps of 8';
  if (FIXED_BYTES_TYPE.test(type)) return 'a fixed-size bytes type has 1 to 32 bytes';
  return undefined;
}

/** `T[k]` or `T[]`, split at its last dimension (`uint8[2][]` is an array of `uint8[2]`). */
export function arrayShape(type: string): { element: string; length: number | undefined } | undefined {
  const match = /^(.*)\[(\d*)\]$/.exec(type);
  if (!match) return undefined;
  return { element: match[1] ?? '', length: match[2] === '' ? undefined : Number(match[2]) };
}

/** The array dimensions a type ends with (`uint8[2][]` has 2). */
export function dimensionCount(type: string): number {
  return type.match(/\[\d*\]/g)?.length ?? 0;
}

/** Levels of tuples and array dimensions a parameter nests: `uint256` is 0, `(uint8[])[2]` is 3. */
export function typeDepth(param: Param): number {
  const inner = (param.components ?? []).reduce((deepest, member) => Math.max(deepest, typeDepth(member)), 0);
  return dimensionCount(param.type) + (param.components ? 1 + inner : 0);
}

/** Whether the type's encoding has a tail (an offset in the head): strings, bytes, `T[]`, and what holds one. */
export function isDynamic(param: Param): boolean {
  if (param.type === 'string' || param.type === 'bytes') return true;
  const array = arrayShape(param.type);
  if (array) return array.length === undefined || isDynamic({ ...param, type: array.element });
  return param.type === 'tuple' && (param.components ?? []).some(isDynamic);
}

/** An event's inputs as this code walks them. */
export function inputsOf(abi: { inputs: readonly unknown[] }): readonly Param[] {
  return abi.inputs as readonly Param[];
}

/** An argument's key in filters and decoded args: its name, or "arg<position>" when it has none. */
export function argKey(param: Param, position: number): string {
  return param.name ? param.name : `arg${position}`;
}

/** An event ABI item built from its parts (viem's types are too narrow to build one generically). */
export function asAbiEvent(name: string, inputs: Param[], anonymous: boolean): AbiEvent {
  const abi = { type: 'event', name, inputs } as unknown as AbiEvent;
  if (anonymous) abi.anonymous = true;
  return abi;
}
