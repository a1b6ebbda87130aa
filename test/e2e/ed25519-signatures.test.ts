/**
 * ed25519 (`v1a`) signatures end to end: a real anvil chain, the real service and a real receiver.
 * What arrives is checked as a receiver would, with Node's crypto alone: the public key is built
 * from the `whpk_` bytes the API shows, and the signature is checked over exactly the bytes received.
 */
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { type Hex, parseEther } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { secretContext } from '../../src/notify/dispatcher.js';
import { createEnvelope } from '../../src/secrets/envelope.js';
import { loadMasterKey } from '../../src/secrets/master-key.js';
import { subscriptions } from '../../src/subscriptions/schema.js';
import { type Devnet, startDevnet } from '../helpers/devnet.js';
import { signatureEntries, v1aVerifiedBy, type WebhookHeaders } from '../helpers/ed25519.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import type { ReceivedRequest } from '../helpers/receiver.js';

interface CreatedEd25519 {
  id: string;
  publicKey: string;
  callbackToken: string;
}

const headersOf = (request: ReceivedRequest): WebhookHeaders => ({
  'webhook-id': request.headers['webhook-id'] as string,
  'webhook-timestamp': request.headers['webhook-timestamp'] as string,
  'webhook-signature': request.headers['webhook-signature'] as string,
});

