/**
 * The loopback Solana node answers as the real one did: its getBlock for a recorded slot is the
 * recorded answer (rewards left out when asked), an assembled block has the recorded answer's keys
 * and types, and errors have a real node's codes and messages.
 */

import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { parseExactJson } from '../../src/chains/node-http.js';
import { fixturePath } from './fixture-node.js';
import { recordedBlockText } from './solana-blocks.js';
import {
  assembleBlock,
  recordedSlot,
  recordedTransactions,
  type SolanaNode,
  skippedSlot,
  startSolanaNode,
} from './solana-node.js';

type Json = Record<string, unknown>;
const R = 110360000;
const SIGNATURE = '5kQSE8yKLY9eNNXrxLpFTWgEaXnb9yNBNhCa7m3ZnVa27UmaSAoociV3873bXndVRSt2nF9cnySvhvUCvWVrKbcq';

let node: SolanaNode;
beforeAll(async () => {
  node = await startSolanaNode();
  const assembled = assembleBlock({
    slot: R + 2,
    parentSlot: R,
    previousBlockhash: 'Dts3MwZrz3DdABfEMtCnEPV8mcGiqvdwEW53YcpuVCEF',
    transactions: recordedTransactions(R, [SIGNATURE]),
  });
  node.setSlots([recordedSlot(R), skippedSlot(R + 1), assembled]);
});
afterAll(() => node?.close());

async function rpc(method: string, params: unknown[]): Promise<Json> {
  const res = await fetch(node.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params }),
  });
  return parseExactJson(await res.text()) as Json;
}

/** Each key's JSON type, recursively for objects (the first element for lists). */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return value.length > 0 ? [shape(value[0])] : [];
  if (value === null) return 'null';
  if (typeof value === 'object')
    return Object.fromEntries(Object.entries(value as Json).map(([k, v]) => [k, shape(v)]));
  return typeof value;
}

const recorded = () => parseExactJson(recordedBlockText(R)) as Json;

describe('the loopback Solana node', () => {
  test('serves the recorded block as recorded, without rewards when asked', async () => {
    const withRewards = await rpc('getBlock', [R, { encoding: 'jsonParsed', commitment: 'confirmed' }]);
    expect(withRewards).toEqual({ ...recorded(), id: 7n });
    const { rewards: _, ...withoutRewards } = recorded().result as Json;
    const answer = await rpc('getBlock', [
      R,
      { encoding: 'jsonParsed', rewards: false, commitment: 'confirmed' },
    ]);
    expect(answer.result).toEqual(withoutRewards);
  });

  test('an assembled block has the recorded answer’s keys and types, and real transactions unchanged', async () => {
    const answer = await rpc('getBlock', [R + 2, { encoding: 'jsonParsed', commitment: 'confirmed' }]);
    const real = recorded().result as Json;
    const block = answer.result as Json;
    expect(shape({ ...block, transactions: [] })).toEqual(shape({ ...real, rewards: [], transactions: [] }));
    // Its transactions are the recorded ones, unchanged.
    const realTx = (real.transactions as Json[]).find(
      (t) => ((t.transaction as Json).signatures as string[])[0] === SIGNATURE,
    );
    expect(block.transactions).toEqual([realTx]);
    expect(Object.keys(answer.result as Json)).toEqual(Object.keys(real));
    const none = await rpc('getBlock', [
      R + 2,
      { transactionDetails: 'none', rewards: false, commitment: 'confirmed' },
    ]);
    expect(Object.keys(none.result as Json).sort()).toEqual([
      'blockHeight',
      'blockTime',
      'blockhash',
      'parentSlot',
      'previousBlockhash',
    ]);
  });

  test('answers a skipped slot, one not yet available and one cleaned up with a real node’s errors', async () => {
    expect((await rpc('getBlock', [R + 1, { commitment: 'confirmed' }])).error).toEqual({
      code: -32007n,
      message: `Slot ${R + 1} was skipped, or missing due to ledger jump to recent snapshot`,
    });
    expect((await rpc('getBlock', [R + 3, { commitment: 'confirmed' }])).error).toEqual({
      code: -32004n,
      message: `Block not available for slot ${R + 3}`,
    });
    expect(((await rpc('getBlock', [R - 5, {}])).error as Json).code).toBe(-32001n);
    expect((await rpc('getSlot', [{ commitment: 'confirmed' }])).result).toBe(BigInt(R + 2));
  });

  test('history: getTransaction has a recorded getTransaction answer’s keys; signatures newest first', async () => {
    const real = parseExactJson(
      fs.readFileSync(
        fixturePath('chains/solana/getTransaction-jsonParsed-sol-transfer-mainnet.json'),
        'utf8',
      ),
    ) as Json;
    const answer = (
      await rpc('getTransaction', [SIGNATURE, { encoding: 'jsonParsed', maxSupportedTransactionVersion: 0 }])
    ).result as Json;
    const realResult = real.result as Json;
    // The recorded block's entries carry no `version` (legacy transactions, answered before it).
    const expected = Object.keys(realResult)
      .filter((k) => k !== 'version' || 'version' in answer)
      .sort();
    expect(Object.keys(answer).sort()).toEqual(expected);
    expect(Object.keys(answer.meta as Json).sort()).toEqual(
      Object.keys(realResult.meta as Json)
        .filter((k) => k in (answer.meta as Json))
        .sort(),
    );
    // Held twice (the assembled block reuses it): answered from the higher slot.
    expect(answer.slot).toBe(BigInt(R + 2));

    const receiver = 'GJ7sYR315wBMmFkSbvAbZai216sA8Mpf58JBmRHZP4eL';
    const signatures = (await rpc('getSignaturesForAddress', [receiver, { limit: 1000 }])).result as Json[];
    expect(signatures.map((e) => e.slot)).toEqual([BigInt(R + 2), BigInt(R)]);
    expect(Object.keys(signatures[0]!).sort()).toEqual(
      ['blockTime', 'confirmationStatus', 'err', 'memo', 'signature', 'slot'].sort(),
    );
    const after = (await rpc('getSignaturesForAddress', [receiver, { before: SIGNATURE }])).result as Json[];
    expect(after.map((e) => e.slot)).toEqual([BigInt(R)]);
  });
});
