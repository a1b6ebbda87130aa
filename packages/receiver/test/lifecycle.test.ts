/**
 * The pending lifecycle told from the bodies alone: a pending announcement (`mempool: true`), then
 * either the mined notification (and, if its block leaves the chain, its `reorg` withdrawal) or the
 * announcement's withdrawal (`dropped: true`, with `replacedBy` when known). The bodies are shaped
 * as the service writes them, from real transactions: EVM transactions signed here with anvil's
 * first development key (a transfer and the speed-up that replaced it, same nonce, to another
 * address), and Bitcoin's real double spend of btcd's reorganisation test chain
 * (../shared/fixtures/bitcoin/blocks/btcd-reorg: 509866fa… of block 3 and c4d85354… of block 3A
 * both spend 29c25cf0…:0, 10 BTC of 1KXFNh…). They are checked against the webhook schemas the
 * service publishes (src/http/webhook-schemas.ts), so a guard and the document cannot drift apart.
 */
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { keccak256, parseEther, parseGwei } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { describe, expect, test } from 'vitest';
import { WEBHOOK_SCHEMAS } from '../../../src/http/webhook-schemas.js';
import {
  type AddressTransactionDroppedEvent,
  type AddressTransactionEvent,
  eventTypeOf,
  isAddressTransaction,
  isDropped,
  isPending,
  isReorg,
  isTest,
  type WebhookEvent,
} from '../src/types.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/** anvil's first development account (the `test test … junk` mnemonic): public knowledge. */
const SENDER = privateKeyToAccount('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80');
const WATCHED = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const ELSEWHERE = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';

/** The hash of a signed EIP-1559 transfer of the sender's nonce 0 on the devnet (chain 31337). */
async function transfer(to: `0x${string}`, value: bigint, tipGwei: string): Promise<string> {
  const signed = await SENDER.signTransaction({
    type: 'eip1559',
    chainId: 31337,
    nonce: 0,
    to,
    value,
    gas: 21_000n,
    maxPriorityFeePerGas: parseGwei(tipGwei),
    maxFeePerGas: parseGwei('50'),
  });
  return keccak256(signed);
}

/** components.schemas as the service serves them (TypeBox's own symbols gone, as in JSON). */
function schemaValidator() {
  const ajv = addFormats(new Ajv({ strict: false, allErrors: true }));
  ajv.addSchema({ components: { schemas: JSON.parse(JSON.stringify(WEBHOOK_SCHEMAS)) } }, 'openapi');
  return (schema: string, body: unknown): string[] => {
    const validate = ajv.getSchema(`openapi#/components/schemas/${schema}`)!;
    return validate(body) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
  };
}
const errorsOf = schemaValidator();

/** The properties a schema documents, following $ref and allOf. */
function documented(name: string): Set<string> {
  type Schema = { $ref?: string; allOf?: Schema[]; properties?: Record<string, unknown> };
  const found = new Set<string>();
  const collect = (s: Schema) => {
    if (s.$ref) collect(WEBHOOK_SCHEMAS[s.$ref.replace('#/components/schemas/', '')] as Schema);
    for (const part of s.allOf ?? []) collect(part);
    for (const key of Object.keys(s.properties ?? {})) found.add(key);
  };
  collect(WEBHOOK_SCHEMAS[name] as Schema);
  return found;
}

/** Which guards hold: [isAddressTransaction, isPending, isDropped, isReorg, isTest]. */
const kinds = (e: WebhookEvent) =>
  [isAddressTransaction(e), isPending(e), isDropped(e), isReorg(e), isTest(e)].map(Number);

// The announced transfer and its speed-up: the same nonce, a higher tip, another recipient.
const announced = await transfer(WATCHED, parseEther('1.5'), '1');
const replacement = await transfer(ELSEWHERE, parseEther('1.5'), '2');

