/**
 * Standard Webhooks verification of a Ledgerhook delivery: HMAC-SHA256 `v1` signatures through
 * the `standardwebhooks` package (`whsec_` secrets), ed25519 `v1a` signatures through Node's
 * crypto (`whpk_` public keys), and the timestamp's tolerance.
 */
import crypto from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import type { WebhookEvent } from './types.js';

/** Why a delivery was not accepted; every one of them is the sender's fault, never the receiver's. */
export type VerificationFailure =
  | 'missing_headers'
  | 'invalid_timestamp'
  | 'timestamp_too_old'
  | 'timestamp_too_new'
  | 'no_matching_signature'
  | 'invalid_body';

/** A delivery that is not authentic, is stale, or whose signed body is not JSON. */
export class WebhookVerificationError extends Error {
  readonly reason: VerificationFailure;
  constructor(reason: VerificationFailure, message: string) {
    super(message);
    this.name = 'WebhookVerificationError';
    this.reason = reason;
  }
}

/** A configured secret or key that cannot verify anything: a mistake of the receiver's setup. */
export class InvalidKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidKeyError';
  }
}

/** Request headers as Node (`req.headers`) or the Fetch API (`Headers`) hold them. */
export type HeaderSource = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** How far the `webhook-timestamp` may be from now, either way (default 300, as standardwebhooks). */
  toleranceSeconds?: number;
  /** The current time in milliseconds (default `Date.now`). */
  now?: () => number;
}

/** A verified delivery. */
export interface VerifiedDelivery {
  event: WebhookEvent;
  /** `webhook-id`: the notification's id, the same on every retry. */
  id: string;
  /** `webhook-timestamp`: when this attempt was signed. */
  timestamp: Date;
}

type VerificationKey = { kind: 'hmac'; webhook: Webhook } | { kind: 'ed25519'; key: crypto.KeyObject };

const DEFAULT_TOLERANCE_SECONDS = 300;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

function decodeBase64(text: string, what: string): Buffer {
  if (!BASE64.test(text) || text.length % 4 !== 0) throw new InvalidKeyError(`${what} is not base64`);
  return Buffer.from(text, 'base64');
}

/** Parses one configured secret: `whsec_…` (HMAC) or `whpk_…` (an ed25519 public key). */
function parseKey(secret: string): VerificationKey {
  if (typeof secret !== 'string') throw new InvalidKeyError('a secret must be a string');
  if (secret.startsWith('whsec_')) {
    const key = decodeBase64(secret.slice('whsec_'.length), 'the whsec_ secret');
    if (key.length < 16)
      throw new InvalidKeyError('the whsec_ secret is too short to be one Ledgerhook issued');
    return { kind: 'hmac', webhook: new Webhook(secret) };
  }
  if (secret.startsWith('whpk_')) {
    const raw = decodeBase64(secret.slice('whpk_'.length), 'the whpk_ public key');
    if (raw.length !== 32)
      throw new InvalidKeyError('a whpk_ public key holds 32 bytes (an Ed25519 public key)');
    const key = crypto.createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') },
      format: 'jwk',
    });
    return { kind: 'ed25519', key };
  }
  if (secret.startsWith('whsk_'))
    throw new InvalidKeyError(
      'whsk_ is a signing key, which lets its holder forge deliveries: give the receiver the subscription’s whpk_ public key',
    );
  throw new InvalidKeyError(
    'a secret is a whsec_ secret or a whpk_ public key, as the subscription gives it',
  );
}

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Record<string, string | string[] | undefined>;
  let value = record[name];
  if (value === undefined) {
    const key = Object.keys(record).find((k) => k.toLowerCase() === name);
    value = key === undefined ? undefined : record[key];
  }
  return Array.isArray(value) ? value.join(' ') : value;
}

