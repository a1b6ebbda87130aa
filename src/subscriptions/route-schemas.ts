/**
 * The request and response schemas of the subscription routes (routes.ts): they validate what
 * comes in and are what the OpenAPI document says of each route.
 */
import { Type } from 'typebox';
import { SIGNATURE_SCHEMES } from '../notify/signing.js';
import {
  ADDRESS_TRANSACTION,
  CONTRACT_LOG_EVENT,
  MAX_ADDRESSES_PER_CALL,
  REGISTRY_EVENTS,
} from './service.js';

export const Id = Type.Object({ id: Type.String({ format: 'uuid' }) });

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
export const AddressList = (description: string) =>
  Type.Array(Address, { maxItems: MAX_ADDRESSES_PER_CALL, description });

export const WatchedAddress = Type.Object({
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
export const PublicKey = Type.String({
  pattern: '^whpk_[A-Za-z0-9+/]{43}=$',
  description: PUBLIC_KEY_DESCRIPTION,
});

/** A JSON ABI fragment of an event, as in a compiler's ABI array (checked further by viem). */
const AbiEventFragment = Type.Object(
  {},
  {
    additionalProperties: true,
    description:
      'A JSON ABI fragment of an event: {"type": "event", "name", "inputs": [{"name", "type", "indexed", "components"?}], "anonymous"?}',
  },
);

export const CreateBody = Type.Object(
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
            'A configured network: ETH, BSC, POL, GLRM, BASE, ARB, OP, AVAX, SEPOLIA, ALGO, BTC, SOL, TRON, NILE, SHASTA…',
        }),
        url: Type.String({
          minLength: 1,
          maxLength: 2048,
          description: 'http(s) endpoint that receives the notifications',
        }),
        fees: Type.Optional(
          Type.Boolean({
            description:
              'EVM and Tron (default false): also a `type: "fee"` notification for each mined transaction a watched address sent (on Tron, each that cost it TRX or failed), `failed: true` when it reverted (Tatum’s PAID_FEE and OUTGOING_FAILED_TX). Elsewhere a notification’s amount already includes the fee',
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
          'Pending notifications (`mempool: true`, no `blockNumber`) before the mined one, withdrawn with `dropped: true` if the transaction can no longer be mined. Address subscriptions on EVM networks (default true) and Bitcoin networks (default false); refused on Algorand (rounds are final within seconds), Solana (no public mempool) and Tron (java-tron shows no pending transactions). Contract events come from mined blocks',
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

export const Subscription = Type.Object({
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

export const Notification = Type.Object({
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

export const NextCursor = Type.Union([Type.String(), Type.Null()]);
export const Secret = Type.String({
  description: 'hmac only: the Standard Webhooks signing secret (whsec_…); shown only once',
});
export const Created = Type.Object({
  id: Type.String({ format: 'uuid' }),
  secret: Type.Optional(Secret),
  publicKey: Type.Optional(PublicKey),
  callbackToken: Type.String({
    description: 'Sent as Authorization: Bearer <callbackToken>; shown only once',
  }),
});

const NotificationState = Type.Enum(['pending', 'delivered', 'failed'], { type: 'string' });

/** The filters both delivery logs take: a state and a window of creation times. */
export const LogFilterQuery = {
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
