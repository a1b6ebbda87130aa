/**
 * The Tron family's block source (chains/source.ts) over java-tron's HTTP API: the tip and a
 * height's hash from `/wallet/getblock` without transactions (a header, where the node is recent
 * enough; `getnowblock` and `getblockbynum` otherwise), and a block from `getblockbynum` and
 * `gettransactioninfobyblocknum` read together: two calls a block.
 */
import type { BlockSource, ChainBlock, ChainTip } from '../source.js';
import type { TronActivity } from './activity.js';
import {
  InexactTronNumber,
  MalformedTronBlock,
  type TronHeader,
  tronActivity,
  tronHeader,
} from './blocks.js';
import { createTronApi, type TronApi, type TronApiOptions } from './http-api.js';

type Json = Record<string, unknown>;

export function createTronSource(options: TronApiOptions): BlockSource<TronActivity> {
  const api = createTronApi(options);
  const headers = headerReader(api);

  async function readBlock(height: number, exact: boolean): Promise<ChainBlock<TronActivity> | undefined> {
    const body = { num: height };
    const [block, infos] = await Promise.all([
      api.call('/wallet/getblockbynum', body, { exact }),
      api.call('/wallet/gettransactioninfobyblocknum', body, { exact }),
    ]);
    const header = tronHeader(block);
    if (header === undefined) return undefined;
    if (header.height !== height)
      throw new MalformedTronBlock(`the node answered block ${header.height} when asked for ${height}`);
    return {
      height,
      hash: header.hash,
      parentHash: header.parentHash,
      activity: tronActivity(block as Json, infos, header),
    };
  }

  return {
    tip: async () => {
      const header = await headers.at(undefined);
      if (header === undefined) throw new MalformedTronBlock(`the node at ${api.host} has no latest block`);
      return { height: header.height, hash: header.hash } satisfies ChainTip;
    },
    hashAt: async (height) => (await headers.at(height))?.hash,
    block: async (height) => {
      try {
        return await readBlock(height, false);
      } catch (err) {
        // Rare (a TRC-10 amount past 2^53): the answers again, parsed exactly.
        if (err instanceof InexactTronNumber) return readBlock(height, true);
        throw err;
      }
    },
  };
}

/**
 * Headers by height (the latest when none): `/wallet/getblock` with `detail: false` answers a
 * block without its transactions; a node without that path is asked for the whole block.
 */
function headerReader(api: TronApi): { at(height: number | undefined): Promise<TronHeader | undefined> } {
  let headerOnly = true;
  const whole = async (height: number | undefined) =>
    tronHeader(
      await (height === undefined
        ? api.call('/wallet/getnowblock', {})
        : api.call('/wallet/getblockbynum', { num: height })),
    );
  return {
    async at(height) {
      if (!headerOnly) return whole(height);
      const answer = await api.call(
        '/wallet/getblock',
        height === undefined ? { detail: false } : { id_or_num: String(height), detail: false },
        { missingOk: true },
      );
      if (answer === undefined) {
        headerOnly = false;
        return whole(height);
      }
      return tronHeader(answer);
    },
  };
}
