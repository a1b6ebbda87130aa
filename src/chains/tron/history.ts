/**
 * A Tron backfill's history: java-tron indexes no addresses, so every block of the range is read
 * through the follower's own source (history-scan.ts), kept to the transactions of watched ones.
 */
import type { Throttle } from '../../shared/throttle.js';
import { scanBlocks } from '../history-scan.js';
import type { HistorySource } from '../source.js';
import { type TronActivity, tronAddressesOf } from './activity.js';
import { tronHeader } from './blocks.js';
import { createTronApi, type TronApiOptions } from './http-api.js';
import { createTronSource } from './source.js';

export interface TronHistoryOptions extends TronApiOptions {
  throttle: Throttle;
  chunk: number;
}

export function tronHistory(options: TronHistoryOptions): HistorySource<TronActivity> {
  const source = createTronSource(options);
  const api = createTronApi(options);
  return {
    chunk: options.chunk,
    describe: `every block from the node at ${api.host} (getblockbynum and gettransactioninfobyblocknum)`,
    tip: async () => (await source.tip()).height,
    timeOf: async (height) => {
      await options.throttle.take();
      const header = tronHeader(
        await api.call('/wallet/getblock', { id_or_num: String(height), detail: false }),
      );
      return header === undefined ? undefined : Math.floor(header.timestamp / 1000);
    },
    scan: (from, to, watched) =>
      scanBlocks(
        { source, throttle: options.throttle, addressesOf: tronAddressesOf, where: api.host },
        from,
        to,
        watched,
      ),
  };
}
