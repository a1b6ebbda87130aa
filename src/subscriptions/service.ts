import crypto from 'node:crypto';
import { and, desc, eq, gte, inArray, isNotNull, isNull, lt, or, type SQL, sql } from 'drizzle-orm';
import { v7 as uuidv7 } from 'uuid';
import { normalizeAddress } from '../chains/addresses.js';
import type { Network, NetworkCatalog } from '../chains/networks.js';
import { ConflictError, type FieldError, NotFoundError, ValidationError } from '../errors.js';
import { decodeCursor, isUuid, type PageQuery, toPage } from '../http/pagination.js';
import { canonicalJson, type Idempotency } from '../idempotency/service.js';
import { secretContext, tokenContext } from '../notify/dispatcher.js';
import { enqueueNotifications, newNotificationId, signalOutbox } from '../notify/outbox.js';
import { deliveryAttempts, notifications } from '../notify/schema.js';
import { newWebhookSecret } from '../notify/signing.js';
import type { Envelope } from '../secrets/envelope.js';
import type { Db } from '../store/db.js';
import { SUBSCRIPTIONS_CHANNEL, type SubscriptionChange } from './events.js';
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

export interface CreateSubscriptionInput {
  type: typeof ADDRESS_TRANSACTION;
  attr: { address: string; chain: string; url: string };
  mempool?: boolean;
  confirmations?: number;
  ack?: 'status' | '2xx';
  callbackToken?: string;
}

export interface CreatedSubscription {
  id: string;
  /** Standard Webhooks signing secret (whsec_…), shown only now. */
  secret: string;
  /** Sent as `Authorization: Bearer <callbackToken>` with every notification, shown only now. */
  callbackToken: string;
}

