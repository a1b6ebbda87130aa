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
  },
  { $id: 'Problem', description: 'RFC 9457 problem details (application/problem+json)' },
);

const problemRef = Type.Unsafe({ $ref: 'Problem#' });

/** Error responses shared by authenticated routes. */
export function problemResponses(...statuses: number[]) {
  const descriptions: Record<number, string> = {
    400: 'Invalid request; `errors` names each invalid field',
    401: 'Missing, malformed, unknown or revoked API token',
    404: 'Not found (or owned by another account)',
    409: 'Conflict',
    413: 'Body larger than the limit',
    415: 'Content-Type is not application/json',
  };
  return Object.fromEntries(
    statuses.map((s) => [s, { ...problemRef, description: descriptions[s] ?? 'Error' }]),
  );
}

export const PaginationQuery = {
  limit: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'Page size (1-100)' }),
  ),
  cursor: Type.Optional(
    Type.String({ minLength: 1, maxLength: 512, description: 'The `next_cursor` of the previous page' }),
  ),
};
