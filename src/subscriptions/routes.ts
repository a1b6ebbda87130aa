import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { type FieldError, ValidationError } from '../errors.js';
import { pageQuery } from '../http-kit/pagination.js';
import { type RateLimit, routeRateLimit } from '../http-kit/rate-limit.js';
import {
  bodyProblemResponses,
  IdempotencyKeyHeader,
  PaginationQuery,
  problemResponses,
  TatumPaginationQuery,
} from '../http-kit/schemas.js';
import { parseIdempotencyKey } from '../idempotency/service.js';
import { SIGNATURE_SCHEMES } from '../notify/signing.js';
import {
  ADDRESS_TRANSACTION,
  CONTRACT_LOG_EVENT,
  type CreateSubscriptionInput,
  type LogFilter,
  MAX_ADDRESSES_PER_CALL,
  REGISTRY_EVENTS,
  type Subscriptions,
} from './service.js';

const Id = Type.Object({ id: Type.String({ format: 'uuid' }) });

/**
 * Bodies of the routes that take address lists: 100,000 addresses of up to 128 characters, quoted
 * and separated, are ~13 MB, past the default limit for other routes (LEDGERHOOK_BODY_LIMIT, 1 MB).
 */
export const ADDRESS_LIST_BODY_LIMIT = 16 * 1024 * 1024;

const Address = Type.String({
  minLength: 1,
  maxLength: 128,
  description: 'Validated and normalised per chain',
});
const AddressList = (description: string) =>
  Type.Array(Address, { maxItems: MAX_ADDRESSES_PER_CALL, description });

const WatchedAddress = Type.Object({
  address: Type.String({ description: 'As stored: normalised for the network (EIP-55 on EVM networks)' }),
  createdAt: Type.String({ format: 'date-time', description: 'When it was added' }),
});

const SignatureScheme = Type.Enum([...SIGNATURE_SCHEMES], {
  type: 'string',
  description:
    "How deliveries are signed (Standard Webhooks). hmac (default): `v1` HMAC-SHA256 signatures under a `whsec_` secret that is shown once. ed25519: `v1a` Ed25519 signatures, verified with the subscription's public key (`whpk_`, shown on every GET); the private key never leaves the service, so a receiver holds nothing that could forge a webhook. Chosen at creation; it cannot be changed",
});
const PUBLIC_KEY_DESCRIPTION =
  'ed25519 only: `whpk_` + base64 of the 32-byte Ed25519 public key that verifies the `v1a` entries of `webhook-signature` (over `webhook-id.webhook-timestamp.body`). Public: shown on every GET; it changes only by rotate-secret';
const PublicKey = Type.String({ pattern: '^whpk_[A-Za-z0-9+/]{43}=$', description: PUBLIC_KEY_DESCRIPTION });

/** A JSON ABI fragment of an event, as in a compiler's ABI array (checked further by viem). */
const AbiEventFragment = Type.Object(
  {},
  {
    additionalProperties: true,
    description:
      'A JSON ABI fragment of an event: {"type": "event", "name", "inputs": [{"name", "type", "indexed", "components"?}], "anonymous"?}',
  },
);

