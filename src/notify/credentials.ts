/** The secrets a dispatcher signs and authorises with, opened once per subscription and kept. */
import { sql } from 'drizzle-orm';
import type { Sealed } from '../secrets/envelope.js';
import { type DispatchContext, type Job, list, rowsOf } from './dispatch-context.js';
import { type SigningKey, signingKey } from './signing.js';

/** Sealing contexts of a subscription's secrets (shared with the subscription service). */
export const secretContext = (subscriptionId: string) => `subscription:${subscriptionId}:secret`;
export const tokenContext = (subscriptionId: string) => `subscription:${subscriptionId}:token`;

/** A subscription's opened secrets, kept in memory between deliveries. */
export interface Credentials {
  version: string;
  /**
   * The current key, then each rotated-out key with the time it stops signing; parsed once here
   * (an HMAC key, or an Ed25519 KeyObject), not per delivery.
   */
  signingKeys: { key: SigningKey; until: number }[];
  authorization: string;
}

export function createCredentials(ctx: DispatchContext) {
  const { db, envelope } = ctx;
  const credentials = new Map<string, Credentials>();

  /** Opens the secrets of subscriptions whose cached credentials are missing or outdated. */
  async function loadCredentials(jobs: Job[]): Promise<void> {
    const stale = [
      ...new Set(
        jobs
          .filter((j) => credentials.get(j.subscriptionId)?.version !== j.credentialsVersion)
          .map((j) => j.subscriptionId),
      ),
    ];
    if (stale.length === 0) return;
    const result = await db.execute(sql`
      SELECT id, secret, previous_secrets, secret_version, callback_token
      FROM subscriptions WHERE id = ANY(${list(stale)}::uuid[])`);
    if (credentials.size > 50_000) credentials.clear();
    for (const r of rowsOf<Record<string, unknown>>(result)) {
      const id = r.id as string;
      // The secret's prefix says how it signs (whsec_: v1 HMAC, whsk_: v1a Ed25519).
      const open = (sealed: Sealed) => signingKey(envelope.open(sealed, secretContext(id)));
      // Rotated-out secrets, as the subscriptions' previous_secrets column holds them.
      const previous = (r.previous_secrets ?? []) as { secret: Sealed; expiresAt: string }[];
      credentials.set(id, {
        version: String(r.secret_version),
        signingKeys: [
          { key: open(r.secret as Sealed), until: Number.POSITIVE_INFINITY },
          ...previous.map((p) => ({ key: open(p.secret), until: Date.parse(p.expiresAt) })),
        ],
        authorization: `Bearer ${envelope.open(r.callback_token as Sealed, tokenContext(id))}`,
      });
    }
  }

  return { credentials, loadCredentials };
}

export type CredentialCache = ReturnType<typeof createCredentials>;
