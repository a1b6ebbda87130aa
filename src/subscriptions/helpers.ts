/**
 * What more than one part of the subscriptions service uses: how a subscription is found, shown
 * and announced, its signing secrets, and how addresses are validated and inserted.
 */
import { and, eq, sql } from 'drizzle-orm';
import { normalizeAddress } from '../chains/addresses.js';
import type { Network } from '../chains/networks.js';
import { ConflictError, type FieldError, NotFoundError, ValidationError } from '../errors.js';
import { isUuid } from '../http-kit/pagination.js';
import { secretContext } from '../notify/dispatcher.js';
import { newEd25519KeyPair, newWebhookSecret, type SignatureScheme } from '../notify/signing.js';
import type { Sealed } from '../secrets/envelope.js';
import type { Db } from '../store/db.js';
import type { SubscriptionsContext } from './context.js';
import {
  MAX_NOTICE_BYTES,
  SUBSCRIPTIONS_CHANNEL,
  type SubscriptionChange,
  type SubscriptionNotice,
} from './events.js';
import {
  CONTRACT_LOG_EVENT,
  REGISTRY_EVENTS,
  type SubscriptionRow,
  type SubscriptionView,
  type VerificationKey,
} from './model.js';
import { type PreviousSecret, subscriptions } from './schema.js';

/** Invalid addresses named one by one in a 400; the problem's title gives how many there were. */
export const MAX_NAMED_ERRORS = 100;
/** How long a change too large for NOTIFY stays readable by other processes' watchers. */
const STORED_CHANGE_TTL = '10 minutes';

export const iso = (d: Date | null) => (d ? d.toISOString() : null);

/**
 * Tells watchers in every process about a change, when the transaction commits: in the NOTIFY
 * payload when it fits, otherwise (a list of thousands of addresses) as a row of
 * subscription_changes whose sequence number the payload carries.
 */
export async function announce(
  tx: Db,
  change: SubscriptionChange,
  origin: string | undefined,
  others: boolean,
): Promise<void> {
  if (!others) return;
  const inline = JSON.stringify({ ...change, origin } satisfies SubscriptionNotice);
  let payload = inline;
  if (Buffer.byteLength(inline) > MAX_NOTICE_BYTES) {
    await tx.execute(
      sql`DELETE FROM subscription_changes WHERE created_at < now() - ${STORED_CHANGE_TTL}::interval`,
    );
    const result = (await tx.execute(
      sql`INSERT INTO subscription_changes (change) VALUES (${JSON.stringify(change)}) RETURNING seq::text AS seq`,
    )) as unknown as { rows: { seq: string }[] };
    payload = JSON.stringify({
      type: 'stored',
      seq: result.rows[0]!.seq,
      origin,
    } satisfies SubscriptionNotice);
  }
  await tx.execute(sql`SELECT pg_notify(${SUBSCRIPTIONS_CHANNEL}, ${payload})`);
}

/** A PostgreSQL array literal of strings, sent as one parameter (drizzle spreads JS arrays). */
export function textArray(values: readonly string[]): string {
  return `{${values.map((v) => `"${v.replace(/["\\]/g, '\\$&')}"`).join(',')}}`;
}

/**
 * Normalises each address for the network, dropping repeats (two spellings of one address are
 * one); the invalid ones are named by their pointers, up to MAX_NAMED_ERRORS.
 */
export function normalizeAll(
  network: Network,
  inputs: readonly string[],
  pointer: string,
  errors: FieldError[],
  invalid: { count: number },
): string[] {
  const seen = new Set<string>();
  for (const [i, input] of inputs.entries()) {
    const check = normalizeAddress(network.family, input, network.bitcoinChain);
    if (check.ok) seen.add(check.address);
    else {
      invalid.count++;
      if (errors.length < MAX_NAMED_ERRORS)
        errors.push({
          pointer: `${pointer}/${i}`,
          detail: `${check.reason} (${network.name} expects ${network.addressFormat})`,
        });
    }
  }
  return [...seen];
}

export function invalidAddresses(errors: FieldError[], invalid: number, total: number): ValidationError {
  const named = errors.length;
  // Past the named ones, one more entry says how many there were, so the client knows to look.
  if (named < invalid)
    errors.push({
      pointer: '#',
      detail: `and ${invalid - named} more invalid addresses (${invalid} of ${total}); nothing was changed`,
    });
  return new ValidationError(`${invalid} of ${total} addresses are invalid; nothing was changed`, errors);
}

