import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import algosdk from 'algosdk';
import { address as btcAddress } from 'bitcoinjs-lib';
import { sql } from 'drizzle-orm';
import { Webhook } from 'standardwebhooks';
import { getAddress, isAddress as isEvmAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../../test/helpers/app.js';
import { type DnsServer, startDnsServer } from '../../test/helpers/dns-server.js';
import { ed25519PublicKeyOf, signatureEntries, v1aVerifiedBy } from '../../test/helpers/ed25519.js';
import { backends } from '../../test/helpers/env.js';
import { waitFor } from '../../test/helpers/process.js';
import { type ReceivedRequest, type Receiver, startReceiver } from '../../test/helpers/receiver.js';
import { snapshotDatabase } from '../../test/helpers/snapshot.js';
import { secretContext } from '../notify/dispatcher.js';
import { createEnvelope } from '../secrets/envelope.js';
import { loadMasterKey } from '../secrets/master-key.js';
import { subscriptions } from './schema.js';
import type { SubscriptionView } from './service.js';

const API = '/api/v1/subscription';
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** `whsec_` + base64 of 32 bytes. */
const WHSEC = /^whsec_[A-Za-z0-9+/]{43}=$/;
/** `whpk_` + base64 of a 32-byte Ed25519 public key. */
const WHPK = /^whpk_[A-Za-z0-9+/]{43}=$/;
const DAY_MS = 24 * 3_600_000;

interface Created {
  id: string;
  secret: string;
  callbackToken: string;
}

/** What creating an ed25519 subscription answers: its public key instead of a secret. */
interface CreatedEd25519 {
  id: string;
  publicKey: string;
  callbackToken: string;
}

type View = SubscriptionView;

interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  errors?: { pointer?: string; parameter?: string; detail: string }[];
}

interface LogPage {
  data: {
    id: string;
    state: string;
    attemptCount: number;
    attempts: { statusCode: number | null; outcome: string; trigger: string }[];
  }[];
  next_cursor: string | null;
}

// ---------------------------------------------------------------------------------------------
// Addresses. Expected normal forms are computed with the chains' own libraries.

/** A real, EIP-55 checksummed mainnet address. */
const EVM_REAL = '0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045';
const evmLower = EVM_REAL.toLowerCase();
const evmUpperBody = `0x${evmLower.slice(2).toUpperCase()}`;
/** The checksummed address with the case of one letter flipped: still mixed case, wrong checksum. */
const evmBadChecksum = (() => {
  const chars = [...EVM_REAL];
  const i = chars.findIndex((c, index) => index > 1 && /[A-F]/.test(c));
  chars[i] = chars[i]!.toLowerCase();
  return chars.join('');
})();
const randomEvm = () => `0x${crypto.randomBytes(20).toString('hex')}`;
const newSecretLike = () => `whsec_${crypto.randomBytes(32).toString('base64')}`;

const BTC_P2PKH = '1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa'; // the genesis block's coinbase
const BTC_P2SH = '3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy';
const BTC_P2WPKH = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';
const BTC_P2TR = 'bc1p5d7rjq7g6rdk2yhzks9smlaqtedr4dekq08ge8ztwac72sfr9rusxg3297'; // BIP-86 vector
/** The normal form: base58check re-encoded, bech32 re-encoded (lower case). */
function btcNormal(input: string): string {
  if (/^bc1/i.test(input)) {
    const d = btcAddress.fromBech32(input.toLowerCase());
    return btcAddress.toBech32(d.data, d.version, d.prefix);
  }
  const d = btcAddress.fromBase58Check(input);
  return btcAddress.toBase58Check(d.hash, d.version);
}
const btcP2wsh = btcAddress.toBech32(new Uint8Array(32).fill(7), 0, 'bc');
const btcTestnetBech32 = btcAddress.toBech32(btcAddress.fromBech32(BTC_P2WPKH).data, 0, 'tb');
const btcTestnetBase58 = btcAddress.toBase58Check(btcAddress.fromBase58Check(BTC_P2PKH).hash, 0x6f);
const swapLast = (s: string, c: string) => `${s.slice(0, -1)}${c}`;

const ALGO_REAL = '25M5BT2DMMED3V6CWDEYKSNEFGPXX4QBIINCOICLXXRU3UGTSGRMF3MTOE';
const SOL_WRAPPED = 'So11111111111111111111111111111111111111112';
const SOL_SYSTEM = '11111111111111111111111111111111';

describe('address fixtures', () => {
  test('are what the chains’ libraries say they are', () => {
    expect(getAddress(evmLower)).toBe(EVM_REAL);
    expect(isEvmAddress(evmBadChecksum, { strict: true })).toBe(false);
    expect(btcAddress.fromBase58Check(BTC_P2PKH).version).toBe(0x00);
    expect(btcAddress.fromBase58Check(BTC_P2SH).version).toBe(0x05);
    expect(btcAddress.fromBech32(BTC_P2WPKH)).toMatchObject({ version: 0, prefix: 'bc' });
    expect(btcAddress.fromBech32(BTC_P2WPKH).data).toHaveLength(20);
    expect(btcAddress.fromBech32(BTC_P2TR)).toMatchObject({ version: 1, prefix: 'bc' });
    expect(btcAddress.fromBech32(BTC_P2TR).data).toHaveLength(32);
    expect(btcTestnetBech32).toMatch(/^tb1q/);
    expect(algosdk.isValidAddress(ALGO_REAL)).toBe(true);
    expect(algosdk.encodeAddress(algosdk.decodeAddress(ALGO_REAL).publicKey)).toBe(ALGO_REAL);
  });
});

/** [chain sent, address sent, chain in the view, address in the view] */
const VALID: [string, string, string, string][] = [
  ['ETH', evmLower, 'ETH', getAddress(evmLower)],
  ['ETH', evmUpperBody, 'ETH', getAddress(evmLower)],
  ['ETH', EVM_REAL, 'ETH', EVM_REAL],
  ['eth', ` ${evmLower} `, 'ETH', getAddress(evmLower)],
  ['BSC', evmLower, 'BSC', getAddress(evmLower)],
  ['POL', evmUpperBody, 'POL', getAddress(evmLower)],
  ['GLRM', evmLower, 'GLRM', getAddress(evmLower)],
  ['GLMR', evmLower, 'GLRM', getAddress(evmLower)],
  ['BTC', BTC_P2PKH, 'BTC', btcNormal(BTC_P2PKH)],
  ['BTC', BTC_P2SH, 'BTC', btcNormal(BTC_P2SH)],
  ['BTC', BTC_P2WPKH, 'BTC', btcNormal(BTC_P2WPKH)],
  ['BTC', BTC_P2WPKH.toUpperCase(), 'BTC', btcNormal(BTC_P2WPKH)],
  ['BTC', btcP2wsh, 'BTC', btcNormal(btcP2wsh)],
  ['BTC', BTC_P2TR, 'BTC', btcNormal(BTC_P2TR)],
  ['BTC', BTC_P2TR.toUpperCase(), 'BTC', btcNormal(BTC_P2TR)],
  ['ALGO', ALGO_REAL, 'ALGO', ALGO_REAL],
  ['SOL', SOL_WRAPPED, 'SOL', SOL_WRAPPED],
  ['SOL', SOL_SYSTEM, 'SOL', SOL_SYSTEM],
];

