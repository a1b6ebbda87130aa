/**
 * Internal native transfers read from a block's call traces, in the two formats nodes answer:
 * geth's `debug_traceBlockByNumber` with `callTracer` (a nested frame tree per transaction) and
 * `trace_block` (parity/erigon: flat entries with a `traceAddress`). Pure: no I/O. What counts is
 * docs/internal-transfers.md's rule; DELEGATECALL never does, even where a tracer shows a value
 * (geth's flat tracer repeats the parent's). Everything a node answered is checked before it is
 * believed: a transfer read from the wrong block, or a trace cut short, would be notified as real.
 */
import type { Hex } from 'viem';
import { LedgerhookError } from '../../errors.js';

/** debug = debug_traceBlockByNumber with {tracer:'callTracer'}; parity = trace_block. */
export type TraceFormat = 'debug' | 'parity';

/** One internal movement of native value found in a transaction's trace. */
export interface InternalTransfer {
  /** The frame's child indexes from the top-level call, joined by dots: "0.2.1". */
  traceAddress: string;
  frame: 'call' | 'create' | 'create2' | 'selfdestruct';
  /** Lower case. For a selfdestruct, the destroyed contract. */
  from: Hex;
  /** Lower case. The created contract for a creation; the beneficiary for a selfdestruct. */
  to: Hex;
  value: bigint;
}

/** A callTracer frame (nested). Its shape is checked at run time: a malformed frame throws TraceMismatchError. */
export interface CallFrame {
  type: string;
  from: string;
  to?: string;
  value?: string;
  error?: string;
  calls?: CallFrame[];
  [k: string]: unknown;
}

/** A parity/OpenEthereum/erigon trace entry. */
export interface ParityTrace {
  type: string;
  action: Record<string, unknown>;
  result?: Record<string, unknown> | null;
  error?: string;
  subtraces: number;
  traceAddress: number[];
  transactionHash?: string | null;
  transactionPosition?: number | null;
  blockHash?: string;
  blockNumber?: number;
  [k: string]: unknown;
}

/** A node's trace answer that does not belong to the block asked for, or is not a trace at all. */
export class TraceMismatchError extends LedgerhookError {}

// ---------------------------------------------------------------------------------------------
// The shapes accepted, all in one place: only what is documented (and recorded in the fixtures) is
// accepted, so a node that answers otherwise is noticed. Loosen here if one is found to.

/** A JSON-RPC quantity (execution-apis `uint`), at most 256 bits: also keeps BigInt off huge strings. */
const QUANTITY = /^0x(?:0|[1-9a-f][0-9a-f]{0,63})$/;
/** Any case: some clients checksum addresses; they are lower-cased on the way out. */
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const HASH = /^0x[0-9a-fA-F]{64}$/;

/**
 * The EVM refuses a call above depth 1024 (the top-level call is depth 0) but tracers still show
 * that failed frame, and a SELFDESTRUCT is shown one level below the frame that ran it: so no real
 * trace has a traceAddress longer than 1025. Deeper is malformed, and refusing it bounds the work
 * an answer can cause (traceAddress strings grow with depth).
 */
export const MAX_TRACE_DEPTH = 1025;

type Kind = InternalTransfer['frame'];

/** callTracer frame types: what each moves when it carries value (null: never moves value away). */
const CALL_TRACER_KINDS: Readonly<Record<string, Kind | null>> = {
  CALL: 'call',
  CREATE: 'create',
  CREATE2: 'create2',
  SELFDESTRUCT: 'selfdestruct',
  DELEGATECALL: null,
  CALLCODE: null,
  STATICCALL: null,
};
/** What a transaction itself can be: a call or a contract creation. */
const CALL_TRACER_TOP_TYPES: ReadonlySet<string> = new Set(['CALL', 'CREATE']);

/** Parity `call` entries by `action.callType`. */
const PARITY_CALL_KINDS: Readonly<Record<string, Kind | null>> = {
  call: 'call',
  delegatecall: null,
  staticcall: null,
  callcode: null,
};
/** Parity `create` entries by `action.creationMethod` (absent before geth/erigon added it: create). */
const PARITY_CREATE_KINDS: Readonly<Record<string, Kind>> = { create: 'create', create2: 'create2' };
const PARITY_TOP_TYPES: ReadonlySet<string> = new Set(['call', 'create']);

