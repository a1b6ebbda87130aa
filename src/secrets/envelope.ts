import crypto from 'node:crypto';
import { LedgerhookError } from '../errors.js';

/** A value sealed under its own data key, which is itself sealed under the master key. */
export interface Sealed {
  ciphertext: string;
  wrappedKey: string;
  keyId: string;
}

export interface Envelope {
  /** Identifies the master key (not secret), so records sealed under another key are recognised. */
  readonly keyId: string;
  seal(plaintext: string, context: string): Sealed;
  open(sealed: Sealed, context: string): string;
  /** A keyed digest, for remembering a request without keeping its plaintext. */
  digest(data: string): string;
}

export class EnvelopeKeyMismatchError extends LedgerhookError {
  constructor(readonly recordKeyId: string) {
    super(`record was sealed under master key ${recordKeyId}, which is not the configured one`);
  }
}

const IV_BYTES = 12;
const TAG_BYTES = 16;

// Layout: iv | tag | ciphertext, base64. `aad` binds the ciphertext to its record.
function gcmSeal(key: Buffer, plaintext: Buffer, aad: string): string {
  const iv = crypto.randomBytes(IV_BYTES);
  const cipher = crypto.createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

function gcmOpen(key: Buffer, sealed: string, aad: string): Buffer {
  const raw = Buffer.from(sealed, 'base64');
  const decipher = crypto.createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
}

export function masterKeyId(masterKey: Buffer): string {
  return crypto
    .createHash('sha256')
    .update('ledgerhook key id\0')
    .update(masterKey)
    .digest('hex')
    .slice(0, 16);
}

/** AES-256-GCM envelope encryption: a fresh data key per record, wrapped by the master key. */
export function createEnvelope(masterKey: Buffer): Envelope {
  if (masterKey.length !== 32) throw new Error('master key must be 32 bytes');
  const keyId = masterKeyId(masterKey);
  const digestKey = crypto.createHmac('sha256', masterKey).update('ledgerhook digest').digest();
  return {
    keyId,
    seal(plaintext, context) {
      const dataKey = crypto.randomBytes(32);
      try {
        return {
          ciphertext: gcmSeal(dataKey, Buffer.from(plaintext, 'utf8'), `data:${context}`),
          wrappedKey: gcmSeal(masterKey, dataKey, `key:${context}`),
          keyId,
        };
      } finally {
        dataKey.fill(0);
      }
    },
    open(sealed, context) {
      if (sealed.keyId !== keyId) throw new EnvelopeKeyMismatchError(sealed.keyId);
      const dataKey = gcmOpen(masterKey, sealed.wrappedKey, `key:${context}`);
      try {
        return gcmOpen(dataKey, sealed.ciphertext, `data:${context}`).toString('utf8');
      } finally {
        dataKey.fill(0);
      }
    },
    digest(data) {
      return crypto.createHmac('sha256', digestKey).update(data).digest('hex');
    },
  };
}
