import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { problemResponse, problemResponses } from '../http-kit/schemas.js';
import type { Transactions } from './service.js';
import { TRANSACTION_FIELDS } from './types.js';

const nullable = <T extends object>(schema: T, description: string) => ({
  ...schema,
  nullable: true,
  description,
});
const integer = (description: string) =>
  nullable({ type: 'integer', format: 'int64' }, `${description}. Exact, even beyond 2^53.`);
const string = (description: string) => nullable({ type: 'string' }, description);

/** The normalised transaction: every key always present, null when it does not apply. */
const TransactionSchema = Type.Unsafe({
  type: 'object',
  required: [...TRANSACTION_FIELDS],
  properties: {
    closeRewards: string('Algorand: close rewards in µAlgo, as the indexer reports them'),
    closingAmount: string('Algorand: closing amount in µAlgo'),
    confirmedRound: integer('Block height, round or slot; null while pending'),
    fee: integer(
      'Fee in the base unit: µAlgo; wei (gasUsed × effectiveGasPrice); satoshi (inputs − outputs); lamports',
    ),
    firstValid: integer('Algorand: first valid round'),
    genesisHash: string('Genesis block hash'),
    genesisId: string('Algorand genesis-id; eip155:<chainId>; bip122:<first 32 hex of the genesis hash>'),
    id: { type: 'string', description: 'Transaction id or hash' },
    intraRoundOffset: integer('Position in the block'),
    lastValid: integer('Algorand: last valid round'),
    note: string('Note (Algorand), input data (EVM) or OP_RETURN payload (Bitcoin), base64'),
    receiverRewards: string('Algorand: receiver rewards in µAlgo'),
    roundTime: integer('Block time, seconds since the epoch'),
    sender: string(
      'Sender (Bitcoin: the first input’s address; Solana: the fee payer; Tron: the contract’s owner, base58)',
    ),
    senderRewards: string('Algorand: sender rewards in µAlgo'),
    signature: {
      description:
        'Algorand signature.sig (base64), or the multisig/logicsig object; EVM r‖s‖v hex; Solana the first signature; Tron the first signature, hex; null for Bitcoin',
      // OpenAPI 3.0 has no null type: the string alternative carries the null.
      oneOf: [
        { type: 'string', nullable: true },
        { type: 'object', additionalProperties: true },
      ],
    },
    txType: string(
      'Algorand tx-type; EVM create, transfer or call; Bitcoin coinbase or transfer; Solana the instruction; Tron the contract type',
    ),
    internalTransfers: {
      type: 'array',
      description:
        'EVM, where the node has traces (absent where it has none): native value the transaction’s contract calls moved, in call order; empty when none did, or when the transaction reverted',
      items: {
        type: 'object',
        required: ['traceAddress', 'type', 'from', 'to', 'value'],
        properties: {
          traceAddress: {
            type: 'string',
            description: 'The call’s position below the transaction’s call: child indexes joined by dots',
            example: '0.2.1',
          },
          type: { type: 'string', enum: ['call', 'create', 'create2', 'selfdestruct'] },
          from: { type: 'string', description: 'The contract the value left (EIP-55)' },
          to: {
            type: 'string',
            description:
              'The recipient: the called account, the created contract, or the self-destruct’s beneficiary',
          },
          value: { type: 'integer', format: 'int64', description: 'Wei. Exact, even beyond 2^53.' },
        },
      },
    },
  },
});

export function registerTransactionRoutes(app: FastifyInstance, transactions: Transactions): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.get(
    '/transaction/:network/:txId',
    {
      schema: {
        tags: ['transactions'],
        operationId: 'getTransaction',
        summary: 'Look up one transaction, normalised across chains',
        description:
          'Networks: ETH, BSC, POL, GLRM (GLMR), BASE, ARB, OP, AVAX, SEPOLIA, ALGO, BTC, SOL, TRON (NILE, SHASTA) and any configured one. On EVM networks whose node has traces, `internalTransfers` lists the value its contract calls moved. Unknown network or malformed id: 400 before any node is asked; unknown transaction: 404; node unreachable or failing: 503 with Retry-After. Final transactions are cached.',
        params: Type.Object({
          network: Type.String({
            minLength: 1,
            maxLength: 32,
            description: 'e.g. ETH, ALGO, BTC, SOL, TRON',
          }),
          txId: Type.String({ minLength: 1, maxLength: 128 }),
        }),
        response: {
          200: TransactionSchema,
          ...problemResponses(400, 401, 404),
          503: problemResponse(
            503,
            'The network’s node cannot be reached or is failing (or the database is unavailable); retry after Retry-After',
          ),
        },
      },
    },
    async (request, reply) => {
      const body = await transactions.get(request.params.network, request.params.txId);
      // Pre-serialised: integers beyond 2^53 must not pass through a JavaScript number.
      return reply
        .type('application/json; charset=utf-8')
        .serializer((payload) => payload as string)
        .send(body);
    },
  );
}
