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
import {
  CreateBody,
  Created,
  Folder,
  FolderId,
  NextCursor,
  Registry,
  VerificationResult,
  VerifyBody,
} from './route-schemas.js';
import type { CreateRegistryInput, Registries } from './service.js';

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
