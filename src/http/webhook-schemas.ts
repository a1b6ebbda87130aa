/**
 * The bodies the service POSTs to callback URLs (and serves as `payload` in the event feed), as
 * OpenAPI components: the document describes what a receiver gets, not only what the API answers.
 * The receiver library (packages/receiver) generates its types from these, and its tests check
 * them against real deliveries. OpenAPI 3.0 has no `webhooks` section, hence components alone.
 *
 * Fields are open (no `additionalProperties: false`): a receiver must accept fields added later.
 */
import { type TSchema, Type } from 'typebox';

const ref = (name: string) => Type.Unsafe({ $ref: `#/components/schemas/${name}` });

const AddressTransactionEvent = Type.Object(
  {
    address: Type.String({
      description:
        'On EVM chains the sender of the transfer; on other chains the watched address (see `watchedAddress`)',
    }),
    txId: Type.String({ description: 'Transaction id (hash, signature) as the chain writes it' }),
    type: Type.Union([Type.Literal('native'), Type.Literal('token'), Type.Literal('fee')], {
      description:
        '`native` for the chain’s own asset, `token` for a token or NFT, `fee` (EVM and Tron, with `attr.fees`) for the fee a watched sender paid for a mined transaction',
    }),
    blockNumber: Type.Optional(
      Type.Integer({
        description: 'Block (round, slot) holding the transaction; absent while in the mempool',
      }),
    ),
    asset: Type.String({
      description:
        'Token contract address (mint, asset id) for tokens; the native asset’s symbol (ETH, BTC, ALGO, SOL, TRX…) otherwise; on Tron a TRC-10 token id or a TRC-20 contract’s base58 address',
    }),
    amount: Type.String({
      description:
        'Decimal amount in display units, signed from the point of view of `address` (+ credited, − debited; negative on EVM chains, where `address` is the sender); an NFT count for ERC-721/1155',
      examples: ['-0.25'],
    }),
    decimalsUnknown: Type.Optional(
      Type.Literal(true, {
        description: 'Present when the token’s decimals could not be read: `amount` is in its base units',
      }),
    ),
    tokenId: Type.Optional(Type.String({ description: 'ERC-721 / ERC-1155 token id, a decimal string' })),
    mempool: Type.Optional(
      Type.Boolean({
        description:
          'EVM and Bitcoin: true while pending (no `blockNumber`, `confirmations` 0), with event `address.transaction.pending`; false (EVM) or absent once in a block',
      }),
    ),
    counterAddress: Type.Optional(
      Type.String({
        description:
          'On EVM chains the recipient (absent on a `fee`); elsewhere the single counterparty, absent if several',
      }),
    ),
    internal: Type.Optional(
      Type.Literal(true, {
        description:
          'EVM: native value moved by a contract call (an internal transfer), found in the block’s traces; `address` is the sending contract. Tron: TRX or a TRC-10 token moved by a contract call (the info’s `internal_transactions`)',
      }),
    ),
    traceAddress: Type.Optional(
      Type.String({
        description:
          'With `internal`: the call’s position below the transaction’s call, child indexes joined by dots (every child counted, static and delegate calls included); on Tron its index among the transaction’s internal transactions',
        examples: ['0.2.1'],
      }),
    ),
    failed: Type.Optional(
      Type.Literal(true, {
        description:
          'On a `fee`: the transaction reverted (Tron: failed, e.g. out of energy); it moved nothing, but its fee was paid',
      }),
    ),
    addressesRiskRatio: Type.Optional(
      Type.Array(Type.Record(Type.String(), Type.Integer({ minimum: 0, maximum: 100 })), {
        description:
          'Where a risk provider is configured: one `{address: score}` per counterparty, 0 (nothing known) to 100 (sanctioned)',
      }),
    ),
    id: Type.String({
      format: 'uuid',
      description:
        'The notification id: equal to the `webhook-id` header, the same on every retry, and derived from the event (a UUID v5 of the subscription, the network and the block, transaction and transfer), so a block processed again (a restart, a backfill, a database failover or restore) yields the same id; a withdrawal (`reorg`, `dropped`) has an id of its own',
    }),
    subscriptionId: Type.String({ format: 'uuid' }),
    chain: Type.String({ description: 'The network’s name (ETH, BTC, SOL, TRON, DEVNET…)' }),
    watchedAddress: Type.String({ description: 'The subscription’s address this transfer touched' }),
    confirmations: Type.Integer({
      minimum: 0,
      description: 'Depth of the block when notified (0 in the mempool)',
    }),
    backfill: Type.Optional(Type.Literal(true, { description: 'Sent by a backfill of past blocks' })),
  },
  {
    description:
      'A transfer touching a watched address (events `address.transaction`, and `address.transaction.pending` with `mempool: true`). A pending one is followed either by the mined one (`address.transaction`, with its `blockNumber`; later an `address.transaction.reorg` if that block leaves the chain) or by its withdrawal (`address.transaction.dropped`)',
  },
);

