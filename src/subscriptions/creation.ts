/**
 * Creating subscriptions: a create request validated (its network, addresses and options), its
 * duplicate looked for, its endpoint inserted with a new secret and callback token, and the
 * change announced; and the endpoint a registry's `callback_url` gets (registry/service.ts).
 */
import crypto from 'node:crypto';
import { and, eq, isNull, sql } from 'drizzle-orm';
import { v7 as uuidv7 } from 'uuid';
import type { Network, NetworkCatalog } from '../chains/networks.js';
import { ConflictError, type FieldError, ValidationError } from '../errors.js';
import { canonicalJson } from '../idempotency/service.js';
import { tokenContext } from '../notify/dispatcher.js';
import type { Db } from '../store/db.js';
import { insertAddresses, invalidAddresses, normalizeAll } from './addresses.js';
import { announce } from './announce.js';
import type { SubscriptionsContext } from './context.js';
import { eventFieldsOnAddressCreate, validateEventCreate } from './event-validation.js';
import type { ContractEventSpec, SubscriptionChange } from './events.js';
import {
  ADDRESS_TRANSACTION,
  CONTRACT_LOG_EVENT,
  type CreatedSubscription,
  type CreateSubscriptionInput,
  REGISTRY_EVENTS,
  type SubscriptionRow,
} from './model.js';
import { subscriptions } from './schema.js';
import { newSigningSecret } from './signing-secrets.js';

export const CREATE_SCOPE = 'POST /api/v1/subscription';
/** The first half of the advisory lock that serialises creating one address's subscriptions. */
const CREATE_LOCK_SPACE = 7_461_004;

/** Why a family has no pending notifications (EVM and Bitcoin have them). */
const NO_MEMPOOL: Partial<Record<Network['family'], string>> = {
  algorand: 'Algorand rounds are final within seconds, so nothing waits in a pool to be announced',
  solana: 'Solana has no public mempool: leaders receive transactions directly',
  tron: 'java-tron does not show its pending transactions: a transaction is seen once a block holds it',
};

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

/**
 * Inserts a subscription row with a new signing secret and callback token (the given one, or a
 * random one), both sealed for its id; what its owner is shown, once.
 */
async function insertEndpoint(
  ctx: SubscriptionsContext,
  tx: Db,
  values: Omit<
    typeof subscriptions.$inferInsert,
    'id' | 'secret' | 'publicKey' | 'callbackToken' | 'createdAt'
  >,
  callbackToken?: string,
): Promise<CreatedSubscription> {
  const id = uuidv7();
  const { secret, publicKey, shown } = newSigningSecret(ctx, id, values.signature ?? 'hmac');
  const token = callbackToken ?? crypto.randomBytes(24).toString('base64url');
  await tx.insert(subscriptions).values({
    id,
    ...values,
    secret,
    publicKey,
    callbackToken: ctx.envelope.seal(token, tokenContext(id)),
    createdAt: ctx.now(),
  });
  return { id, callbackToken: token, ...shown };
}

/** What a valid create request inserts: its kind, network, addresses and endpoint options. */
interface CreatePlan {
  type: typeof ADDRESS_TRANSACTION | typeof CONTRACT_LOG_EVENT;
  net: Network;
  /** The addresses watched, or the contracts an event is followed on; normalised, no repeats. */
  addresses: string[];
  /** The one address (or contract) of a subscription made with one, not a list. */
  single: string | undefined;
  mempool: boolean;
  fees: boolean;
  contractEvent?: ContractEventSpec;
}

/**
 * The network of an address create request and its addresses, normalised (repeats dropped);
 * problems are pushed to `errors`.
 */
