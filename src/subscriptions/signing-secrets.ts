/** A subscription's signing secrets: a new one for its scheme, and the rotated-out ones still signing. */
import { secretContext } from '../notify/dispatcher.js';
import { newEd25519KeyPair, newWebhookSecret, type SignatureScheme } from '../notify/signing.js';
import type { Sealed } from '../secrets/envelope.js';
import type { SubscriptionsContext } from './context.js';
import type { VerificationKey } from './model.js';
import type { PreviousSecret } from './schema.js';

/** The rotated-out secrets that still sign now, oldest first. */
export function signingSecrets(ctx: SubscriptionsContext, previous: PreviousSecret[]): PreviousSecret[] {
  const at = ctx.now().getTime();
  return previous.filter((p) => Date.parse(p.expiresAt) > at);
}

/**
 * A new signing secret for the scheme, sealed for the subscription's row, and what its owner is
 * shown: an HMAC secret itself, or only the public half of an Ed25519 key pair.
 */
export function newSigningSecret(
  ctx: SubscriptionsContext,
  id: string,
  scheme: SignatureScheme,
): { secret: Sealed; publicKey: string | null; shown: VerificationKey } {
  const { envelope } = ctx;
  if (scheme === 'ed25519') {
    const { secretKey, publicKey } = newEd25519KeyPair();
    return { secret: envelope.seal(secretKey, secretContext(id)), publicKey, shown: { publicKey } };
  }
  const secret = newWebhookSecret();
  return { secret: envelope.seal(secret, secretContext(id)), publicKey: null, shown: { secret } };
}
