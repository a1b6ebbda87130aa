/**
 * `GET /pass/{id}`: the public verification address of a PASS, served without a token, as HTML
 * for people and JSON for machines (by `Accept`). Registered outside /api/v1, in a scope with a
 * per-IP rate limit of its own (see http/server.ts).
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { NotFoundError } from '../errors.js';
import { sendProblem } from '../http-kit/problem.js';
import { problemResponse } from '../http-kit/schemas.js';
import { PASS_PAGE_CSP, renderPassNotFound, renderPassPage } from './pass-page.js';
import { MetadataItem, Registry } from './route-schemas.js';
import { PASS_NOT_FOUND, type Registries } from './service.js';

const PublicPass = Type.Object({
  id: Type.String({ format: 'uuid' }),
  title: Type.String(),
  description: Type.Union([Type.String(), Type.Null()], { description: 'Null when the pass is encrypted' }),
  issuer: Type.String({ description: 'The name of the account that issued the pass' }),
  created_at: Type.String({ format: 'date-time' }),
  status: Type.String({ enum: ['valid', 'revoked'] }),
  revoked_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  data_encrypted: Type.Boolean(),
  metadata: Type.Union([Type.Array(MetadataItem), Type.Null()], {
    description: 'Null when the pass is encrypted: only its issuer reads it',
  }),
  anchor: Registry.properties.anchor,
});

interface Weight {
  q: number;
  /** Position in the header, which breaks ties. */
  at: number;
}

/** The weights `Accept` gives JSON and HTML when it names them (wildcards name neither). */
function weights(accept: string): { json?: Weight; page?: Weight } {
  let json: Weight | undefined;
  let page: Weight | undefined;
  accept.split(',').forEach((part, at) => {
    const [range = '', ...params] = part.split(';').map((p) => p.trim());
    const qParam = params.find((p) => /^q\s*=/i.test(p));
    const parsed = qParam === undefined ? 1 : Number(qParam.split('=')[1]);
    const q = Number.isFinite(parsed) ? parsed : 0;
    const type = range.toLowerCase();
    if (type === 'application/json' && (json === undefined || q > json.q)) json = { q, at };
    if (type === 'text/html' && (page === undefined || q > page.q)) page = { q, at };
  });
  return { json, page };
}

/** Whether `a` wins over `b`: a higher weight, or the same weight listed first. */
const outranks = (a: Weight, b: Weight | undefined) =>
  b === undefined || a.q > b.q || (a.q === b.q && a.at < b.at);

/**
 * Whether the client asked for JSON: `application/json` listed with a weight above `text/html`'s
 * (or, at equal weight, before it). Wildcards never choose JSON, so browsers get the page.
 */
export function prefersJson(accept: string | undefined): boolean {
  const { json, page } = weights(accept ?? '');
  return json !== undefined && json.q > 0 && outranks(json, page);
}

/**
 * Whether the client asked for HTML by name, as browsers do. Errors are problem details as
 * everywhere in the API unless it did: only people get the not-found page.
 */
export function asksForHtml(accept: string | undefined): boolean {
  const { json, page } = weights(accept ?? '');
  return page !== undefined && page.q > 0 && outranks(page, json);
}

/**
 * Headers of every answer of the page, errors and 429 included: nothing may run or load, it is
 * not sniffed, framed or sent on as a referrer, and caches must ask again (a pass can be revoked
 * at any moment).
 */
const PAGE_HEADERS: Record<string, string> = {
  'content-security-policy': PASS_PAGE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-cache',
  'x-robots-tag': 'noindex',
  vary: 'Accept',
};

export function registerPassRoutes(app: FastifyInstance, registries: Registries): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.get(
    '/pass/:id',
    {
      // On every answer of the route, whoever sends it (the rate limit, the error handler).
      onSend: async (_request, reply, payload) => {
        reply.headers(PAGE_HEADERS);
        return payload;
      },
      schema: {
        security: [],
        tags: ['registry'],
        operationId: 'getPass',
        summary: 'Verify a PASS: its public page (no token)',
        description:
          'The public verification address of a PASS, for anyone it is shown to: title, issuer, creation time, status (valid or revoked) and anchoring, and its metadata and description unless it is encrypted. `Accept: application/json` gets JSON; anything else the HTML page. An unknown id, a malformed one and the id of a registry that is not a PASS are the same 404. Limited per client IP address (LEDGERHOOK_PASS_RATE_LIMIT).',
        // Any text that is not a PASS id is the same 404; what no id can hold (a control
        // character, more than 64 characters) is refused as everywhere else, by its form alone.
        params: Type.Object({
          id: Type.String({
            maxLength: 64,
            pattern: '^[^\\u0000-\\u001F\\u007F]*$',
            description: 'The id of the PASS',
          }),
        }),
        response: {
          200: {
            description: 'The pass, as JSON or as an HTML page',
            content: {
              'application/json': { schema: Type.Object({ data: PublicPass }) },
              'text/html': { schema: { type: 'string' } },
            },
          },
          400: problemResponse(400, 'The id holds a control character or is longer than 64 characters'),
          404: problemResponse(
            404,
            'No pass has this id, or it is not a PASS (a browser, asking for text/html, gets an HTML page)',
          ),
          429: problemResponse(
            429,
            'Over the limit per client IP address; retry after `Retry-After` seconds',
          ),
          503: problemResponse(503, 'The database is unavailable; retry after `Retry-After` seconds'),
        },
      },
    },
    async (request, reply) => {
      const accept = request.headers.accept;
      try {
        const pass = await registries.pass(request.params.id);
        if (prefersJson(accept)) return reply.type('application/json').send({ data: pass });
        return reply.type('text/html; charset=utf-8').send(renderPassPage(pass));
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
        if (asksForHtml(accept))
          return reply.code(404).type('text/html; charset=utf-8').send(renderPassNotFound());
        return sendProblem(reply, 404, 'not_found', PASS_NOT_FOUND);
      }
    },
  );
}
