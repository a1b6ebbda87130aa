import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  assembledChain,
  recordedBlock69351239,
  startTronNode,
  type TronNode,
} from '../../../test/helpers/tron-node.js';
import { UpstreamUnavailableError } from '../../errors.js';
import { MalformedTronBlock } from './blocks.js';
import { createTronSource } from './source.js';

const KEY = 'source-test-key';

describe('the Tron block source against a java-tron HTTP API', () => {
  let node: TronNode;
  const recorded = recordedBlock69351239();
  const chain = assembledChain();
  const tip = chain.at(-1)!.block;
  const source = () => createTronSource({ url: node.url, headers: { 'TRON-PRO-API-KEY': KEY } });

  beforeAll(async () => {
    node = await startTronNode({ apiKey: KEY, blocks: [recorded, ...chain] });
  });
  afterAll(async () => {
    await node?.close();
  });

  test('the tip and a height’s hash come from headers; a block from two calls; past the tip, none', async () => {
    const s = source();
    const before = node.requests.length;
    expect(await s.tip()).toEqual({ height: tip.block_header.raw_data.number, hash: tip.blockID });
    expect(await s.hashAt(recorded.block.block_header.raw_data.number)).toBe(recorded.block.blockID);
    const block = await s.block(chain[0]!.block.block_header.raw_data.number);
    expect(block).toMatchObject({ hash: chain[0]!.block.blockID, parentHash: recorded.block.blockID });
    expect(block!.activity).toHaveLength(chain[0]!.block.transactions!.length);
    expect(node.requests.slice(before).map((r) => r.path)).toEqual([
      '/wallet/getblock',
      '/wallet/getblock',
      '/wallet/getblockbynum',
      '/wallet/gettransactioninfobyblocknum',
    ]);
    expect(await s.block(tip.block_header.raw_data.number + 1)).toBeUndefined();
  });

  test('without the API key the node’s refusal says to check the headers', async () => {
    const s = createTronSource({ url: node.url });
    await expect(s.tip()).rejects.toThrow(/refused .* check the network's headers/);
  });

  test.each([
    ['infos-count', MalformedTronBlock, /transaction infos/],
    ['infos-ids', MalformedTronBlock, /has no transaction info/],
    ['garbage', UpstreamUnavailableError, /not JSON/],
  ] as const)('a lie (%s) fails the read; the next read is whole', async (kind, error, message) => {
    const s = source();
    const height = chain[2]!.block.block_header.raw_data.number;
    node.lieNext({ kind });
    const lied = s.block(height);
    await expect(lied).rejects.toThrow(error);
    await expect(lied).rejects.toThrow(message);
    expect((await s.block(height))!.activity).toHaveLength(chain[2]!.block.transactions!.length);
  });

  test('a failing or vanishing node is unavailable, then read again', async () => {
    const s = source();
    node.failNext(1, 503);
    await expect(s.tip()).rejects.toThrow(UpstreamUnavailableError);
    node.dropNext(1);
    await expect(s.tip()).rejects.toThrow(UpstreamUnavailableError);
    expect((await s.tip()).hash).toBe(tip.blockID);
  });
});
