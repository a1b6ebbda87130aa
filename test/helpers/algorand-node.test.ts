/**
 * The loopback Algorand node is no looser than the real APIs: its answers for the recorded round
 * equal the recorded ones (algod's msgpack byte for byte, its /hash, the indexer's JSON), and the
 * rounds it assembles keep the recorded answers' keys and types. Its transaction pool answers a
 * real signed transaction in algod's documented form, and refuses what algod refuses.
 */
import fs from 'node:fs';
import algosdk from 'algosdk';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
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

async function post(path: string, body: Uint8Array): Promise<{ status: number; json: unknown }> {
  const res = await request(`${node.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-binary' },
    body,
  });
  return { status: res.statusCode, json: parseExactJson(await res.body.text()) };
}

const pendingFixture = () =>
  parseExactJson(
    fs.readFileSync(
      fixturePath('chains/algorand', 'algod-pending-transaction-pay-testnet-constructed.json'),
      'utf8',
    ),
  ) as Record<string, unknown>;

/** The real signed payment RXZ6XSMU… (its signature verifies) as algod's POST takes it: msgpack. */
function realSignedPayment(): algosdk.SignedTransaction {
  return algosdk.decodeJSON(
    JSON.stringify(pendingFixture().txn, (_k, v) => (typeof v === 'bigint' ? Number(v) : v)),
    algosdk.SignedTransaction,
  );
}
const REAL_TX_ID = 'RXZ6XSMUNRX7DFMUQCKFHMOSEZ7EYIOKKFNPUXKXAEL32PFRU7TQ';

/** The keys and JSON types of a value, array elements merged. */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return [Object.assign({}, ...value.map(shape))];
  if (typeof value === 'object' && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shape(v)]));
  return typeof value;
}

describe('the loopback Algorand node', () => {
  test('serves the recorded round as recorded', async () => {
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

  test('the recorded msgpack is canonical: decoding and re-encoding with algosdk gives the same bytes', () => {
    const decoded = algosdk.decodeMsgpack(recordedAlgodBlock(), algosdk.modelsv2.BlockResponse);
    expect(Buffer.from(algosdk.encodeMsgpack(decoded)).equals(Buffer.from(recordedAlgodBlock()))).toBe(true);
  });

  test("assembled rounds keep the recorded answers' keys and types, in both forms", async () => {
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

describe("the loopback Algorand node's transaction pool", () => {
  test('answers a real signed transaction pending exactly in the documented form, then refuses it again', async () => {
    // Round 42226001 is inside the payment's window 42225820--42226820.
    node.setRounds(assembleRun(42226000, 1));
    const signed = realSignedPayment();
    expect(signed.txn.txID()).toBe(REAL_TX_ID);
    const bytes = algosdk.encodeMsgpack(signed);
    expect(await post('/v2/transactions', bytes)).toEqual({ status: 200, json: { txId: REAL_TX_ID } });
    const pending = await get(`/v2/transactions/pending/${REAL_TX_ID}?format=json`);
    expect(pending.status).toBe(200);
    expect(parseExactJson(pending.bytes.toString())).toEqual(pendingFixture());
    expect(await post('/v2/transactions', bytes)).toEqual({
      status: 400,
      json: { message: `TransactionPool.Remember: transaction already in ledger: ${REAL_TX_ID}` },
    });
    node.confirm(REAL_TX_ID, 42226000);
    const confirmed = parseExactJson((await get(`/v2/transactions/pending/${REAL_TX_ID}`)).bytes.toString());
    expect(confirmed).toEqual({
      ...pendingFixture(),
      'asset-closing-amount': 0n,
      'close-rewards': 0n,
      'closing-amount': 0n,
      'confirmed-round': 42226000n,
      'receiver-rewards': 0n,
      'sender-rewards': 0n,
    });
  });

  test("refuses a bad signature, a transaction outside its window and garbage with algod's 400 {message}", async () => {
    node.setRounds(assembleRun(42226000, 1));
    const tampered = realSignedPayment();
    tampered.sig![0]! ^= 1;
    expect(await post('/v2/transactions', algosdk.encodeMsgpack(tampered))).toEqual({
      status: 400,
      json: { message: "At least one signature didn't pass verification" },
    });
    node.setRounds(assembleRun(42226820, 1));
    expect(await post('/v2/transactions', algosdk.encodeMsgpack(realSignedPayment()))).toEqual({
      status: 400,
      json: { message: 'TransactionPool.Remember: txn dead: round 42226821 outside of 42225820--42226820' },
    });
    const garbage = await post('/v2/transactions', new Uint8Array([1, 2, 3]));
    expect(garbage.status).toBe(400);
    expect(Object.keys(garbage.json as object)).toEqual(['message']);
    expect((await post('/v2/transactions', new Uint8Array())).json).toEqual({ message: 'empty txgroup' });
  });

  test("answers an unknown id 404 and a malformed one 400, with algod's texts", async () => {
    const unknown = await get(`/v2/transactions/pending/${'A'.repeat(52)}`);
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.bytes.toString())).toEqual({
      message: 'could not find the transaction in the transaction pool or in the last 1000 confirmed rounds',
    });
    const malformed = await get('/v2/transactions/pending/not-an-id');
    expect(malformed.status).toBe(400);
    expect(JSON.parse(malformed.bytes.toString())).toEqual({
      message: 'no valid transaction ID was specified',
    });
  });
});

describe('account transactions (a backfill’s history)', () => {
  const BFO7 = 'BFO7NQTTXGYDPUEWJYLWPFZRUFQISHY4E2SKXARM7UROMAW36YYBGPSUYY';

  test('has the recorded answer’s keys, the rounds asked for, newest first, paged with next', async () => {
    node.setRounds([
      { algod: recordedAlgodBlock(), indexer: recordedIndexerBlock() },
      ...assembleRun(RECORDED_ROUND + 1, 2),
    ]);
    const real = parseExactJson(
      fs.readFileSync(fixturePath('chains/algorand/indexer-account-transactions-testnet.json'), 'utf8'),
    ) as Record<string, unknown>;
    const path = `/v2/accounts/${BFO7}/transactions?min-round=${RECORDED_ROUND + 1}&limit=5`;
    const first = parseExactJson((await get(path)).bytes.toString()) as Record<string, unknown>;
    expect(Object.keys(first).sort()).toEqual(Object.keys(real).sort());
    const rounds = (page: Record<string, unknown>) =>
      (page.transactions as Record<string, unknown>[]).map((tx) => Number(tx['confirmed-round']));
    // Four self-payments a round: five of the eight, the newest round's first.
    expect(rounds(first)).toEqual([...Array(4).fill(RECORDED_ROUND + 2), RECORDED_ROUND + 1]);
    const second = parseExactJson(
      (await get(`${path}&next=${first['next-token']}`)).bytes.toString(),
    ) as Record<string, unknown>;
    expect(rounds(second)).toEqual(Array(3).fill(RECORDED_ROUND + 1));
    const end = parseExactJson(
      (await get(`${path}&next=${second['next-token']}`)).bytes.toString(),
    ) as Record<string, unknown>;
    expect(end.transactions).toEqual([]);
    expect(end['next-token']).toBeUndefined();
  });
});