const AddressTransactionReorgEvent = Type.Intersect(
  [
    ref('AddressTransactionEvent'),
    Type.Object({
      reorg: Type.Literal(true, {
        description: 'This withdraws an earlier notification whose block left the canonical chain',
      }),
    }),
  ],
  {
    description:
      'Event `address.transaction.reorg`: the body of a notification already sent, with a new `id` and `reorg: true`, because its block left the chain',
  },
);

const AddressTransactionDroppedEvent = Type.Intersect(
  [
    ref('AddressTransactionEvent'),
    Type.Object({
      dropped: Type.Literal(true, {
        description:
          'This withdraws an earlier pending announcement (`mempool: true`) whose transaction can no longer be mined',
      }),
      replacedBy: Type.Optional(
        Type.String({
          description:
            'The transaction that took its place, when known: on EVM chains the one mined with the same sender and nonce; on Bitcoin the one spending an input of it, in the mempool (replace-by-fee) or in a block (a double spend). Absent when an EVM transaction left the node’s pool and its nonce stayed unused past `LEDGERHOOK_MEMPOOL_DROP_AFTER`',
        }),
      ),
    }),
  ],
  {
    description:
      'Event `address.transaction.dropped`: the body of a pending announcement already sent (`mempool: true`, no `blockNumber`), with a new `id`, `dropped: true` and, when known, `replacedBy`, because its transaction was replaced or dropped. Should it be mined after all, an `address.transaction` follows as usual; a mined transaction is never withdrawn this way (see `address.transaction.reorg`)',
  },
);

const Hex = (description: string) => Type.String({ pattern: '^0x[0-9a-f]*$', description });

const ContractLogEvent = Type.Object(
  {
    chain: Type.String({ description: 'The network’s name (ETH, BASE, DEVNET…)' }),
    contractAddress: Type.String({ description: 'The contract that emitted the log, EIP-55 checksummed' }),
    txId: Type.String({ description: 'The transaction that emitted it' }),
    blockNumber: Type.Integer({ minimum: 0 }),
    blockHash: Type.String(),
    logIndex: Type.Integer({ minimum: 0, description: 'The log’s position in its block' }),
    event: Type.Optional(
      Type.String({ description: 'The event’s name (absent for a subscription made with a bare topic0)' }),
    ),
    signature: Type.Optional(
      Type.String({
        description:
          'The canonical signature, `Transfer(address,address,uint256)` (absent for a bare topic0)',
      }),
    ),
    topics: Type.Array(Hex('A 32-byte topic'), { description: 'As the node returned them, lower-case hex' }),
    data: Hex('The log’s data as the node returned it, lower-case hex (`0x` when empty)'),
    args: Type.Optional(
      Type.Record(Type.String(), Type.Unknown(), {
        description:
          'The arguments decoded by name (`arg0`, `arg1`… where the ABI names none): integers as decimal strings, addresses checksummed, bytes as hex, bool, string, arrays as arrays, tuples as objects by component name; an indexed string, bytes, array or tuple as its topic hash. Absent for a bare topic0',
      }),
    ),
    id: Type.String({
      format: 'uuid',
      description:
        'The notification id, equal to the `webhook-id` header; deduplicate on it. Derived from the event (a UUID v5 of the subscription, the network, the block and the log), so a block processed again yields the same id; a withdrawal has an id of its own',
    }),
    subscriptionId: Type.String({ format: 'uuid' }),
    confirmations: Type.Integer({ minimum: 1, description: 'Depth of the block when notified' }),
    reorg: Type.Optional(
      Type.Literal(true, {
        description:
          'Event `contract.log.reorg`: this withdraws an earlier notification (same body, new id) whose block left the canonical chain',
      }),
    ),
    backfill: Type.Optional(Type.Literal(true, { description: 'Sent by a backfill of past blocks' })),
  },
  {
    description:
      'A log a followed contract event matched (CONTRACT_LOG_EVENT subscriptions; events `contract.log`, and `contract.log.reorg` with `reorg: true`)',
  },
);

