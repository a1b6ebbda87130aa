/**
 * Which trace method a network's node answers, and a block's traces read with it. Internal
 * transfers are only in traces: geth's callTracer through `debug_traceBlockByNumber`, or parity's
 * `trace_block` (which nodes give which: docs/internal-transfers.md); `traces: auto` probes
 * callTracer first. A block the node cannot trace never holds the network up: a node that no
 * longer has the block's state says so at once, any other failure is retried for the trace wait,
 * and the block is then read without its internal transfers, as a trace gap.
 */
import type { Hex, PublicClient } from 'viem';
import type { TracesSetting } from '../networks.js';
import { describeNodeFailure, isMethodUnavailable, isStateUnavailable } from '../node-errors.js';
import { blockInternalTransfers, type InternalTransfer, type TraceFormat } from './traces.js';

const METHOD: Record<TraceFormat, string> = {
  debug: 'debug_traceBlockByNumber',
  parity: 'trace_block',
};

/** Whether a network's internal transfers are read, and if not, why: for /readyz and the metric. */
export interface TracesStatus {
  available: boolean;
  /** The method in use; null while none is (off, refused, not probed yet). */
  method: string | null;
  /** Why internal transfers are not read; null while they are. */
  reason: string | null;
}

/** After this long without traces, `auto` asks the node again: behind a fallback it may be another. */
const REPROBE_AFTER_MS = 10 * 60_000;
/** Blocks whose failing traces are remembered at once: a read-ahead window's worth, and then some. */
const FAILING_KEPT = 64;

/** A block whose traces cannot be had: read without its internal transfers, and why. */
export interface TraceGap {
  gap: string;
}

/**
 * What a block's traces gave: each transaction's internal transfers in block order; a gap; or
 * undefined when traces are not read on the network (off, or refused by the node).
 */
export type TraceOutcome = InternalTransfer[][] | TraceGap | undefined;

export function isTraceGap(outcome: TraceOutcome): outcome is TraceGap {
  return outcome !== undefined && !Array.isArray(outcome);
}

export interface TraceReader {
  /**
   * Asks for the traces of the block at `number` (sent at once, beside the block and its
   * receipts); the answer, once awaited with the block, is checked against it (TraceOutcome). A
   * failure that may pass is thrown, to be read again, until the trace wait is over.
   */
  read(number: bigint): (block: TracedBlock) => Promise<TraceOutcome>;
  status(): TracesStatus;
}

export interface TracedBlock {
  hash: Hex;
  number: bigint;
  transactions: readonly { hash: Hex }[];
}

const hex = (n: bigint): Hex => `0x${n.toString(16)}`;

function request(client: PublicClient, format: TraceFormat, number: bigint): Promise<unknown> {
  const params = format === 'debug' ? [hex(number), { tracer: 'callTracer' }] : [hex(number)];
  return client.request({ method: METHOD[format] as never, params: params as never });
}

/**
 * The network's trace reader for its setting. A method the node refuses (JSON-RPC -32601 and the
 * like) turns traces off with the reason, and `auto` tries the other method first; any other
 * failure (a timeout, an answer that is not this block's) fails the block's read, to be retried.
 */
export function createTraceReader(
  client: PublicClient,
  setting: TracesSetting,
  options: {
    now?: () => number;
    onChange?: (status: TracesStatus) => void;
    /**
     * How long one block's traces may keep failing (other than for its pruned state) before it
     * is read without them (LEDGERHOOK_TRACE_WAIT); 0: retried for ever, the network waiting.
     */
    waitMs?: number;
  } = {},
): TraceReader {
  const now = options.now ?? Date.now;
  const waitMs = options.waitMs ?? 60_000;
  /** Since when each block's traces have been failing, by number. */
  const failingSince = new Map<bigint, number>();
  const candidates: TraceFormat[] =
    setting === 'auto' ? ['debug', 'parity'] : setting === 'off' ? [] : [setting];
  /** The method in use; undefined before the first probe and while none answers. */
  let format: TraceFormat | undefined = candidates.length === 1 ? candidates[0] : undefined;
  let probed = setting !== 'auto';
  let refusedAt: number | undefined;
  let status: TracesStatus =
    setting === 'off'
      ? { available: false, method: null, reason: 'traces are off for this network (traces: off)' }
      : { available: false, method: null, reason: 'not probed yet' };
  const set = (next: TracesStatus) => {
    const changed =
      next.available !== status.available || next.method !== status.method || next.reason !== status.reason;
    status = next;
    if (changed) options.onChange?.(status);
  };
  const refused = () => {
    refusedAt = now();
    format = undefined;
    set({
      available: false,
      method: null,
      reason: `the node refuses ${candidates.map((c) => METHOD[c]).join(' and ')}: internal transfers are not notified`,
    });
  };

  /** The first method (but the one just `refused`) that the node answers for this block, or undefined. */
  async function probe(
    number: bigint,
    refused?: TraceFormat,
  ): Promise<{ format: TraceFormat; answer: unknown } | undefined> {
    for (const candidate of candidates) {
      if (candidate === refused) continue;
      try {
        const answer = await request(client, candidate, number);
        return { format: candidate, answer };
      } catch (err) {
        if (!isMethodUnavailable(err)) throw err;
      }
    }
    return undefined;
  }

  /** A failed read of a block's traces: a gap (pruned state, or failing past the wait), else thrown. */
  function untraceable(number: bigint, err: unknown): TraceGap {
    if (isStateUnavailable(err)) {
      failingSince.delete(number);
      return { gap: `the node no longer has this block's state (${describeNodeFailure(err)})` };
    }
    if (waitMs === 0) throw err;
    const since = failingSince.get(number) ?? now();
    if (now() - since >= waitMs) {
      failingSince.delete(number);
      return {
        gap: `its traces kept failing for ${Math.round(waitMs / 1000)} s (${describeNodeFailure(err)})`,
      };
    }
    failingSince.set(number, since);
    if (failingSince.size > FAILING_KEPT) failingSince.delete(failingSince.keys().next().value!);
    throw err;
  }

  return {
    read(number) {
      if (candidates.length === 0) return async () => undefined;
      // Off after a refusal: asked again after a while (another node behind a fallback may trace).
      const retry = refusedAt !== undefined && now() - refusedAt >= REPROBE_AFTER_MS;
      if (refusedAt !== undefined && !retry) return async () => undefined;
      const using = format;
      const asked: Promise<{ format: TraceFormat; answer: unknown } | undefined> =
        using && probed && !retry
          ? request(client, using, number).then(
              (answer) => ({ format: using, answer }),
              async (err: unknown) => {
                // The node stopped offering the method (another node now): the others are tried.
                if (!isMethodUnavailable(err)) throw err;
                return probe(number, using);
              },
            )
          : probe(number);
      asked.catch(() => {}); // awaited with the block, unless the block is missing
      return async (block) => {
        let found: Awaited<typeof asked>;
        let transfers: InternalTransfer[][];
        try {
          found = await asked;
          if (found) transfers = blockInternalTransfers(found.format, found.answer, block);
        } catch (err) {
          return untraceable(number, err);
        }
        probed = true;
        if (!found) {
          refused();
          return undefined;
        }
        failingSince.delete(number);
        format = found.format;
        refusedAt = undefined;
        set({ available: true, method: METHOD[found.format], reason: null });
        return transfers!;
      };
    },
    status: () => status,
  };
}