function signatureEntries(value: string): { version: string; signature: string }[] {
  return value
    .split(' ')
    .filter((entry) => entry !== '')
    .map((entry) => {
      const comma = entry.indexOf(',');
      return comma < 0
        ? { version: '', signature: '' }
        : { version: entry.slice(0, comma), signature: entry.slice(comma + 1) };
    });
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}

/**
 * A verifier for one secret, or several (a receiver holding the old and the new keys through a
 * rotation; a delivery passes when any of them signed it). Bad secrets throw InvalidKeyError here,
 * at setup, rather than at the first delivery.
 */
export function createVerifier(
  secret: string | readonly string[],
  options: VerifyOptions = {},
): (rawBody: string | Uint8Array, headers: HeaderSource) => VerifiedDelivery {
  const secrets = typeof secret === 'string' ? [secret] : [...secret];
  if (secrets.length === 0) throw new InvalidKeyError('no secret given');
  const keys = secrets.map(parseKey);
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const now = options.now ?? Date.now;

  return (rawBody, headers) => {
    const id = header(headers, 'webhook-id');
    const timestampText = header(headers, 'webhook-timestamp');
    const signatures = header(headers, 'webhook-signature');
    if (!id || !timestampText || !signatures)
      throw new WebhookVerificationError(
        'missing_headers',
        'webhook-id, webhook-timestamp and webhook-signature are required',
      );
    // No leading zeros: both schemes must sign the very digits the header carries.
    if (!/^(0|[1-9][0-9]{0,14})$/.test(timestampText))
      throw new WebhookVerificationError('invalid_timestamp', 'webhook-timestamp is not a number of seconds');
    const seconds = Number(timestampText);
    const age = Math.floor(now() / 1000) - seconds;
    if (age > tolerance)
      throw new WebhookVerificationError(
        'timestamp_too_old',
        `webhook-timestamp is ${age} s old, beyond the tolerance of ${tolerance} s`,
      );
    if (-age > tolerance)
      throw new WebhookVerificationError(
        'timestamp_too_new',
        `webhook-timestamp is ${-age} s ahead, beyond the tolerance of ${tolerance} s`,
      );

    const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : Buffer.from(rawBody);
    const timestamp = new Date(seconds * 1000);
    const entries = signatureEntries(signatures);
    // The bytes both schemes sign: `${id}.${timestamp}.${body}`.
    const signed = Buffer.concat([Buffer.from(`${id}.${timestampText}.`, 'utf8'), body]);
    const matches = keys.some((key) => {
      if (key.kind === 'hmac') {
        const expected = key.webhook.sign(id, timestamp, body).slice('v1,'.length);
        return entries.some((e) => e.version === 'v1' && sameText(e.signature, expected));
      }
      return entries.some((e) => {
        if (e.version !== 'v1a' || !BASE64.test(e.signature)) return false;
        const signature = Buffer.from(e.signature, 'base64');
        return signature.length === 64 && crypto.verify(null, signed, key.key, signature);
      });
    });
    if (!matches)
      throw new WebhookVerificationError(
        'no_matching_signature',
        'no signature in webhook-signature matches the body with the configured secret',
      );

    let event: WebhookEvent;
    try {
      event = JSON.parse(body.toString('utf8')) as WebhookEvent;
    } catch {
      throw new WebhookVerificationError('invalid_body', 'the signed body is not JSON');
    }
    if (event === null || typeof event !== 'object' || Array.isArray(event))
      throw new WebhookVerificationError('invalid_body', 'the signed body is not a JSON object');
    return { event, id, timestamp };
  };
}

/**
 * Verifies one delivery and returns its parsed, typed body. Throws WebhookVerificationError for a
 * delivery to refuse (answer 401), InvalidKeyError for a secret that is not one.
 *
 * `rawBody` must be the bytes as received: a body parsed and serialised again no longer matches.
 */
export function verify(
  rawBody: string | Uint8Array,
  headers: HeaderSource,
  secret: string | readonly string[],
  options?: VerifyOptions,
): WebhookEvent {
  return createVerifier(secret, options)(rawBody, headers).event;
}