describe('EVM: a pending transfer replaced by a speed-up to another address', () => {
  const pending = {
    address: SENDER.address,
    txId: announced,
    type: 'native',
    asset: 'ETH',
    amount: '-1.5',
    mempool: true,
    counterAddress: WATCHED,
    id: '01a3a1c0-5e1d-7a11-9a11-2c8c1f0e4d01',
    subscriptionId: '01a3a1c0-0000-7a11-9a11-2c8c1f0e4d01',
    chain: 'DEVNET',
    watchedAddress: WATCHED,
    confirmations: 0,
  } satisfies AddressTransactionEvent;
  const dropped = {
    ...pending,
    id: '01a3a1c7-9b2e-7a11-9a11-2c8c1f0e4d02',
    dropped: true,
    replacedBy: replacement,
  } satisfies AddressTransactionDroppedEvent;

  test('the transactions are distinct and real-shaped', () => {
    expect(announced).toMatch(/^0x[0-9a-f]{64}$/);
    expect(replacement).toMatch(/^0x[0-9a-f]{64}$/);
    expect(replacement).not.toBe(announced);
  });

  test('the announcement is pending; its withdrawal is dropped, and names the replacement', () => {
    expect(eventTypeOf(pending)).toBe('address.transaction.pending');
    expect(kinds(pending)).toEqual([1, 1, 0, 0, 0]);
    expect(eventTypeOf(dropped)).toBe('address.transaction.dropped');
    // Still `mempool: true` (the announced body), but a withdrawal, not a pending announcement.
    expect(kinds(dropped)).toEqual([1, 0, 1, 0, 0]);
    const event: WebhookEvent = dropped;
    if (!isDropped(event)) throw new Error('a dropped withdrawal was expected');
    // Narrowed: replacedBy is typed, and the rest is the announced body, found by txId.
    const replacedBy: string | undefined = event.replacedBy;
    expect(replacedBy).toBe(replacement);
    expect(event.txId).toBe(pending.txId);
    expect(event.id).not.toBe(pending.id);
  });

  test('an eviction whose nonce stayed unused is dropped without replacedBy', () => {
    const { replacedBy: _replacedBy, ...evicted } = dropped;
    expect(eventTypeOf(evicted)).toBe('address.transaction.dropped');
    expect(isDropped(evicted)).toBe(true);
    expect('replacedBy' in evicted).toBe(false);
    expect(errorsOf('AddressTransactionDroppedEvent', evicted)).toEqual([]);
  });

  test('the mined notification, and a reorganisation taking it back, are neither pending nor dropped', () => {
    const mined = { ...pending, id: '01a3a1c9-0000-7a11-9a11-2c8c1f0e4d03', blockNumber: 8, mempool: false };
    const reorg = { ...mined, id: '01a3a1ca-0000-7a11-9a11-2c8c1f0e4d04', reorg: true as const };
    expect(eventTypeOf(mined)).toBe('address.transaction');
    expect(kinds(mined)).toEqual([1, 0, 0, 0, 0]);
    expect(eventTypeOf(reorg)).toBe('address.transaction.reorg');
    expect(kinds(reorg)).toEqual([1, 0, 0, 1, 0]);
    expect(errorsOf('AddressTransactionReorgEvent', reorg)).toEqual([]);
  });

  test('the bodies match the published schemas, every field documented', () => {
    expect(errorsOf('AddressTransactionEvent', pending)).toEqual([]);
    expect(errorsOf('AddressTransactionDroppedEvent', dropped)).toEqual([]);
    expect(errorsOf('WebhookEvent', dropped)).toEqual([]);
    const known = documented('AddressTransactionDroppedEvent');
    expect(Object.keys(dropped).filter((key) => !known.has(key))).toEqual([]);
    // `dropped` is the constant true, and a withdrawal without it is not one.
    expect(errorsOf('AddressTransactionDroppedEvent', { ...dropped, dropped: false })).not.toEqual([]);
    expect(errorsOf('AddressTransactionDroppedEvent', pending)).not.toEqual([]);
    expect(errorsOf('AddressTransactionDroppedEvent', { ...dropped, replacedBy: 7 })).not.toEqual([]);
  });
});

describe("Bitcoin: a pending payment double-spent in a block (btcd's reorganisation test chain)", () => {
  // Transaction 509866fa… pays the 10 BTC of output 29c25cf0…:0 (1KXFNh…) to 1JyMKv…; block 3A's
  // c4d85354… spends the same output to 1NiEGX… instead.
  const WATCHED_BTC = '1JyMKvPHkrCQd8jQrqTR1rBsAd1VpRhTiE';
  const pending = {
    address: WATCHED_BTC,
    txId: '509866fa6b6a33190bbf03473bc798adad72d08418832e7b391fb95a71fdc42c',
    type: 'native',
    asset: 'BTC',
    amount: '10',
    mempool: true,
    counterAddress: '1KXFNhNtrRMfgbdiQeuJqnfD7dR4PhniyJ',
    id: '01a3a1d0-5e1d-7b22-8b22-3d9d2f1f5e01',
    subscriptionId: '01a3a1d0-0000-7b22-8b22-3d9d2f1f5e01',
    chain: 'BTC',
    watchedAddress: WATCHED_BTC,
    confirmations: 0,
  } satisfies AddressTransactionEvent;
  const dropped = {
    ...pending,
    id: '01a3a1d8-1f0a-7b22-8b22-3d9d2f1f5e02',
    dropped: true,
    replacedBy: 'c4d8535471dded0c0a48ed5e5e421340112b2ae8073ee013b1230e8030e9d648',
  } satisfies AddressTransactionDroppedEvent;

  test('pending, then dropped with the double spend as replacedBy', () => {
    expect(eventTypeOf(pending)).toBe('address.transaction.pending');
    expect(kinds(pending)).toEqual([1, 1, 0, 0, 0]);
    expect(eventTypeOf(dropped)).toBe('address.transaction.dropped');
    expect(kinds(dropped)).toEqual([1, 0, 1, 0, 0]);
    expect(isDropped(dropped) && dropped.replacedBy).toBe(
      'c4d8535471dded0c0a48ed5e5e421340112b2ae8073ee013b1230e8030e9d648',
    );
    expect(errorsOf('AddressTransactionEvent', pending)).toEqual([]);
    expect(errorsOf('AddressTransactionDroppedEvent', dropped)).toEqual([]);
    expect(errorsOf('WebhookEvent', dropped)).toEqual([]);
  });

  test('the mined notification of a Bitcoin payment has its block and no mempool flag', () => {
    const { mempool: _mempool, ...rest } = pending;
    const mined = { ...rest, id: '01a3a1d9-0000-7b22-8b22-3d9d2f1f5e03', blockNumber: 3, confirmations: 2 };
    expect(eventTypeOf(mined)).toBe('address.transaction');
    expect(kinds(mined)).toEqual([1, 0, 0, 0, 0]);
  });
});