export interface SubscriptionView {
  id: string;
  type: string;
  attr: Record<string, string>;
  mempool: boolean;
  confirmations: number;
  ack: string;
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
function samplePayload(network: Network, sub: SubscriptionRow, id: string): Record<string, unknown> {
  const isEvm = network.family === 'evm';
  const oneUnit = network.decimals > 0 ? `0.${'0'.repeat(network.decimals - 1)}1` : '1';
  return {
    address: sub.address,
    txId: SAMPLE_TX_ID[network.family],
    type: 'native',
    blockNumber: 1,
    asset: network.symbol,
    amount: isEvm ? `-${oneUnit}` : oneUnit,
    ...(isEvm ? { mempool: false, counterAddress: '0x000000000000000000000000000000000000dEaD' } : {}),
    id,
    subscriptionId: sub.id,
    chain: network.name,
    watchedAddress: sub.address,
    confirmations: sub.confirmations,
    test: true,
  };
}

/** Tells watchers in every process about a change, when the transaction commits. */
async function announce(tx: Db, change: SubscriptionChange): Promise<void> {
  await tx.execute(sql`SELECT pg_notify(${SUBSCRIPTIONS_CHANNEL}, ${JSON.stringify(change)})`);
}

export function createSubscriptions(deps: {
  db: Db;
  envelope: Envelope;
  idempotency: Idempotency;
  networks: NetworkCatalog;
  urls: UrlChecker;
  /** Called after a change that the watchers' in-memory address index must follow. */
  onChange?: (change: SubscriptionChange) => void;
  now?: () => Date;
}) {
  const { db, envelope, networks, urls, idempotency } = deps;
  const now = deps.now ?? (() => new Date());

  function toView(row: SubscriptionRow): SubscriptionView {
    const attr: Record<string, string> =
      row.type === REGISTRY_EVENTS
        ? { registryId: row.registryId ?? '', url: row.url }
        : { address: row.address ?? '', chain: row.network ?? '', url: row.url };
    return {
      id: row.id,
      type: row.type,
      attr,
      mempool: row.mempool,
      confirmations: row.confirmations,
      ack: row.ack,
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

  function sealSecrets(id: string, secret: string, callbackToken: string) {
    return {
      secret: envelope.seal(secret, secretContext(id)),
      callbackToken: envelope.seal(callbackToken, tokenContext(id)),
    };
  }

  async function insertEndpoint(
    tx: Db,
    values: Omit<typeof subscriptions.$inferInsert, 'id' | 'secret' | 'callbackToken' | 'createdAt'>,
    callbackToken?: string,
  ): Promise<CreatedSubscription> {
    const id = uuidv7();
    const secret = newWebhookSecret();
    const token = callbackToken ?? crypto.randomBytes(24).toString('base64url');
    await tx
      .insert(subscriptions)
      .values({ id, ...values, ...sealSecrets(id, secret, token), createdAt: now() });
    return { id, secret, callbackToken: token };
  }

  return {
    /**
     * Watches an address. With an idempotency key the same request within 24 h answers as the
     * first did (secret included); a live subscription of the same address and URL is a conflict.
     */
    async create(
      accountId: string,
      input: CreateSubscriptionInput,
      idempotencyKey?: string,
    ): Promise<{ body: CreatedSubscription; replayed: boolean }> {
      const errors: FieldError[] = [];
      const network = networks.find(input.attr.chain);
      let address: string | undefined;
      if (!network) {
        errors.push({
          pointer: '#/attr/chain',
          detail: `is not a configured network; use one of ${networks.names().join(', ')}`,
        });
      } else {
        const check = normalizeAddress(network.family, input.attr.address, network.bitcoinChain);
        if (check.ok) address = check.address;
        else
          errors.push({
            pointer: '#/attr/address',
            detail: `${check.reason} (${network.name} expects ${network.addressFormat})`,
          });
        if (input.mempool === true && network.family !== 'evm') {
          errors.push({
            pointer: '#/mempool',
            detail: `is only available on EVM networks, not ${network.name}`,
          });
        }
      }
      if (errors.length > 0) throw new ValidationError('Invalid subscription', errors);
      await checkUrl(input.attr.url, '#/attr/url');
      const net = network!;
      const watched = {
        accountId,
        network: net.name,
        address: address!,
        confirmations: input.confirmations ?? net.defaultConfirmations,
        mempool: input.mempool ?? net.family === 'evm',
      };
      const insert = async (tx: Db): Promise<CreatedSubscription> => {
        const existing = await findDuplicate(tx, accountId, watched, input.attr.url);
        if (existing) {
          throw new ConflictError(
            `Subscription ${existing.id} already watches this address on ${net.name} with this url${existing.status === 'active' ? '' : ` (${existing.status}: enable it)`}`,
            { existingId: existing.id },
          );
        }
        const endpoint = await insertEndpoint(
          tx,
          { ...watched, type: ADDRESS_TRANSACTION, url: input.attr.url, ack: input.ack ?? 'status' },
          input.callbackToken,
        );
        await tx.insert(subscriptionAddresses).values({
          subscriptionId: endpoint.id,
          network: watched.network,
          address: watched.address,
          createdAt: now(),
        });
        await announce(tx, { type: 'upsert', subscription: { id: endpoint.id, ...watched } });
        return endpoint;
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
      if (!result.replayed)
        deps.onChange?.({ type: 'upsert', subscription: { id: result.body.id, ...watched } });
      return { body: result.body, replayed: result.replayed };
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
    ): Promise<CreatedSubscription> {
      return insertEndpoint(tx, {
        accountId,
        type: REGISTRY_EVENTS,
        registryId,
        url,
        mempool: false,
        confirmations: 0,
      });
    },

    checkUrl,

    /** Newest first; deleted subscriptions only when asked for by `status`. */
    async list(accountId: string, query: PageQuery & { type?: string; status?: string }) {
      const conditions: SQL[] = [eq(subscriptions.accountId, accountId)];
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
        await announce(tx, { type: 'remove', id });
        await tx
          .update(notifications)
          .set({ state: 'failed', nextAttemptAt: null, lastError: 'subscription deleted' })
          .where(and(eq(notifications.subscriptionId, id), eq(notifications.state, 'pending')));
      });
      deps.onChange?.({ type: 'remove', id });
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
     * A new signing secret. Every secret it replaces keeps signing beside it for 24 hours from
     * its own rotation, so receivers still holding any of them verify every webhook meanwhile.
     */
    async rotateSecret(
      accountId: string,
      id: string,
    ): Promise<{ secret: string; previousSecretExpiresAt: string }> {
      await undeleted(accountId, id);
      const secret = newWebhookSecret();
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
            secret: envelope.seal(secret, secretContext(id)),
            previousSecrets: [...signing, { secret: row!.secret, expiresAt: expires.toISOString() }],
            secretVersion: sql`${subscriptions.secretVersion} + 1`,
          })
          .where(eq(subscriptions.id, id));
      });
      return { secret, previousSecretExpiresAt: expires.toISOString() };
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
        payload = samplePayload(network, row, notificationId);
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

    /** The delivery log: newest notifications first, each with its attempts. */
    async notifications(accountId: string, id: string, query: PageQuery & { state?: string }) {
      await owned(accountId, id);
      const conditions: SQL[] = [eq(notifications.subscriptionId, id)];
      if (query.state) conditions.push(eq(notifications.state, query.state));
      if (query.cursor) conditions.push(lt(notifications.id, decodeCursor(query.cursor)));
      const rows = await db
        .select()
        .from(notifications)
        .where(and(...conditions))
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
