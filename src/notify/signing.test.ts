import crypto from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, test } from 'vitest';
import { ed25519PublicKeyOf, signatureEntries } from '../../test/helpers/ed25519.js';
import {
  ed25519PrivateKey,
  ed25519PublicKey,
  newEd25519KeyPair,
  newWebhookSecret,
  signingKey,
  signWebhook,
} from './signing.js';

/** RFC 8032 §7.1, Ed25519 test vectors 1-3: seed, public key, message, signature (hex). */
const RFC8032 = [
  {
    seed: '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60',
    publicKey: 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a',
    message: '',
    signature:
      'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b',
  },
  {
    seed: '4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb',
    publicKey: '3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c',
    message: '72',
    signature:
      '92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00',
  },
  {
    seed: 'c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7',
    publicKey: 'fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025',
    message: 'af82',
    signature:
      '6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a',
  },
];

const hexToBase64 = (hex: string) => Buffer.from(hex, 'hex').toString('base64');
const whsk = (hex: string) => `whsk_${hexToBase64(hex)}`;

describe('Ed25519 keys (whsk_ / whpk_)', () => {
  test.each(RFC8032)('RFC 8032 vector: the seed gives its public key and signs its message', (v) => {
    expect(ed25519PublicKey(whsk(v.seed))).toBe(`whpk_${hexToBase64(v.publicKey)}`);
    const signature = crypto.sign(null, Buffer.from(v.message, 'hex'), ed25519PrivateKey(whsk(v.seed)));
    expect(signature.toString('hex')).toBe(v.signature);
  });

  test('the 64-byte form (seed || public key) is the same key; a public half of another key is refused', () => {
    const [a, b] = RFC8032;
    const long = `whsk_${Buffer.from(a!.seed + a!.publicKey, 'hex').toString('base64')}`;
    expect(ed25519PublicKey(long)).toBe(ed25519PublicKey(whsk(a!.seed)));
    const mixed = `whsk_${Buffer.from(a!.seed + b!.publicKey, 'hex').toString('base64')}`;
    expect(() => ed25519PrivateKey(mixed)).toThrow(/does not belong/);
  });

  test.each([
    ['another prefix', `whsec_${hexToBase64(RFC8032[0]!.seed)}`, /starts with whsk_/],
    ['not base64', `whsk_${hexToBase64(RFC8032[0]!.seed).replace(/.$/, '!')}`, /base64/],
    ['base64url', `whsk_${Buffer.from(RFC8032[0]!.seed, 'hex').toString('base64url')}`, /base64/],
    ['31 bytes', `whsk_${crypto.randomBytes(31).toString('base64')}`, /32 or 64 bytes, not 31/],
    ['33 bytes', `whsk_${crypto.randomBytes(33).toString('base64')}`, /32 or 64 bytes, not 33/],
    ['empty', 'whsk_', /32 or 64 bytes, not 0/],
  ])('a malformed secret key (%s) is refused rather than signing with less', (_, key, error) => {
    expect(() => ed25519PrivateKey(key)).toThrow(error);
  });

  test('a new key pair: 32-byte seed and public key, the one belonging to the other, never twice the same', () => {
    const one = newEd25519KeyPair();
    const two = newEd25519KeyPair();
    expect(one.secretKey).toMatch(/^whsk_[A-Za-z0-9+/]{43}=$/);
    expect(one.publicKey).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/);
    expect(ed25519PublicKey(one.secretKey)).toBe(one.publicKey);
    expect(two.secretKey).not.toBe(one.secretKey);
    expect(two.publicKey).not.toBe(one.publicKey);
  });
});

describe('signWebhook', () => {
  const [vector] = RFC8032;
  const secretKey = whsk(vector!.seed);
  const publicKey = `whpk_${hexToBase64(vector!.publicKey)}`;
  const id = 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W';
  const timestamp = 1_674_087_231;
  // Not ASCII only: what is signed is the body's UTF-8 bytes.
  const body = '{"amount":"-1.5","asset":"ETH","note":"naïve ✓"}';

  test('an Ed25519 key signs v1a: base64 of the 64-byte signature over the bytes of "id.timestamp.body"', () => {
    const headers = signWebhook(id, timestamp, body, [secretKey]);
    expect(headers['webhook-id']).toBe(id);
    expect(headers['webhook-timestamp']).toBe(String(timestamp));
    const [version, signature] = signatureEntries(headers['webhook-signature'])[0]!;
    expect(version).toBe('v1a');
    expect(signature).toMatch(/^[A-Za-z0-9+/]{86}==$/);
    const signed = Buffer.from(`${id}.${timestamp}.${body}`, 'utf8');
    const verifier = ed25519PublicKeyOf(publicKey);
    expect(crypto.verify(null, signed, verifier, Buffer.from(signature, 'base64'))).toBe(true);
    // Ed25519 is deterministic: the RFC key signs these bytes to exactly this, parsed or not.
    expect(signature).toBe(crypto.sign(null, signed, ed25519PrivateKey(secretKey)).toString('base64'));
    expect(signWebhook(id, timestamp, body, [signingKey(secretKey)])).toEqual(headers);

    for (const [what, tampered] of [
      ['body', Buffer.from(`${id}.${timestamp}.${body.replace('-1.5', '-1.6')}`, 'utf8')],
      ['timestamp', Buffer.from(`${id}.${timestamp + 1}.${body}`, 'utf8')],
      ['id', Buffer.from(`${id}x.${timestamp}.${body}`, 'utf8')],
    ] as const) {
      expect(crypto.verify(null, tampered, verifier, Buffer.from(signature, 'base64')), what).toBe(false);
    }
    // Another key's public half does not verify it.
    const other = ed25519PublicKeyOf(`whpk_${hexToBase64(RFC8032[1]!.publicKey)}`);
    expect(crypto.verify(null, signed, other, Buffer.from(signature, 'base64'))).toBe(false);
  });

  test('an HMAC verifier finds nothing to accept in v1a entries; v1 and v1a keys sign side by side, in order', () => {
    const hmacSecret = newWebhookSecret();
    const now = Math.floor(Date.now() / 1000);
    const alone = signWebhook(id, now, body, [secretKey]);
    expect(signatureEntries(alone['webhook-signature']).map(([version]) => version)).toEqual(['v1a']);
    expect(() => new Webhook(hmacSecret).verify(body, { ...alone })).toThrow(/No matching signature/);
    // Not even with the public key's bytes taken for an HMAC secret.
    const asSecret = `whsec_${publicKey.slice('whpk_'.length)}`;
    expect(() => new Webhook(asSecret).verify(body, { ...alone })).toThrow(/No matching signature/);

    const both = signWebhook(id, now, body, [hmacSecret, secretKey]);
    const [first, second] = signatureEntries(both['webhook-signature']);
    expect([first![0], second![0]]).toEqual(['v1', 'v1a']);
    expect(new Webhook(hmacSecret).verify(body, { ...both })).toEqual(JSON.parse(body));
    // The v1a entry is the one the Ed25519 key makes alone: the HMAC key beside it changes nothing.
    expect(second![1]).toBe(signatureEntries(alone['webhook-signature'])[0]![1]);
  });
});
