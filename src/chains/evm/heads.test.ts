import { describe, expect, test } from 'vitest';
import { announcedTip } from './heads.js';

describe('announcedTip', () => {
  const hash = `0x${'ab'.repeat(32)}`;

  test('a newHeads message (as viem passes it) announces its block', () => {
    expect(announcedTip({ subscription: '0x9', result: { number: '0x1f', hash, parentHash: hash } })).toEqual(
      {
        height: 31,
        hash,
      },
    );
  });

  test('anything else announces nothing: the follower asks the node for its tip', () => {
    for (const data of [
      undefined,
      null,
      {},
      { result: null },
      { result: { number: '0x1f' } },
      { result: { number: 31, hash } },
      { result: { number: '0xzz', hash } },
      { result: { number: '0x1f', hash: '0x12' } },
    ])
      expect(announcedTip(data), JSON.stringify(data)).toBeUndefined();
  });
});
