/**
 * A subscription's signing secret rotated: a new one (an ed25519 key pair) signs at once, and the
 * ones it replaces keep signing beside it for a while.
 */
import { eq, sql } from 'drizzle-orm';
import { ConflictError } from '../errors.js';
import type { SubscriptionsContext } from './context.js';
import type { VerificationKey } from './model.js';
import { undeleted } from './owned.js';
import { subscriptions } from './schema.js';
import { newSigningSecret, signingSecrets } from './signing-secrets.js';

/** How long a rotated-out secret keeps signing beside the new one. */
export const SECRET_OVERLAP_MS = 24 * 3_600_000;
/**
 * Rotated-out secrets that may sign at once: each adds a signature to every webhook, so a client
 * rotating in a loop is refused rather than growing every request without bound.
 */
export const MAX_PREVIOUS_SECRETS = 10;

export function createSecretRotation(ctx: SubscriptionsContext) {
  const { db, now } = ctx;

  return {
    /**
     * A new signing secret (an ed25519 subscription: a new key pair, of which the public key is
     * answered). Every secret it replaces keeps signing beside it for 24 hours from its own
     * rotation, so receivers still holding any of them verify every webhook meanwhile.
     */
    async rotateSecret(
      accountId: string,
      id: string,
    ): Promise<VerificationKey & { previousSecretExpiresAt: string }> {
      const current = await undeleted(ctx, accountId, id);
      // The scheme is fixed at creation, so it can be read before the row is locked.
      const { secret, publicKey, shown } = newSigningSecret(ctx, id, current.signature);
      const expires = new Date(now().getTime() + SECRET_OVERLAP_MS);
      await db.transaction(async (tx) => {
        // Rows lock: two rotations at once must not both keep only their own predecessor.
        const [row] = await tx.select().from(subscriptions).where(eq(subscriptions.id, id)).for('update');
        const signing = signingSecrets(ctx, row!.previousSecrets);
        if (signing.length >= MAX_PREVIOUS_SECRETS) {
          throw new ConflictError(
            `${signing.length} earlier secrets still sign beside the current one; the oldest stops at ${signing[0]!.expiresAt}, rotate again after that`,
          );
        }
        await tx
          .update(subscriptions)
          .set({
            secret,
            publicKey,
            previousSecrets: [...signing, { secret: row!.secret, expiresAt: expires.toISOString() }],
            secretVersion: sql`${subscriptions.secretVersion} + 1`,
          })
          .where(eq(subscriptions.id, id));
      });
      return { ...shown, previousSecretExpiresAt: expires.toISOString() };
    },
  };
}
