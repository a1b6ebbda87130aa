import { Type } from 'typebox';

/** RFC 9457 problem details, as every error response of the API. */
export const ProblemSchema = Type.Object(
  {
    type: Type.String({ examples: ['urn:ledgerhook:problem:validation'] }),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    errors: Type.Optional(
      Type.Array(
        Type.Object({
          detail: Type.String(),
          pointer: Type.Optional(
            Type.String({ description: 'JSON pointer into the request body, e.g. #/metadata/0/value' }),
          ),
          parameter: Type.Optional(Type.String({ description: 'query or path parameter' })),
          header: Type.Optional(Type.String()),
        }),
      ),
    ),
    existingId: Type.Optional(Type.String({ description: 'A conflict with an existing resource: its id' })),
  },
  { $id: 'Problem', description: 'RFC 9457 problem details (application/problem+json)' },
);

const PROBLEM_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request (or the Authorization or x-api-key header sent twice); `errors` names each invalid field or header',
  401: 'Missing, malformed, unknown or revoked API token',
  404: 'Not found (or owned by another account)',
  405: 'The path exists, but not with this method; `Allow` lists the methods it has',
  409: 'Conflict',
  413: 'Body larger than the limit (LEDGERHOOK_BODY_LIMIT)',
  415: 'A non-empty body that is not application/json',
  429: 'Over the account’s rate limit; retry after `Retry-After` seconds',
  503: 'The database (or, for lookups, the network’s node) is unavailable; retry after `Retry-After` seconds',
};

/** One error response as served: RFC 9457 problem details, `application/problem+json`. */
export function problemResponse(status: number, description = PROBLEM_DESCRIPTIONS[status] ?? 'Error') {
  return {
    description,
    content: { 'application/problem+json': { schema: { $ref: 'Problem#' } } },
  };
}

/**
 * Error responses of an authenticated route: `statuses`, and those every such route may answer
 * (400 with credentials sent twice, 401 without a valid token, 429 over the rate limit, 503 while
 * the database is unavailable).
 */
export function problemResponses(...statuses: number[]) {
  const all = [...new Set([...statuses, 400, 401, 429, 503])].sort();
  return Object.fromEntries(all.map((s) => [s, problemResponse(s)]));
}

/** Of a route that reads a body: too large (413) and not JSON (415) besides `problemResponses`. */
export function bodyProblemResponses(...statuses: number[]) {
  return problemResponses(...statuses, 400, 413, 415);
}

export const PaginationQuery = {
  limit: Type.Optional(
    // No schema default: a default would be indistinguishable from a sent limit beside pageSize.
    Type.Integer({ minimum: 1, maximum: 100, description: 'Page size (1-100, default 20)' }),
  ),
  cursor: Type.Optional(
    Type.String({ minLength: 1, maxLength: 512, description: 'The `next_cursor` of the previous page' }),
  ),
};

/** Tatum's paging parameters, accepted beside ours on the lists Tatum has. */
export const TatumPaginationQuery = {
  pageSize: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 100, description: 'Same as `limit` (Tatum clients send it)' }),
  ),
  offset: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000,
      description: 'Items to skip, for clients that page by offset (Tatum); not with `cursor`',
    }),
  ),
};

/** The optional `Idempotency-Key` header of create routes. */
export const IdempotencyKeyHeader = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      description:
        '1-255 printable ASCII characters. The same key and body within 24 h return the first response (with `Idempotent-Replayed: true`); the same key with another body is 409.',
    }),
  ),
});
