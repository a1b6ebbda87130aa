import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { bodyProblemResponses, problemResponses } from '../http-kit/schemas.js';
import type { Backfills } from './jobs.js';

const Id = Type.Object({ id: Type.String({ format: 'uuid' }) });

const Bound = (description: string) =>
  Type.Union([Type.Integer({ minimum: 0 }), Type.String({ minLength: 1, maxLength: 64 })], { description });

const StartBody = Type.Object(
  {
    from: Bound('First block (a height) or an ISO 8601 time: the first block at or after it'),
    to: Type.Optional(
      Bound(
        'Last block or an ISO 8601 time (the last block at or before it). Default: where the live follower stands when asked, so the two meet without a gap',
      ),
    ),
  },
  { additionalProperties: false },
);

const Backfill = Type.Object({
  id: Type.String({ format: 'uuid' }),
  subscriptionId: Type.String({ format: 'uuid' }),
  network: Type.String(),
  state: Type.String({ enum: ['running', 'done', 'cancelled', 'failed'] }),
  from: Type.Integer({ description: 'First block of the range' }),
  to: Type.Integer({ description: 'Last block of the range' }),
  position: Type.Integer({ description: 'Last block done (from − 1 before the first)' }),
  blocksDone: Type.Integer(),
  blocksTotal: Type.Integer(),
  progress: Type.Number({ minimum: 0, maximum: 1 }),
  found: Type.Integer({ description: 'Notifications added (transfers the live follower had not notified)' }),
  traceGaps: Type.Integer({
    description:
      'EVM: blocks read without their internal transfers because the node could not trace them (trace gaps; GET /readyz counts those still open)',
  }),
  etaSeconds: Type.Union([Type.Integer(), Type.Null()], {
    description: 'Seconds left at the pace so far; null until there is one',
  }),
  requested: Type.Object({ from: Type.String(), to: Type.Union([Type.String(), Type.Null()]) }),
  method: Type.String({ description: 'Where the history comes from and how it is throttled' }),
  error: Type.Union([Type.String(), Type.Null()], {
    description: 'Why it failed, or the last error it is retrying after while running',
  }),
  createdAt: Type.String({ format: 'date-time' }),
  updatedAt: Type.String({ format: 'date-time' }),
  finishedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

/** The backfill of a subscription: start, watch, cancel. */
export function registerBackfillRoutes(app: FastifyInstance, backfills: Backfills): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['subscriptions'];

  r.post(
    '/subscription/:id/backfill',
    {
      schema: {
        tags,
        operationId: 'startBackfill',
        summary: "Replay history for the subscription's addresses or contract event",
        description:
          "Notifies what the live follower would have for the blocks of the range, marked `\"backfill\": true`, through the same outbox and with the same deduplication: a transfer (or contract event) already notified is not sent again. Address subscriptions (`ADDRESS_TRANSACTION`) and contract event subscriptions (`CONTRACT_LOG_EVENT`) can be backfilled. One backfill runs per subscription at a time (a second is 409 naming it, `existingId`). Blocks are notified once as deep as the subscription's `confirmations`. The history comes from the cheapest source of the network's family (the view's `method` says which and how it is throttled): EVM `eth_getLogs` and a block scan for native transfers, and for a contract event `eth_getLogs` with its topic0 (and filtered argument values) on its contracts, 1,000 a query, or on any contract, then a block header per block with events (a range the node refuses as too large is halved until it passes); Bitcoin Esplora address histories (a block scan through Bitcoin Core); Algorand the indexer's account transactions (a round scan through algod alone); Solana `getSignaturesForAddress` and `getTransaction`; Tron every block of the range (`getblockbynum` and `gettransactioninfobyblocknum`). A network without a configured node is a 400.",
        params: Id,
        body: StartBody,
        response: { 202: Backfill, ...bodyProblemResponses(404, 409, 503) },
      },
    },
    async (request, reply) => {
      const view = await backfills.start(request.principal.accountId, request.params.id, request.body);
      return reply.code(202).send(view);
    },
  );

  r.get(
    '/subscription/:id/backfill',
    {
      schema: {
        tags,
        operationId: 'getBackfill',
        summary: "The subscription's latest backfill and its progress",
        params: Id,
        response: { 200: Backfill, ...problemResponses(400, 401, 404) },
      },
    },
    async (request) => backfills.get(request.principal.accountId, request.params.id),
  );

  r.delete(
    '/subscription/:id/backfill',
    {
      schema: {
        tags,
        operationId: 'cancelBackfill',
        summary: "Cancel the subscription's running backfill",
        description:
          'What it committed stays and is delivered; nothing more is added. Cancelling again (or a finished backfill) changes nothing and shows it.',
        params: Id,
        response: { 200: Backfill, ...bodyProblemResponses(404) },
      },
    },
    async (request) => backfills.cancel(request.principal.accountId, request.params.id),
  );
}
