import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { ValidationError } from '../errors.js';
import { PaginationQuery, problemResponses } from '../http/schemas.js';
import {
  ADDRESS_TRANSACTION,
  type CreateSubscriptionInput,
  REGISTRY_EVENTS,
  type Subscriptions,
} from './service.js';

const Id = Type.Object({ id: Type.String({ format: 'uuid' }) });

const CreateBody = Type.Object(
  {
    type: Type.Enum([ADDRESS_TRANSACTION], { type: 'string' }),
    attr: Type.Object(
      {
        address: Type.String({
          minLength: 1,
          maxLength: 128,
          description: 'Validated and normalised per chain',
        }),
        chain: Type.String({
          minLength: 1,
          maxLength: 32,
          description: 'A configured network: ETH, BSC, POL, GLRM, ALGO, BTC, SOL…',
        }),
        url: Type.String({
          minLength: 1,
          maxLength: 2048,
          description: 'http(s) endpoint that receives the notifications',
        }),
      },
      { additionalProperties: false },
    ),
    mempool: Type.Optional(Type.Boolean({ description: 'EVM only; default true there' })),
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
  },
  { additionalProperties: false },
);

const Subscription = Type.Object({
  id: Type.String({ format: 'uuid' }),
  type: Type.String({ enum: [ADDRESS_TRANSACTION, REGISTRY_EVENTS] }),
  attr: Type.Record(Type.String(), Type.String(), {
    description: '{address, chain, url} or, for REGISTRY_EVENTS, {registryId, url}',
  }),
  mempool: Type.Boolean(),
  confirmations: Type.Integer(),
  ack: Type.String(),
  status: Type.String({ enum: ['active', 'disabled'] }),
  disabledReason: Type.Union([Type.String(), Type.Null()]),
  disabledAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  previousSecretExpiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'Set while a rotated-out secret still signs beside the new one',
  }),
  createdAt: Type.String({ format: 'date-time' }),
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
const Created = Type.Object({
  id: Type.String({ format: 'uuid' }),
  secret: Type.String({ description: 'Standard Webhooks signing secret (whsec_…); shown only once' }),
  callbackToken: Type.String({
    description: 'Sent as Authorization: Bearer <callbackToken>; shown only once',
  }),
});

export function registerSubscriptionRoutes(app: FastifyInstance, subscriptions: Subscriptions): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['subscriptions'];

  r.post(
    '/subscription',
    {
      schema: {
        tags,
        summary: 'Watch an address (Tatum-compatible request)',
        description:
          'The callback URL must be http(s) and resolve to public addresses. The `secret` and `callbackToken` of the response are shown only once.',
        body: CreateBody,
        response: { 201: Created, ...problemResponses(400, 401, 413, 415) },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send(
          await subscriptions.create(request.principal.accountId, request.body as CreateSubscriptionInput),
        ),
  );

  r.get(
    '/subscription',
    {
      schema: {
        tags,
        summary: 'List subscriptions, newest first',
        querystring: Type.Object(
          {
            type: Type.Optional(Type.Enum([ADDRESS_TRANSACTION, REGISTRY_EVENTS], { type: 'string' })),
            ...PaginationQuery,
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
        limit: request.query.limit ?? 20,
        cursor: request.query.cursor,
        type: request.query.type,
      }),
  );

  r.get(
    '/subscription/:id',
    {
      schema: {
        tags,
        summary: 'Get a subscription',
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
        summary: 'Stop watching; pending notifications fail, the log stays',
        params: Id,
        response: { 204: Type.Null({ description: 'Deleted' }), ...problemResponses(400, 401, 404) },
      },
    },
    async (request, reply) => {
      await subscriptions.remove(request.principal.accountId, request.params.id);
      return reply.code(204).send(null);
    },
  );

  r.post(
    '/subscription/:id/enable',
    {
      schema: {
        tags,
        summary: 'Re-enable a disabled subscription',
        params: Id,
        response: { 200: Subscription, ...problemResponses(400, 401, 404) },
      },
    },
    async (request) => subscriptions.enable(request.principal.accountId, request.params.id),
  );

  r.post(
    '/subscription/:id/rotate-secret',
    {
      schema: {
        tags,
        summary: 'Issue a new signing secret; the old one keeps signing beside it for 24 h',
        params: Id,
        response: {
          200: Type.Object({
            secret: Type.String(),
            previousSecretExpiresAt: Type.String({ format: 'date-time' }),
          }),
          ...problemResponses(400, 401, 404),
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
        summary: 'Send a sample notification through the real outbox',
        params: Id,
        response: {
          202: Type.Object({ notificationId: Type.String({ format: 'uuid' }) }),
          ...problemResponses(400, 401, 404, 409),
        },
      },
    },
    async (request, reply) =>
      reply.code(202).send(await subscriptions.sendTest(request.principal.accountId, request.params.id)),
  );

  r.get(
    '/subscription/:id/notifications',
    {
      schema: {
        tags,
        summary: 'Delivery log: notifications, newest first, with every attempt',
        params: Id,
        querystring: Type.Object(
          {
            state: Type.Optional(Type.Enum(['pending', 'delivered', 'failed'], { type: 'string' })),
            ...PaginationQuery,
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
        limit: request.query.limit ?? 20,
        cursor: request.query.cursor,
        state: request.query.state,
      }),
  );

  r.post(
    '/subscription/:id/recover',
    {
      schema: {
        tags,
        summary: 'Resend every failed notification created since a time',
        params: Id,
        body: Type.Object({ since: Type.String({ format: 'date-time' }) }, { additionalProperties: false }),
        response: { 202: Type.Object({ resent: Type.Integer() }), ...problemResponses(400, 401, 404, 409) },
      },
    },
    async (request, reply) => {
      const since = new Date(request.body.since);
      if (Number.isNaN(since.getTime())) {
        throw new ValidationError('Invalid since', [
          { pointer: '#/since', detail: 'must be an ISO 8601 date-time' },
        ]);
      }
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
        summary: 'Deliver a notification again as a new attempt',
        params: Id,
        response: {
          202: Type.Object({ id: Type.String({ format: 'uuid' }), state: Type.String() }),
          ...problemResponses(400, 401, 404, 409),
        },
      },
    },
    async (request, reply) =>
      reply.code(202).send(await subscriptions.resend(request.principal.accountId, request.params.id)),
  );
}
