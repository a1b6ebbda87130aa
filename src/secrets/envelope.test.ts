import crypto from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { createEnvelope, EnvelopeKeyMismatchError } from './envelope.js';

describe('envelope encryption', () => {
  const envelope = createEnvelope(crypto.randomBytes(32));

  test('seals with a fresh data key each time and opens to the same plaintext', () => {
    const a = envelope.seal('the plaintext', 'registry:1');
    const b = envelope.seal('the plaintext', 'registry:1');
    expect(a.ciphertext).not.toBe(b.ciphertext);
    expect(a.wrappedKey).not.toBe(b.wrappedKey);
    expect(Buffer.from(a.ciphertext, 'base64').toString('latin1')).not.toContain('plaintext');
    expect(envelope.open(a, 'registry:1')).toBe('the plaintext');
  });

  test('refuses a ciphertext moved to another record or altered', () => {
    const sealed = envelope.seal('bound to record 1', 'registry:1');
    expect(() => envelope.open(sealed, 'registry:2')).toThrow();
    const raw = Buffer.from(sealed.ciphertext, 'base64');
    raw[raw.length - 1] = (raw[raw.length - 1] ?? 0) ^ 1;
    expect(() => envelope.open({ ...sealed, ciphertext: raw.toString('base64') }, 'registry:1')).toThrow();
  });

  test('names the master key a record needs when it is another one', () => {
    const other = createEnvelope(crypto.randomBytes(32));
    const sealed = other.seal('x', 'c');
    expect(() => envelope.open(sealed, 'c')).toThrow(EnvelopeKeyMismatchError);
  });

  test('digests are keyed: the same data digests differently under another master key', () => {
    const other = createEnvelope(crypto.randomBytes(32));
    expect(envelope.digest('body')).toBe(envelope.digest('body'));
    expect(envelope.digest('body')).not.toBe(other.digest('body'));
  });
});
