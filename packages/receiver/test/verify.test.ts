/**
 * verify() on its own: HMAC `v1` deliveries signed by `standardwebhooks` (the sender's side of the
 * same library), ed25519 `v1a` deliveries signed with Node's crypto in the agreed key format,
 * rotations holding several keys, the timestamp's tolerance, and secrets that cannot be right.
 */
import crypto from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, test } from 'vitest';
import { createMemoryStore } from '../src/dedupe.js';
import {
  type ContractLogEvent,
  eventTypeOf,
  isAddressTransaction,
  isContractLog,
  isRegistryEvent,
  isReorg,
  isTest,
  type WebhookEvent,
} from '../src/types.js';
import { InvalidKeyError, verify, WebhookVerificationError } from '../src/verify.js';

const BODY = JSON.stringify({
  address: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
  txId: `0x${'ab'.repeat(32)}`,
  type: 'native',
  blockNumber: 7,
  asset: 'ETH',
  amount: '-1.5',
  mempool: false,
  counterAddress: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
  id: '01a2fffc-544d-77ec-a09b-ace21074a83f',
  subscriptionId: '01a2fffc-0000-77ec-a09b-ace21074a83f',
  chain: 'DEVNET',
  watchedAddress: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
  confirmations: 1,
});
const ID = '01a2fffc-544d-77ec-a09b-ace21074a83f';
/** A `contract.log` body: an ERC-20 Transfer, decoded. */
const CONTRACT_LOG_BODY = JSON.stringify({
  chain: 'DEVNET',
  contractAddress: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
  txId: `0x${'cd'.repeat(32)}`,
  blockNumber: 12,
  blockHash: `0x${'ef'.repeat(32)}`,
  logIndex: 3,
  event: 'Transfer',
  signature: 'Transfer(address,address,uint256)',
  topics: [
    '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef',
    '0x000000000000000000000000f39fd6e51aad88f6f4ce6ab8827279cfffb92266',
    '0x00000000000000000000000070997970c51812dc3a010c7d01b50e0d17dc79c8',
  ],
  data: '0x00000000000000000000000000000000000000000000000000000000000f4240',
  args: {
    from: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
    to: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
    value: '1000000',
  },
  id: '01a2fffd-544d-77ec-a09b-ace21074a83f',
  subscriptionId: '01a2fffd-0000-77ec-a09b-ace21074a83f',
  confirmations: 1,
});

const newSecret = () => `whsec_${crypto.randomBytes(32).toString('base64')}`;
const nowSeconds = () => Math.floor(Date.now() / 1000);

/** An ed25519 key pair in the agreed format: whpk_ + base64 of the raw 32-byte public key. */
function ed25519Pair() {
  const { publicKey, privateKey } = crypto.generateKeyPairSync('ed25519');
  const raw = Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url');
  return { whpk: `whpk_${raw.toString('base64')}`, privateKey };
}

/** `v1a,` + base64 of the ed25519 signature over `${id}.${timestamp}.${body}`. */
function v1a(privateKey: crypto.KeyObject, id: string, timestamp: number, body: string): string {
  return `v1a,${crypto.sign(null, Buffer.from(`${id}.${timestamp}.${body}`), privateKey).toString('base64')}`;
}

function hmacHeaders(secrets: string[], body = BODY, timestamp = nowSeconds(), id = ID) {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets
      .map((s) => new Webhook(s).sign(id, new Date(timestamp * 1000), body))
      .join(' '),
  };
}

function failure(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    if (error instanceof WebhookVerificationError) return error.reason;
    throw error;
  }
  throw new Error('verified, but should not have');
}

