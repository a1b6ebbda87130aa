import crypto from 'node:crypto';

const SECRET_PREFIX = 'whsec_';
/** Standard Webhooks' prefixes of asymmetric (`v1a`, Ed25519) keys. */
const ED25519_SECRET_PREFIX = 'whsk_';
const ED25519_PUBLIC_PREFIX = 'whpk_';
const ED25519_KEY_BYTES = 32;
/** The DER of a PKCS#8 Ed25519 private key before its 32-byte seed (RFC 8410). */
const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** How a subscription signs its deliveries: HMAC-SHA256 (`v1`) or Ed25519 (`v1a`). */
export type SignatureScheme = 'hmac' | 'ed25519';
export const SIGNATURE_SCHEMES: readonly SignatureScheme[] = ['hmac', 'ed25519'];

/** A new Standard Webhooks signing secret: `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return SECRET_PREFIX + crypto.randomBytes(32).toString('base64');
}

/** The HMAC key inside a `whsec_` secret. */
export function webhookKey(secret: string): Buffer {
  return Buffer.from(
    secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret,
    'base64',
  );
}

export interface Ed25519KeyPair {
  /** `whsk_` + base64 of the 32-byte seed: kept sealed, never shown. */
  secretKey: string;
  /** `whpk_` + base64 of the 32-byte public key: what receivers verify with. */
  publicKey: string;
}

function rawPublicKey(privateKey: crypto.KeyObject): Buffer {
  const jwk = crypto.createPublicKey(privateKey).export({ format: 'jwk' });
  return Buffer.from(jwk.x!, 'base64url');
}

/** A new Ed25519 key pair in Standard Webhooks' `whsk_`/`whpk_` form. */
export function newEd25519KeyPair(): Ed25519KeyPair {
  // An Ed25519 private JWK holds the seed (`d`) and the public key (`x`), both raw, base64url.
  const { d, x } = crypto.generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });
  return {
    secretKey: ED25519_SECRET_PREFIX + Buffer.from(d!, 'base64url').toString('base64'),
    publicKey: ED25519_PUBLIC_PREFIX + Buffer.from(x!, 'base64url').toString('base64'),
  };
}

/**
 * The private key of a `whsk_` secret key: base64 of the 32-byte seed, or of the 64 bytes
 * seed || public key that libsodium-style tools write (whose public half must match the seed).
 */
export function ed25519PrivateKey(secretKey: string): crypto.KeyObject {
  if (!secretKey.startsWith(ED25519_SECRET_PREFIX))
    throw new Error('an Ed25519 secret key starts with whsk_');
  const encoded = secretKey.slice(ED25519_SECRET_PREFIX.length);
  // Buffer.from skips what is not base64; a key mangled in transit must fail, not sign with less.
  if (!BASE64.test(encoded)) throw new Error('an Ed25519 secret key is whsk_ and standard base64');
  const raw = Buffer.from(encoded, 'base64');
  if (raw.length !== ED25519_KEY_BYTES && raw.length !== 2 * ED25519_KEY_BYTES)
    throw new Error(`an Ed25519 secret key holds 32 or 64 bytes, not ${raw.length}`);
  const seed = raw.subarray(0, ED25519_KEY_BYTES);
  const key = crypto.createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519_PREFIX, seed]),
    format: 'der',
    type: 'pkcs8',
  });
  if (raw.length > ED25519_KEY_BYTES && !rawPublicKey(key).equals(raw.subarray(ED25519_KEY_BYTES)))
    throw new Error('the public half of this 64-byte Ed25519 secret key does not belong to its seed');
  return key;
}

/** The `whpk_` public key that verifies what a `whsk_` secret key signs. */
export function ed25519PublicKey(secretKey: string): string {
  return ED25519_PUBLIC_PREFIX + rawPublicKey(ed25519PrivateKey(secretKey)).toString('base64');
}

/**
 * A key ready to sign, parsed once from its secret (the dispatcher caches these): an HMAC key
 * (`whsec_`, signs `v1`) or an Ed25519 private key (`whsk_`, signs `v1a`).
 */
export type SigningKey = Buffer | crypto.KeyObject;

export function signingKey(secret: string): SigningKey {
  return secret.startsWith(ED25519_SECRET_PREFIX) ? ed25519PrivateKey(secret) : webhookKey(secret);
}

export interface SignedHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/**
 * Standard Webhooks headers: one signature of `"id.timestamp.body"` per key, space-separated
 * (during a rotation the old and the new keys all sign). An HMAC key gives
 * `v1,<base64 HMAC-SHA256>`, an Ed25519 key `v1a,<base64 Ed25519 signature>`.
 */
export function signWebhook(
  id: string,
  timestampSeconds: number,
  body: string,
  /** Secrets (`whsec_…`, `whsk_…`), or keys already parsed with `signingKey`. */
  secrets: readonly (string | SigningKey)[],
): SignedHeaders {
  const content = `${id}.${timestampSeconds}.${body}`;
  // Ed25519 signs bytes; encoded once, and only when some key needs them.
  let bytes: Buffer | undefined;
  const signatures = secrets.map((s) => {
    const key = typeof s === 'string' ? signingKey(s) : s;
    if (Buffer.isBuffer(key))
      return `v1,${crypto.createHmac('sha256', key).update(content).digest('base64')}`;
    bytes ??= Buffer.from(content, 'utf8');
    return `v1a,${crypto.sign(null, bytes, key).toString('base64')}`;
  });
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': signatures.join(' '),
  };
}
