import crypto from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { CHAIN_NOTIFICATION_NAMESPACE, chainNotificationId } from './outbox.js';

/** RFC 9562's name-based UUID (version 5), computed here from its definition, not by the library. */
function rfcV5(namespace: string, name: string): string {
  const hash = crypto
    .createHash('sha1')
    .update(Buffer.from(namespace.replaceAll('-', ''), 'hex'))
    .update(Buffer.from(name, 'utf8'))
    .digest()
    .subarray(0, 16);
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

describe('chain notification ids', () => {
  // A receiver deduplicates by webhook-id across our upgrades: the derivation is a contract.
  test.each([
    ['an EVM transfer', '0x6f2b…:0x9a1c…:3'],
    ['a reorg withdrawal', 'reorg:0x6f2b:0x9a1c:3'],
    ['non-ASCII in the key', 'memo:é€𝄞'],
    ['a long key', 'k'.repeat(10_000)],
  ])('%s: version 5 of subscription, chain and key under the fixed namespace', (_, key) => {
    const subscription = crypto.randomUUID();
    const id = chainNotificationId(subscription, 'ETH', key);
    expect(id).toBe(rfcV5(CHAIN_NOTIFICATION_NAMESPACE, `${subscription}\nETH\n${key}`));
    expect(id).toBe(chainNotificationId(subscription, 'ETH', key));
    expect(id).not.toBe(chainNotificationId(subscription, 'ETH-SEPOLIA', key));
  });

  test('a key with an unpaired surrogate still gets an id (its UTF-8 replacement character)', () => {
    const subscription = crypto.randomUUID();
    expect(chainNotificationId(subscription, 'SOL', 'memo:\ud800')).toBe(
      rfcV5(CHAIN_NOTIFICATION_NAMESPACE, `${subscription}\nSOL\nmemo:\ufffd`),
    );
  });
});