describe('HMAC (v1, whsec_)', () => {
  test('a delivery signed with the secret verifies and comes back parsed, from a string or the raw bytes', () => {
    const secret = newSecret();
    const headers = hmacHeaders([secret]);
    const event = verify(BODY, headers, secret);
    expect(event).toEqual(JSON.parse(BODY));
    expect(eventTypeOf(event)).toBe('address.transaction');
    expect(verify(Buffer.from(BODY), headers, secret)).toEqual(event);
    expect(verify(new Uint8Array(Buffer.from(BODY)), new Headers(headers), secret)).toEqual(event);
    const logId = '01a2fffd-544d-77ec-a09b-ace21074a83f';
    const log = verify(
      CONTRACT_LOG_BODY,
      hmacHeaders([secret], CONTRACT_LOG_BODY, nowSeconds(), logId),
      secret,
    );
    expect(log).toEqual(JSON.parse(CONTRACT_LOG_BODY));
    expect(eventTypeOf(log)).toBe('contract.log');
    // Header names are case-insensitive, as HTTP's are.
    const shouted = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), v]));
    expect(verify(BODY, shouted, secret)).toEqual(event);
  });

  test('a changed body, another secret, a changed id or a missing header fail', () => {
    const secret = newSecret();
    const headers = hmacHeaders([secret]);
    expect(failure(() => verify(BODY.replace('-1.5', '-15'), headers, secret))).toBe('no_matching_signature');
    expect(failure(() => verify(BODY, headers, newSecret()))).toBe('no_matching_signature');
    expect(failure(() => verify(BODY, { ...headers, 'webhook-id': `${ID}x` }, secret))).toBe(
      'no_matching_signature',
    );
    expect(failure(() => verify(BODY, { ...headers, 'webhook-signature': 'v1,' }, secret))).toBe(
      'no_matching_signature',
    );
    for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) {
      const { [name as keyof typeof headers]: _, ...rest } = headers;
      expect(failure(() => verify(BODY, rest, secret))).toBe('missing_headers');
    }
  });

  test('through a rotation: a header with two signatures, a receiver with two secrets', () => {
    const [old, current] = [newSecret(), newSecret()];
    const both = hmacHeaders([old, current]);
    expect(verify(BODY, both, old)).toEqual(JSON.parse(BODY));
    expect(verify(BODY, both, current)).toEqual(JSON.parse(BODY));
    expect(verify(BODY, hmacHeaders([current]), [old, current])).toEqual(JSON.parse(BODY));
    expect(failure(() => verify(BODY, hmacHeaders([newSecret()]), [old, current]))).toBe(
      'no_matching_signature',
    );
  });

  test('the timestamp must be within 5 minutes either way, or the tolerance given', () => {
    const secret = newSecret();
    const at = (offset: number) => hmacHeaders([secret], BODY, nowSeconds() + offset);
    expect(verify(BODY, at(-290), secret)).toBeDefined();
    expect(verify(BODY, at(290), secret)).toBeDefined();
    expect(failure(() => verify(BODY, at(-310), secret))).toBe('timestamp_too_old');
    expect(failure(() => verify(BODY, at(310), secret))).toBe('timestamp_too_new');
    expect(verify(BODY, at(-3600), secret, { toleranceSeconds: 7200 })).toBeDefined();
    expect(failure(() => verify(BODY, at(-60), secret, { toleranceSeconds: 30 }))).toBe('timestamp_too_old');
    const headers = at(0);
    for (const bad of ['soon', '', '0012', '1.5e9', '-5'])
      expect(failure(() => verify(BODY, { ...headers, 'webhook-timestamp': bad }, secret))).toMatch(
        /invalid_timestamp|missing_headers/,
      );
  });

  test('a signed body that is not a JSON object is refused as such', () => {
    const secret = newSecret();
    expect(failure(() => verify('not json', hmacHeaders([secret], 'not json'), secret))).toBe('invalid_body');
    expect(failure(() => verify('[1]', hmacHeaders([secret], '[1]'), secret))).toBe('invalid_body');
  });
});

describe('ed25519 (v1a, whpk_)', () => {
  test('a v1a signature made with the private key verifies with the whpk_ public key', () => {
    const { whpk, privateKey } = ed25519Pair();
    const timestamp = nowSeconds();
    const headers = {
      'webhook-id': ID,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': v1a(privateKey, ID, timestamp, BODY),
    };
    expect(verify(BODY, headers, whpk)).toEqual(JSON.parse(BODY));
    expect(failure(() => verify(`${BODY} `, headers, whpk))).toBe('no_matching_signature');
    expect(failure(() => verify(BODY, headers, ed25519Pair().whpk))).toBe('no_matching_signature');
    expect(
      failure(() => verify(BODY, { ...headers, 'webhook-timestamp': String(timestamp + 1) }, whpk)),
    ).toBe('no_matching_signature');
    // The same bytes under an HMAC version tag are not an ed25519 signature, nor the reverse.
    const relabelled = headers['webhook-signature'].replace(/^v1a,/, 'v1,');
    expect(failure(() => verify(BODY, { ...headers, 'webhook-signature': relabelled }, whpk))).toBe(
      'no_matching_signature',
    );
  });

  test('a rotation signs with several keys; HMAC and ed25519 entries may share a header', () => {
    const [old, current] = [ed25519Pair(), ed25519Pair()];
    const secret = newSecret();
    const timestamp = nowSeconds();
    const hmac = hmacHeaders([secret], BODY, timestamp)['webhook-signature'];
    const headers = {
      'webhook-id': ID,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': `${v1a(old.privateKey, ID, timestamp, BODY)} ${v1a(current.privateKey, ID, timestamp, BODY)} ${hmac}`,
    };
    expect(verify(BODY, headers, old.whpk)).toBeDefined();
    expect(verify(BODY, headers, current.whpk)).toBeDefined();
    expect(verify(BODY, headers, secret)).toBeDefined();
    expect(verify(BODY, headers, [ed25519Pair().whpk, current.whpk])).toBeDefined();
    expect(failure(() => verify(BODY, headers, [ed25519Pair().whpk, newSecret()]))).toBe(
      'no_matching_signature',
    );
    // Malformed entries beside a good one are passed over, not fatal.
    const noisy = {
      ...headers,
      'webhook-signature': `v1a,!!! v1a,AAAA junk ${headers['webhook-signature']}`,
    };
    expect(verify(BODY, noisy, current.whpk)).toBeDefined();
  });

  test('the timestamp tolerance holds for v1a too', () => {
    const { whpk, privateKey } = ed25519Pair();
    const stale = nowSeconds() - 301;
    const headers = {
      'webhook-id': ID,
      'webhook-timestamp': String(stale),
      'webhook-signature': v1a(privateKey, ID, stale, BODY),
    };
    expect(failure(() => verify(BODY, headers, whpk))).toBe('timestamp_too_old');
  });
});