// ---------------------------------------------------------------------------------------------

type Json = Record<string, unknown>;

function isRecord(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function has(o: Json, key: string): boolean {
  return Object.hasOwn(o, key);
}

/** A short, safe rendering of something a node sent, for error messages. */
function show(v: unknown): string {
  const s = typeof v === 'string' ? JSON.stringify(v) : Array.isArray(v) ? 'an array' : String(v);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

// The checks below name only the field: the caller adds where the frame is when one throws
// (building that text for every frame would cost more than the checks).

/** Checked, as written: only the few addresses of counted transfers are lower-cased (by `moved`). */
function address(v: unknown, field: string): Hex {
  if (typeof v !== 'string' || !ADDRESS.test(v)) {
    throw new TraceMismatchError(`${field} is not an address: ${show(v)}`);
  }
  return v as Hex;
}

function quantity(v: unknown, field: string): bigint {
  // Most frames move nothing: no regular expression or BigInt for them.
  if (v === '0x0') return 0n;
  if (typeof v !== 'string' || !QUANTITY.test(v)) {
    throw new TraceMismatchError(`${field} is not a hex quantity: ${show(v)}`);
  }
  return BigInt(v);
}

/** A counted transfer as returned: addresses lower case. */
function moved(traceAddress: string, frame: Kind, from: Hex, to: Hex, value: bigint): InternalTransfer {
  return { traceAddress, frame, from: from.toLowerCase() as Hex, to: to.toLowerCase() as Hex, value };
}

/** `error` is absent or a message; anything else (null included) is not a documented shape. */
function errorOf(o: Json): string | undefined {
  if (!has(o, 'error')) return undefined;
  if (typeof o.error !== 'string') throw new TraceMismatchError(`error is not a string: ${show(o.error)}`);
  return o.error;
}

/** What a check threw, prefixed with where it was. */
function located(e: unknown, where: string): unknown {
  return e instanceof TraceMismatchError ? new TraceMismatchError(`${where}: ${e.message}`) : e;
}

function traceAddressString(path: readonly number[], depth: number): string {
  return path.slice(0, depth).join('.');
}

// ---------------------------------------------------------------------------------------------
// callTracer

/** A frame waiting to be visited: its depth and its index among its parent's calls. */
interface Pending {
  frame: unknown;
  depth: number;
  index: number;
}

/** Internal transfers of one transaction from its callTracer top frame. */
export function callFrameTransfers(top: CallFrame): InternalTransfer[] {
  return callTracerTransfers(top);
}

function callTracerTransfers(top: unknown): InternalTransfer[] {
  const out: InternalTransfer[] = [];
  // Visited depth first (preorder) with an explicit stack, so no answer can overflow the call
  // stack. In preorder, path[0..d-1] and failed[d-1] always describe the current frame's
  // ancestors, so a frame needs no link to its parent.
  const path: number[] = [];
  const failed: boolean[] = [];
  const stack: Pending[] = [{ frame: top, depth: 0, index: 0 }];
  while (stack.length > 0) {
    const { frame, depth, index } = stack.pop()!;
    if (depth > 0) path[depth - 1] = index;
    let f: CheckedFrame;
    try {
      f = checkedFrame(frame, depth);
    } catch (e) {
      throw located(e, `callTracer frame ${depth === 0 ? 'top' : traceAddressString(path, depth)}`);
    }
    const hasFailed = (depth > 0 && failed[depth - 1]!) || f.error !== undefined;
    failed[depth] = hasFailed;
    if (depth > 0 && !hasFailed && f.kind !== null && f.value > 0n && f.to !== undefined) {
      out.push(moved(traceAddressString(path, depth), f.kind, f.from, f.to, f.value));
    }
    const calls = f.calls;
    if (calls.length > 0 && depth + 1 > MAX_TRACE_DEPTH) {
      throw new TraceMismatchError(
        `callTracer frame ${traceAddressString(path, depth)}: calls deeper than the EVM allows (${MAX_TRACE_DEPTH})`,
      );
    }
    // Pushed last child first so that they are visited in order. A loop, not push(...calls): a
    // spread of a huge array overflows the call stack.
    for (let i = calls.length - 1; i >= 0; i--) stack.push({ frame: calls[i], depth: depth + 1, index: i });
  }
  return out;
}

interface CheckedFrame {
  /** Null: moves no value away (delegate/static/callcode). */
  kind: Kind | null;
  from: Hex;
  /** Undefined only for a creation that failed. */
  to: Hex | undefined;
  value: bigint;
  error: string | undefined;
  calls: readonly unknown[];
}

function checkedFrame(frame: unknown, depth: number): CheckedFrame {
  if (!isRecord(frame)) throw new TraceMismatchError('not an object');
  const type = frame.type;
  if (typeof type !== 'string' || !Object.hasOwn(CALL_TRACER_KINDS, type)) {
    throw new TraceMismatchError(`unknown type ${show(type)}`);
  }
  if (depth === 0 && !CALL_TRACER_TOP_TYPES.has(type)) {
    throw new TraceMismatchError(`a transaction cannot be a ${type}`);
  }
  const error = errorOf(frame);
  // A call always has a callee; only a creation that failed has no new contract to name.
  const creation = type === 'CREATE' || type === 'CREATE2';
  const to = has(frame, 'to') || !creation || error === undefined ? address(frame.to, 'to') : undefined;
  const calls = has(frame, 'calls') ? frame.calls : [];
  if (!Array.isArray(calls)) throw new TraceMismatchError('calls is not an array');
  return {
    kind: CALL_TRACER_KINDS[type]!,
    from: address(frame.from, 'from'),
    to,
    // STATICCALL frames have no `value`: nothing is sent.
    value: has(frame, 'value') ? quantity(frame.value, 'value') : 0n,
    error,
    calls,
  };
}

// ---------------------------------------------------------------------------------------------
// parity (trace_block, trace_transaction)

/** An entry checked and reduced to what the extraction needs. */
interface ParityNode {
  traceAddress: readonly number[];
  subtraces: number;
  failed: boolean;
  type: string;
  /** Null: moves no value away (delegate/static/callcode). */
  kind: Kind | null;
  from: Hex;
  /** Undefined only for a failed creation. */
  to: Hex | undefined;
  value: bigint;
}

function traceAddressOf(entry: Json): number[] {
  const ta = entry.traceAddress;
  if (!Array.isArray(ta)) throw new TraceMismatchError('traceAddress is not an array');
  // Checked before reading the elements: a huge array is refused without walking it.
  if (ta.length > MAX_TRACE_DEPTH) {
    throw new TraceMismatchError(`traceAddress deeper than the EVM allows (${MAX_TRACE_DEPTH})`);
  }
  for (const i of ta) {
    if (!Number.isSafeInteger(i) || i < 0) throw new TraceMismatchError(`traceAddress has ${show(i)}`);
  }
  return ta as number[];
}

function parityNode(entry: unknown, n: number): ParityNode {
  try {
    return checkedEntry(entry);
  } catch (e) {
    const ta = isRecord(entry) && Array.isArray(entry.traceAddress) ? entry.traceAddress : undefined;
    throw located(e, `trace entry ${n}${ta && ta.length <= MAX_TRACE_DEPTH ? ` [${ta.join(',')}]` : ''}`);
  }
}

function checkedEntry(entry: unknown): ParityNode {
  if (!isRecord(entry)) throw new TraceMismatchError('not an object');
  const traceAddress = traceAddressOf(entry);
  const subtraces = entry.subtraces;
  if (!Number.isSafeInteger(subtraces) || (subtraces as number) < 0) {
    throw new TraceMismatchError(`subtraces is ${show(subtraces)}`);
  }
  const action = entry.action;
  if (!isRecord(action)) throw new TraceMismatchError('action is not an object');
  if (has(entry, 'result') && entry.result !== null && !isRecord(entry.result)) {
    throw new TraceMismatchError('result is not an object');
  }
  const error = errorOf(entry);
  const failed = error !== undefined;
  switch (entry.type) {
    case 'call': {
      const callType = action.callType;
      if (typeof callType !== 'string' || !Object.hasOwn(PARITY_CALL_KINDS, callType)) {
        throw new TraceMismatchError(`unknown callType ${show(callType)}`);
      }
      return {
        traceAddress,
        subtraces: subtraces as number,
        failed,
        type: 'call',
        kind: PARITY_CALL_KINDS[callType]!,
        from: address(action.from, 'action.from'),
        to: address(action.to, 'action.to'),
        value: quantity(action.value, 'action.value'),
      };
    }
    case 'create': {
      const method = has(action, 'creationMethod') ? action.creationMethod : 'create';
      if (typeof method !== 'string' || !Object.hasOwn(PARITY_CREATE_KINDS, method)) {
        throw new TraceMismatchError(`unknown creationMethod ${show(method)}`);
      }
      // The new contract is in the result; a creation that failed has none.
      const result = isRecord(entry.result) ? entry.result : undefined;
      return {
        traceAddress,
        subtraces: subtraces as number,
        failed,
        type: 'create',
        kind: PARITY_CREATE_KINDS[method]!,
        from: address(action.from, 'action.from'),
        to: failed ? undefined : address(result?.address, 'result.address'),
        value: quantity(action.value, 'action.value'),
      };
    }
    case 'suicide':
      // The destroyed contract's whole balance goes to the refund address.
      return {
        traceAddress,
        subtraces: subtraces as number,
        failed,
        type: 'suicide',
        kind: 'selfdestruct',
        from: address(action.address, 'action.address'),
        to: address(action.refundAddress, 'action.refundAddress'),
        value: quantity(action.balance, 'action.balance'),
      };
    default:
      throw new TraceMismatchError(`not a transaction's trace entry: type ${show(entry.type)}`);
  }
}

/** traceAddress order, which is depth-first order: [0] < [0,0] < [0,1] < [1], numerically per index. */
function compareTraceAddress(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i] !== b[i]) return a[i]! - b[i]!;
  }
  return a.length - b.length;
}