describe.each(backends)('ed25519 signatures on a devnet, on %s', (backend) => {
  let d: Devnet;
  let sub: CreatedEd25519;
  let watched: Hex;
  /** The first transfer's delivery, resent after the rotation. */
  let first: ReceivedRequest;
  /** Every line the service logged, at its most verbose. */
  const logLines: string[] = [];
  /** Every API answer of this file, to search for the private key. */
  const answers: string[] = [];

  async function api(method: string, path: string, body?: unknown) {
    const response = await d.t.request(method, path, { body });
    answers.push(response.text);
    return response;
  }

  /** The deliveries of notification `id` received so far, in order. */
  const deliveriesOf = (id: string) => d.receiver.requests.filter((r) => r.headers['webhook-id'] === id);

  /** Sends a transfer to the watched address and returns its one delivery (mined, not pending). */
  async function transferDelivered(value: bigint): Promise<ReceivedRequest> {
    const { hash } = await d.send(0, watched, value);
    return waitFor(
      () => d.receiver.requests.find((r) => (JSON.parse(r.body) as { txId?: string }).txId === hash),
      `the notification of ${hash}`,
    );
  }

  beforeAll(async () => {
    const logger = pino({ level: 'trace' }, { write: (line: string) => logLines.push(line) });
    d = await startDevnet(backend, { logger });
    watched = d.addresses[1]!;
    const created = await api('POST', '/api/v1/subscription', {
      type: 'ADDRESS_TRANSACTION',
      attr: { address: watched, chain: 'DEVNET', url: d.receiver.url },
      // Only mined transfers: a pending announcement would race with the mined one here.
      mempool: false,
      signature: 'ed25519',
    });
    expect(created.status, created.text).toBe(201);
    sub = created.body as CreatedEd25519;
    await d.processed(await d.chain.getBlockNumber());
  });

  afterAll(async () => {
    await d?.close();
  });

  test('a real transfer arrives signed v1a only, verified by the public key over exactly the bytes received', async () => {
    const request = await transferDelivered(parseEther('1.25'));
    first = request;
    expect(request.headers.authorization).toBe(`Bearer ${sub.callbackToken}`);
    const body = JSON.parse(request.body) as Record<string, unknown>;
    expect(body).toMatchObject({
      subscriptionId: sub.id,
      watchedAddress: watched,
      amount: '-1.25', // from the sender's side, as on every EVM notification
      asset: 'ETH',
      id: request.headers['webhook-id'],
    });
    const headers = headersOf(request);
    expect(Math.abs(Number(headers['webhook-timestamp']) * 1000 - Date.now())).toBeLessThan(60_000);
    const entries = signatureEntries(headers['webhook-signature']);
    expect(entries.map(([version]) => version)).toEqual(['v1a']);
    expect(v1aVerifiedBy(sub.publicKey, headers, request.body)).toBe(1);

    // Any other bytes fail: a changed amount, a reordered body, another timestamp or id.
    const tampered = request.body.replace('"-1.25"', '"-9.25"');
    expect(tampered).not.toBe(request.body);
    expect(v1aVerifiedBy(sub.publicKey, headers, tampered)).toBe(0);
    expect(v1aVerifiedBy(sub.publicKey, headers, JSON.stringify(body, null, 1))).toBe(0);
    const later = String(Number(headers['webhook-timestamp']) + 1);
    expect(v1aVerifiedBy(sub.publicKey, { ...headers, 'webhook-timestamp': later }, request.body)).toBe(0);
    expect(v1aVerifiedBy(sub.publicKey, { ...headers, 'webhook-id': `${body.id}x` }, request.body)).toBe(0);

    // An HMAC verifier accepts none of it, not even given the public key's bytes as its secret.
    expect(() => new Webhook(sub.publicKey.replace('whpk_', 'whsec_')).verify(request.body, headers)).toThrow(
      /No matching signature/,
    );

    // The public key is on every GET, unchanged.
    const view = await api('GET', `/api/v1/subscription/${sub.id}`);
    expect(view.body).toMatchObject({ signature: 'ed25519', publicKey: sub.publicKey });
  });

  test('after rotate-secret the old and the new key both sign transfers and resends, each its own v1a entry', async () => {
    const rotated = await api('POST', `/api/v1/subscription/${sub.id}/rotate-secret`);
    expect(rotated.status, rotated.text).toBe(200);
    const { publicKey } = rotated.body as { publicKey: string };
    expect(publicKey).not.toBe(sub.publicKey);

    const request = await transferDelivered(parseEther('0.5'));
    const headers = headersOf(request);
    expect(signatureEntries(headers['webhook-signature']).map(([version]) => version)).toEqual([
      'v1a',
      'v1a',
    ]);
    expect(v1aVerifiedBy(sub.publicKey, headers, request.body)).toBe(1);
    expect(v1aVerifiedBy(publicKey, headers, request.body)).toBe(1);

    // A resend of the notification from before the rotation is signed anew, by both keys.
    const firstId = first.headers['webhook-id'] as string;
    const resent = await api('POST', `/api/v1/notification/${firstId}/resend`);
    expect(resent.status, resent.text).toBe(202);
    const again = await waitFor(() => deliveriesOf(firstId)[1], `the resend of ${firstId}`);
    expect(again.body).toBe(first.body);
    expect(v1aVerifiedBy(sub.publicKey, headersOf(again), again.body)).toBe(1);
    expect(v1aVerifiedBy(publicKey, headersOf(again), again.body)).toBe(1);
    expect(signatureEntries(headersOf(first)['webhook-signature'])).toHaveLength(1);
    const log = await api('GET', `/api/v1/subscription/${sub.id}/notifications`);
    expect(log.status).toBe(200);
  });

  test('the private keys, current and rotated out, appear in no API answer and no log line', async () => {
    await api('GET', '/api/v1/subscription');
    const [row] = (await d.t.app.store.db.select().from(subscriptions)).filter((r) => r.id === sub.id);
    const envelope = createEnvelope(loadMasterKey(undefined, d.t.environment.dataDir).key);
    const sealed = [row!.secret, ...row!.previousSecrets.map((p) => p.secret)];
    const secretKeys = sealed.map((s) => envelope.open(s, secretContext(sub.id)));
    expect(secretKeys).toHaveLength(2);
    // The service did log (its dispatcher, at trace level), and answered: the search is not empty.
    expect(logLines.length).toBeGreaterThan(0);
    expect(answers.length).toBeGreaterThanOrEqual(6);
    for (const secretKey of secretKeys) {
      const seed = Buffer.from(secretKey.slice('whsk_'.length), 'base64');
      expect(seed).toHaveLength(32);
      for (const form of [seed.toString('base64'), seed.toString('base64url'), seed.toString('hex')]) {
        for (const text of [...answers, ...logLines]) expect(text).not.toContain(form);
      }
    }
    for (const text of [...answers, ...logLines]) expect(text).not.toContain('whsk_');
  });
});
