/**
 * The loopback Algorand node is no looser than the real APIs: its answers for the recorded round
 * equal the recorded ones (algod's msgpack byte for byte, its /hash, the indexer's JSON), and the
 * rounds it assembles keep the recorded answers' keys and types.
 */
import fs from 'node:fs';
import algosdk from 'algosdk';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseExactJson } from '../../src/chains/node-http.js';
import {
  type AlgorandNode,
  assembleRun,
  RECORDED_ROUND,
  recordedAlgodBlock,
  recordedIndexerBlock,
  startAlgorandNode,
} from './algorand-node.js';
import { fixturePath } from './fixture-node.js';

let node: AlgorandNode;
beforeAll(async () => {
  node = await startAlgorandNode();
});
afterAll(() => node.close());

async function get(path: string): Promise<{ status: number; bytes: Buffer }> {
  const res = await request(`${node.url}${path}`);
  return { status: res.statusCode, bytes: Buffer.from(await res.body.arrayBuffer()) };
}

/** The keys and JSON types of a value, array elements merged. */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return [Object.assign({}, ...value.map(shape))];
  if (typeof value === 'object' && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shape(v)]));
  return typeof value;
}

describe('the loopback Algorand node', () => {
  it('serves the recorded round as recorded', async () => {
    node.setRounds([{ algod: recordedAlgodBlock(), indexer: recordedIndexerBlock() }]);
    const block = await get(`/v2/blocks/${RECORDED_ROUND}?format=msgpack`);
    expect(block.bytes.equals(Buffer.from(recordedAlgodBlock()))).toBe(true);
    const hash = await get(`/v2/blocks/${RECORDED_ROUND}/hash`);
    const recordedHash = fs.readFileSync(
      fixturePath('chains/algorand/blocks', 'algod-block-24099447-hash-testnet.json'),
      'utf8',
    );
    expect(JSON.parse(hash.bytes.toString())).toEqual(JSON.parse(recordedHash));
    const indexer = await get(`/v2/blocks/${RECORDED_ROUND}`);
    expect(parseExactJson(indexer.bytes.toString())).toEqual(recordedIndexerBlock());
  });

  it('the recorded msgpack is canonical: decoding and re-encoding with algosdk gives the same bytes', () => {
    const decoded = algosdk.decodeMsgpack(recordedAlgodBlock(), algosdk.modelsv2.BlockResponse);
    expect(Buffer.from(algosdk.encodeMsgpack(decoded)).equals(Buffer.from(recordedAlgodBlock()))).toBe(true);
  });

  it("assembled rounds keep the recorded answers' keys and types, in both forms", async () => {
    node.setRounds(assembleRun(100, 2));
    const indexer = parseExactJson((await get('/v2/blocks/101')).bytes.toString());
    expect(shape(indexer)).toEqual(shape(recordedIndexerBlock()));
    const raw = algosdk.msgpackRawDecodeAsMap((await get('/v2/blocks/101?format=msgpack')).bytes) as Map<
      string,
      Map<string, unknown>
    >;
    const recorded = algosdk.msgpackRawDecodeAsMap(recordedAlgodBlock()) as Map<string, Map<string, unknown>>;
    expect([...raw.keys()]).toEqual([...recorded.keys()]);
    expect([...raw.get('block')!.keys()]).toEqual([...recorded.get('block')!.keys()]);
    expect((await get('/v2/blocks/102?format=msgpack')).status).toBe(404);
    expect((await get('/v2/blocks/102')).status).toBe(404);
  });
});
