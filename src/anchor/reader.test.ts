import { describe, expect, test } from 'vitest';
import { readOnce } from './reader.js';
import type { AnchorReader } from './verify.js';

describe('readOnce (ledgerhook verify over many receipts)', () => {
  test('each transaction and the tip are asked of the node once; a failed read is asked again', async () => {
    const asked: string[] = [];
    let failNext = true;
    const node: AnchorReader = {
      async transaction(txId) {
        asked.push(txId);
        if (txId === 'flaky' && failNext) {
          failNext = false;
          throw new Error('node busy');
        }
        return { payload: Buffer.from(txId), blockNumber: 7, chain: 'eip155:1' };
      },
      async tip() {
        asked.push('tip');
        return 9;
      },
    };
    const reader = readOnce(node);
    const reads = await Promise.all(['a', 'b', 'a', 'a', 'b'].map((id) => reader.transaction(id)));
    expect(reads.map((r) => r?.payload?.toString())).toEqual(['a', 'b', 'a', 'a', 'b']);
    expect(await Promise.all([reader.tip(), reader.tip()])).toEqual([9, 9]);
    await expect(reader.transaction('flaky')).rejects.toThrow('node busy');
    expect((await reader.transaction('flaky'))?.blockNumber).toBe(7);
    expect(asked).toEqual(['a', 'b', 'tip', 'flaky', 'flaky']);
  });
});
