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
import {
  ADDRESS_LIST_BODY_LIMIT,
  AddressList,
  CreateBody,
  Created,
  Id,
  LogFilterQuery,
  NextCursor,
  Notification,
  PublicKey,
  Secret,
  Subscription,
  WatchedAddress,
} from './route-schemas.js';
import {
  ADDRESS_TRANSACTION,
  CONTRACT_LOG_EVENT,
  type CreateSubscriptionInput,
  type LogFilter,
  REGISTRY_EVENTS,
  type Subscriptions,
} from './service.js';

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
