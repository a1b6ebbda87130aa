/**
 * Which trace method a network's node answers, and a block's traces read with it. Internal
 * transfers (native value moved by contract calls) are only in traces: `debug_traceBlockByNumber`
 * with geth's callTracer (geth, reth, nethermind, erigon, anvil) or parity's `trace_block`
 * (erigon, nethermind, reth, anvil). A network's `traces` setting picks one, turns them off, or
 * (`auto`) probes: callTracer first, then trace_block.
 */
import type { Hex, PublicClient } from 'viem';
import type { TracesSetting } from '../networks.js';
import { isMethodUnavailable } from '../node-errors.js';
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

export interface TraceReader {
  /**
   * Asks for the traces of the block at `number` (sent at once, beside the block and its
   * receipts); the answer, once awaited with the block, is checked against it and gives each
   * transaction's internal transfers in block order, or undefined when traces are not read.
   */
  read(number: bigint): (block: TracedBlock) => Promise<InternalTransfer[][] | undefined>;
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
  options: { now?: () => number; onChange?: (status: TracesStatus) => void } = {},
): TraceReader {
  const now = options.now ?? Date.now;
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
        const found = await asked;
        probed = true;
        if (!found) {
          refused();
          return undefined;
        }
        const transfers = blockInternalTransfers(found.format, found.answer, block);
        format = found.format;
        refusedAt = undefined;
        set({ available: true, method: METHOD[found.format], reason: null });
        return transfers;
      };
    },
    status: () => status,
  };
}