/** [why, chain, address] */
const INVALID: [string, string, string][] = [
  ['EVM: mixed case with a wrong EIP-55 checksum', 'ETH', evmBadChecksum],
  ['EVM: 39 hex characters', 'ETH', evmLower.slice(0, -1)],
  ['EVM: 41 hex characters', 'BSC', `${evmLower}0`],
  ['EVM: a non-hex character', 'POL', `${evmLower.slice(0, -1)}g`],
  ['EVM: no 0x prefix', 'GLMR', evmLower.slice(2)],
  ['EVM: a Bitcoin address', 'ETH', BTC_P2WPKH],
  ['BTC: bech32 with a bad checksum', 'BTC', swapLast(BTC_P2WPKH, BTC_P2WPKH.endsWith('q') ? 'p' : 'q')],
  ['BTC: bech32m with a bad checksum', 'BTC', swapLast(BTC_P2TR, BTC_P2TR.endsWith('7') ? '8' : '7')],
  ['BTC: bech32 mixing cases', 'BTC', `bc1q${BTC_P2WPKH.slice(4, 10).toUpperCase()}${BTC_P2WPKH.slice(10)}`],
  ['BTC: a testnet bech32 address', 'BTC', btcTestnetBech32],
  ['BTC: a testnet base58 address', 'BTC', btcTestnetBase58],
  ['BTC: base58 with a bad checksum', 'BTC', swapLast(BTC_P2PKH, BTC_P2PKH.endsWith('a') ? 'b' : 'a')],
  ['BTC: an EVM address', 'BTC', evmLower],
  ['ALGO: the last character changed (checksum)', 'ALGO', swapLast(ALGO_REAL, 'A')],
  ['ALGO: the last character changed (padding bits only)', 'ALGO', swapLast(ALGO_REAL, 'F')],
  ['ALGO: lower case', 'ALGO', ALGO_REAL.toLowerCase()],
  ['ALGO: 57 characters', 'ALGO', ALGO_REAL.slice(0, -1)],
  ['SOL: contains 0', 'SOL', swapLast(SOL_WRAPPED, '0')],
  ['SOL: contains O', 'SOL', swapLast(SOL_WRAPPED, 'O')],
  ['SOL: contains l', 'SOL', swapLast(SOL_WRAPPED, 'l')],
  ['SOL: too short', 'SOL', 'So1111111111'],
  ['SOL: an EVM address', 'SOL', evmLower],
];

// ---------------------------------------------------------------------------------------------

/**
 * Everything a rejected request must leave as it was: the database's digest, taken once no
 * delivery is under way. A test notification's request reaches the
 * receiver before its result is recorded (results wait up to 50 ms to be written together), so a
 * snapshot taken right after a send, in this test or the one before, could catch that write.
 */
async function digest(t: TestApp): Promise<Record<string, string>> {
  await waitFor(
    async () => {
      const result = (await t.app.store.db.execute(sql`
        SELECT (SELECT count(*) FROM notifications
                WHERE locked_by IS NOT NULL OR (state = 'pending' AND next_attempt_at <= now()))::int
             + (SELECT count(*) FROM feed_queue)::int AS busy`)) as unknown as { rows: { busy: number }[] };
      return result.rows[0]?.busy === 0 ? true : undefined;
    },
    'no delivery under way',
    15_000,
  );
  return snapshotDatabase(t.app.store);
}

function pointersOf(body: unknown): string[] {
  return ((body as Problem).errors ?? []).map((e) => e.pointer ?? `?${e.parameter}`);
}

function headersOf(request: ReceivedRequest): {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
} {
  return {
    'webhook-id': request.headers['webhook-id'] as string,
    'webhook-timestamp': request.headers['webhook-timestamp'] as string,
    'webhook-signature': request.headers['webhook-signature'] as string,
  };
}

function subscriptionBody(chain: string, address: string, url: string, extra: Record<string, unknown> = {}) {
  return { type: 'ADDRESS_TRANSACTION', attr: { address, chain, url }, ...extra };
}

/** Posts `body` and asserts a 400 problem naming exactly `pointer`, with the database unchanged. */
async function expectRejected(t: TestApp, body: unknown, pointer: string): Promise<Problem> {
  const before = await digest(t);
  const response = await t.request('POST', API, { body });
  expect(response.status, response.text).toBe(400);
  expect(response.headers.get('content-type')).toContain('application/problem+json');
  const problem = response.body as Problem;
  expect(problem).toMatchObject({
    type: 'urn:ledgerhook:problem:validation',
    title: 'Bad Request',
    status: 400,
  });
  expect(problem.detail).toEqual(expect.any(String));
  expect(new Set(pointersOf(problem)), response.text).toEqual(new Set([pointer]));
  expect(await digest(t)).toEqual(before);
  return problem;
}

