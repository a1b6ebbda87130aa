import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import {
  bodyProblemResponses,
  IdempotencyKeyHeader,
  PaginationQuery,
  problemResponses,
} from '../http/schemas.js';
import { parseIdempotencyKey } from '../idempotency/service.js';
import { METADATA_TYPES } from './metadata.js';
import type { CreateRegistryInput, Registries } from './service.js';

const FolderId = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: '^[A-Za-z0-9._~:@-]+$',
  description: 'Folder name chosen by the client; a new one creates the folder',
});

const MetadataItem = Type.Object(
  {
    type: Type.Enum([...METADATA_TYPES], { type: 'string' }),
    key: Type.String({ minLength: 1, maxLength: 128 }),
    value: Type.Optional(Type.String({ maxLength: 65_536, description: 'Must parse as `type`' })),
    title: Type.Optional(Type.String({ maxLength: 256 })),
    file: Type.Optional(Type.String({ maxLength: 1_000_000, description: 'http(s) URL or data: URI' })),
  },
  { additionalProperties: false },
);

const CreateBody = Type.Object(
  {
    title: Type.String({ minLength: 1, maxLength: 256 }),
    metadata: Type.Array(MetadataItem, { maxItems: 1000 }),
    folder_id: FolderId,
    template: Type.Enum(['STORAGE', 'PASS'], { type: 'string' }),
    callback_url: Type.Optional(
      Type.String({ maxLength: 2048, description: 'http(s) URL for registry events' }),
    ),
    data_encrypted: Type.Optional(Type.Boolean({ default: false })),
    description: Type.Optional(Type.String({ maxLength: 10_000 })),
  },
  { additionalProperties: false },
);

const Registry = Type.Object({
  id: Type.String({ format: 'uuid' }),
  title: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  folder_id: Type.String(),
  template: Type.String({ enum: ['STORAGE', 'PASS'] }),
  metadata: Type.Array(MetadataItem),
  callback_url: Type.Union([Type.String(), Type.Null()]),
  data_encrypted: Type.Boolean(),
  created_at: Type.String({ format: 'date-time' }),
});

const Created = Type.Object({
  message: Type.String(),
  data: Type.Object({
    id: Type.String({ format: 'uuid' }),
    title: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    subscription_id: Type.Optional(
      Type.String({
        format: 'uuid',
        description: 'With callback_url: the endpoint receiving registry events',
      }),
    ),
    secret: Type.Optional(
      Type.String({ description: 'With callback_url: Standard Webhooks signing secret, shown once' }),
    ),
    callback_token: Type.Optional(
      Type.String({ description: 'With callback_url: Bearer token sent with each event, shown once' }),
    ),
  }),
});

const Folder = Type.Object({
  folder_id: Type.String(),
  registry_count: Type.Integer(),
  created_at: Type.String({ format: 'date-time' }),
});

const NextCursor = Type.Union([Type.String(), Type.Null()], {
  description: 'Pass as `cursor` for the next page; null on the last',
});

export function registerRegistryRoutes(app: FastifyInstance, registries: Registries): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.post(
    '/registry/create',
    {
      schema: {
        tags: ['registry'],
        operationId: 'createRegistry',
        summary: 'Create a registry',
        description:
          'Creates a registry in `folder_id` (creating the folder if new). With `data_encrypted`, metadata and description are stored only as AES-256-GCM ciphertext. Send `Idempotency-Key` to make retries safe: the same key and body within 24 h returns the first response; the same key with another body is 409.',
        headers: IdempotencyKeyHeader,
        body: CreateBody,
        response: { 201: Created, ...bodyProblemResponses(409) },
      },
    },
    async (request, reply) => {
      const { body, replayed } = await registries.create(
        request.principal.accountId,
        request.body as CreateRegistryInput,
        parseIdempotencyKey(request.headers['idempotency-key']),
      );
      if (replayed) reply.header('Idempotent-Replayed', 'true');
      return reply.code(201).send(body);
    },
  );

  r.get(
    '/registry/:id',
    {
      schema: {
        tags: ['registry'],
        operationId: 'getRegistry',
        summary: 'Get a registry, decrypted for its owner',
        params: Type.Object({ id: Type.String({ format: 'uuid' }) }),
        response: { 200: Type.Object({ data: Registry }), ...problemResponses(400, 401, 404) },
      },
    },
    async (request) => ({ data: await registries.get(request.principal.accountId, request.params.id) }),
  );

  r.get(
    '/registry',
    {
      schema: {
        tags: ['registry'],
        operationId: 'listRegistries',
        summary: 'List registries, newest first',
        querystring: Type.Object(
          { folder_id: Type.Optional(FolderId), ...PaginationQuery },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({ data: Type.Array(Registry), next_cursor: NextCursor }),
          ...problemResponses(400, 401),
        },
      },
    },
    async (request) => {
      const { folder_id, limit, cursor } = request.query;
      return registries.list(request.principal.accountId, {
        folderId: folder_id,
        limit: limit ?? 20,
        cursor,
      });
    },
  );

  r.get(
    '/folder',
    {
      schema: {
        tags: ['registry'],
        operationId: 'listFolders',
        summary: 'List folders with their registry counts',
        querystring: Type.Object({ ...PaginationQuery }, { additionalProperties: false }),
        response: {
          200: Type.Object({ data: Type.Array(Folder), next_cursor: NextCursor }),
          ...problemResponses(400, 401),
        },
      },
    },
    async (request) =>
      registries.listFolders(request.principal.accountId, {
        limit: request.query.limit ?? 20,
        cursor: request.query.cursor,
      }),
  );
}
