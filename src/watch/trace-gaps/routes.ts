/**
 * `GET /network/{network}/trace-gaps`: a network's open trace gaps (tracker.ts), the blocks
 * committed without their internal transfers because the node could not trace them. They are the
 * service's, not an account's: every token sees the same list, as /readyz shows their count.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { and, asc, eq, gte, lte, sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { NetworkCatalog } from '../../chains/networks.js';
import { ValidationError } from '../../errors.js';
import { decodeCursor, type Page, toPage } from '../../http-kit/pagination.js';
import { problemResponses } from '../../http-kit/schemas.js';
import type { Db } from '../../store/db.js';
import { traceGaps } from '../schema.js';
import { traceGapStatus } from './tracker.js';

const TraceGap = Type.Object({
  block: Type.Integer({ description: 'The block committed without its internal transfers' }),
  hash: Type.String({ description: 'Its hash when it was committed' }),
  reason: Type.String({ description: 'Why the node could not trace it (the last try)' }),
  since: Type.String({ format: 'date-time', description: 'When it was committed without them' }),
  tries: Type.Integer({ minimum: 0, description: 'Attempts to fill it so far' }),
  triedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'When it was last tried; null before the first try',
  }),
});

const NextCursor = Type.Union([Type.String(), Type.Null()], {
  description: 'Pass as `cursor` for the next page; null on the last',
});

const List = Type.Object({
  network: Type.String(),
  count: Type.Integer({ minimum: 0, description: 'Open gaps of the network in all' }),
  data: Type.Array(TraceGap),
  next_cursor: NextCursor,
});

type GapRow = typeof traceGaps.$inferSelect;
type GapView = {
  block: number;
  hash: string;
  reason: string;
  since: string;
  tries: number;
  triedAt: string | null;
};

const KEY = /^(\d{1,16}):(0x[0-9a-f]{64})$/;

const view = (row: GapRow): GapView => ({
  block: row.height,
  hash: row.hash,
  reason: row.reason,
  since: row.since.toISOString(),
  tries: row.tries,
  triedAt: row.triedAt?.toISOString() ?? null,
});

/** A page of a network's open gaps, oldest block first, within `from`–`to` when given. */
export async function listTraceGaps(
  db: Db,
  network: string,
  query: { limit: number; cursor?: string; from?: number; to?: number },
): Promise<Page<GapView> & { count: number }> {
  const conditions = [eq(traceGaps.network, network)];
  if (query.from !== undefined) conditions.push(gte(traceGaps.height, query.from));
  if (query.to !== undefined) conditions.push(lte(traceGaps.height, query.to));
  if (query.cursor !== undefined) {
    const [, height, hash] = KEY.exec(decodeCursor(query.cursor, (key) => KEY.test(key)))!;
    conditions.push(sql`(${traceGaps.height}, ${traceGaps.hash}) > (${Number(height)}, ${hash})`);
  }
  const rows = await db
    .select()
    .from(traceGaps)
    .where(and(...conditions))
    .orderBy(asc(traceGaps.height), asc(traceGaps.hash))
    .limit(query.limit + 1);
  const { count } = await traceGapStatus(db, network);
  return { count, ...toPage(rows, query.limit, (row) => `${row.height}:${row.hash}`, view) };
}

export function registerTraceGapRoutes(
  app: FastifyInstance,
  deps: { db: Db; networks: NetworkCatalog },
): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.get(
    '/network/:network/trace-gaps',
    {
      schema: {
        tags: ['networks'],
        operationId: 'listTraceGaps',
        summary: "A network's open trace gaps: blocks committed without their internal transfers",
        description:
          'EVM networks. A block whose traces the node could not give (its state pruned, or traces failing past LEDGERHOOK_TRACE_WAIT) was committed with every other notification but without its internal transfers; it stays listed here until it is filled (in the background once the node traces again, or by `ledgerhook traces fill`) or closed (its block left the chain). Oldest block first; `from` and `to` bound the blocks listed. The same list for every token: it is the service’s, as /readyz’s `traceGaps` count is.',
        params: Type.Object({
          network: Type.String({
            minLength: 1,
            maxLength: 32,
            description: 'e.g. ETH, or any configured EVM network',
          }),
        }),
        querystring: Type.Object(
          {
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
            cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
            from: Type.Optional(
              Type.Integer({
                minimum: 0,
                maximum: Number.MAX_SAFE_INTEGER,
                description: 'First block listed',
              }),
            ),
            to: Type.Optional(
              Type.Integer({
                minimum: 0,
                maximum: Number.MAX_SAFE_INTEGER,
                description: 'Last block listed',
              }),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 200: List, ...problemResponses(400, 401) },
      },
    },
    async (request) => {
      // The query first: what is wrong with it is wrong for any network.
      const { from, to, cursor, limit = 100 } = request.query;
      if (from !== undefined && to !== undefined && from > to)
        throw new ValidationError('Empty range', [{ parameter: 'from', detail: 'is after to' }]);
      if (cursor !== undefined) decodeCursor(cursor, (key) => KEY.test(key));
      const network = deps.networks.find(request.params.network);
      if (!network)
        throw new ValidationError('Unknown network', [
          {
            parameter: 'network',
            detail: `is not a configured network; use one of ${deps.networks.names().join(', ')}`,
          },
        ]);
      if (network.family !== 'evm')
        throw new ValidationError('Not an EVM network', [
          {
            parameter: 'network',
            detail: `is a ${network.family} network; trace gaps are of EVM networks (internal transfers come from traces)`,
          },
        ]);
      const page = await listTraceGaps(deps.db, network.name, {
        limit,
        ...(cursor === undefined ? {} : { cursor }),
        ...(from === undefined ? {} : { from }),
        ...(to === undefined ? {} : { to }),
      });
      return { network: network.name, ...page };
    },
  );
}
