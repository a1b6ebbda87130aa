/**
 * The Solana block source against the loopback node (test/helpers/solana-node.ts): the recorded
 * mainnet blocks read whole, skipped slots presented as empty blocks that link, slots not there
 * yet, node failures, commitment, exactness beyond 2^53 and slotSubscribe.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { waitFor } from '../../../test/helpers/process.js';
import {
  recordedBlock,
  SENDER,
  SLOT,
  SLOT_HASH,
  SLOT_PARENT_HASH,
  TX,
} from '../../../test/helpers/solana-blocks.js';
import {
  assembleBlock,
  blockhashOf,
  recordedSlot,
  recordedTransactions,
  type SolanaNode,
  skippedSlot,
  startSolanaNode,
} from '../../../test/helpers/solana-node.js';
import { UpstreamUnavailableError } from '../../errors.js';
import { solanaChanges } from './activity.js';
import { createSolanaSource, solanaActivityFromBlock } from './source.js';

const R = SLOT;
const RECORDED_HASH = SLOT_HASH;
const SOL_TRANSFER = TX.sol;

let node: SolanaNode;
beforeAll(async () => {
  node = await startSolanaNode();
});
afterAll(() => node?.close());
afterEach(() => {
  node.failNext(0);
  node.setFinalized(-1);
});

/** The recorded block, two skipped slots, then an ASSEMBLED block holding one real transfer. */
function chainWithSkips() {
  const next = assembleBlock({
    slot: R + 3,
    parentSlot: R,
    previousBlockhash: RECORDED_HASH,
    transactions: recordedTransactions(R, [SOL_TRANSFER]),
  });
  node.setSlots([recordedSlot(R), skippedSlot(R + 1), skippedSlot(R + 2), next]);
  return next;
}

