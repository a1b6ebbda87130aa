/**
 * The request and response schemas of the registry routes (routes.ts, and the pass pages'
 * JSON form): they validate what comes in and are what the OpenAPI document says of each route.
 */
import { Type } from 'typebox';
import { ReceiptSchema } from '../anchor/receipt-schema.js';
import { METADATA_TYPES } from './metadata.js';

export const FolderId = Type.String({
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

export const CreateBody = Type.Object(
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

export const Created = Type.Object({
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

export const Folder = Type.Object({
  folder_id: Type.String(),
  registry_count: Type.Integer(),
  created_at: Type.String({ format: 'date-time' }),
});

export const NextCursor = Type.Union([Type.String(), Type.Null()], {
  description: 'Pass as `cursor` for the next page; null on the last',
});

export const VerifyBody = Type.Object(
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

export const VerificationResult = Type.Object({
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