/** Internal transfers of one transaction from its parity entries (the entries of that transaction only, any order). */
export function parityTransfers(entries: readonly ParityTrace[]): InternalTransfer[] {
  return parityTransactionTransfers(entries);
}

function entryName(traceAddress: readonly number[]): string {
  return `trace entry [${traceAddress.join(',')}]`;
}

function parityTransactionTransfers(entries: readonly unknown[], hashesChecked = false): InternalTransfer[] {
  if (entries.length === 0) throw new TraceMismatchError('a transaction without trace entries');
  let txHash: string | undefined;
  const nodes = entries.map((entry, n) => {
    const node = parityNode(entry, n);
    if (hashesChecked) return node;
    // geth's flat tracer leaves the hash off some entries; those that have one must agree.
    const hash = (entry as Json).transactionHash;
    if (hash !== undefined && hash !== null) {
      if (typeof hash !== 'string' || !HASH.test(hash)) {
        throw new TraceMismatchError(`trace entry ${n}: transactionHash ${show(hash)}`);
      }
      if (txHash !== undefined && hash.toLowerCase() !== txHash) {
        throw new TraceMismatchError(`trace entries of two transactions: ${txHash} and ${hash}`);
      }
      txHash = hash.toLowerCase();
    }
    return node;
  });
  // Nodes list them in this order already: sorted only when they do not.
  for (let i = 1; i < nodes.length; i++) {
    if (compareTraceAddress(nodes[i - 1]!.traceAddress, nodes[i]!.traceAddress) > 0) {
      nodes.sort((a, b) => compareTraceAddress(a.traceAddress, b.traceAddress));
      break;
    }
  }

  // One preorder pass checks the tree: a single top entry, every other entry the next child of
  // the entry above it, and each entry with exactly `subtraces` children (no gap, no duplicate).
  // open[d] is the entry at depth d on the current path, with the children seen so far.
  const out: InternalTransfer[] = [];
  const open: { node: ParityNode; seen: number }[] = [];
  const close = (to: number) => {
    while (open.length > to) {
      const { node, seen } = open.pop()!;
      if (seen !== node.subtraces) {
        throw new TraceMismatchError(
          `${entryName(node.traceAddress)}: subtraces ${node.subtraces} but ${seen} entries below it`,
        );
      }
    }
  };
  for (const node of nodes) {
    const ta = node.traceAddress;
    const d = ta.length;
    if (d === 0) {
      if (open.length > 0) throw new TraceMismatchError('two top-level trace entries');
      if (!PARITY_TOP_TYPES.has(node.type)) {
        throw new TraceMismatchError(`${entryName(ta)}: a transaction cannot be a ${node.type}`);
      }
      open.push({ node, seen: 0 });
      continue;
    }
    close(d);
    const parent = open[d - 1];
    if (parent === undefined) throw new TraceMismatchError(`${entryName(ta)}: no entry above it`);
    for (let i = 0; i < d - 1; i++) {
      if (ta[i] !== parent.node.traceAddress[i])
        throw new TraceMismatchError(`${entryName(ta)}: no entry above it`);
    }
    if (ta[d - 1] !== parent.seen || parent.seen >= parent.node.subtraces) {
      throw new TraceMismatchError(
        `${entryName(ta)}: not child ${parent.seen} of ${parent.node.subtraces} of the entry above it`,
      );
    }
    parent.seen++;
    node.failed ||= parent.node.failed;
    open.push({ node, seen: 0 });
    if (!node.failed && node.kind !== null && node.value > 0n && node.to !== undefined) {
      out.push(moved(ta.join('.'), node.kind, node.from, node.to, node.value));
    }
  }
  if (open.length === 0) throw new TraceMismatchError('no top-level trace entry');
  close(0);
  return out;
}