describe('secrets that cannot be right', () => {
  test('are refused with InvalidKeyError, naming what is expected', () => {
    const headers = hmacHeaders([newSecret()]);
    const seed = crypto.randomBytes(32).toString('base64');
    const cases: [string | string[], RegExp][] = [
      [`whsk_${seed}`, /signing key.*whpk_ public key/],
      [seed, /whsec_ secret or a whpk_ public key/],
      ['whsec_not*base64', /not base64/],
      ['whsec_AAAA', /too short/],
      [`whpk_${crypto.randomBytes(16).toString('base64')}`, /32 bytes/],
      [[], /no secret/],
    ];
    for (const [secret, message] of cases) {
      expect(() => verify(BODY, headers, secret)).toThrow(InvalidKeyError);
      expect(() => verify(BODY, headers, secret)).toThrow(message);
    }
  });
});

describe('the event type told from the body', () => {
  test('matches the Ledgerhook-Event-Type values', () => {
    const base = JSON.parse(BODY) as WebhookEvent;
    expect(eventTypeOf({ ...base, mempool: true } as WebhookEvent)).toBe('address.transaction.pending');
    expect(eventTypeOf({ ...base, reorg: true } as WebhookEvent)).toBe('address.transaction.reorg');
    const { blockNumber: _blockNumber, ...announced } = JSON.parse(BODY) as Record<string, unknown>;
    const withdrawn = { ...announced, mempool: true, confirmations: 0, dropped: true } as WebhookEvent;
    expect(eventTypeOf(withdrawn)).toBe('address.transaction.dropped');
    expect(eventTypeOf({ ...base, test: true } as WebhookEvent)).toBe('test');
    expect(eventTypeOf({ type: 'registry.revoked' } as WebhookEvent)).toBe('registry.revoked');
    const log = JSON.parse(CONTRACT_LOG_BODY) as WebhookEvent;
    expect(eventTypeOf(log)).toBe('contract.log');
    expect(eventTypeOf({ ...log, reorg: true } as WebhookEvent)).toBe('contract.log.reorg');
    // A subscription made with a bare topic0 (Tatum's way): no name, signature or arguments.
    const { event: _event, signature: _signature, args: _args, ...bare } = log as ContractLogEvent;
    expect(eventTypeOf(bare)).toBe('contract.log');
  });

  test('the guards tell a contract event from a transfer and a registry event', () => {
    const transfer = JSON.parse(BODY) as WebhookEvent;
    const log = JSON.parse(CONTRACT_LOG_BODY) as WebhookEvent;
    const registry = { type: 'registry.revoked' } as WebhookEvent;
    const withdrawal = { ...log, reorg: true } as WebhookEvent;
    const kinds = (e: WebhookEvent) =>
      [isContractLog(e), isAddressTransaction(e), isRegistryEvent(e), isReorg(e), isTest(e)].map(Number);
    expect(kinds(log)).toEqual([1, 0, 0, 0, 0]);
    expect(kinds(withdrawal)).toEqual([1, 0, 0, 1, 0]);
    expect(kinds(transfer)).toEqual([0, 1, 0, 0, 0]);
    expect(kinds({ ...transfer, reorg: true } as WebhookEvent)).toEqual([0, 1, 0, 1, 0]);
    expect(kinds(registry)).toEqual([0, 0, 1, 0, 0]);
    // Narrowed, the fields are typed: this compiles only if the guard narrows to ContractLogEvent.
    if (!isContractLog(log)) throw new Error('a contract event was expected');
    const named: { event?: string; topics: string[]; logIndex: number } = log;
    expect(named).toMatchObject({ event: 'Transfer', logIndex: 3 });
    expect(log.args?.value).toBe('1000000');
  });
});

describe('the memory store', () => {
  test('remembers an id for its window, holds one in progress for its lease, and stays within its size', () => {
    let now = 0;
    const store = createMemoryStore({ maxEntries: 3, now: () => now });
    expect(store.begin('a', 1_000)).toBe('new');
    expect(store.begin('a', 1_000)).toBe('in-progress');
    store.done('a', 10_000);
    expect(store.begin('a', 1_000)).toBe('done');
    expect(store.begin('b', 1_000)).toBe('new');
    now = 1_500; // b's lease ran out (its handler's process died): it may be claimed again
    expect(store.begin('b', 1_000)).toBe('new');
    store.forget('b'); // its handler failed
    expect(store.begin('b', 1_000)).toBe('new');
    now = 11_000; // a's window ended
    expect(store.begin('a', 1_000)).toBe('new');
    for (const id of ['c', 'd', 'e', 'f']) store.begin(id, 60_000);
    expect(store.size()).toBe(3);
    expect(store.begin('f', 60_000)).toBe('in-progress');
  });
});