const CreateBody = Type.Object(
  {
    type: Type.Enum([ADDRESS_TRANSACTION, CONTRACT_LOG_EVENT], {
      type: 'string',
      description:
        'ADDRESS_TRANSACTION: value moving to or from addresses. CONTRACT_LOG_EVENT (EVM): an event emitted by contracts, decoded',
    }),
    attr: Type.Object(
      {
        address: Type.Optional(
          Type.String({
            minLength: 1,
            maxLength: 128,
            description: 'One address, validated and normalised per chain. Send this or `addresses`',
          }),
        ),
        addresses: Type.Optional(
          AddressList(
            'A list of addresses of the chain (up to 100,000; more through /subscription/{id}/addresses), instead of `address`. Repeats are watched once. May be empty',
          ),
        ),
        chain: Type.String({
          minLength: 1,
          maxLength: 32,
          description:
            'A configured network: ETH, BSC, POL, GLRM, BASE, ARB, OP, AVAX, SEPOLIA, ALGO, BTC, SOL…',
        }),
        url: Type.String({
          minLength: 1,
          maxLength: 2048,
          description: 'http(s) endpoint that receives the notifications',
        }),
        fees: Type.Optional(
          Type.Boolean({
            description:
              'EVM only (default false): also a `type: "fee"` notification for each mined transaction a watched address sent, `failed: true` when it reverted (Tatum’s PAID_FEE and OUTGOING_FAILED_TX). Elsewhere a notification’s amount already includes the fee',
          }),
        ),
        event: Type.Optional(
          Type.Union([Type.String({ minLength: 1, maxLength: 4096 }), AbiEventFragment], {
            description:
              'CONTRACT_LOG_EVENT (required): the event as a human-readable ABI signature (`event Transfer(address indexed from, address indexed to, uint256 value)`), a JSON ABI fragment, or a bare topic0 (`0x` + 64 hex digits: nothing decoded, the body carries the raw topics and data)',
          }),
        ),
        contractAddress: Type.Optional(
          Type.String({
            minLength: 1,
            maxLength: 128,
            description:
              'CONTRACT_LOG_EVENT: the one contract whose events are followed. Or `addresses` (a list of contracts), or neither: any contract that emits the event',
          }),
        ),
        filter: Type.Optional(
          Type.Object(
            {},
            {
              additionalProperties: true,
              maxProperties: 4,
              description:
                'CONTRACT_LOG_EVENT with an ABI: equality on indexed arguments by name (an event has at most four indexed ones; at most 1,000 values each, 256 KiB in all), each a value or a list of values (any of them), given plain: an address, a decimal string for integers, true/false, hex for bytes, the string itself (indexed string, bytes and arrays are compared by their keccak-256 hash, as the topic holds them)',
            },
          ),
        ),
      },
      { additionalProperties: false },
    ),
    mempool: Type.Optional(
      Type.Boolean({
        description:
          'Pending notifications (`mempool: true`, no `blockNumber`) before the mined one, withdrawn with `dropped: true` if the transaction can no longer be mined. Address subscriptions on EVM networks (default true) and Bitcoin networks (default false); refused on Algorand (rounds are final within seconds) and Solana (no public mempool). Contract events come from mined blocks',
      }),
    ),
    confirmations: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1000, description: 'Default 1 (EVM), 2 (UTXO)' }),
    ),
    ack: Type.Optional(
      Type.Enum(['status', '2xx'], {
        type: 'string',
        description: 'status: 2xx with {"status":"success"}; 2xx: any 2xx',
      }),
    ),
    callbackToken: Type.Optional(Type.String({ minLength: 8, maxLength: 512, pattern: '^[\\x21-\\x7e]+$' })),
    signature: Type.Optional(SignatureScheme),
  },
  { additionalProperties: false },
);

const Subscription = Type.Object({
  id: Type.String({ format: 'uuid' }),
  type: Type.String({ enum: [ADDRESS_TRANSACTION, CONTRACT_LOG_EVENT, REGISTRY_EVENTS] }),
  attr: Type.Object(
    {
      address: Type.Optional(
        Type.String({ description: 'The one address of a subscription made with `attr.address`' }),
      ),
      addressCount: Type.Optional(Type.Integer({ description: 'Addresses watched (ADDRESS_TRANSACTION)' })),
      chain: Type.Optional(Type.String()),
      url: Type.String(),
      registryId: Type.Optional(Type.String({ description: 'REGISTRY_EVENTS only' })),
      fees: Type.Optional(
        Type.Boolean({ description: 'Present (true) when fee notifications were asked for' }),
      ),
      event: Type.Optional(
        Type.Union([Type.String(), AbiEventFragment], {
          description:
            'CONTRACT_LOG_EVENT: the event as viem parsed it (a JSON ABI fragment), or the bare topic0 it was made with',
        }),
      ),
      signature: Type.Optional(
        Type.String({
          description: 'CONTRACT_LOG_EVENT with an ABI: canonical, `Transfer(address,address,uint256)`',
        }),
      ),
      topic0: Type.Optional(
        Type.Union([Type.String(), Type.Null()], {
          description: 'CONTRACT_LOG_EVENT: the event’s topic0; null for an anonymous event',
        }),
      ),
      contractAddress: Type.Optional(
        Type.String({
          description: 'CONTRACT_LOG_EVENT made with one contract, never changed through /addresses',
        }),
      ),
      anyContract: Type.Optional(
        Type.Boolean({
          description: 'CONTRACT_LOG_EVENT: present (true) when any contract’s event is followed',
        }),
      ),
      filter: Type.Optional(
        Type.Object(
          {},
          { additionalProperties: true, description: 'CONTRACT_LOG_EVENT: the filter as given' },
        ),
      ),
    },
    {
      description:
        'ADDRESS_TRANSACTION: {chain, url, addressCount}, with `address` when made with one address and never changed through /addresses; CONTRACT_LOG_EVENT: {chain, url, event, signature, topic0, filter} and `contractAddress`, `addressCount` (a list of contracts) or `anyContract`; REGISTRY_EVENTS: {registryId, url}',
    },
  ),
  mempool: Type.Boolean(),
  confirmations: Type.Integer(),
  ack: Type.String(),
  signature: Type.String({ enum: [...SIGNATURE_SCHEMES], description: 'hmac (`v1`) or ed25519 (`v1a`)' }),
  publicKey: Type.Optional(PublicKey),
  status: Type.String({
    enum: ['active', 'disabled', 'deleted'],
    description: 'deleted: no longer watched or delivered; it and its log stay readable',
  }),
  disabledReason: Type.Union([Type.String(), Type.Null()]),
  disabledAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  previousSecretExpiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'Set while rotated-out secrets still sign beside the new one: when the last of them stops',
  }),
  createdAt: Type.String({ format: 'date-time' }),
  deletedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