// ---------------------------------------------------------------------------------------------
// A block's answer

interface TracedBlock {
  hash: Hex;
  number: bigint;
  transactions: readonly { hash: Hex }[];
}

/**
 * A block's traces checked against the block it was asked for, then extracted: one array per
 * transaction of the block, in block order. Throws TraceMismatchError when the answer does not
 * belong to that block: not an array; wrong count of transactions; a transaction hash that differs
 * from the block's at that position or is unknown; (parity) an entry whose blockHash/blockNumber is
 * another block's; a malformed frame or entry (missing type/from, non-hex value, traceAddress not
 * consistent with subtraces); a per-transaction tracer error entry ({error: "..."} instead of result).
 */
export function blockInternalTransfers(
  format: TraceFormat,
  answer: unknown,
  block: { hash: Hex; number: bigint; transactions: readonly { hash: Hex }[] },
): InternalTransfer[][] {
  if (!Array.isArray(answer))
    throw new TraceMismatchError(`block ${block.number}: the trace answer is not an array`);
  switch (format) {
    case 'debug':
      return debugBlockTransfers(answer, block);
    case 'parity':
      return parityBlockTransfers(answer, block);
    default:
      throw new Error(`unknown trace format ${show(format)}`);
  }
}

/** `debug_traceBlockByNumber` with callTracer: `[{txHash, result}]`, one per transaction in block order. */
function debugBlockTransfers(answer: readonly unknown[], block: TracedBlock): InternalTransfer[][] {
  const txs = block.transactions;
  if (answer.length !== txs.length) {
    throw new TraceMismatchError(
      `block ${block.number}: traces of ${answer.length} transactions for ${txs.length} in the block`,
    );
  }
  const out: InternalTransfer[][] = [];
  for (let i = 0; i < answer.length; i++) {
    try {
      out.push(debugTransactionTransfers(answer[i], txs[i]!.hash));
    } catch (e) {
      throw located(e, `block ${block.number} transaction ${i} (${txs[i]!.hash})`);
    }
  }
  return out;
}

