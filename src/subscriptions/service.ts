import crypto from 'node:crypto';
import { and, desc, eq, gte, inArray, isNotNull, isNull, lt, or, type SQL, sql } from 'drizzle-orm';
import { v7 as uuidv7 } from 'uuid';
import { normalizeAddress } from '../chains/addresses.js';
import type { Network, NetworkCatalog } from '../chains/networks.js';
import { ConflictError, type FieldError, NotFoundError, ValidationError } from '../errors.js';
import { decodeCursor, isUuid, type PageQuery, toPage } from '../http-kit/pagination.js';
import { canonicalJson, type Idempotency } from '../idempotency/service.js';
import { secretContext, tokenContext } from '../notify/dispatcher.js';
import { enqueueNotifications, newNotificationId, signalOutbox } from '../notify/outbox.js';
import { deliveryAttempts, notifications } from '../notify/schema.js';
import { newEd25519KeyPair, newWebhookSecret, type SignatureScheme } from '../notify/signing.js';
import type { Envelope, Sealed } from '../secrets/envelope.js';
import type { Db } from '../store/db.js';
import {
  MAX_NOTICE_BYTES,
  SUBSCRIPTIONS_CHANNEL,
  type SubscriptionChange,
  type SubscriptionNotice,
} from './events.js';
import { type PreviousSecret, subscriptionAddresses, subscriptions } from './schema.js';

export const ADDRESS_TRANSACTION = 'ADDRESS_TRANSACTION';
export const REGISTRY_EVENTS = 'REGISTRY_EVENTS';
/** How long a rotated-out secret keeps signing beside the new one. */
export const SECRET_OVERLAP_MS = 24 * 3_600_000;
/**
 * Rotated-out secrets that may sign at once: each adds a signature to every webhook, so a client
 * rotating in a loop is refused rather than growing every request without bound.
 */
export const MAX_PREVIOUS_SECRETS = 10;
export const CREATE_SCOPE = 'POST /api/v1/subscription';
/** The first half of the advisory lock that serialises creating one address's subscriptions. */
const CREATE_LOCK_SPACE = 7_461_004;

/** Addresses one request may add and remove, together (create: in `attr.addresses`). */
export const MAX_ADDRESSES_PER_CALL = 100_000;
/** Invalid addresses named one by one in a 400; the problem's title gives how many there were. */
const MAX_NAMED_ERRORS = 100;
/** How long a change too large for NOTIFY stays readable by other processes' watchers. */
const STORED_CHANGE_TTL = '10 minutes';

export interface CreateSubscriptionInput {
  type: typeof ADDRESS_TRANSACTION;
  /** `address` (one) or `addresses` (a list, managed by /subscription/{id}/addresses). */
  attr: { address?: string; addresses?: string[]; chain: string; url: string; fees?: boolean };
  mempool?: boolean;
  confirmations?: number;
  ack?: 'status' | '2xx';
  callbackToken?: string;
  /** hmac (the default) or ed25519. */
  signature?: SignatureScheme;
}

/** How a receiver checks a subscription's signatures: the one of these its scheme has. */
export type VerificationKey =
  /** hmac: the Standard Webhooks signing secret (whsec_…), shown only at creation and rotation. */
  | { secret: string }
  /** ed25519: the public key (whpk_…) of the `v1a` signatures, public and shown on every GET. */
  | { publicKey: string };

export type CreatedSubscription = {
  id: string;
  /** Sent as `Authorization: Bearer <callbackToken>` with every notification, shown only now. */
  callbackToken: string;
} & VerificationKey;

export interface AddressChangeInput {
  add?: string[];
  remove?: string[];
}

export interface AddressChangeResult {
  /** Addresses newly watched and no longer watched by this call (present or absent ones aside). */
  added: number;
  removed: number;
  addressCount: number;
}

export interface WatchedAddressView {
  address: string;
  createdAt: string;
}

export interface SubscriptionView {
  id: string;
  type: string;
  attr: {
    address?: string;
    addressCount?: number;
    chain?: string;
    url: string;
    registryId?: string;
    fees?: boolean;
  };
  mempool: boolean;
  confirmations: number;
  ack: string;
  signature: SignatureScheme;
  /** ed25519 only: the `whpk_` key that verifies the `v1a` signatures. */
  publicKey?: string;
  /** active, disabled, or deleted (kept readable with its delivery log). */
  status: string;
  disabledReason: string | null;
  disabledAt: string | null;
  previousSecretExpiresAt: string | null;
  createdAt: string;
  deletedAt: string | null;
}

