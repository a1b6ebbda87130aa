import { parseEther } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Devnet, startDevnet } from '../helpers/devnet.js';

describe('new heads by WebSocket', () => {
  let d: Devnet;
  beforeAll(async () => {
    // Polling every 10 minutes: only newHeads can bring a block in within the test's deadline.
    d = await startDevnet('pglite', { websocket: true, pollInterval: '600s' });
    d.subs.set(d.addresses[2]!, await d.subscribe(d.addresses[2]!, { mempool: false }));
  });
  afterAll(async () => {
    await d?.close();
  });

  test('a mined block is processed at once although polling is rare', async () => {
    const started = Date.now();
    const { hash, block } = await d.send(1, d.addresses[2]!, parseEther('0.5'));
    const [body] = await d.receivedAtLeast(hash, 1);
    expect(body).toMatchObject({
      blockNumber: Number(block),
      amount: '-0.5',
      watchedAddress: d.addresses[2],
    });
    expect(Date.now() - started).toBeLessThan(60_000);
  });
});