function debugTransactionTransfers(item: unknown, txHash: Hex): InternalTransfer[] {
  if (!isRecord(item)) throw new TraceMismatchError('not an object');
  // Older geth leaves txHash out: then only the count and the order vouch for the answer.
  if (has(item, 'txHash')) {
    const hash = item.txHash;
    if (typeof hash !== 'string' || !HASH.test(hash)) throw new TraceMismatchError(`txHash ${show(hash)}`);
    if (hash.toLowerCase() !== txHash.toLowerCase()) throw new TraceMismatchError(`traced ${hash} instead`);
  }
  // The tracer failed on this transaction: its transfers are unknown, not absent.
  if (has(item, 'error')) throw new TraceMismatchError(`the tracer failed: ${show(item.error)}`);
  if (!has(item, 'result')) throw new TraceMismatchError('no result');
  return callTracerTransfers(item.result);
}

/**
 * `trace_block`: the entries of every transaction, each transaction's contiguous and in block
 * order, then the block's `reward` entries (no transaction; ignored).
 */
function parityBlockTransfers(answer: readonly unknown[], block: TracedBlock): InternalTransfer[][] {
  const txs = block.transactions;
  const blockHash = block.hash.toLowerCase();
  const groups: unknown[][] = [];
  let current: { hash: string; spelt: string; position: number; entries: unknown[] } | undefined;
  for (let n = 0; n < answer.length; n++) {
    const entry = answer[n];
    const where = () => `block ${block.number} trace entry ${n}`;
    if (!isRecord(entry)) throw new TraceMismatchError(`${where()}: not an object`);
    if (
      typeof entry.blockHash !== 'string' ||
      (entry.blockHash !== block.hash && entry.blockHash.toLowerCase() !== blockHash)
    ) {
      throw new TraceMismatchError(`${where()}: blockHash ${show(entry.blockHash)} is not ${block.hash}`);
    }
    if (!Number.isSafeInteger(entry.blockNumber) || BigInt(entry.blockNumber as number) !== block.number) {
      throw new TraceMismatchError(`${where()}: blockNumber ${show(entry.blockNumber)}`);
    }
    if (entry.type === 'reward') {
      // Rewards belong to the block, not to a transaction (the key is null or left out).
      if (entry.transactionHash != null || entry.transactionPosition != null) {
        throw new TraceMismatchError(`${where()}: a reward entry of a transaction`);
      }
      continue;
    }
    const hash = entry.transactionHash;
    const position = entry.transactionPosition;
    // The same transaction's next entry, spelt as its first: checked already.
    if (current !== undefined && hash === current.spelt) {
      if (position !== current.position) {
        throw new TraceMismatchError(
          `${where()}: transactionPosition ${show(position)} and ${current.position}`,
        );
      }
      current.entries.push(entry);
      continue;
    }
    if (typeof hash !== 'string' || !HASH.test(hash)) {
      throw new TraceMismatchError(`${where()}: transactionHash ${show(hash)}`);
    }
    if (!Number.isSafeInteger(position)) {
      throw new TraceMismatchError(`${where()}: transactionPosition ${show(position)}`);
    }
    const lower = hash.toLowerCase();
    if (current !== undefined && current.hash === lower) {
      if (position !== current.position) {
        throw new TraceMismatchError(`${where()}: transactionPosition ${position} and ${current.position}`);
      }
      current.entries.push(entry);
      continue;
    }
    // A new transaction: the next of the block. Every transaction has at least its top-level
    // entry, so positions run 0, 1, 2... and a hash seen before cannot come back.
    const i = groups.length;
    const expected = txs[i];
    if (expected === undefined) {
      throw new TraceMismatchError(`${where()}: traces of more transactions than the block's ${txs.length}`);
    }
    if (position !== i || lower !== expected.hash.toLowerCase()) {
      throw new TraceMismatchError(
        `${where()}: transaction ${hash} at position ${show(position)} where the block has ${expected.hash} at ${i}`,
      );
    }
    current = { hash: lower, spelt: hash, position: i, entries: [entry] };
    groups.push(current.entries);
  }
  if (groups.length !== txs.length) {
    throw new TraceMismatchError(
      `block ${block.number}: traces of ${groups.length} transactions for ${txs.length} in the block`,
    );
  }
  return groups.map((entries, i) => {
    try {
      // Their hashes were checked above: one transaction's, the block's at that position.
      return parityTransactionTransfers(entries, true);
    } catch (e) {
      throw located(e, `block ${block.number} transaction ${i} (${txs[i]!.hash})`);
    }
  });
}