/** An event subscription's attr: the event, where it is followed, and its filter as given. */
function eventAttr(row: SubscriptionRow): SubscriptionView['attr'] {
  const { event, anyContract, filter } = row.contractEvent!;
  return {
    chain: row.network ?? '',
    url: row.url,
    // A bare topic0 subscription has no ABI, and every other has one.
    event: event.abi ?? event.topic0!,
    ...(event.signature === null ? {} : { signature: event.signature }),
    topic0: event.topic0,
    ...(anyContract
      ? { anyContract: true }
      : row.address !== null
        ? { contractAddress: row.address }
        : { addressCount: row.addressCount }),
    ...(filter === null ? {} : { filter }),
  };
}

export function toView(ctx: SubscriptionsContext, row: SubscriptionRow): SubscriptionView {
  // One address as Tatum shows it; a list by its size (GET …/addresses lists it).
  const attr: SubscriptionView['attr'] =
    row.type === CONTRACT_LOG_EVENT && row.contractEvent
      ? eventAttr(row)
      : row.type === REGISTRY_EVENTS
        ? { registryId: row.registryId ?? '', url: row.url }
        : row.address !== null
          ? { address: row.address, chain: row.network ?? '', url: row.url }
          : { chain: row.network ?? '', url: row.url, addressCount: row.addressCount };
  if (row.fees) attr.fees = true;
  return {
    id: row.id,
    type: row.type,
    attr,
    mempool: row.mempool,
    confirmations: row.confirmations,
    ack: row.ack,
    signature: row.signature,
    ...(row.publicKey === null ? {} : { publicKey: row.publicKey }),
    status: row.deletedAt ? 'deleted' : row.status,
    disabledReason: row.disabledReason,
    disabledAt: iso(row.disabledAt),
    previousSecretExpiresAt: signingSecrets(ctx, row.previousSecrets).at(-1)?.expiresAt ?? null,
    createdAt: row.createdAt.toISOString(),
    deletedAt: iso(row.deletedAt),
  };
}

/** The rotated-out secrets that still sign now, oldest first. */
export function signingSecrets(ctx: SubscriptionsContext, previous: PreviousSecret[]): PreviousSecret[] {
  const at = ctx.now().getTime();
  return previous.filter((p) => Date.parse(p.expiresAt) > at);
}

/** The account's subscription, deleted or not (a deleted one stays readable with its log). */
export async function owned(
  ctx: SubscriptionsContext,
  accountId: string,
  id: string,
): Promise<SubscriptionRow> {
  const [row] = isUuid(id)
    ? await ctx.db
        .select()
        .from(subscriptions)
        .where(and(eq(subscriptions.id, id), eq(subscriptions.accountId, accountId)))
    : [];
  if (!row) throw new NotFoundError(`No subscription with id ${id}`);
  return row;
}

/** The account's subscription, which must not be deleted: it can no longer be acted on. */
export async function undeleted(
  ctx: SubscriptionsContext,
  accountId: string,
  id: string,
): Promise<SubscriptionRow> {
  const row = await owned(ctx, accountId, id);
  if (row.deletedAt) {
    throw new ConflictError(
      `Subscription ${id} was deleted at ${row.deletedAt.toISOString()}; its log stays readable, but it cannot be used again`,
    );
  }
  return row;
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

/** Inserts the addresses not there yet, in one statement; how many were new. */
export async function insertAddresses(
  ctx: SubscriptionsContext,
  tx: Db,
  id: string,
  network: string,
  addresses: string[],
): Promise<number> {
  if (addresses.length === 0) return 0;
  // Indented as it was when this was a closure, so the statement's text is unchanged.
  const result = (await tx.execute(sql`
      WITH inserted AS (
        INSERT INTO subscription_addresses (subscription_id, network, address, created_at)
        SELECT ${id}::uuid, ${network}, a, ${ctx.now().toISOString()}::timestamptz
        -- In key order: each index page is then written once, in turn, not at random (100,000
        -- addresses into PostgreSQL: 620 ms sorted, 1,070-1,720 ms as given).
        FROM (SELECT a FROM unnest(${textArray(addresses)}::text[]) AS a ORDER BY a) AS sorted
        ON CONFLICT DO NOTHING RETURNING 1)
      SELECT count(*)::int AS n FROM inserted`)) as unknown as { rows: { n: number }[] };
  return result.rows[0]!.n;
}