const Attempt = Type.Object({
  attempt: Type.Integer(),
  trigger: Type.String({ description: 'scheduled, retry, resend, recover or test' }),
  startedAt: Type.String({ format: 'date-time' }),
  durationMs: Type.Integer(),
  statusCode: Type.Union([Type.Integer(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
  response: Type.Union([Type.String(), Type.Null()], { description: 'First 20 KB of the response body' }),
  outcome: Type.String({ enum: ['delivered', 'retry', 'failed'] }),
  nextAttemptAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

const Notification = Type.Object({
  id: Type.String({ format: 'uuid', description: 'Also the webhook-id header and the body id' }),
  subscriptionId: Type.String({ format: 'uuid' }),
  eventType: Type.String(),
  state: Type.String({ enum: ['pending', 'delivered', 'failed'] }),
  attemptCount: Type.Integer(),
  nextAttemptAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  lastStatusCode: Type.Union([Type.Integer(), Type.Null()]),
  lastError: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.String({ format: 'date-time' }),
  deliveredAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  payload: Type.Unknown({ description: 'The JSON body delivered' }),
  attempts: Type.Array(Attempt),
});

const NextCursor = Type.Union([Type.String(), Type.Null()]);
const Secret = Type.String({
  description: 'hmac only: the Standard Webhooks signing secret (whsec_…); shown only once',
});
const Created = Type.Object({
  id: Type.String({ format: 'uuid' }),
  secret: Type.Optional(Secret),
  publicKey: Type.Optional(PublicKey),
  callbackToken: Type.String({
    description: 'Sent as Authorization: Bearer <callbackToken>; shown only once',
  }),
});

const NotificationState = Type.Enum(['pending', 'delivered', 'failed'], { type: 'string' });

/** The filters both delivery logs take: a state and a window of creation times. */
const LogFilterQuery = {
  state: Type.Optional(NotificationState),
  since: Type.Optional(
    Type.String({
      format: 'date-time',
      description: 'Only notifications created at or after this time (ISO 8601 with a time zone)',
    }),
  ),
  until: Type.Optional(
    Type.String({
      format: 'date-time',
      description: 'Only notifications created before this time (ISO 8601 with a time zone)',
    }),
  ),
};

/**
 * An ISO 8601 date-time the schema admitted as a Date; what the format allows but a Date cannot
 * hold (a leap second, 23:59:60) is refused the same way.
 */
function toDate(value: string, at: Omit<FieldError, 'detail'>): Date {
  const date = new Date(value);
  if (Number.isNaN(date.getTime()))
    throw new ValidationError('Invalid date-time', [{ ...at, detail: 'must be an ISO 8601 date-time' }]);
  return date;
}

/** The state and time window a delivery log was asked for; an empty window is refused. */
function logFilter(query: { state?: string; since?: string; until?: string }): LogFilter {
  const since = query.since === undefined ? undefined : toDate(query.since, { parameter: 'since' });
  const until = query.until === undefined ? undefined : toDate(query.until, { parameter: 'until' });
  if (since && until && until <= since)
    throw new ValidationError('Empty time window', [
      { parameter: 'until', detail: 'must be later than since' },
    ]);
  return { state: query.state, since, until };
}

const tags = ['subscriptions'];

/**
 * Every route of subscriptions and their delivery logs, a group at a time. The OpenAPI document
 * lists paths in the order they are registered: keep it.
 */
export function registerSubscriptionRoutes(
  app: FastifyInstance,
  subscriptions: Subscriptions,
  options: { testRateLimit?: RateLimit } = {},
): void {
  registerCrudRoutes(app, subscriptions);
  registerActionRoutes(app, subscriptions, options);
  registerDeliveryLogRoutes(app, subscriptions);
  registerAddressListRoutes(app, subscriptions);
  registerRedeliveryRoutes(app, subscriptions);
}

/** Create, list, read and delete subscriptions. */
function registerCrudRoutes(app: FastifyInstance, subscriptions: Subscriptions): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.post(
    '/subscription',
    {
      schema: {
        tags,
        operationId: 'createSubscription',
        summary: 'Watch an address (Tatum-compatible request) or a list of addresses',
        description:
          'Send `attr.address` (one address, as Tatum) or `attr.addresses` (a list of up to 100,000; grow or shrink it through `/subscription/{id}/addresses`), not both. Invalid addresses are named by pointer (the first 100) and nothing is created. The callback URL must be http(s) and resolve to public addresses. The response has the `secret` (signature hmac, the default; shown only once) or the `publicKey` (signature ed25519), and the `callbackToken` (shown only once). A live subscription of the same one address, chain and url is 409 naming it (`existingId`); lists are not checked for overlap. Send `Idempotency-Key` to make retries safe. Bodies up to 16 MB.',
        headers: IdempotencyKeyHeader,
        body: CreateBody,
        response: { 201: Created, ...bodyProblemResponses(409) },
      },
      bodyLimit: ADDRESS_LIST_BODY_LIMIT,
    },
    async (request, reply) => {
      const { body, replayed } = await subscriptions.create(
        request.principal.accountId,
        request.body as CreateSubscriptionInput,
        parseIdempotencyKey(request.headers['idempotency-key']),
      );
      if (replayed) reply.header('Idempotent-Replayed', 'true');
      return reply.code(201).send(body);
    },
  );

  r.get(
    '/subscription',
    {
      schema: {
        tags,
        operationId: 'listSubscriptions',
        summary: 'List subscriptions, newest first',
        description:
          'Deleted subscriptions are listed only with `status=deleted`. `chain` narrows the list to one network (an unknown one is 400 listing the configured networks).',
        querystring: Type.Object(
          {
            type: Type.Optional(
              Type.Enum([ADDRESS_TRANSACTION, CONTRACT_LOG_EVENT, REGISTRY_EVENTS], { type: 'string' }),
            ),
            status: Type.Optional(Type.Enum(['active', 'disabled', 'deleted'], { type: 'string' })),
            chain: Type.Optional(
              Type.String({
                minLength: 1,
                maxLength: 32,
                description: 'Only subscriptions of this network (any of its names: GLMR finds GLRM)',
              }),
            ),
            ...PaginationQuery,
            ...TatumPaginationQuery,
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({ data: Type.Array(Subscription), next_cursor: NextCursor }),
          ...problemResponses(400, 401),
        },
      },
    },
    async (request) =>
      subscriptions.list(request.principal.accountId, {
        ...pageQuery(request.query),
        type: request.query.type,
        status: request.query.status,
        chain: request.query.chain,
      }),
  );

  r.get(
    '/subscription/:id',
    {
      schema: {
        tags,
        operationId: 'getSubscription',
        summary: 'Get a subscription (a deleted one too, with status deleted)',
        params: Id,
        response: { 200: Subscription, ...problemResponses(400, 401, 404) },
      },
    },
    async (request) => subscriptions.get(request.principal.accountId, request.params.id),
  );

  r.delete(
    '/subscription/:id',
    {
      schema: {
        tags,
        operationId: 'deleteSubscription',
        summary: 'Stop watching; pending notifications fail; it and its log stay readable',
        description: 'Deleting a deleted subscription again changes nothing (204).',
        params: Id,
        response: { 204: Type.Null({ description: 'Deleted' }), ...bodyProblemResponses(404) },
      },
    },
    async (request, reply) => {
      await subscriptions.remove(request.principal.accountId, request.params.id);
      return reply.code(204).send(null);
    },
  );
}

/** What is done to a subscription: enable it, rotate its secret, send it a test notification. */
function registerActionRoutes(
  app: FastifyInstance,
  subscriptions: Subscriptions,
  options: { testRateLimit?: RateLimit },
): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.post(
    '/subscription/:id/enable',
    {
      schema: {
        tags,
        operationId: 'enableSubscription',
        summary: 'Re-enable a disabled subscription',
        params: Id,
        response: { 200: Subscription, ...bodyProblemResponses(404, 409) },
      },
    },
    async (request) => subscriptions.enable(request.principal.accountId, request.params.id),
  );

  r.post(
    '/subscription/:id/rotate-secret',
    {
      schema: {
        tags,
        operationId: 'rotateSubscriptionSecret',
        summary: 'Issue a new signing secret; the ones it replaces keep signing beside it for 24 h',
        description:
          'An hmac subscription gets a new `secret` (shown once), an ed25519 one a new key pair, of which the new `publicKey` is answered. Every secret (key) rotated out in the last 24 hours keeps signing (one signature each in `webhook-signature`: `v1` entries for hmac, `v1a` for ed25519), up to 10 at a time; an 11th rotation within the overlap is 409.',
        params: Id,
        response: {
          200: Type.Object({
            secret: Type.Optional(Secret),
            publicKey: Type.Optional(PublicKey),
            previousSecretExpiresAt: Type.String({ format: 'date-time' }),
          }),
          ...bodyProblemResponses(404, 409),
        },
      },
    },
    async (request) => subscriptions.rotateSecret(request.principal.accountId, request.params.id),
  );

  r.post(
    '/subscription/:id/test',
    {
      schema: {
        tags,
        operationId: 'sendTestNotification',
        summary: 'Send a sample notification through the real outbox',
        description:
          'The notification is marked `"test": true` and sent with `Ledgerhook-Event-Type: test`. Limited per account (LEDGERHOOK_TEST_RATE_LIMIT, 60 a minute by default).',
        params: Id,
        response: {
          202: Type.Object({ notificationId: Type.String({ format: 'uuid' }) }),
          ...bodyProblemResponses(404, 409),
        },
      },
      config: routeRateLimit(options.testRateLimit),
    },
    async (request, reply) =>
      reply.code(202).send(await subscriptions.sendTest(request.principal.accountId, request.params.id)),
  );
}

/** The delivery log of a subscription, and of every subscription of the account. */
function registerDeliveryLogRoutes(app: FastifyInstance, subscriptions: Subscriptions): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.get(
    '/subscription/:id/notifications',
    {
      schema: {
        tags,
        operationId: 'listSubscriptionNotifications',
        summary: 'Delivery log: notifications, newest first, with every attempt',
        description:
          'Narrow it by `state` and by creation time (`since` inclusive, `until` exclusive). `GET /notification` is the same log across every subscription of the account.',
        params: Id,
        querystring: Type.Object(
          {
            ...LogFilterQuery,
            ...PaginationQuery,
            ...TatumPaginationQuery,
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({ data: Type.Array(Notification), next_cursor: NextCursor }),
          ...problemResponses(400, 401, 404),
        },
      },
    },
    async (request) =>
      subscriptions.notifications(request.principal.accountId, request.params.id, {
        ...pageQuery(request.query),
        ...logFilter(request.query),
      }),
  );

  r.get(
    '/notification',
    {
      schema: {
        tags,
        operationId: 'listNotifications',
        summary: "The account's delivery log: notifications of all its subscriptions, newest first",
        description:
          "The same items as a subscription's log (`GET /subscription/{id}/notifications`), across every subscription of the account, deleted ones included. Narrow it by `state`, by creation time (`since` inclusive, `until` exclusive) and to one `subscription`; a subscription of another account, or none, lists nothing.",
        querystring: Type.Object(
          {
            ...LogFilterQuery,
            subscription: Type.Optional(
              Type.String({ format: 'uuid', description: 'Only the notifications of this subscription' }),
            ),
            ...PaginationQuery,
            ...TatumPaginationQuery,
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({ data: Type.Array(Notification), next_cursor: NextCursor }),
          ...problemResponses(400, 401),
        },
      },
    },
    async (request) =>
      subscriptions.accountNotifications(request.principal.accountId, {
        ...pageQuery(request.query),
        ...logFilter(request.query),
        subscriptionId: request.query.subscription,
      }),
  );
}

/** The addresses of an address subscription: changed, listed, looked up. */
function registerAddressListRoutes(app: FastifyInstance, subscriptions: Subscriptions): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.post(
    '/subscription/:id/addresses',
    {
      schema: {
        tags,
        operationId: 'changeSubscriptionAddresses',
        summary: 'Add and remove watched addresses, all or nothing',
        description:
          "Up to 100,000 addresses in `add` and `remove` together, validated and normalised for the subscription's chain. One invalid address and nothing changes: the 400 names them by pointer (the first 100) and says how many there were. Adding a watched address or removing one not watched changes nothing; repeats count once; an address in both lists is 400. In force for the next block in every process. A subscription made with `attr.address` becomes a list at its first change. Deleted: 409; REGISTRY_EVENTS: 409. Bodies up to 16 MB.",
        params: Id,
        body: Type.Object(
          {
            add: Type.Optional(AddressList('Addresses to watch')),
            remove: Type.Optional(AddressList('Addresses to stop watching')),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            added: Type.Integer({ description: 'Addresses this call started watching' }),
            removed: Type.Integer({ description: 'Addresses this call stopped watching' }),
            addressCount: Type.Integer({ description: 'Addresses watched now' }),
          }),
          ...bodyProblemResponses(404, 409),
        },
      },
      bodyLimit: ADDRESS_LIST_BODY_LIMIT,
    },
    async (request) =>
      subscriptions.changeAddresses(request.principal.accountId, request.params.id, request.body),
  );

  r.get(
    '/subscription/:id/addresses',
    {
      schema: {
        tags,
        operationId: 'listSubscriptionAddresses',
        summary: 'The watched addresses, in ascending order',
        params: Id,
        querystring: Type.Object(
          { ...PaginationQuery, ...TatumPaginationQuery },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({ data: Type.Array(WatchedAddress), next_cursor: NextCursor }),
          ...problemResponses(400, 401, 404, 409),
        },
      },
    },
    async (request) =>
      subscriptions.listAddresses(request.principal.accountId, request.params.id, pageQuery(request.query)),
  );

  r.get(
    '/subscription/:id/addresses/:address',
    {
      schema: {
        tags,
        operationId: 'getSubscriptionAddress',
        summary: 'Whether the subscription watches an address: 200 if it does, 404 if not',
        description:
          'The address is normalised for the chain first (any case of an EVM address), so the 200 gives its stored form. 404 when it is not watched (or there is no such subscription; the problem detail says which); 400 when it is not an address of the chain.',
        params: Type.Object({
          id: Type.String({ format: 'uuid' }),
          address: Type.String({ minLength: 1, maxLength: 128 }),
        }),
        response: { 200: WatchedAddress, ...problemResponses(400, 401, 404, 409) },
      },
    },
    async (request) =>
      subscriptions.getWatchedAddress(request.principal.accountId, request.params.id, request.params.address),
  );
}

/** Notifications delivered again: every failed one of a subscription since a time, or one. */
function registerRedeliveryRoutes(app: FastifyInstance, subscriptions: Subscriptions): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.post(
    '/subscription/:id/recover',
    {
      schema: {
        tags,
        operationId: 'recoverFailedNotifications',
        summary: 'Resend every failed notification created since a time',
        params: Id,
        body: Type.Object({ since: Type.String({ format: 'date-time' }) }, { additionalProperties: false }),
        response: { 202: Type.Object({ resent: Type.Integer() }), ...bodyProblemResponses(404, 409) },
      },
    },
    async (request, reply) => {
      const since = toDate(request.body.since, { pointer: '#/since' });
      return reply
        .code(202)
        .send(await subscriptions.recover(request.principal.accountId, request.params.id, since));
    },
  );

  r.post(
    '/notification/:id/resend',
    {
      schema: {
        tags,
        operationId: 'resendNotification',
        summary: 'Deliver a notification again as a new attempt',
        params: Id,
        response: {
          202: Type.Object({ id: Type.String({ format: 'uuid' }), state: Type.String() }),
          ...bodyProblemResponses(404, 409),
        },
      },
    },
    async (request, reply) =>
      reply.code(202).send(await subscriptions.resend(request.principal.accountId, request.params.id)),
  );
}