export interface AttemptView {
  attempt: number;
  trigger: string;
  startedAt: string;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
  response: string | null;
  outcome: string;
  nextAttemptAt: string | null;
}

export interface NotificationView {
  id: string;
  subscriptionId: string;
  eventType: string;
  state: string;
  attemptCount: number;
  nextAttemptAt: string | null;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: string;
  deliveredAt: string | null;
  payload: unknown;
  attempts: AttemptView[];
}

/** What a delivery log is narrowed to: a state, and a creation time from `since` (inclusive) to `until` (exclusive). */
export interface LogFilter {
  state?: string;
  since?: Date;
  until?: Date;
}

type SubscriptionRow = typeof subscriptions.$inferSelect;

export interface UrlChecker {
  /** Rejects URLs that are not http(s) or that resolve to addresses we will not call. */
  checkUrl(url: string): Promise<void>;
}

/** Not held by a dispatcher right now (no claim, or one whose lease ran out). */
const unclaimed = or(isNull(notifications.lockedUntil), lt(notifications.lockedUntil, sql`now()`))!;

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** Transaction ids shaped as each family writes them (hex hash, base32 id, base58 signature). */
const SAMPLE_TX_ID: Record<Network['family'], string> = {
  evm: `0x${'ab'.repeat(32)}`,
  bitcoin: 'ab'.repeat(32),
  algorand: 'A'.repeat(52),
  solana: '5'.repeat(88),
};

/**
 * A sample notification with exactly the documented fields (DESIGN §6) a real one carries, so a
 * customer can test their endpoint: one base unit of the native asset, sent on EVM chains (where
 * `address` is the sender), received elsewhere.
 */
function samplePayload(
  network: Network,
  address: string,
  sub: SubscriptionRow,
  id: string,
): Record<string, unknown> {
  const isEvm = network.family === 'evm';
  const oneUnit = network.decimals > 0 ? `0.${'0'.repeat(network.decimals - 1)}1` : '1';
  return {
    address,
    txId: SAMPLE_TX_ID[network.family],
    type: 'native',
    blockNumber: 1,
    asset: network.symbol,
    amount: isEvm ? `-${oneUnit}` : oneUnit,
    ...(isEvm ? { mempool: false, counterAddress: '0x000000000000000000000000000000000000dEaD' } : {}),
    id,
    subscriptionId: sub.id,
    chain: network.name,
    watchedAddress: address,
    confirmations: sub.confirmations,
    test: true,
  };
}

/**
 * Tells watchers in every process about a change, when the transaction commits: in the NOTIFY
 * payload when it fits, otherwise (a list of thousands of addresses) as a row of
 * subscription_changes whose sequence number the payload carries.
 */
async function announce(
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
function textArray(values: readonly string[]): string {
  return `{${values.map((v) => `"${v.replace(/["\\]/g, '\\$&')}"`).join(',')}}`;
}

/**
 * Normalises each address for the network, dropping repeats (two spellings of one address are
 * one); the invalid ones are named by their pointers, up to MAX_NAMED_ERRORS.
 */
