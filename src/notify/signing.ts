import crypto from 'node:crypto';

const SECRET_PREFIX = 'whsec_';

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

export interface SignedHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/**
 * Standard Webhooks headers: `v1,<base64 HMAC-SHA256(key, "id.timestamp.body")>`, one signature
 * per secret (during a rotation the old and the new secret both sign), space-separated.
 */
export function signWebhook(
  id: string,
  timestampSeconds: number,
  body: string,
  /** `whsec_` secrets, or their keys already decoded with `webhookKey`. */
  secrets: readonly (string | Buffer)[],
): SignedHeaders {
  const content = `${id}.${timestampSeconds}.${body}`;
  const signatures = secrets.map((s) => {
    const key = typeof s === 'string' ? webhookKey(s) : s;
    return `v1,${crypto.createHmac('sha256', key).update(content).digest('base64')}`;
  });
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': signatures.join(' '),
  };
}
