/**
 * A receiver's own check of Standard Webhooks `v1a` (Ed25519) signatures, with Node's crypto and
 * nothing of the service: the public key is built from the `whpk_` bytes alone.
 */
import crypto from 'node:crypto';
import { expect } from 'vitest';

export interface WebhookHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/** The Ed25519 public key in a `whpk_` key (base64 of its 32 raw bytes), as a JWK. */
export function ed25519PublicKeyOf(whpk: string): crypto.KeyObject {
  expect(whpk).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/);
  const x = Buffer.from(whpk.slice('whpk_'.length), 'base64').toString('base64url');
  return crypto.createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
}

/** The entries of a `webhook-signature` header, as [version, base64 signature]. */
export function signatureEntries(header: string): [string, string][] {
  return header.split(' ').map((entry) => {
    const comma = entry.indexOf(',');
    return [entry.slice(0, comma), entry.slice(comma + 1)];
  });
}

/**
 * How many `v1a` entries of the headers `whpk` verifies over `${id}.${timestamp}.${rawBody}`,
 * `rawBody` being exactly the bytes received.
 */
export function v1aVerifiedBy(whpk: string, headers: WebhookHeaders, rawBody: Buffer | string): number {
  const key = ed25519PublicKeyOf(whpk);
  const signed = Buffer.concat([
    Buffer.from(`${headers['webhook-id']}.${headers['webhook-timestamp']}.`, 'utf8'),
    typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody,
  ]);
  return signatureEntries(headers['webhook-signature']).filter(
    ([version, signature]) =>
      version === 'v1a' && crypto.verify(null, signed, key, Buffer.from(signature, 'base64')),
  ).length;
}