describe.each(backends)('subscription API on %s', (backend) => {
  let t: TestApp;
  /** A URL that passes the create-time check (loopback is allowlisted in tests); nothing is sent to it. */
  const quietUrl = 'http://127.0.0.1:9/hook';
  /** Another such URL each time: the same address and URL twice would be a duplicate (409). */
  const quietUrlOf = () => `http://127.0.0.1:9/hook/${crypto.randomUUID()}`;

  beforeAll(async () => {
    t = await startTestApp(backend);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function create(body: unknown, token?: string): Promise<Created> {
    const response = await t.request('POST', API, { body, token });
    expect(response.status, response.text).toBe(201);
    return response.body as Created;
  }

  test('create returns 201 {id, secret, callbackToken}; get returns the documented view', async () => {
    const before = Date.now();
    const response = await t.request('POST', API, { body: subscriptionBody('ETH', evmLower, quietUrl) });
    const after = Date.now();
    expect(response.status).toBe(201);
    expect(response.headers.get('content-type')).toContain('application/json');
    const created = response.body as Created;
    expect(Object.keys(created).sort()).toEqual(['callbackToken', 'id', 'secret']);
    expect(created.id).toMatch(UUID);
    expect(created.secret).toMatch(WHSEC);
    expect(created.callbackToken).toMatch(/^[\x21-\x7e]{16,}$/);

    const got = await t.request('GET', `${API}/${created.id}`);
    expect(got.status).toBe(200);
    const view = got.body as View;
    expect(view).toEqual({
      id: created.id,
      type: 'ADDRESS_TRANSACTION',
      attr: { address: EVM_REAL, chain: 'ETH', url: quietUrl },
      mempool: true,
      confirmations: 1,
      ack: 'status',
      signature: 'hmac',
      status: 'active',
      disabledReason: null,
      disabledAt: null,
      previousSecretExpiresAt: null,
      createdAt: expect.stringMatching(ISO_UTC),
      deletedAt: null,
    });
    expect(Date.parse(view.createdAt)).toBeGreaterThanOrEqual(before - 5);
    expect(Date.parse(view.createdAt)).toBeLessThanOrEqual(after + 5);

    // The secret and the token are shown only once, and are not stored in clear.
    expect(got.text).not.toContain(created.secret.slice('whsec_'.length));
    expect(got.text).not.toContain(created.callbackToken);
    const rows = await t.app.store.db.select().from(subscriptions);
    const stored = JSON.stringify(rows.find((r) => r.id === created.id));
    expect(stored).toBeDefined();
    expect(stored).not.toContain(created.secret.slice('whsec_'.length));
    expect(stored).not.toContain(created.callbackToken);
  });

  test.each([
    ['BTC', BTC_P2WPKH, false, 2],
    ['ALGO', ALGO_REAL, false, 1],
    ['SOL', SOL_WRAPPED, false, 1],
    ['BSC', evmLower, true, 1],
  ] as const)(
    'defaults on %s: mempool %s, confirmations %i',
    async (chain, address, mempool, confirmations) => {
      const created = await create(subscriptionBody(chain, address, quietUrlOf()));
      const view = (await t.request('GET', `${API}/${created.id}`)).body as View;
      expect(view).toMatchObject({ mempool, confirmations, ack: 'status', status: 'active' });
      expect(view.attr.chain).toBe(chain);
    },
  );

  test('the optional fields are kept, and a provided callbackToken is used', async () => {
    const created = await create(
      subscriptionBody('POL', evmLower, quietUrlOf(), {
        mempool: false,
        confirmations: 12,
        ack: '2xx',
        callbackToken: 'my-own-callback-token',
      }),
    );
    expect(created.callbackToken).toBe('my-own-callback-token');
    const view = (await t.request('GET', `${API}/${created.id}`)).body as View;
    expect(view).toMatchObject({ mempool: false, confirmations: 12, ack: '2xx' });
    const btc = await create(
      subscriptionBody('BTC', BTC_P2PKH, quietUrl, { mempool: false, confirmations: 6 }),
    );
    expect((await t.request('GET', `${API}/${btc.id}`)).body).toMatchObject({
      mempool: false,
      confirmations: 6,
    });
  });

  test('signature ed25519: 201 {id, publicKey, callbackToken}; GET and the list show the public key; the private key stays sealed', async () => {
    const token = await t.tokenFor('ed25519-creator');
    const response = await t.request('POST', API, {
      body: subscriptionBody('ETH', randomEvm(), quietUrlOf(), { signature: 'ed25519' }),
      token,
    });
    expect(response.status, response.text).toBe(201);
    const created = response.body as CreatedEd25519;
    expect(Object.keys(created).sort()).toEqual(['callbackToken', 'id', 'publicKey']);
    expect(created.publicKey).toMatch(WHPK);

    // Public, so every read shows it, unlike an HMAC secret.
    const view = (await t.request('GET', `${API}/${created.id}`, { token })).body as View;
    expect(view).toMatchObject({ id: created.id, signature: 'ed25519', publicKey: created.publicKey });
    const list = (await t.request('GET', API, { token })).body as { data: View[] };
    expect(list.data).toEqual([view]);
    const hmac = await create(
      subscriptionBody('ETH', randomEvm(), quietUrlOf(), { signature: 'hmac' }),
      token,
    );
    expect(hmac.secret).toMatch(WHSEC);
    const hmacView = (await t.request('GET', `${API}/${hmac.id}`, { token })).body as View;
    expect(hmacView.signature).toBe('hmac');
    expect(hmacView).not.toHaveProperty('publicKey');

    // The row holds the private key sealed (as HMAC secrets are): opened with the master key it
    // is the whsk_ seed of the public key shown, and its bytes appear nowhere in clear.
    const [row] = (await t.app.store.db.select().from(subscriptions)).filter((r) => r.id === created.id);
    const envelope = createEnvelope(loadMasterKey(undefined, t.environment.dataDir).key);
    const secretKey = envelope.open(row!.secret, secretContext(created.id));
    expect(secretKey).toMatch(/^whsk_[A-Za-z0-9+/]{43}=$/);
    const seed = Buffer.from(secretKey.slice('whsk_'.length), 'base64');
    const x = Buffer.from(created.publicKey.slice('whpk_'.length), 'base64').toString('base64url');
    const privateKey = crypto.createPrivateKey({
      key: { kty: 'OKP', crv: 'Ed25519', d: seed.toString('base64url'), x },
      format: 'jwk',
    });
    const message = Buffer.from('signed by the sealed key');
    const signature = crypto.sign(null, message, privateKey);
    expect(crypto.verify(null, message, ed25519PublicKeyOf(created.publicKey), signature)).toBe(true);
    for (const form of [seed.toString('base64'), seed.toString('base64url'), seed.toString('hex')]) {
      expect(JSON.stringify(row)).not.toContain(form);
      for (const text of [response.text, JSON.stringify(view), JSON.stringify(list)]) {
        expect(text).not.toContain(form);
        expect(text).not.toContain('whsk_');
      }
    }
  });

  test('the list pages newest first with limit and cursor, per account', async () => {
    const token = await t.tokenFor('lister');
    const ids: string[] = [];
    for (const chain of ['ETH', 'BSC', 'POL', 'GLRM', 'BTC']) {
      const address = chain === 'BTC' ? BTC_P2TR : randomEvm();
      ids.push((await create(subscriptionBody(chain, address, quietUrl), token)).id);
    }
    const newestFirst = [...ids].reverse();
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await t.request('GET', `${API}?limit=2${cursor ? `&cursor=${cursor}` : ''}`, { token });
      expect(page.status).toBe(200);
      const body = page.body as { data: View[]; next_cursor: string | null };
      expect(Object.keys(body).sort()).toEqual(['data', 'next_cursor']);
      expect(body.data.length).toBeLessThanOrEqual(2);
      seen.push(...body.data.map((v) => v.id));
      cursor = body.next_cursor;
      pages++;
    } while (cursor && pages < 10);
    expect(pages).toBe(3);
    expect(seen).toEqual(newestFirst);

    // Each item is the same view as GET by id.
    const all = (await t.request('GET', `${API}?limit=100`, { token })).body as { data: View[] };
    expect(all.data.map((v) => v.id)).toEqual(newestFirst);
    expect(all.data[0]).toEqual((await t.request('GET', `${API}/${ids.at(-1)}`, { token })).body);

    // A cursor this API did not return, and a limit out of range, are 400.
    const bad = await t.request('GET', `${API}?cursor=${Buffer.from('nope').toString('base64url')}`, {
      token,
    });
    expect(bad.status).toBe(400);
    expect((await t.request('GET', `${API}?limit=0`, { token })).status).toBe(400);
    expect((await t.request('GET', `${API}?limit=101`, { token })).status).toBe(400);
  });

  test('delete → 204; the subscription stays readable as deleted, out of the default list, and cannot be used', async () => {
    const token = await t.tokenFor('deleter');
    const keep = await create(subscriptionBody('ETH', randomEvm(), quietUrl), token);
    const gone = await create(subscriptionBody('SOL', SOL_WRAPPED, quietUrl), token);
    const deletedAt = Date.now();
    const deleted = await t.request('DELETE', `${API}/${gone.id}`, { token });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    const got = await t.request('GET', `${API}/${gone.id}`, { token });
    expect(got.status).toBe(200);
    const view = got.body as View;
    expect(view).toMatchObject({
      id: gone.id,
      status: 'deleted',
      attr: { chain: 'SOL', address: SOL_WRAPPED },
    });
    expect(Math.abs(Date.parse(view.deletedAt!) - deletedAt)).toBeLessThan(60_000);
    const list = (await t.request('GET', `${API}?limit=100`, { token })).body as { data: View[] };
    expect(list.data.map((v) => v.id)).toEqual([keep.id]);
    const deletedList = (await t.request('GET', `${API}?status=deleted`, { token })).body as { data: View[] };
    expect(deletedList.data).toEqual([view]);
    const active = (await t.request('GET', `${API}?status=active`, { token })).body as { data: View[] };
    expect(active.data.map((v) => v.id)).toEqual([keep.id]);
    // The log stays readable; deleting again changes nothing.
    expect((await t.request('GET', `${API}/${gone.id}/notifications`, { token })).status).toBe(200);
    const before = await digest(t);
    expect((await t.request('DELETE', `${API}/${gone.id}`, { token })).status).toBe(204);
    // Acting on it is a conflict that says why, and changes nothing.
    for (const [method, path, body] of [
      ['POST', 'test', undefined],
      ['POST', 'enable', undefined],
      ['POST', 'rotate-secret', undefined],
      ['POST', 'recover', { since: new Date(0).toISOString() }],
    ] as const) {
      const r = await t.request(method, `${API}/${gone.id}/${path}`, { token, body });
      expect(r.status, `${path}: ${r.text}`).toBe(409);
      expect((r.body as Problem).detail).toMatch(/deleted/);
    }
    expect(await digest(t)).toEqual(before);
    // The same address and URL can be subscribed again: the deleted one does not count.
    const again = await create(subscriptionBody('SOL', SOL_WRAPPED, quietUrl), token);
    expect(again.id).not.toBe(gone.id);
  });

  test('an exact duplicate (same account, chain, address, url) is 409 naming the one that exists', async () => {
    const token = await t.tokenFor('duplicator');
    const url = quietUrlOf();
    const first = await create(subscriptionBody('ETH', evmLower, url), token);
    const before = await digest(t);
    // The same address written otherwise, and the chain by an alias, are still the same.
    for (const [chain, address] of [
      ['ETH', evmLower],
      ['eth', EVM_REAL],
      ['ethereum-mainnet', evmUpperBody],
    ]) {
      const r = await t.request('POST', API, { token, body: subscriptionBody(chain!, address!, url) });
      expect(r.status, r.text).toBe(409);
      expect(r.headers.get('content-type')).toContain('application/problem+json');
      expect(r.body).toMatchObject({
        status: 409,
        type: 'urn:ledgerhook:problem:conflict',
        existingId: first.id,
      });
      expect((r.body as Problem).detail).toContain(first.id);
    }
    expect(await digest(t)).toEqual(before);
    // Another URL, another chain or another account is not a duplicate.
    await create(subscriptionBody('ETH', evmLower, quietUrlOf()), token);
    await create(subscriptionBody('BSC', evmLower, url), token);
    await create(subscriptionBody('ETH', evmLower, url), await t.tokenFor('duplicator-2'));
    // Concurrent identical creates: one wins, the others are told which.
    const racer = await t.tokenFor('racer');
    const raceUrl = quietUrlOf();
    const results = await Promise.all(
      Array.from({ length: 5 }, () =>
        t.request('POST', API, { token: racer, body: subscriptionBody('POL', evmLower, raceUrl) }),
      ),
    );
    const won = results.filter((r) => r.status === 201);
    expect(won).toHaveLength(1);
    const winner = (won[0]!.body as Created).id;
    for (const r of results.filter((x) => x.status !== 201)) {
      expect(r.status).toBe(409);
      expect((r.body as { existingId: string }).existingId).toBe(winner);
    }
  });

  test('Idempotency-Key: a retry returns the first response (secret included); another body is 409', async () => {
    const token = await t.tokenFor('idempotent-subscriber');
    const key = `sub-${crypto.randomUUID()}`;
    const body = subscriptionBody('BSC', randomEvm(), quietUrlOf());
    const first = await t.request('POST', API, { token, body, headers: { 'Idempotency-Key': key } });
    expect(first.status, first.text).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const before = await digest(t);
    const again = await t.request('POST', API, { token, body, headers: { 'Idempotency-Key': key } });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await digest(t)).toEqual(before);
    const other = await t.request('POST', API, {
      token,
      body: subscriptionBody('BSC', randomEvm(), quietUrlOf()),
      headers: { 'Idempotency-Key': key },
    });
    expect(other.status).toBe(409);
    expect(await digest(t)).toEqual(before);
    // Without the key the same body is a duplicate of the subscription the first request made.
    const plain = await t.request('POST', API, { token, body });
    expect(plain.status).toBe(409);
    expect((plain.body as { existingId: string }).existingId).toBe((first.body as Created).id);
    // The key is checked like the registry's.
    const bad = await t.request('POST', API, { token, body, headers: { 'Idempotency-Key': 'has space' } });
    expect(bad.status).toBe(400);
    expect((bad.body as Problem).errors).toEqual([
      { header: 'idempotency-key', detail: expect.stringContaining('printable') },
    ]);
    // Concurrent retries with one key create one subscription and all answer alike.
    const raceKey = `race-${crypto.randomUUID()}`;
    const raceBody = subscriptionBody('BSC', randomEvm(), quietUrlOf());
    const raced = await Promise.all(
      Array.from({ length: 4 }, () =>
        t.request('POST', API, { token, body: raceBody, headers: { 'Idempotency-Key': raceKey } }),
      ),
    );
    for (const r of raced) {
      expect(r.status, r.text).toBe(201);
      expect(r.body).toEqual(raced[0]!.body);
    }
  });

  test("Tatum's pageSize and offset page the list like limit and cursor", async () => {
    const token = await t.tokenFor('tatum-pager');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++)
      ids.push((await create(subscriptionBody('ETH', randomEvm(), quietUrl), token)).id);
    const newestFirst = [...ids].reverse();
    const page = async (query: string) => {
      const r = await t.request('GET', `${API}?${query}`, { token });
      expect(r.status, r.text).toBe(200);
      return (r.body as { data: View[] }).data.map((v) => v.id);
    };
    expect(await page('pageSize=2')).toEqual(newestFirst.slice(0, 2));
    expect(await page('pageSize=2&offset=2')).toEqual(newestFirst.slice(2, 4));
    expect(await page('pageSize=2&offset=4')).toEqual(newestFirst.slice(4));
    expect(await page('offset=5')).toEqual([]);
    expect(await page('limit=3&offset=1')).toEqual(newestFirst.slice(1, 4));
    for (const [query, parameter] of [
      ['pageSize=0', 'pageSize'],
      ['pageSize=101', 'pageSize'],
      ['offset=-1', 'offset'],
      ['offset=x', 'offset'],
      ['limit=2&pageSize=2', 'pageSize'],
      [`offset=1&cursor=${Buffer.from(ids[0]!).toString('base64url')}`, 'offset'],
    ]) {
      const r = await t.request('GET', `${API}?${query}`, { token });
      expect(r.status, query).toBe(400);
      expect(pointersOf(r.body), query).toEqual([`?${parameter}`]);
    }
  });

  test('unknown and malformed ids are 404 and 400', async () => {
    expect((await t.request('GET', `${API}/${crypto.randomUUID()}`)).status).toBe(404);
    const malformed = await t.request('GET', `${API}/not-a-uuid`);
    expect(malformed.status).toBe(400);
    expect(pointersOf(malformed.body)).toEqual(['?id']);
  });

  test('without a token every route is 401', async () => {
    const id = crypto.randomUUID();
    for (const [method, url] of [
      ['POST', API],
      ['GET', API],
      ['GET', `${API}/${id}`],
      ['DELETE', `${API}/${id}`],
      ['POST', `${API}/${id}/test`],
      ['POST', `${API}/${id}/rotate-secret`],
    ] as const) {
      expect((await t.request(method, url, { token: null })).status).toBe(401);
    }
  });

  describe('addresses are validated per family and normalised', () => {
    test.each(VALID)('%s %s is stored as %s %s', async (chain, address, viewChain, viewAddress) => {
      const url = quietUrlOf();
      const created = await create(subscriptionBody(chain, address, url));
      const view = (await t.request('GET', `${API}/${created.id}`)).body as View;
      expect(view.attr).toEqual({ address: viewAddress, chain: viewChain, url });
    });

    test.each(INVALID)('%s → 400 naming #/attr/address', async (_, chain, address) => {
      const problem = await expectRejected(t, subscriptionBody(chain, address, quietUrl), '#/attr/address');
      expect(problem.errors![0]!.detail).toMatch(/expects/);
    });
  });

  describe('other invalid requests are 400 naming the field, and store nothing', () => {
    test('an unknown chain names #/attr/chain and lists the configured networks', async () => {
      const problem = await expectRejected(t, subscriptionBody('DOGE', evmLower, quietUrl), '#/attr/chain');
      for (const name of ['ETH', 'BSC', 'POL', 'GLRM', 'ALGO', 'BTC', 'SOL']) {
        expect(problem.detail).toContain(name);
        expect(problem.errors![0]!.detail).toContain(name);
      }
    });

    test.each([
      ['ftp://', 'ftp://example.com/hook'],
      ['not a URL', 'not-a-url'],
      ['empty', ''],
      ['javascript:', 'javascript:alert(1)'],
      ['file:', 'file:///etc/passwd'],
      ['no host', 'http://'],
    ])('a bad url (%s) names #/attr/url', async (_, url) => {
      await expectRejected(t, subscriptionBody('ETH', evmLower, url), '#/attr/url');
    });

    test('a missing url names #/attr/url', async () => {
      await expectRejected(
        t,
        { type: 'ADDRESS_TRANSACTION', attr: { address: evmLower, chain: 'ETH' } },
        '#/attr/url',
      );
    });

    test.each([
      ['ALGO', /final within seconds/],
      ['SOL', /no public mempool/],
    ])('mempool: true on %s names #/mempool and says why', async (chain, why) => {
      const address = { ALGO: ALGO_REAL, SOL: SOL_WRAPPED }[chain as 'ALGO' | 'SOL'];
      const problem = await expectRejected(
        t,
        subscriptionBody(chain as string, address, quietUrl, { mempool: true }),
        '#/mempool',
      );
      expect(problem.errors![0]!.detail).toMatch(why);
    });

    test('mempool on Bitcoin: off unless asked for, kept when asked for', async () => {
      const plain = await create(subscriptionBody('BTC', BTC_P2WPKH, quietUrlOf()));
      expect(((await t.request('GET', `${API}/${plain.id}`)).body as View).mempool).toBe(false);
      const asked = await create(subscriptionBody('BTC', BTC_P2WPKH, quietUrlOf(), { mempool: true }));
      expect(((await t.request('GET', `${API}/${asked.id}`)).body as View).mempool).toBe(true);
    });

    test.each(['BTC', 'ALGO', 'SOL'])('attr.fees: true on %s names #/attr/fees', async (chain) => {
      const address = { BTC: BTC_P2WPKH, ALGO: ALGO_REAL, SOL: SOL_WRAPPED }[chain]!;
      const body = subscriptionBody(chain, address, quietUrl) as { attr: Record<string, unknown> };
      const problem = await expectRejected(t, { ...body, attr: { ...body.attr, fees: true } }, '#/attr/fees');
      expect(problem.errors![0]!.detail).toMatch(/EVM and Tron networks; on .* already includes the fee/);
    });

    test('attr.fees on an EVM network is kept and shown; a non-boolean names #/attr/fees', async () => {
      const body = subscriptionBody('ETH', evmLower, quietUrlOf()) as { attr: Record<string, unknown> };
      const created = await create({ ...body, attr: { ...body.attr, fees: true } });
      const view = (await t.request('GET', `${API}/${created.id}`)).body as View;
      expect(view.attr).toMatchObject({ fees: true });
      await expectRejected(t, { ...body, attr: { ...body.attr, fees: 'yes' } }, '#/attr/fees');
    });

    test.each([
      ['ack "maybe"', { ack: 'maybe' }, '#/ack'],
      ['ack 200', { ack: 200 }, '#/ack'],
      ['confirmations 0', { confirmations: 0 }, '#/confirmations'],
      ['confirmations "x"', { confirmations: 'x' }, '#/confirmations'],
      ['confirmations "3" (a string)', { confirmations: '3' }, '#/confirmations'],
      ['confirmations 1.5', { confirmations: 1.5 }, '#/confirmations'],
      ['confirmations 1001', { confirmations: 1001 }, '#/confirmations'],
      ['mempool "yes"', { mempool: 'yes' }, '#/mempool'],
      ['callbackToken too short', { callbackToken: 'short' }, '#/callbackToken'],
      ['callbackToken with a space', { callbackToken: 'has a space in it' }, '#/callbackToken'],
      ['an unknown field', { events: ['all'] }, '#/events'],
      ['type CONTRACT_LOG', { type: 'CONTRACT_LOG' }, '#/type'],
      ['signature "rsa"', { signature: 'rsa' }, '#/signature'],
      ['signature "ED25519" (the case matters)', { signature: 'ED25519' }, '#/signature'],
      ['signature "" ', { signature: '' }, '#/signature'],
      ['signature with a NUL', { signature: 'ed25519\u0000' }, '#/signature'],
      ['signature 1', { signature: 1 }, '#/signature'],
      ['signature true', { signature: true }, '#/signature'],
      ['signature null', { signature: null }, '#/signature'],
      ['signature ["ed25519"]', { signature: ['ed25519'] }, '#/signature'],
      ['signature {"type": "ed25519"}', { signature: { type: 'ed25519' } }, '#/signature'],
      ['type in lower case', { type: 'address_transaction' }, '#/type'],
    ])('%s', async (_, extra, pointer) => {
      await expectRejected(t, subscriptionBody('ETH', evmLower, quietUrl, extra), pointer);
    });

    test.each([
      ['no type', { attr: { address: evmLower, chain: 'ETH', url: quietUrl } }, '#/type'],
      ['no attr', { type: 'ADDRESS_TRANSACTION' }, '#/attr'],
      [
        'an unknown attr field',
        { type: 'ADDRESS_TRANSACTION', attr: { address: evmLower, chain: 'ETH', url: quietUrl, memo: 'x' } },
        '#/attr/memo',
      ],
      [
        'no address',
        { type: 'ADDRESS_TRANSACTION', attr: { chain: 'ETH', url: quietUrl } },
        '#/attr/address',
      ],
      [
        'no chain',
        { type: 'ADDRESS_TRANSACTION', attr: { address: evmLower, url: quietUrl } },
        '#/attr/chain',
      ],
      ['an empty address', subscriptionBody('ETH', '', quietUrl), '#/attr/address'],
      ['a blank address', subscriptionBody('ETH', '   ', quietUrl), '#/attr/address'],
      ['a numeric address', subscriptionBody('ETH', 42 as unknown as string, quietUrl), '#/attr/address'],
    ])('%s', async (_, body, pointer) => {
      await expectRejected(t, body, pointer);
    });
  });

  describe('callback URLs are checked against DNS at create time, outside the allowlist', () => {
    let dns: DnsServer;
    let s: TestApp;
    let dir: string;

    beforeAll(async () => {
      dns = await startDnsServer({
        'hooks.example-public.com': ['10.0.0.7'],
        'mixed.example-public.com': ['1.1.1.1', '192.168.1.20'],
        'v6.example-public.com': ['fd12:3456::1'],
        'metadata.example-public.com': ['169.254.169.254'],
        'hooks.example-fine.com': ['1.1.1.1', '2606:4700:4700::1111'],
      });
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-subs-'));
      const config = path.join(dir, 'config.json');
      fs.writeFileSync(
        config,
        JSON.stringify({
          networks: {
            ARB: { family: 'evm', chainId: 42161, symbol: 'ETH', rpc: 'https://arb1.arbitrum.io/rpc' },
          },
        }),
      );
      s = await startTestApp(backend, {
        LEDGERHOOK_ALLOW_CIDRS: '',
        LEDGERHOOK_DNS_SERVERS: `127.0.0.1:${dns.port}`,
        LEDGERHOOK_CONFIG: config,
      });
    });
    afterAll(async () => {
      await s?.close();
      await dns?.close();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    });

    test.each([
      ['127.0.0.1', 'http://127.0.0.1:8080/hook', /loopback/],
      ['10.0.0.1', 'http://10.0.0.1/hook', /private/],
      ['169.254.169.254', 'http://169.254.169.254/latest/meta-data/', /link-local/],
      ['[::1]', 'http://[::1]:8080/hook', /loopback/],
      ['[::ffff:127.0.0.1]', 'http://[::ffff:127.0.0.1]/hook', /loopback/],
      ['100.64.0.1', 'https://100.64.0.1/hook', /carrier-grade NAT/],
      ['0.0.0.0', 'http://0.0.0.0/hook', /unspecified/],
      [
        'a public-looking name answered with 10.0.0.7',
        'https://hooks.example-public.com/hook',
        /10\.0\.0\.7/,
      ],
      ['a name answered with a public and a private address', 'https://mixed.example-public.com/', /private/],
      ['a name answered with a unique-local IPv6 address', 'https://v6.example-public.com/', /unique-local/],
      ['a name answered with the metadata address', 'http://metadata.example-public.com/', /link-local/],
      ['a name without an answer', 'https://nxdomain.example-public.com/', /could not be resolved/],
    ])('%s is refused, naming #/attr/url', async (_, url, why) => {
      const problem = await expectRejected(s, subscriptionBody('ETH', evmLower, url), '#/attr/url');
      expect(problem.errors![0]!.detail).toMatch(why);
    });

    test('the names were asked of the configured DNS server', () => {
      expect(dns.queries).toContain('hooks.example-public.com A');
      expect(dns.queries).toContain('mixed.example-public.com A');
    });

    test('a name with public answers only is accepted, here on a network added by configuration', async () => {
      const response = await s.request('POST', API, {
        body: subscriptionBody('ARB', evmUpperBody, 'https://hooks.example-fine.com/hook'),
      });
      expect(response.status, response.text).toBe(201);
      const view = (await s.request('GET', `${API}/${(response.body as Created).id}`)).body as View;
      expect(view.attr).toEqual({
        address: EVM_REAL,
        chain: 'ARB',
        url: 'https://hooks.example-fine.com/hook',
      });
      expect(view).toMatchObject({ mempool: true, confirmations: 1 });
    });
  });

  describe('notifications', () => {
    let receiver: Receiver;
    beforeAll(async () => {
      receiver = await startReceiver();
    });
    afterAll(async () => {
      await receiver?.close();
    });

    /** Sends a test notification and returns its id and the request that arrived for it. */
    async function sendTest(
      id: string,
      token?: string,
    ): Promise<{ notificationId: string; request: ReceivedRequest }> {
      const response = await t.request('POST', `${API}/${id}/test`, { token });
      expect(response.status, response.text).toBe(202);
      expect(Object.keys(response.body as object)).toEqual(['notificationId']);
      const { notificationId } = response.body as { notificationId: string };
      expect(notificationId).toMatch(UUID);
      const request = await waitFor(
        () => receiver.requests.find((r) => r.headers['webhook-id'] === notificationId),
        `the test notification ${notificationId}`,
        15_000,
      );
      return { notificationId, request };
    }

    async function waitForLog(id: string, token?: string): Promise<LogPage> {
      return waitFor(
        async () => {
          const page = (await t.request('GET', `${API}/${id}/notifications`, { token })).body as LogPage;
          return page.data.length > 0 && page.data.every((n) => n.state !== 'pending') ? page : undefined;
        },
        'the delivery log to settle',
        15_000,
      );
    }

    test('an EVM test notification arrives signed, with the documented headers and body, and is logged', async () => {
      const watched = randomEvm();
      const created = await create(
        subscriptionBody('ETH', watched, receiver.url, { callbackToken: 'token-of-the-eth-test' }),
      );
      const sentAt = Date.now();
      const { notificationId, request } = await sendTest(created.id);

      expect(request.method).toBe('POST');
      expect(request.path).toBe('/hook');
      expect(request.headers['content-type']).toBe('application/json');
      expect(request.headers.authorization).toBe('Bearer token-of-the-eth-test');
      expect(request.headers['webhook-id']).toBe(notificationId);
      const timestamp = Number(request.headers['webhook-timestamp']);
      expect(Math.abs(timestamp * 1000 - sentAt)).toBeLessThan(60_000);
      expect(request.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);

      const body = new Webhook(created.secret).verify(request.body, headersOf(request)) as Record<
        string,
        unknown
      >;
      expect(Object.keys(body).sort()).toEqual(
        [
          'address',
          'txId',
          'type',
          'blockNumber',
          'asset',
          'amount',
          'mempool',
          'counterAddress',
          'id',
          'subscriptionId',
          'chain',
          'watchedAddress',
          'confirmations',
          'test',
        ].sort(),
      );
      // A test notification says so, in the body and in the event-type header.
      expect(body.test).toBe(true);
      expect(request.headers['ledgerhook-event-type']).toBe('test');
      expect(body).toMatchObject({
        id: notificationId,
        subscriptionId: created.id,
        chain: 'ETH',
        asset: 'ETH',
        type: 'native',
        mempool: false,
        address: getAddress(watched),
        watchedAddress: getAddress(watched),
        confirmations: 1,
      });
      expect(body.txId).toMatch(/^0x[0-9a-f]{64}$/);
      expect(Number.isInteger(body.blockNumber)).toBe(true);
      expect(body.amount).toMatch(/^-\d+(\.\d+)?$/);
      expect(Number(body.amount)).toBeLessThan(0);
      expect(isEvmAddress(body.counterAddress as string, { strict: true })).toBe(true);

      // Another secret does not verify it.
      expect(() =>
        new Webhook(`whsec_${crypto.randomBytes(32).toString('base64')}`).verify(
          request.body,
          headersOf(request),
        ),
      ).toThrow();

      const log = await waitForLog(created.id);
      expect(log).toEqual({
        data: [
          {
            id: notificationId,
            subscriptionId: created.id,
            eventType: 'test',
            state: 'delivered',
            attemptCount: 1,
            nextAttemptAt: null,
            lastStatusCode: 200,
            lastError: null,
            createdAt: expect.stringMatching(ISO_UTC),
            deliveredAt: expect.stringMatching(ISO_UTC),
            payload: JSON.parse(request.body),
            attempts: [
              {
                attempt: 1,
                trigger: 'test',
                startedAt: expect.stringMatching(ISO_UTC),
                durationMs: expect.any(Number),
                statusCode: 200,
                error: null,
                response: '{"status":"success"}',
                outcome: 'delivered',
                nextAttemptAt: null,
              },
            ],
          },
        ],
        next_cursor: null,
      });
    });

    test('a BTC test notification carries asset BTC and no mempool key', async () => {
      const created = await create(subscriptionBody('BTC', BTC_P2WPKH.toUpperCase(), receiver.url));
      const { notificationId, request } = await sendTest(created.id);
      expect(request.headers.authorization).toBe(`Bearer ${created.callbackToken}`);
      const body = new Webhook(created.secret).verify(request.body, headersOf(request)) as Record<
        string,
        unknown
      >;
      expect(body).not.toHaveProperty('mempool');
      expect(Object.keys(body).sort()).toEqual(
        [
          'address',
          'txId',
          'type',
          'blockNumber',
          'asset',
          'amount',
          'id',
          'subscriptionId',
          'chain',
          'watchedAddress',
          'confirmations',
          'test',
        ].sort(),
      );
      expect(body).toMatchObject({
        id: notificationId,
        subscriptionId: created.id,
        chain: 'BTC',
        asset: 'BTC',
        type: 'native',
        address: BTC_P2WPKH,
        watchedAddress: BTC_P2WPKH,
        confirmations: 2,
      });
      expect(body.amount).toMatch(/^\d+(\.\d{1,8})?$/);
      expect(Number(body.amount)).toBeGreaterThan(0);
    });

    test.each([
      ['BSC', 'BSC', 'BNB'],
      ['POL', 'POL', 'POL'],
      ['GLMR', 'GLRM', 'GLMR'],
      ['ALGO', 'ALGO', 'ALGO'],
      ['SOL', 'SOL', 'SOL'],
    ])('%s: the test notification reports chain %s and asset %s', async (chain, canonical, asset) => {
      const address = chain === 'ALGO' ? ALGO_REAL : chain === 'SOL' ? SOL_WRAPPED : randomEvm();
      const created = await create(subscriptionBody(chain, address, receiver.url));
      const { request } = await sendTest(created.id);
      const body = new Webhook(created.secret).verify(request.body, headersOf(request)) as Record<
        string,
        unknown
      >;
      expect(body).toMatchObject({ chain: canonical, asset, subscriptionId: created.id });
      expect('mempool' in body).toBe(canonical !== 'ALGO' && canonical !== 'SOL');
      // The amount is a decimal string within the native asset's precision (ALGO 6, SOL 9, EVM 18).
      const decimals = { ALGO: 6, SOL: 9 }[canonical] ?? 18;
      expect(body.amount).toMatch(new RegExp(`^-?\\d+(\\.\\d{1,${decimals}})?$`));
    });

    test('rotate-secret: a new secret; for 24 h both secrets sign, each with its own signature', async () => {
      const created = await create(subscriptionBody('ETH', randomEvm(), receiver.url));
      const rotatedAt = Date.now();
      const rotated = await t.request('POST', `${API}/${created.id}/rotate-secret`);
      expect(rotated.status, rotated.text).toBe(200);
      const r = rotated.body as { secret: string; previousSecretExpiresAt: string };
      expect(Object.keys(r).sort()).toEqual(['previousSecretExpiresAt', 'secret']);
      expect(r.secret).toMatch(WHSEC);
      expect(r.secret).not.toBe(created.secret);
      expect(r.previousSecretExpiresAt).toMatch(ISO_UTC);
      expect(Math.abs(Date.parse(r.previousSecretExpiresAt) - (rotatedAt + DAY_MS))).toBeLessThan(60_000);
      const view = (await t.request('GET', `${API}/${created.id}`)).body as View;
      expect(view.previousSecretExpiresAt).toBe(r.previousSecretExpiresAt);

      const { request } = await sendTest(created.id);
      const headers = headersOf(request);
      const signatures = headers['webhook-signature'].split(' ');
      expect(signatures).toHaveLength(2);
      for (const sig of signatures) expect(sig).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
      const viaOld = new Webhook(created.secret).verify(request.body, headers);
      const viaNew = new Webhook(r.secret).verify(request.body, headers);
      expect(viaOld).toEqual(viaNew);
      // Each secret matches exactly one of the two signatures.
      for (const secret of [created.secret, r.secret]) {
        const matching = signatures.filter((sig) => {
          try {
            new Webhook(secret).verify(request.body, { ...headers, 'webhook-signature': sig });
            return true;
          } catch {
            return false;
          }
        });
        expect(matching).toHaveLength(1);
      }

      // A second rotation within the overlap keeps every secret younger than it signing: all three.
      const again = (await t.request('POST', `${API}/${created.id}/rotate-secret`)).body as {
        secret: string;
        previousSecretExpiresAt: string;
      };
      const { request: next } = await sendTest(created.id);
      const nextHeaders = headersOf(next);
      expect(nextHeaders['webhook-signature'].split(' ')).toHaveLength(3);
      for (const secret of [created.secret, r.secret, again.secret])
        expect(() => new Webhook(secret).verify(next.body, nextHeaders)).not.toThrow();
      const viewAfter = (await t.request('GET', `${API}/${created.id}`)).body as View;
      expect(viewAfter.previousSecretExpiresAt).toBe(again.previousSecretExpiresAt);
    });

    test('rotating more than 10 times within the overlap is refused, naming when the oldest stops', async () => {
      const created = await create(subscriptionBody('ETH', randomEvm(), receiver.url));
      const secrets = [created.secret];
      for (let i = 0; i < 10; i++) {
        const rotated = await t.request('POST', `${API}/${created.id}/rotate-secret`);
        expect(rotated.status, rotated.text).toBe(200);
        secrets.push((rotated.body as { secret: string }).secret);
      }
      const before = await digest(t);
      const refused = await t.request('POST', `${API}/${created.id}/rotate-secret`);
      expect(refused.status).toBe(409);
      expect((refused.body as Problem).detail).toMatch(/10 earlier secrets still sign/);
      expect(await digest(t)).toEqual(before);
      // Every one of the eleven secrets verifies the next notification.
      const { request } = await sendTest(created.id);
      expect(headersOf(request)['webhook-signature'].split(' ')).toHaveLength(11);
      for (const secret of secrets)
        expect(() => new Webhook(secret).verify(request.body, headersOf(request))).not.toThrow();
    });

    test('ed25519: only v1a signatures, which the public key verifies; rotate-secret gives a new key pair and the keys it replaced keep signing, up to 10', async () => {
      const response = await t.request('POST', API, {
        body: subscriptionBody('ETH', randomEvm(), receiver.url, { signature: 'ed25519' }),
      });
      expect(response.status, response.text).toBe(201);
      const created = response.body as CreatedEd25519;
      const { request } = await sendTest(created.id);
      const headers = headersOf(request);
      const entries = signatureEntries(headers['webhook-signature']);
      expect(entries.map(([version]) => version)).toEqual(['v1a']);
      expect(entries[0]![1]).toMatch(/^[A-Za-z0-9+/]{86}==$/);
      expect(v1aVerifiedBy(created.publicKey, headers, request.body)).toBe(1);
      const altered = request.body.replace('"test":true', '"test":false');
      expect(altered).not.toBe(request.body);
      expect(v1aVerifiedBy(created.publicKey, headers, altered)).toBe(0);
      // An HMAC verifier accepts none of it, whatever secret it is given.
      for (const secret of [created.publicKey.replace('whpk_', 'whsec_'), newSecretLike()])
        expect(() => new Webhook(secret).verify(request.body, headers)).toThrow(/No matching signature/);

      const keys = [created.publicKey];
      for (let rotation = 1; rotation <= 10; rotation++) {
        const rotatedAt = Date.now();
        const rotated = await t.request('POST', `${API}/${created.id}/rotate-secret`);
        expect(rotated.status, rotated.text).toBe(200);
        const r = rotated.body as { publicKey: string; previousSecretExpiresAt: string };
        expect(Object.keys(r).sort()).toEqual(['previousSecretExpiresAt', 'publicKey']);
        expect(r.publicKey).toMatch(WHPK);
        expect(keys).not.toContain(r.publicKey);
        keys.push(r.publicKey);
        if (rotation > 1) continue;
        expect(Math.abs(Date.parse(r.previousSecretExpiresAt) - (rotatedAt + DAY_MS))).toBeLessThan(60_000);
        expect((await t.request('GET', `${API}/${created.id}`)).body).toMatchObject({
          signature: 'ed25519',
          publicKey: r.publicKey,
          previousSecretExpiresAt: r.previousSecretExpiresAt,
        });
        // The old key and the new one both sign, each its own v1a entry.
        const { request: next } = await sendTest(created.id);
        const nextHeaders = headersOf(next);
        expect(signatureEntries(nextHeaders['webhook-signature']).map(([v]) => v)).toEqual(['v1a', 'v1a']);
        for (const key of keys) expect(v1aVerifiedBy(key, nextHeaders, next.body)).toBe(1);
      }
      const before = await digest(t);
      const refused = await t.request('POST', `${API}/${created.id}/rotate-secret`);
      expect(refused.status).toBe(409);
      expect((refused.body as Problem).detail).toMatch(/10 earlier secrets still sign/);
      expect(await digest(t)).toEqual(before);
      const { request: last } = await sendTest(created.id);
      expect(signatureEntries(headersOf(last)['webhook-signature'])).toHaveLength(11);
      for (const key of keys) expect(v1aVerifiedBy(key, headersOf(last), last.body)).toBe(1);
    });

    test('a 410 disables the subscription; test then is 409 until it is enabled again', async () => {
      const gone = await startReceiver(() => ({ status: 410, body: 'gone' }));
      try {
        const created = await create(subscriptionBody('BSC', randomEvm(), gone.url));
        const sent = await t.request('POST', `${API}/${created.id}/test`);
        expect(sent.status).toBe(202);
        await gone.waitForRequests(1);
        const disabled = await waitFor(
          async () => {
            const view = (await t.request('GET', `${API}/${created.id}`)).body as View;
            return view.status === 'disabled' ? view : undefined;
          },
          'the subscription to be disabled',
          15_000,
        );
        expect(disabled.disabledReason).toEqual(expect.any(String));
        expect(disabled.disabledAt).toMatch(ISO_UTC);
        const refused = await t.request('POST', `${API}/${created.id}/test`);
        expect(refused.status).toBe(409);

        const enabled = await t.request('POST', `${API}/${created.id}/enable`);
        expect(enabled.status).toBe(200);
        expect(enabled.body).toMatchObject({
          id: created.id,
          status: 'active',
          disabledReason: null,
          disabledAt: null,
        });
        gone.respond(() => ({
          status: 200,
          headers: { 'content-type': 'application/json' },
          body: '{"status":"success"}',
        }));
        expect((await t.request('POST', `${API}/${created.id}/test`)).status).toBe(202);
        await gone.waitForRequests(2);
      } finally {
        await gone.close();
      }
    });

    test('another account gets 404 for every route of the subscription and does not list it', async () => {
      const created = await create(subscriptionBody('ETH', randomEvm(), receiver.url));
      const { notificationId } = await sendTest(created.id);
      await waitForLog(created.id);

      const other = await t.tokenFor('other');
      const before = await digest(t);
      const id = created.id;
      for (const [method, url, body] of [
        ['GET', `${API}/${id}`, undefined],
        ['DELETE', `${API}/${id}`, undefined],
        ['POST', `${API}/${id}/test`, undefined],
        ['GET', `${API}/${id}/notifications`, undefined],
        ['POST', `${API}/${id}/recover`, { since: new Date(0).toISOString() }],
        ['POST', `${API}/${id}/enable`, undefined],
        ['POST', `${API}/${id}/rotate-secret`, undefined],
        ['POST', `/api/v1/notification/${notificationId}/resend`, undefined],
      ] as const) {
        const response = await t.request(method, url, { token: other, body });
        expect(response.status, `${method} ${url}: ${response.text}`).toBe(404);
        expect(response.headers.get('content-type')).toContain('application/problem+json');
        expect(response.text).not.toContain(receiver.url);
      }
      const list = (await t.request('GET', `${API}?limit=100`, { token: other })).body as { data: View[] };
      expect(list.data.map((v) => v.id)).not.toContain(id);
      expect(await digest(t)).toEqual(before);

      // The owner still has it, untouched, with its one notification.
      const view = (await t.request('GET', `${API}/${id}`)).body as View;
      expect(view).toMatchObject({ id, status: 'active', previousSecretExpiresAt: null });
      const log = (await t.request('GET', `${API}/${id}/notifications`)).body as LogPage;
      expect(log.data.map((n) => n.id)).toEqual([notificationId]);
    });
  });
});
