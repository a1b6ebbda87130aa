import type { Logger } from 'pino';
import { BlockNotFoundError, type PublicClient } from 'viem';
import type { BlockSource, ChainTip } from '../source.js';
import { readBlockActivity } from './activity.js';
import { subscribeToHeads } from './heads.js';
import type { TraceReader } from './trace-reader.js';
import type { EvmBlockActivity } from './types.js';

export type FetchEvmActivity = (
  client: PublicClient,
  number: bigint,
  traces?: TraceReader,
) => Promise<EvmBlockActivity>;

/** undefined where the node has no block at that height (a chain shorter than asked). */
async function unlessMissing<T>(read: Promise<T>): Promise<T | undefined> {
  try {
    return await read;
  } catch (err) {
    if (err instanceof BlockNotFoundError) return undefined;
    throw err;
  }
}

/**
 * An EVM network as a block source: the latest block's header for the tip (its hash shows a tip
 * replaced at the same height), each block with its receipts (and its traces, where `traces`
 * reads them) as transfers (addresses in lower case: the matcher checksums those it notifies), and
 * with a WebSocket endpoint its `newHeads` as announcements (with their height and hash).
 */
export function evmSource(
  client: PublicClient,
  fetchActivity: FetchEvmActivity = readBlockActivity,
  heads?: { wsUrl: string; logger: Logger },
  traces?: TraceReader,
): BlockSource<EvmBlockActivity> {
  return {
    ...(traces
      ? {
          status: () => {
            const { available, reason } = traces.status();
            return { internalTransfers: available, internalTransfersReason: reason };
          },
        }
      : {}),
    ...(heads
      ? {
          watchHeads: (onHead: (tip?: ChainTip) => void) =>
            subscribeToHeads(heads.wsUrl, onHead, heads.logger),
        }
      : {}),
    async tip() {
      const latest = await client.getBlock({ blockTag: 'latest' });
      return { height: Number(latest.number), hash: latest.hash };
    },
    async block(height) {
      const activity = await unlessMissing(fetchActivity(client, BigInt(height), traces));
      if (!activity) return undefined;
      return { height, hash: activity.hash, parentHash: activity.parentHash, activity };
    },
    async hashAt(height) {
      return (await unlessMissing(client.getBlock({ blockNumber: BigInt(height) })))?.hash;
    },
  };
}