function normalizeAll(
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

function invalidAddresses(errors: FieldError[], invalid: number, total: number): ValidationError {
  const named = errors.length;
  // Past the named ones, one more entry says how many there were, so the client knows to look.
  if (named < invalid)
    errors.push({
      pointer: '#',
      detail: `and ${invalid - named} more invalid addresses (${invalid} of ${total}); nothing was changed`,
    });
  return new ValidationError(`${invalid} of ${total} addresses are invalid; nothing was changed`, errors);
}

export function createSubscriptions(deps: {
  db: Db;
  envelope: Envelope;
  idempotency: Idempotency;
  networks: NetworkCatalog;
  urls: UrlChecker;
  /**
   * Called after a change that the watchers' in-memory address index must follow; awaited, so
   * the change is in force in this process before the request is answered.
   */
  onChange?: (change: SubscriptionChange) => void | Promise<void>;
  /** Marks this instance's NOTIFY payloads, which its own watchers skip (onChange applied them). */
  origin?: string;
  /**
   * Whether watchers of other processes may listen (PostgreSQL). Embedded PGlite admits one
   * process, whose watchers onChange keeps in step: a change is then not stored for others.
   */
  notifyOthers?: boolean;
  now?: () => Date;
}) {
  const { db, envelope, networks, urls, idempotency } = deps;
  const now = deps.now ?? (() => new Date());
  const notifyOthers = deps.notifyOthers ?? true;

  function toView(row: SubscriptionRow): SubscriptionView {
    // One address as Tatum shows it; a list by its size (GET …/addresses lists it).
    const attr: SubscriptionView['attr'] =
      row.type === REGISTRY_EVENTS
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
      previousSecretExpiresAt: signingSecrets(row.previousSecrets).at(-1)?.expiresAt ?? null,
      createdAt: row.createdAt.toISOString(),
      deletedAt: iso(row.deletedAt),
    };
  }

  /** The rotated-out secrets that still sign now, oldest first. */
  function signingSecrets(previous: PreviousSecret[]): PreviousSecret[] {
    const at = now().getTime();
    return previous.filter((p) => Date.parse(p.expiresAt) > at);
  }

  /** The account's subscription, deleted or not (a deleted one stays readable with its log). */
  async function owned(accountId: string, id: string): Promise<SubscriptionRow> {
    const [row] = isUuid(id)
      ? await db
          .select()
          .from(subscriptions)
          .where(and(eq(subscriptions.id, id), eq(subscriptions.accountId, accountId)))
      : [];
    if (!row) throw new NotFoundError(`No subscription with id ${id}`);
    return row;
  }

  /** The account's subscription, which must not be deleted: it can no longer be acted on. */
  async function undeleted(accountId: string, id: string): Promise<SubscriptionRow> {
    const row = await owned(accountId, id);
    if (row.deletedAt) {
      throw new ConflictError(
        `Subscription ${id} was deleted at ${row.deletedAt.toISOString()}; its log stays readable, but it cannot be used again`,
      );
    }
    return row;
  }

  /** The same account's live subscription of the same address and URL, if there is one. */
  async function findDuplicate(
    tx: Db,
    accountId: string,
    watched: { network: string; address: string },
    url: string,
  ): Promise<SubscriptionRow | undefined> {
    // Two creates of one address at once would both find nothing: the second waits for the first.
    await tx.execute(
      sql`SELECT pg_advisory_xact_lock(${CREATE_LOCK_SPACE}, hashtext(${`${accountId}:${watched.network}:${watched.address}`}))`,
    );
    const [row] = await tx
      .select()
      .from(subscriptions)
      .where(
        and(
          eq(subscriptions.accountId, accountId),
          eq(subscriptions.type, ADDRESS_TRANSACTION),
          eq(subscriptions.network, watched.network),
          eq(subscriptions.address, watched.address),
          eq(subscriptions.url, url),
          isNull(subscriptions.deletedAt),
        ),
      );
    return row;
  }

  async function checkUrl(url: string, pointer: string): Promise<void> {
    try {
      await urls.checkUrl(url);
    } catch (err) {
      throw new ValidationError('Invalid callback URL', [{ pointer, detail: (err as Error).message }]);
    }
  }

  /**
   * A new signing secret for the scheme, sealed for the subscription's row, and what its owner is
   * shown: an HMAC secret itself, or only the public half of an Ed25519 key pair.
   */
  function newSigningSecret(
    id: string,
    scheme: SignatureScheme,
  ): { secret: Sealed; publicKey: string | null; shown: VerificationKey } {
    if (scheme === 'ed25519') {
      const { secretKey, publicKey } = newEd25519KeyPair();
      return { secret: envelope.seal(secretKey, secretContext(id)), publicKey, shown: { publicKey } };
    }
    const secret = newWebhookSecret();
    return { secret: envelope.seal(secret, secretContext(id)), publicKey: null, shown: { secret } };
  }

  /** The network of an address subscription; any other kind has no addresses (409). */
  function addressNetwork(row: SubscriptionRow): Network {
    if (row.type !== ADDRESS_TRANSACTION)
      throw new ConflictError(
        `Subscription ${row.id} is a ${row.type} subscription; it watches no addresses`,
      );
    const network = networks.find(row.network ?? '');
    if (!network) throw new ConflictError(`Network ${row.network} is no longer configured`);
    return network;
  }

  /** Inserts the addresses not there yet, in one statement; how many were new. */
  async function insertAddresses(tx: Db, id: string, network: string, addresses: string[]): Promise<number> {
    if (addresses.length === 0) return 0;
    const result = (await tx.execute(sql`
      WITH inserted AS (
        INSERT INTO subscription_addresses (subscription_id, network, address, created_at)
        SELECT ${id}::uuid, ${network}, a, ${now().toISOString()}::timestamptz
        -- In key order: each index page is then written once, in turn, not at random (100,000
        -- addresses into PostgreSQL: 620 ms sorted, 1,070-1,720 ms as given).
        FROM (SELECT a FROM unnest(${textArray(addresses)}::text[]) AS a ORDER BY a) AS sorted
        ON CONFLICT DO NOTHING RETURNING 1)
      SELECT count(*)::int AS n FROM inserted`)) as unknown as { rows: { n: number }[] };
    return result.rows[0]!.n;
  }

  /** Deletes those of the addresses that are there, in one statement; how many were. */
  async function deleteAddresses(tx: Db, id: string, addresses: string[]): Promise<number> {
    if (addresses.length === 0) return 0;
    const result = (await tx.execute(sql`
      WITH deleted AS (
        DELETE FROM subscription_addresses
        WHERE subscription_id = ${id}::uuid AND address = ANY(${textArray(addresses)}::text[])
        RETURNING 1)
      SELECT count(*)::int AS n FROM deleted`)) as unknown as { rows: { n: number }[] };
    return result.rows[0]!.n;
  }

  async function insertEndpoint(
    tx: Db,
    values: Omit<
      typeof subscriptions.$inferInsert,
      'id' | 'secret' | 'publicKey' | 'callbackToken' | 'createdAt'
    >,
    callbackToken?: string,
  ): Promise<CreatedSubscription> {
    const id = uuidv7();
    const { secret, publicKey, shown } = newSigningSecret(id, values.signature ?? 'hmac');
    const token = callbackToken ?? crypto.randomBytes(24).toString('base64url');
    await tx.insert(subscriptions).values({
      id,
      ...values,
      secret,
      publicKey,
      callbackToken: envelope.seal(token, tokenContext(id)),
      createdAt: now(),
    });
    return { id, callbackToken: token, ...shown };
  }

  /** A page of a delivery log: the notifications matching `conditions`, newest first, with their attempts. */
  async function logPage(conditions: SQL[], query: PageQuery & LogFilter) {
    const where = [...conditions];
    if (query.state) where.push(eq(notifications.state, query.state));
    if (query.since) where.push(gte(notifications.createdAt, query.since));
    if (query.until) where.push(lt(notifications.createdAt, query.until));
    if (query.cursor) where.push(lt(notifications.id, decodeCursor(query.cursor)));
    const rows = await db
      .select()
      .from(notifications)
      .where(and(...where))
      .orderBy(desc(notifications.id))
      .limit(query.limit + 1)
      .offset(query.offset ?? 0);
    const page = rows.slice(0, query.limit);
    const attempts =
      page.length === 0
        ? []
        : await db
            .select()
            .from(deliveryAttempts)
            .where(
              inArray(
                deliveryAttempts.notificationId,
                page.map((r) => r.id),
              ),
            )
            .orderBy(deliveryAttempts.attemptNumber);
    const byNotification = new Map<string, AttemptView[]>();
    for (const a of attempts) {
      const list = byNotification.get(a.notificationId) ?? [];
      list.push({
        attempt: a.attemptNumber,
        trigger: a.trigger,
        startedAt: a.startedAt.toISOString(),
        durationMs: a.durationMs,
        statusCode: a.statusCode,
        error: a.error,
        response: a.responseBody,
        outcome: a.outcome,
        nextAttemptAt: iso(a.nextAttemptAt),
      });
      byNotification.set(a.notificationId, list);
    }
    return toPage(
      rows,
      query.limit,
      (n) => n.id,
      (n): NotificationView => ({
        id: n.id,
        subscriptionId: n.subscriptionId,
        eventType: n.eventType,
        state: n.state,
        attemptCount: n.attempts,
        nextAttemptAt: n.state === 'pending' ? iso(n.nextAttemptAt) : null,
        lastStatusCode: n.lastStatusCode,
        lastError: n.lastError,
        createdAt: n.createdAt.toISOString(),
        deliveredAt: iso(n.deliveredAt),
        payload: JSON.parse(n.body) as unknown,
        attempts: byNotification.get(n.id) ?? [],
      }),
    );
  }

  return {
    /**
     * Watches an address, or a list of them. With an idempotency key the same request within 24 h
     * answers as the first did (secret included); a live subscription of the same one address and
     * URL is a conflict (lists are not checked: see README, "Address lists").
     */
    async create(
      accountId: string,
      input: CreateSubscriptionInput,
      idempotencyKey?: string,
    ): Promise<{ body: CreatedSubscription; replayed: boolean }> {
      const errors: FieldError[] = [];
      const network = networks.find(input.attr.chain);
      const { address: one, addresses: many } = input.attr;
      if (one !== undefined && many !== undefined)
        errors.push({
          pointer: '#/attr/addresses',
          detail: 'cannot be combined with attr.address; send one address or a list of them',
        });
      else if (one === undefined && many === undefined)
        errors.push({ pointer: '#/attr/address', detail: 'is required (or attr.addresses, a list)' });
      let addresses: string[] = [];
      const invalid = { count: 0 };
      if (!network) {
        errors.push({
          pointer: '#/attr/chain',
          detail: `is not a configured network; use one of ${networks.names().join(', ')}`,
        });
      } else {
        if (one !== undefined && many === undefined)
          addresses = normalizeAll(network, [one], '#/attr/address', errors, invalid);
        else if (many !== undefined)
          addresses = normalizeAll(network, many, '#/attr/addresses', errors, invalid);
        // One address reports its pointer as before: #/attr/address, not #/attr/address/0.
        for (const e of errors) if (e.pointer === '#/attr/address/0') e.pointer = '#/attr/address';
        if (input.mempool === true && network.family !== 'evm') {
          errors.push({
            pointer: '#/mempool',
            detail: `is only available on EVM networks, not ${network.name}`,
          });
        }
        // Elsewhere a notification's amount already includes the fee its payer paid.
        if (input.attr.fees === true && network.family !== 'evm') {
          errors.push({
            pointer: '#/attr/fees',
            detail: `is only available on EVM networks; on ${network.name} a notification's amount already includes the fee`,
          });
        }
      }
      if (errors.length > 0)
        throw invalid.count > 1
          ? invalidAddresses(errors, invalid.count, many?.length ?? 1)
          : new ValidationError('Invalid subscription', errors);
      await checkUrl(input.attr.url, '#/attr/url');
      const net = network!;
      const endpoint = {
        accountId,
        network: net.name,
        confirmations: input.confirmations ?? net.defaultConfirmations,
        mempool: input.mempool ?? net.family === 'evm',
        fees: input.attr.fees === true,
      };
      const single = many === undefined ? addresses[0]! : undefined;
      const change = (id: string): SubscriptionChange =>
        single === undefined
          ? { type: 'upsert', subscription: { id, ...endpoint }, addresses }
          : { type: 'upsert', subscription: { id, ...endpoint, address: single } };
      const insert = async (tx: Db): Promise<CreatedSubscription> => {
        if (single !== undefined) {
          const existing = await findDuplicate(
            tx,
            accountId,
            { network: net.name, address: single },
            input.attr.url,
          );
          if (existing) {
            throw new ConflictError(
              `Subscription ${existing.id} already watches this address on ${net.name} with this url${existing.status === 'active' ? '' : ` (${existing.status}: enable it)`}`,
              { existingId: existing.id },
            );
          }
        }
        const created = await insertEndpoint(
          tx,
          {
            ...endpoint,
            address: single ?? null,
            addressCount: addresses.length,
            type: ADDRESS_TRANSACTION,
            url: input.attr.url,
            ack: input.ack ?? 'status',
            signature: input.signature ?? 'hmac',
          },
          input.callbackToken,
        );
        await insertAddresses(tx, created.id, net.name, addresses);
        await announce(tx, change(created.id), deps.origin, notifyOthers);
        return created;
      };
      const result =
        idempotencyKey === undefined
          ? { body: await db.transaction(insert), replayed: false }
          : await idempotency.run<CreatedSubscription>(
              {
                accountId,
                key: idempotencyKey,
                scope: CREATE_SCOPE,
                // Keyed digest: the body holds the callback token.
                requestHash: envelope.digest(`${CREATE_SCOPE}\n${canonicalJson(input)}`),
              },
              async (tx) => ({ statusCode: 201, body: await insert(tx) }),
            );
      // This process's watchers follow at once; others hear the NOTIFY at commit.
      if (!result.replayed) await deps.onChange?.(change(result.body.id));
      return { body: result.body, replayed: result.replayed };
    },

    /**
     * Adds and removes addresses of an address subscription, all or nothing: every address is
     * validated first, and the bad ones are named. Adding a watched address or removing one not
     * watched changes nothing. A subscription made with `attr.address` becomes a list at its first
     * change (its `attr.address` goes, and with it the one-address duplicate rule).
     */
    async changeAddresses(
      accountId: string,
      id: string,
      input: AddressChangeInput,
    ): Promise<AddressChangeResult> {
      const row = await undeleted(accountId, id);
      const network = addressNetwork(row);
      const addInput = input.add ?? [];
      const removeInput = input.remove ?? [];
      const total = addInput.length + removeInput.length;
      if (total > MAX_ADDRESSES_PER_CALL)
        throw new ValidationError(`${total} addresses in one call`, [
          {
            pointer: '#',
            detail: `holds ${total} addresses; add and remove may hold ${MAX_ADDRESSES_PER_CALL} together`,
          },
        ]);
      const errors: FieldError[] = [];
      const invalid = { count: 0 };
      const add = normalizeAll(network, addInput, '#/add', errors, invalid);
      const remove = normalizeAll(network, removeInput, '#/remove', errors, invalid);
      if (invalid.count > 0) throw invalidAddresses(errors, invalid.count, total);
      const adding = new Set(add);
      const both = removeInput.flatMap((input, i) => {
        const check = normalizeAddress(network.family, input, network.bitcoinChain);
        return check.ok && adding.has(check.address)
          ? [{ pointer: `#/remove/${i}`, detail: 'is also in add; send it in one of them' }]
          : [];
      });
      if (both.length > 0)
        throw new ValidationError('Addresses both added and removed', both.slice(0, MAX_NAMED_ERRORS));
      const change: SubscriptionChange = { type: 'addresses', id, add, remove };
      const result = await db.transaction(async (tx) => {
        // One change of a subscription at a time: counts stay exact and NOTIFYs in commit order.
        const [locked] = await tx
          .select({ deletedAt: subscriptions.deletedAt })
          .from(subscriptions)
          .where(eq(subscriptions.id, id))
          .for('update');
        if (locked?.deletedAt) throw new ConflictError(`Subscription ${id} was deleted meanwhile`);
        const removed = await deleteAddresses(tx, id, remove);
        const added = await insertAddresses(tx, id, network.name, add);
        const [updated] = await tx
          .update(subscriptions)
          .set({
            addressCount: sql`${subscriptions.addressCount} + ${added - removed}`,
            // A change (not a call that changed nothing) makes a one-address subscription a list.
            ...(added + removed > 0 ? { address: null } : {}),
          })
          .where(eq(subscriptions.id, id))
          .returning({ addressCount: subscriptions.addressCount });
        if (added + removed > 0) await announce(tx, change, deps.origin, notifyOthers);
        return { added, removed, addressCount: updated!.addressCount };
      });
      if (result.added + result.removed > 0) await deps.onChange?.(change);
      return result;
    },

    /** The subscription's addresses in ascending order, a page at a time. */
    async listAddresses(
      accountId: string,
      id: string,
      query: PageQuery,
    ): Promise<{ data: WatchedAddressView[]; next_cursor: string | null }> {
      const row = await owned(accountId, id);
      addressNetwork(row);
      const after = query.cursor
        ? decodeCursor(query.cursor, (key) => key.length > 0 && key.length <= 256)
        : undefined;
      const rows = await db
        .select({ address: subscriptionAddresses.address, createdAt: subscriptionAddresses.createdAt })
        .from(subscriptionAddresses)
        .where(
          and(
            eq(subscriptionAddresses.subscriptionId, id),
            after === undefined ? undefined : sql`${subscriptionAddresses.address} > ${after}`,
          ),
        )
        .orderBy(subscriptionAddresses.address)
        .limit(query.limit + 1)
        .offset(query.offset ?? 0);
      return toPage(
        rows,
        query.limit,
        (r) => r.address,
        (r) => ({ address: r.address, createdAt: r.createdAt.toISOString() }),
      );
    },

    /**
     * Whether the subscription watches `address` (normalised for its network first): its entry,
     * or NotFoundError.
     */
    async getWatchedAddress(accountId: string, id: string, address: string): Promise<WatchedAddressView> {
      const row = await owned(accountId, id);
      const network = addressNetwork(row);
      const check = normalizeAddress(network.family, address, network.bitcoinChain);
      if (!check.ok)
        throw new ValidationError('Invalid address', [
          {
            parameter: 'address',
            detail: `${check.reason} (${network.name} expects ${network.addressFormat})`,
          },
        ]);
      const [found] = await db
        .select({ address: subscriptionAddresses.address, createdAt: subscriptionAddresses.createdAt })
        .from(subscriptionAddresses)
        .where(
          and(eq(subscriptionAddresses.subscriptionId, id), eq(subscriptionAddresses.address, check.address)),
        );
      if (!found) throw new NotFoundError(`Subscription ${id} does not watch ${check.address}`);
      return { address: found.address, createdAt: found.createdAt.toISOString() };
    },

    /**
     * The endpoint of a registry's `callback_url`, created in the registry's transaction; it is
     * an ordinary subscription, so its deliveries show in the same log and can be replayed.
     */
    async createRegistryEndpoint(
      tx: Db,
      accountId: string,
      registryId: string,
      url: string,
    ): Promise<CreatedSubscription & { secret: string }> {
      const created = await insertEndpoint(tx, {
        accountId,
        type: REGISTRY_EVENTS,
        registryId,
        url,
        mempool: false,
        confirmations: 0,
        signature: 'hmac',
      });
      // A registry create has no `signature` field: its endpoint signs with HMAC, as it always has.
      if (!('secret' in created)) throw new Error('a registry endpoint was given no HMAC secret');
      return created;
    },

    checkUrl,

    /**
     * Newest first; deleted subscriptions only when asked for by `status`. `chain` is any name of
     * a configured network (an alias finds the subscriptions stored under its canonical name).
     */
    async list(accountId: string, query: PageQuery & { type?: string; status?: string; chain?: string }) {
      const conditions: SQL[] = [eq(subscriptions.accountId, accountId)];
      if (query.chain !== undefined) {
        const network = networks.find(query.chain);
        if (!network)
          throw new ValidationError('Unknown network', [
            {
              parameter: 'chain',
              detail: `is not a configured network; use one of ${networks.names().join(', ')}`,
            },
          ]);
        conditions.push(eq(subscriptions.network, network.name));
      }
      if (query.status === 'deleted') conditions.push(isNotNull(subscriptions.deletedAt));
      else {
        conditions.push(isNull(subscriptions.deletedAt));
        if (query.status) conditions.push(eq(subscriptions.status, query.status));
      }
      if (query.type) conditions.push(eq(subscriptions.type, query.type));
      if (query.cursor) conditions.push(lt(subscriptions.id, decodeCursor(query.cursor)));
      const rows = await db
        .select()
        .from(subscriptions)
        .where(and(...conditions))
        .orderBy(desc(subscriptions.id))
        .limit(query.limit + 1)
        .offset(query.offset ?? 0);
      return toPage(rows, query.limit, (r) => r.id, toView);
    },

    /** Subscriptions of every account by state (active, disabled, deleted), for /metrics. */
    async countByState(): Promise<Record<string, number>> {
      const rows = await db
        .select({
          state: sql<string>`CASE WHEN ${subscriptions.deletedAt} IS NOT NULL THEN 'deleted' ELSE ${subscriptions.status} END`,
          count: sql<number>`count(*)::int`,
        })
        .from(subscriptions)
        .groupBy(sql`1`);
      const counts: Record<string, number> = { active: 0, disabled: 0, deleted: 0 };
      for (const row of rows) counts[row.state] = Number(row.count);
      return counts;
    },

    async get(accountId: string, id: string): Promise<SubscriptionView> {
      return toView(await owned(accountId, id));
    },

    /**
     * Stops watching and delivering; the subscription and its log stay readable. Deleting it
     * again changes nothing.
     */
    async remove(accountId: string, id: string): Promise<void> {
      const row = await owned(accountId, id);
      if (row.deletedAt) return;
      await db.transaction(async (tx) => {
        await tx.update(subscriptions).set({ deletedAt: now() }).where(eq(subscriptions.id, id));
        await announce(tx, { type: 'remove', id }, deps.origin, notifyOthers);
        await tx
          .update(notifications)
          .set({ state: 'failed', nextAttemptAt: null, lastError: 'subscription deleted' })
          .where(and(eq(notifications.subscriptionId, id), eq(notifications.state, 'pending')));
      });
      await deps.onChange?.({ type: 'remove', id });
    },

    /** Re-enables a disabled subscription; its failed notifications can then be recovered. */
    async enable(accountId: string, id: string): Promise<SubscriptionView> {
      await undeleted(accountId, id);
      await db
        .update(subscriptions)
        .set({ status: 'active', disabledReason: null, disabledAt: null, failingSince: null })
        .where(eq(subscriptions.id, id));
      return toView(await owned(accountId, id));
    },

    /**
     * A new signing secret (an ed25519 subscription: a new key pair, of which the public key is
     * answered). Every secret it replaces keeps signing beside it for 24 hours from its own
     * rotation, so receivers still holding any of them verify every webhook meanwhile.
     */
    async rotateSecret(
      accountId: string,
      id: string,
    ): Promise<VerificationKey & { previousSecretExpiresAt: string }> {
      const current = await undeleted(accountId, id);
      // The scheme is fixed at creation, so it can be read before the row is locked.
      const { secret, publicKey, shown } = newSigningSecret(id, current.signature);
      const expires = new Date(now().getTime() + SECRET_OVERLAP_MS);
      await db.transaction(async (tx) => {
        // Rows lock: two rotations at once must not both keep only their own predecessor.
        const [row] = await tx.select().from(subscriptions).where(eq(subscriptions.id, id)).for('update');
        const signing = signingSecrets(row!.previousSecrets);
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

    /** Enqueues a sample notification through the real outbox. */
    async sendTest(accountId: string, id: string): Promise<{ notificationId: string }> {
      const row = await undeleted(accountId, id);
      if (row.status !== 'active') throw new ConflictError('The subscription is disabled; enable it first');
      const notificationId = newNotificationId();
      let payload: Record<string, unknown>;
      if (row.type === REGISTRY_EVENTS) {
        payload = {
          type: 'registry.test',
          id: notificationId,
          subscriptionId: row.id,
          registry: { id: row.registryId },
          test: true,
        };
      } else {
        const network = networks.find(row.network ?? '');
        if (!network) throw new ConflictError(`Network ${row.network} is no longer configured`);
        // A list's sample names one of its addresses (the first in order), as a real one would.
        const [first] =
          row.address === null
            ? await db
                .select({ address: subscriptionAddresses.address })
                .from(subscriptionAddresses)
                .where(eq(subscriptionAddresses.subscriptionId, row.id))
                .orderBy(subscriptionAddresses.address)
                .limit(1)
            : [{ address: row.address }];
        if (!first) throw new ConflictError('The subscription watches no addresses yet; add some first');
        payload = samplePayload(network, first.address, row, notificationId);
      }
      await db.transaction((tx) =>
        enqueueNotifications(tx, [
          {
            id: notificationId,
            accountId,
            subscriptionId: row.id,
            eventType: 'test',
            body: JSON.stringify(payload),
            armedBy: 'test',
          },
        ]),
      );
      return { notificationId };
    },

    /** A subscription's delivery log: newest notifications first, each with its attempts. */
    async notifications(accountId: string, id: string, query: PageQuery & LogFilter) {
      await owned(accountId, id);
      return logPage([eq(notifications.subscriptionId, id)], query);
    },

    /**
     * The account's delivery log across its subscriptions (one of them with `subscriptionId`),
     * newest first. Every row carries its account, so another account's notifications never match.
     */
    async accountNotifications(
      accountId: string,
      query: PageQuery & LogFilter & { subscriptionId?: string },
    ) {
      const conditions: SQL[] = [eq(notifications.accountId, accountId)];
      if (query.subscriptionId) conditions.push(eq(notifications.subscriptionId, query.subscriptionId));
      return logPage(conditions, query);
    },

    /** Delivers one notification again as a new attempt, whatever its state, with a fresh retry schedule. */
    async resend(accountId: string, notificationId: string): Promise<{ id: string; state: string }> {
      const [row] = isUuid(notificationId)
        ? await db
            .select({ id: notifications.id, subscriptionId: notifications.subscriptionId })
            .from(notifications)
            .where(and(eq(notifications.id, notificationId), eq(notifications.accountId, accountId)))
        : [];
      if (!row) throw new NotFoundError(`No notification with id ${notificationId}`);
      const sub = await undeleted(accountId, row.subscriptionId);
      if (sub.status !== 'active') throw new ConflictError('The subscription is disabled; enable it first');
      const rearmed = await db.transaction(async (tx) => {
        // A delivery in flight keeps its claim; resending it now would race with its result.
        const rows = await tx
          .update(notifications)
          .set({
            state: 'pending',
            scheduleStep: 0,
            armedBy: 'resend',
            nextAttemptAt: now(),
            lockedBy: null,
            lockedUntil: null,
          })
          .where(and(eq(notifications.id, row.id), unclaimed))
          .returning({ id: notifications.id });
        if (rows.length > 0) await signalOutbox(tx);
        return rows.length > 0;
      });
      if (!rearmed)
        throw new ConflictError(
          'A delivery of this notification is in progress; try again when it has finished',
        );
      return { id: row.id, state: 'pending' };
    },

    /** Resends every failed notification of the subscription created since `since`. */
    async recover(accountId: string, id: string, since: Date): Promise<{ resent: number }> {
      const sub = await undeleted(accountId, id);
      if (sub.status !== 'active') throw new ConflictError('The subscription is disabled; enable it first');
      const resent = await db.transaction(async (tx) => {
        const rows = await tx
          .update(notifications)
          .set({
            state: 'pending',
            scheduleStep: 0,
            armedBy: 'recover',
            nextAttemptAt: now(),
            lockedBy: null,
            lockedUntil: null,
          })
          .where(
            and(
              eq(notifications.subscriptionId, id),
              eq(notifications.state, 'failed'),
              gte(notifications.createdAt, since),
              unclaimed,
            ),
          )
          .returning({ id: notifications.id });
        if (rows.length > 0) await signalOutbox(tx);
        return rows.length;
      });
      return { resent };
    },
  };
}

export type Subscriptions = ReturnType<typeof createSubscriptions>;
