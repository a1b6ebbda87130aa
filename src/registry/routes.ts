import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { Receipt } from '../anchor/receipt.js';
import { ReceiptSchema } from '../anchor/receipt-schema.js';
import type { Verification } from '../anchor/verify.js';
import {
  bodyProblemResponses,
  IdempotencyKeyHeader,
  PaginationQuery,
  problemResponses,
} from '../http-kit/schemas.js';
import { parseIdempotencyKey } from '../idempotency/service.js';
import { METADATA_TYPES } from './metadata.js';
import type { CreateRegistryInput, Registries } from './service.js';

const FolderId = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: '^[A-Za-z0-9._~:@-]+$',
  description: 'Folder name chosen by the client; a new one creates the folder',
});

export const MetadataItem = Type.Object(
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

export const Registry = Type.Object({
  id: Type.String({ format: 'uuid' }),
  title: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  folder_id: Type.String(),
  template: Type.String({ enum: ['STORAGE', 'PASS'] }),
  metadata: Type.Array(MetadataItem),
  callback_url: Type.Union([Type.String(), Type.Null()]),
  data_encrypted: Type.Boolean(),
  created_at: Type.String({ format: 'date-time' }),
  anchor: Type.Union(
    [
      Type.Object({
        status: Type.String({ enum: ['pending', 'anchored'] }),
        network: Type.Union([Type.String(), Type.Null()], {
          description: 'The network the registry is (to be) anchored on',
        }),
        txId: Type.Union([Type.String(), Type.Null()], {
          description: 'The transaction holding the Merkle root; null while pending',
        }),
        blockNumber: Type.Union([Type.Integer(), Type.Null()]),
        root: Type.Union([Type.String(), Type.Null()], { description: 'The Merkle root, hex' }),
        anchored_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
      }),
      Type.Null(),
    ],
    {
      description:
        "Where the registry's leaf is anchored on chain (see GET /registry/{id}/proof); null while anchoring is off",
    },
  ),
  revoked_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'When the owner revoked this PASS; null while it is valid',
  }),
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

const VerifyBody = Type.Object(
  {
    receipt: ReceiptSchema,
    content: Type.Optional(
      Type.Object(
        {},
        {
          additionalProperties: true,
          description:
            'The registry as GET /registry/{id} returns it (its `data`); the anchored fields are id, created_at, title, description, folder_id, template, metadata, callback_url and data_encrypted, and any other field is ignored',
        },
      ),
    ),
  },
  { additionalProperties: false },
);

const VerificationResult = Type.Object({
  verified: Type.Boolean({ description: 'Every check passed' }),
  checks: Type.Object({
    content: Type.Union([Type.Boolean(), Type.Null()], {
      description: 'The content hashes to the leaf under the salt; null when no content was sent',
    }),
    path: Type.Boolean({ description: 'The proof leads from the leaf to the Merkle root' }),
    transaction: Type.Boolean({
      description: 'The named transaction, on the named chain, carries the root',
    }),
  }),
  blockNumber: Type.Union([Type.Integer(), Type.Null()]),
  confirmations: Type.Union([Type.Integer(), Type.Null()], {
    description: "Blocks from the transaction's to the tip, its own included",
  }),
  problems: Type.Array(Type.String(), { description: 'What failed, one line each' }),
});

export interface RegistryRouteOptions {
  /** Checks a receipt against the configured node of the network it names. */
  verify(receipt: Receipt, content: unknown): Promise<Verification>;
}

export function registerRegistryRoutes(
  app: FastifyInstance,
  registries: Registries,
  options: RegistryRouteOptions,
): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.get(
    '/registry/:id/proof',
    {
      schema: {
        tags: ['registry'],
        operationId: 'getRegistryProof',
        summary: 'The anchoring receipt of a registry',
        description:
          'A self-contained receipt (Chainpoint v2 shape): the leaf, its salt, the Merkle path, the root and the transaction that carries it. Anyone can check it against a node of the network, with `POST /registry/verify` or `ledgerhook verify` without this service. 409 while the registry is not anchored yet.',
        params: Type.Object({ id: Type.String({ format: 'uuid' }) }),
        response: { 200: Type.Object({ data: ReceiptSchema }), ...problemResponses(400, 401, 404, 409) },
      },
    },
    async (request) => ({ data: await registries.proof(request.principal.accountId, request.params.id) }),
  );

  r.post(
    '/registry/verify',
    {
      schema: {
        tags: ['registry'],
        operationId: 'verifyRegistryReceipt',
        summary: 'Verify an anchoring receipt, with or without the registry content',
        description:
          "Answers whether the receipt's path leads to its root, whether that root is in the named transaction on the named network (read from this service's node, as transaction lookup reads it), whether the content (if sent) hashes to the leaf, and how deep the transaction is. A receipt that fails a check is still 200, with `verified: false` and the problems; a malformed one is 400.",
        body: VerifyBody,
        response: { 200: Type.Object({ data: VerificationResult }), ...bodyProblemResponses(503) },
      },
    },
    async (request) => {
      const body = request.body as { receipt: Receipt; content?: unknown };
      return { data: await options.verify(body.receipt, body.content) };
    },
  );

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

  r.post(
    '/registry/:id/revoke',
    {
      schema: {
        tags: ['registry'],
        operationId: 'revokeRegistry',
        summary: 'Revoke a PASS',
        description:
          'Marks a PASS revoked: `revoked_at` is set, its public page (GET /pass/{id}) says Revoked, and with a `callback_url` a `registry.revoked` event is sent. Revoking again changes nothing and answers the same. Only a PASS can be revoked: any other template is 409. Takes no body.',
        params: Type.Object({ id: Type.String({ format: 'uuid' }) }),
        response: { 200: Type.Object({ data: Registry }), ...bodyProblemResponses(404, 409) },
      },
    },
    async (request) => ({ data: await registries.revoke(request.principal.accountId, request.params.id) }),
  );
}
