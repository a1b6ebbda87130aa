import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { ValidationError } from '../errors.js';
import { decodeCursor } from '../http-kit/pagination.js';
import { problemResponses } from '../http-kit/schemas.js';
import { type EventFeed, MAX_FEED_WAIT_SECONDS } from './feed-reader.js';

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1_000;

/** A sequence number as a cursor's key: a decimal without sign or leading zeros, within bigint. */
const SEQUENCE = /^(0|[1-9][0-9]{0,18})$/;
const isSequence = (key: string) => SEQUENCE.test(key) && BigInt(key) <= 9_223_372_036_854_775_807n;

/** Opaque to clients, as every cursor of the API: base64url of the last sequence read. */
const cursorOf = (sequence: string) => Buffer.from(sequence, 'utf8').toString('base64url');

function sequenceOf(after: string | undefined): string {
  if (after === undefined) return '0';
  try {
    return decodeCursor(after, isSequence);
  } catch {
    // decodeCursor names `cursor`; this route calls it `after`.
    throw new ValidationError('Invalid cursor', [
      { parameter: 'after', detail: 'is not a cursor this API returned (the next_cursor of /events)' },
    ]);
  }
}

const FeedItem = Type.Object({
  id: Type.String({
    format: 'uuid',
    description: 'The notification id: the webhook-id header and the body id of its webhook',
  }),
  sequence: Type.String({
    pattern: '^[1-9][0-9]*$',
    description: 'Its place in the account’s feed (a decimal string: it may exceed 2^53)',
  }),
  subscriptionId: Type.String({ format: 'uuid' }),
  eventType: Type.String({ description: 'As the Ledgerhook-Event-Type header of its webhook' }),
  createdAt: Type.String({ format: 'date-time' }),
  payload: Type.Unknown({ description: 'The JSON body of the webhook, exactly as sent' }),
});

export function registerFeedRoutes(app: FastifyInstance, feed: EventFeed): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.get(
    '/events',
    {
      schema: {
        tags: ['events'],
        operationId: 'listEvents',
        summary: 'The account’s notifications in one gap-free order, to pull instead of (or beside) webhooks',
        description: `Every notification webhook delivery sends (pending, delivered or failed alike; never one held for confirmations until it is released, nor one cancelled before it was sent), oldest first, in the order their transactions committed: a notification committed late comes after everything already read, so resuming from \`next_cursor\` never skips one. \`id\` is the webhook's \`webhook-id\`, to reconcile the two. A withdrawal (\`"reorg": true\` in the payload) follows a notification read here whose block left the chain, and one with \`"dropped": true\` a pending announcement whose transaction can no longer be mined. \`next_cursor\` is always set: at the end of the feed it is where to resume. With \`wait\` (at most ${MAX_FEED_WAIT_SECONDS} seconds), an empty page waits for the first event, answering as soon as one is committed, or empty when the wait ends.`,
        querystring: Type.Object(
          {
            after: Type.Optional(
              Type.String({
                minLength: 1,
                maxLength: 64,
                description:
                  'The `next_cursor` of the previous page; `now`: from the end of the feed (only events committed after this request; its `next_cursor` is where to read on); omitted: from the start',
              }),
            ),
            limit: Type.Optional(
              Type.Integer({
                minimum: 1,
                maximum: MAX_LIMIT,
                description: `Events per page (1-${MAX_LIMIT}, default ${DEFAULT_LIMIT})`,
              }),
            ),
            subscription: Type.Optional(
              Type.String({ format: 'uuid', description: 'Only this subscription’s events' }),
            ),
            wait: Type.Optional(
              Type.Integer({
                minimum: 0,
                maximum: MAX_FEED_WAIT_SECONDS,
                description: `Seconds to wait for an event when there is none yet (0-${MAX_FEED_WAIT_SECONDS}, default 0)`,
              }),
            ),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            data: Type.Array(FeedItem),
            next_cursor: Type.String({ description: 'Pass as `after` to read on; never null' }),
          }),
          ...problemResponses(400, 401, 404),
        },
      },
    },
    async (request, reply) => {
      const { after, limit, subscription, wait } = request.query;
      // A client that goes away ends its wait at once.
      const gone = new AbortController();
      const onClose = () => {
        if (!reply.raw.writableEnded) gone.abort();
      };
      reply.raw.on('close', onClose);
      try {
        const page = await feed.read(
          request.principal.accountId,
          {
            afterSequence: after === 'now' ? await feed.head() : sequenceOf(after),
            limit: limit ?? DEFAULT_LIMIT,
            subscriptionId: subscription,
            waitSeconds: wait ?? 0,
          },
          gone.signal,
        );
        // The payload is spliced in as stored: the very bytes its webhook carries, not re-encoded.
        const items = page.events.map(
          (e) =>
            `{"id":${JSON.stringify(e.id)},"sequence":${JSON.stringify(e.sequence)},"subscriptionId":${JSON.stringify(e.subscriptionId)},"eventType":${JSON.stringify(e.eventType)},"createdAt":${JSON.stringify(e.createdAt)},"payload":${e.body}}`,
        );
        return reply
          .type('application/json; charset=utf-8')
          .send(
            `{"data":[${items.join(',')}],"next_cursor":${JSON.stringify(cursorOf(page.lastSequence))}}` as never,
          );
      } finally {
        reply.raw.off('close', onClose);
      }
    },
  );
}