const TestEvent = Type.Intersect(
  [
    ref('AddressTransactionEvent'),
    Type.Object({ test: Type.Literal(true, { description: 'A sample; its transfer is made up' }) }),
  ],
  { description: 'Event `test`, sent by POST /api/v1/subscription/{id}/test' },
);

const eventHeader = {
  id: Type.String({ format: 'uuid', description: 'The notification id, equal to the `webhook-id` header' }),
  subscriptionId: Type.String({ format: 'uuid', description: 'The registry’s event endpoint' }),
};
/** What every registry event says of its registry; thin, as metadata may be encrypted at rest. */
const registryFields = {
  id: Type.String({ format: 'uuid' }),
  title: Type.String(),
  folder_id: Type.String(),
  template: Type.Union([Type.Literal('STORAGE'), Type.Literal('PASS')]),
};

const RegistryCreatedEvent = Type.Object(
  {
    type: Type.Literal('registry.created'),
    ...eventHeader,
    registry: Type.Object({
      ...registryFields,
      data_encrypted: Type.Boolean(),
      created_at: Type.String({ format: 'date-time' }),
    }),
  },
  { description: 'A registry with a `callback_url` was created (thin: no metadata)' },
);

const RegistryAnchoredEvent = Type.Object(
  {
    type: Type.Literal('registry.anchored'),
    ...eventHeader,
    registry: Type.Object({ id: Type.String({ format: 'uuid' }) }),
    anchor: Type.Object({
      network: Type.String(),
      txId: Type.String({ description: 'The anchor transaction' }),
      blockNumber: Type.Integer(),
      root: Type.String({ description: 'The Merkle root anchored, hex' }),
      anchored_at: Type.String({ format: 'date-time' }),
    }),
    receipt_url: Type.String({ description: 'Where the registry’s receipt is served (GET, with a token)' }),
  },
  { description: 'A transaction carrying the registry’s Merkle root is deep enough on its chain' },
);

const RegistryRevokedEvent = Type.Object(
  {
    type: Type.Literal('registry.revoked'),
    ...eventHeader,
    registry: Type.Object({
      ...registryFields,
      revoked_at: Type.String({ format: 'date-time' }),
    }),
  },
  { description: 'A PASS was revoked' },
);

const WebhookEvent = Type.Union(
  [
    ref('AddressTransactionEvent'),
    ref('AddressTransactionReorgEvent'),
    ref('AddressTransactionDroppedEvent'),
    ref('ContractLogEvent'),
    ref('TestEvent'),
    ref('RegistryCreatedEvent'),
    ref('RegistryAnchoredEvent'),
    ref('RegistryRevokedEvent'),
  ],
  {
    description:
      'Any webhook body. Registry events have a `type` of `registry.*`; address notifications have `type` `native`, `token` or `fee`, with `mempool: true` while pending, `reorg: true` on the withdrawal of a mined one, `dropped: true` on the withdrawal of a pending one and `test: true` on a sample; contract events have `contractAddress`, `topics` and `data`',
  },
);

/** components.schemas of the OpenAPI document. */
export const WEBHOOK_SCHEMAS: Record<string, TSchema> = {
  WebhookEvent,
  AddressTransactionEvent,
  AddressTransactionReorgEvent,
  AddressTransactionDroppedEvent,
  ContractLogEvent,
  TestEvent,
  RegistryCreatedEvent,
  RegistryAnchoredEvent,
  RegistryRevokedEvent,
};
