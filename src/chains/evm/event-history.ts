/**
 * History of a followed contract event on an EVM chain, for the backfill of a CONTRACT_LOG_EVENT
 * subscription: its logs through `eth_getLogs` (the event's topic0 and what of its filter the node
 * can apply, on its contracts a page at a time, or on any contract), then a header per block
 * holding some, so that each block reaches the follower's matcher as the follower would read it.
 * The node's filtering only narrows what is read: the matcher decides what is notified.
 */
import type { Hex } from 'viem';
import { UpstreamUnavailableError } from '../../errors.js';
import type { ChainBlock, HistoryScan, WatchedAddresses } from '../source.js';
import type { RpcBlock } from './activity.js';
import type { FollowedEvent } from './followed-event.js';
import { getLogs, hex, type Request, type RpcHistoryLog } from './get-logs.js';
import type { EvmBlockActivity, EvmLog } from './types.js';

/**
 * Contracts per `eth_getLogs` request: nodes and providers cap the address list (often at 1,000 or
 * a little more), and a list of 100,000 contracts is asked in pages of this many.
 */
export const CONTRACTS_PER_QUERY = 1_000;
/**
 * Allowed values of one indexed argument put in the request's topics; an argument allowing more is
 * left to the matcher (nodes accept a few hundred alternatives per topic).
 */
export const TOPIC_VALUES_PER_QUERY = 200;
/** Block headers read at once. */
const HEADERS_IN_FLIGHT = 4;

const lower = (a: string) => a.toLowerCase();

/** What the backfill of an event subscription asks for. */
export interface EventLogQuery {
  /** The event: its topic0 (null when anonymous) and its filter compiled to topic values. */
  event: Pick<FollowedEvent, 'topic0' | 'filter'>;
  /** The contracts it is followed on; absent for any contract. */
  contracts?: WatchedAddresses;
}

/**
 * The `topics` of an `eth_getLogs` request for the event: its topic0 first (none for an anonymous
 * event, whose indexed arguments start at topic 0), then per indexed argument its allowed values
 * where the filter lists at most TOPIC_VALUES_PER_QUERY, else any; trailing "any" dropped. A log
 * with the event's topic0 but another topic count is found too, and refused by the matcher.
 */
export function eventLogTopics(event: EventLogQuery['event']): (Hex | Hex[] | null)[] {
  const topics: (Hex | Hex[] | null)[] = event.topic0 ? [event.topic0] : [];
  for (const values of event.filter) {
    const allowed = values === null ? [] : [...new Set(values.map((v) => lower(v) as Hex))];
    topics.push(allowed.length > 0 && allowed.length <= TOPIC_VALUES_PER_QUERY ? allowed : null);
  }
  while (topics.length > 0 && topics[topics.length - 1] === null) topics.pop();
  return topics;
}

/** The range's logs of the event, once each (a removed one is not), on the contracts asked for. */
async function eventLogs(request: Request, from: number, to: number, query: EventLogQuery) {
  const topics = eventLogTopics(query.event);
  const found: RpcHistoryLog[] = [];
  if (query.contracts) {
    for await (const page of query.contracts.pages(CONTRACTS_PER_QUERY))
      found.push(
        ...(await getLogs(request, from, to, { topics, address: page.map((a) => lower(a) as Hex) })),
      );
  } else found.push(...(await getLogs(request, from, to, { topics })));
  const unique = new Map<string, RpcHistoryLog>();
  for (const log of found) {
    const height = Number(log.blockNumber);
    if (log.removed || height < from || height > to) continue;
    unique.set(`${log.blockHash}:${Number(log.logIndex)}`, log);
  }
  return [...unique.values()];
}

const changed = (what: string) =>
  new UpstreamUnavailableError(`The node ${what}: the chain changed while reading`);

/**
 * The blocks holding the logs, in height order, each with its logs in block order as the
 * follower reads them, and its header read by height: a log of a block no longer at its height
 * means the chain moved while reading (the chunk is read again).
 */
async function blocksOfLogs(
  request: Request,
  logs: RpcHistoryLog[],
): Promise<ChainBlock<EvmBlockActivity>[]> {
  const byHeight = new Map<number, RpcHistoryLog[]>();
  for (const log of logs) {
    const height = Number(log.blockNumber);
    const list = byHeight.get(height);
    if (!list) byHeight.set(height, [log]);
    else if (list[0]!.blockHash !== log.blockHash)
      throw changed(`returned logs of two blocks at ${height} (${list[0]!.blockHash}, ${log.blockHash})`);
    else list.push(log);
  }
  const heights = [...byHeight.keys()].sort((a, b) => a - b);
  const blocks = new Array<ChainBlock<EvmBlockActivity>>(heights.length);
  let next = 0;
  const worker = async () => {
    while (next < heights.length) {
      const at = next++;
      const height = heights[at]!;
      const inBlock = byHeight.get(height)!;
      const hash = inBlock[0]!.blockHash;
      const header = await request<RpcBlock | null>('eth_getBlockByNumber', [hex(height), false]);
      if (!header || header.hash !== hash)
        throw changed(`has ${header?.hash ?? 'no block'} at ${height}, not the block ${hash} of its logs`);
      blocks[at] = {
        height,
        hash,
        parentHash: header.parentHash,
        activity: {
          number: BigInt(height),
          hash,
          parentHash: header.parentHash,
          timestamp: BigInt(header.timestamp),
          // Transfers and fees are address subscriptions' (and the follower's): none here.
          transfers: [],
          payments: [],
          logs: inBlock.map(evmLog).sort((a, b) => a.logIndex - b.logIndex),
        },
      };
    }
  };
  await Promise.all(Array.from({ length: Math.min(HEADERS_IN_FLIGHT, heights.length) }, worker));
  return blocks;
}

/** A log of `eth_getLogs` as a block's activity holds it (rpcLogs: as the node returned it). */
function evmLog(log: RpcHistoryLog): EvmLog {
  return {
    txHash: log.transactionHash,
    txIndex: Number(log.transactionIndex),
    logIndex: Number(log.logIndex),
    address: log.address,
    topics: log.topics,
    data: log.data,
  };
}

/**
 * The blocks of `from`…`to` holding logs of the event (on its contracts, or any), and the
 * contracts found emitting them (as stored; none for any contract).
 */
export async function scanEventLogs(
  request: Request,
  from: number,
  to: number,
  query: EventLogQuery,
): Promise<HistoryScan<EvmBlockActivity>> {
  let logs = await eventLogs(request, from, to, query);
  let watched: string[] = [];
  if (query.contracts) {
    // The node answers with the contracts asked for; those of the list now, as stored.
    watched = await query.contracts.among([...new Set(logs.map((log) => lower(log.address)))]);
    const isWatched = new Set(watched.map(lower));
    logs = logs.filter((log) => isWatched.has(lower(log.address)));
  }
  return { blocks: await blocksOfLogs(request, logs), watched };
}

/** What a backfill's view says of an event scan. */
export function describeEventScan(perSecond: number): string {
  return (
    `contract events through eth_getLogs with the event's topic0 and the values of its filtered ` +
    `arguments in the topics, on the subscription's contracts ${CONTRACTS_PER_QUERY.toLocaleString('en')} a query ` +
    `(or on any contract), a range the node refuses as too large halved until it passes, and one block ` +
    `header per block with events, at most ${perSecond || 'unlimited'} requests/s`
  );
}