function validateAddressCreate(
  networks: NetworkCatalog,
  input: CreateSubscriptionInput,
  errors: FieldError[],
  invalid: { count: number },
): CreatePlan | undefined {
  errors.push(...eventFieldsOnAddressCreate(input));
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
  if (!network) {
    errors.push({
      pointer: '#/attr/chain',
      detail: `is not a configured network; use one of ${networks.names().join(', ')}`,
    });
  } else {
    if (one !== undefined && many === undefined)
      addresses = normalizeAll(network, [one], '#/attr/address', errors, invalid);
    else if (many !== undefined) addresses = normalizeAll(network, many, '#/attr/addresses', errors, invalid);
    // One address reports its pointer as before: #/attr/address, not #/attr/address/0.
    for (const e of errors) if (e.pointer === '#/attr/address/0') e.pointer = '#/attr/address';
    const noMempool = NO_MEMPOOL[network.family];
    if (input.mempool === true && noMempool) {
      errors.push({
        pointer: '#/mempool',
        detail: `is only available on EVM and Bitcoin networks, not ${network.name}: ${noMempool}`,
      });
    }
    // Elsewhere a notification's amount already includes the fee its payer paid.
    if (input.attr.fees === true && network.family !== 'evm' && network.family !== 'tron') {
      errors.push({
        pointer: '#/attr/fees',
        detail: `is only available on EVM and Tron networks; on ${network.name} a notification's amount already includes the fee`,
      });
    }
  }
  if (errors.length > 0 || !network) return undefined;
  return {
    type: ADDRESS_TRANSACTION,
    net: network,
    addresses,
    single: many === undefined ? addresses[0]! : undefined,
    // Pending notifications by default where they are the norm (EVM); asked for on Bitcoin.
    mempool: input.mempool ?? network.family === 'evm',
    fees: input.attr.fees === true,
  };
}

/**
 * What a create request inserts, its addresses normalised; otherwise a ValidationError naming
 * every problem of the request at once.
 */
function validateCreate(networks: NetworkCatalog, input: CreateSubscriptionInput): CreatePlan {
  const errors: FieldError[] = [];
  const invalid = { count: 0 };
  let plan: CreatePlan | undefined;
  if (input.type === CONTRACT_LOG_EVENT) {
    const valid = validateEventCreate(networks, input, errors, invalid);
    if (valid)
      plan = {
        type: CONTRACT_LOG_EVENT,
        net: valid.net,
        addresses: valid.contracts,
        single: valid.single,
        mempool: false,
        fees: false,
        contractEvent: valid.spec,
      };
  } else plan = validateAddressCreate(networks, input, errors, invalid);
  if (errors.length > 0 || !plan)
    throw invalid.count > 1
      ? invalidAddresses(errors, invalid.count, input.attr.addresses?.length ?? 1)
      : new ValidationError('Invalid subscription', errors);
  return plan;
}

export function createSubscriptionCreation(ctx: SubscriptionsContext) {
  const { db, envelope, networks, urls, idempotency } = ctx;

  async function checkUrl(url: string, pointer: string): Promise<void> {
    try {
      await urls.checkUrl(url);
    } catch (err) {
      throw new ValidationError('Invalid callback URL', [{ pointer, detail: (err as Error).message }]);
    }
  }

  return {
    /**
     * Watches an address, or a list of them, or follows a contract event. With an idempotency key
     * the same request within 24 h answers as the first did (secret included); a live subscription
     * of the same one address and URL is a conflict (lists and events are not checked: see
     * docs/subscriptions.md, "Address lists").
     */
    async create(
      accountId: string,
      input: CreateSubscriptionInput,
      idempotencyKey?: string,
    ): Promise<{ body: CreatedSubscription; replayed: boolean }> {
      const plan = validateCreate(networks, input);
      const { net, addresses, single } = plan;
      await checkUrl(input.attr.url, '#/attr/url');
      const endpoint = {
        accountId,
        network: net.name,
        confirmations: input.confirmations ?? net.defaultConfirmations,
        mempool: plan.mempool,
        fees: plan.fees,
        ...(plan.contractEvent ? { contractEvent: plan.contractEvent } : {}),
      };
      const change = (id: string): SubscriptionChange =>
        single === undefined
          ? { type: 'upsert', subscription: { id, ...endpoint }, addresses }
          : { type: 'upsert', subscription: { id, ...endpoint, address: single } };
      const insert = async (tx: Db): Promise<CreatedSubscription> => {
        // One address watched twice to one URL is a mistake; an event may well be followed with
        // two filters, or twice while a receiver moves: not checked.
        if (single !== undefined && plan.type === ADDRESS_TRANSACTION) {
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
          ctx,
          tx,
          {
            ...endpoint,
            address: single ?? null,
            addressCount: addresses.length,
            type: plan.type,
            url: input.attr.url,
            ack: input.ack ?? 'status',
            signature: input.signature ?? 'hmac',
          },
          input.callbackToken,
        );
        await insertAddresses(ctx, tx, created.id, net.name, addresses);
        await announce(tx, change(created.id), ctx.origin, ctx.notifyOthers);
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
      if (!result.replayed) await ctx.onChange?.(change(result.body.id));
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
    ): Promise<CreatedSubscription & { secret: string }> {
      const created = await insertEndpoint(ctx, tx, {
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
  };
}
