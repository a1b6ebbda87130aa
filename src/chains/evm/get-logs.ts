/**
 * `eth_getLogs` for a backfill's history scans (history.ts, event-history.ts), through the backfill
 * throttle, a range at a time as the node allows: a range the node refuses as too large (too many
 * blocks, or more results than it returns at once) is halved until it passes.
 */
import type { Hex, PublicClient } from 'viem';
import type { Throttle } from '../../shared/throttle.js';
import { isLogRangeTooLarge } from '../node-errors.js';
import type { RpcLog } from './activity.js';

/** A log as `eth_getLogs` answers it: where it is, and whether a reorganisation removed it. */
export interface RpcHistoryLog extends RpcLog {
  blockNumber: Hex;
  blockHash: Hex;
  transactionHash: Hex;
  transactionIndex: Hex;
  removed?: boolean;
}

export const hex = (n: number): Hex => `0x${n.toString(16)}`;

/** A JSON-RPC request to the node, sent once the throttle lets it through. */
export type Request = <T>(method: string, params: unknown[]) => Promise<T>;

export function throttledRequest(client: PublicClient, throttle: Throttle): Request {
  return async function request<T>(method: string, params: unknown[]): Promise<T> {
    await throttle.take();
    return (await client.request({ method: method as never, params: params as never })) as T;
  };
}

/** What `eth_getLogs` filters on besides the range: topics by position, and contracts. */
export interface LogFilter {
  /** Per position: one value, any of several, or null for any. */
  topics: (Hex | Hex[] | null)[];
  /** The contracts (never empty: an empty list means every contract to most nodes); absent for any. */
  address?: Hex[];
}

/**
 * The logs of blocks `from`…`to` passing `filter`. Where the node refuses the range as too large
 * for one answer, each half is asked in turn (and so on down to single blocks, whose refusal is
 * the caller's error): a backfill's chunk of blocks passes on a node that caps ranges or results
 * lower than it, only at the cost of the refused requests.
 */
export async function getLogs(
  request: Request,
  from: number,
  to: number,
  filter: LogFilter,
): Promise<RpcHistoryLog[]> {
  if (filter.address?.length === 0) return [];
  try {
    return await request<RpcHistoryLog[]>('eth_getLogs', [
      { fromBlock: hex(from), toBlock: hex(to), ...filter },
    ]);
  } catch (err) {
    if (from >= to || !isLogRangeTooLarge(err)) throw err;
    const middle = Math.floor((from + to) / 2);
    const first = await getLogs(request, from, middle, filter);
    const second = await getLogs(request, middle + 1, to, filter);
    return first.concat(second);
  }
}