describe('reading blocks', () => {
  test.each([110130000, 110360000] as const)(
    'slot %i: read whole, hashes and every transaction',
    async (slot) => {
      node.setSlots([recordedSlot(slot)]);
      const source = createSolanaSource({ url: node.url });
      const block = await source.block(slot);
      const recorded = recordedBlock(slot);
      expect(block).toMatchObject({
        height: slot,
        hash: recorded.blockhash,
        parentHash: recorded.previousBlockhash,
      });
      expect(block!.activity.map((tx) => tx.signature)).toEqual(
        (recorded.transactions as { transaction: { signatures: string[] } }[]).map(
          (t) => t.transaction.signatures[0],
        ),
      );
      // `accounts` details carry all the activity needs: the same as from the recorded full answer.
      expect(block!.activity).toEqual(solanaActivityFromBlock(recorded));
      // What was asked: jsonParsed, accounts details, v0 transactions, no rewards, at `confirmed`.
      expect(node.requests.at(-1)).toEqual({
        method: 'getBlock',
        params: [
          slot,
          {
            encoding: 'jsonParsed',
            transactionDetails: 'accounts',
            maxSupportedTransactionVersion: 0,
            rewards: false,
            commitment: 'confirmed',
          },
        ],
      });
    },
  );

  test('a skipped slot is an empty block whose hash and parent are the last real block’s, so the chain links', async () => {
    const next = chainWithSkips();
    const source = createSolanaSource({ url: node.url });
    const blocks = [];
    for (let slot = R; slot <= R + 3; slot++) blocks.push(await source.block(slot));
    expect(blocks.map((b) => [b!.height, b!.hash, b!.parentHash, b!.activity.length])).toEqual([
      [R, RECORDED_HASH, SLOT_PARENT_HASH, 4435],
      [R + 1, RECORDED_HASH, RECORDED_HASH, 0],
      [R + 2, RECORDED_HASH, RECORDED_HASH, 0],
      [R + 3, blockhashOf(next), RECORDED_HASH, 1],
    ]);
    for (let i = 1; i < blocks.length; i++) expect(blocks[i]!.parentHash).toBe(blocks[i - 1]!.hash);
    // hashAt answers what block() did, so walking back after a reorganisation compares like with like.
    for (const b of blocks) expect(await source.hashAt(b!.height)).toBe(b!.hash);
    // Read with transactionDetails "none".
    expect(node.requests.at(-1)!.params[1]).toMatchObject({ transactionDetails: 'none' });
  });

  test('the tip is the node’s confirmed slot; one it has not got yet is not in the chain', async () => {
    const next = chainWithSkips();
    const source = createSolanaSource({ url: node.url });
    expect(await source.tip()).toEqual({ height: R + 3, hash: blockhashOf(next) });
    expect(await source.block(R + 4)).toBeUndefined();
    expect(await source.hashAt(R + 4)).toBeUndefined();
    // The tip slot skipped: its hash is the last real block's.
    node.setSlots([recordedSlot(R), skippedSlot(R + 1)]);
    expect(await source.tip()).toEqual({ height: R + 1, hash: RECORDED_HASH });
  });

  test('at `finalized`, the finalized slot is the tip and a confirmed-only block is not there yet', async () => {
    chainWithSkips();
    node.setFinalized(R + 1);
    const source = createSolanaSource({ url: node.url, commitment: 'finalized' });
    expect(await source.tip()).toEqual({ height: R + 1, hash: RECORDED_HASH });
    expect(await source.block(R + 3)).toBeUndefined();
    expect(node.requests.at(-1)!.params[1]).toMatchObject({ commitment: 'finalized' });
  });

  test('a 5xx, another JSON-RPC error or an unreachable node throws: never a partial block', async () => {
    chainWithSkips();
    const source = createSolanaSource({ url: node.url, timeoutMs: 2_000 });
    node.failNext(1, 503);
    await expect(source.block(R)).rejects.toThrow(UpstreamUnavailableError);
    // Below the first block the node holds: cleaned up (-32001), an error, not a skip.
    await expect(source.block(R - 1)).rejects.toThrow(/cleaned up/);
    // A skipped slot whose walk down meets a failure fails too.
    node.failNext(2);
    await expect(source.block(R + 2)).rejects.toThrow(UpstreamUnavailableError);
    await node.stop();
    try {
      await expect(source.tip()).rejects.toThrow(/could not be reached/);
    } finally {
      await node.start();
    }
  });

  test('a balance beyond 2^53 lamports is read exactly (CONSTRUCTED: the recorded transfer with 2^53 added)', async () => {
    const [tx] = recordedTransactions(R, [SOL_TRANSFER]) as [Record<string, Record<string, unknown>>];
    const big = 2n ** 53n;
    const meta = tx.meta!;
    const shifted = {
      ...tx,
      meta: {
        ...meta,
        preBalances: (meta.preBalances as bigint[]).map((b, i) => (i === 0 ? b + big : b)),
        postBalances: (meta.postBalances as bigint[]).map((b, i) => (i === 0 ? b + big : b)),
      },
    };
    const block = assembleBlock({
      slot: R + 1,
      parentSlot: R,
      previousBlockhash: RECORDED_HASH,
      transactions: [shifted],
    });
    node.setSlots([recordedSlot(R), block]);
    const read = await createSolanaSource({ url: node.url }).block(R + 1);
    const [change] = solanaChanges(read!.activity[0]!);
    // 328378169 → 278373169 both plus 2^53: still −50005000 to the lamport.
    expect(change).toMatchObject({
      address: SENDER,
      amount: -50005000n,
    });
    expect(read!.activity[0]!.preBalances[0]).toBe(328378169n + big);
  });
});

describe('slotSubscribe', () => {
  /** A source on the node's WebSocket, counting its wake-ups, once subscribed. */
  async function subscribed() {
    chainWithSkips();
    const source = createSolanaSource({ url: node.url, wsUrl: node.wsUrl });
    const counter = { heads: 0 };
    const stop = source.watchHeads!(() => counter.heads++);
    await waitFor(() => (node.subscribers() === 1 ? true : undefined), 'the subscription');
    return { counter, stop };
  }

  test('each slot notification wakes the follower; stopping closes the socket without waiting on the node', async () => {
    const { counter, stop } = await subscribed();
    try {
      node.addSlots(skippedSlot(R + 4), skippedSlot(R + 5));
      await waitFor(() => (counter.heads >= 2 ? true : undefined), 'two slot notifications');
    } finally {
      stop();
    }
    await waitFor(() => (node.subscribers() === 0 ? true : undefined), 'the socket closed');
  });

  test('a dropped socket wakes the follower and subscribes again', async () => {
    const { counter, stop } = await subscribed();
    try {
      await node.stop();
      await waitFor(() => (counter.heads >= 1 ? true : undefined), 'a wake on the dropped socket');
      await node.start();
      await waitFor(() => (node.subscribers() === 1 ? true : undefined), 'subscribed again', 10_000);
    } finally {
      stop();
    }
  });
});
