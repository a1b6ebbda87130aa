import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Accounts, Principal } from '../accounts/service.js';
import { type FieldError, UnauthorizedError, ValidationError } from '../errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
}

const BEARER = /^Bearer ([^\s]+)$/;

/**
 * Every route registered in `scope` requires a live API token: `Authorization: Bearer <token>`,
 * or `x-api-key: <token>` as Tatum's clients send it. When both are sent they must agree.
 */
export function requireBearerToken(scope: FastifyInstance, accounts: Accounts): void {
  scope.decorateRequest('principal', null as unknown as Principal);
  // onRequest runs before the body is read, so an unauthenticated client cannot make us parse it.
  scope.addHook('onRequest', async (request: FastifyRequest) => {
    const token = presentedToken(request);
    const principal = await accounts.authenticate(token);
    if (!principal) throw new UnauthorizedError('Unknown or revoked API token');
    request.principal = principal;
  });
}

/**
 * A request with two credentials headers is refused (400), as Svix and most gateways do: Node keeps
 * only the first Authorization header, and a proxy in front may have checked another one.
 */
function refuseRepeated(request: FastifyRequest): void {
  const raw = request.raw.rawHeaders;
  let authorization = 0;
  let apiKey = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    // Cheap first test on length: most requests have a dozen headers, none of these twice.
    if (name.length === 13 && name.toLowerCase() === 'authorization') authorization++;
    else if (name.length === 9 && name.toLowerCase() === 'x-api-key') apiKey++;
  }
  const errors: FieldError[] = [];
  if (authorization > 1) errors.push({ header: 'authorization', detail: 'is sent more than once; send one' });
  if (apiKey > 1) errors.push({ header: 'x-api-key', detail: 'is sent more than once; send one' });
  if (errors.length > 0) throw new ValidationError('Credentials sent more than once', errors);
}

function presentedToken(request: FastifyRequest): string {
  refuseRepeated(request);
  const header = request.headers.authorization;
  // One at most (refuseRepeated): Node would have joined several into one string.
  const apiKey = request.headers['x-api-key'] as string | undefined;
  let bearer: string | undefined;
  if (header !== undefined) {
    const match = BEARER.exec(header);
    if (!match?.[1]) throw new UnauthorizedError('Malformed Authorization header: expected "Bearer <token>"');
    bearer = match[1];
  }
  if (bearer !== undefined && apiKey !== undefined && apiKey !== bearer)
    throw new UnauthorizedError('Authorization and x-api-key name different tokens; send one');
  const token = bearer ?? apiKey;
  if (!token)
    throw new UnauthorizedError(
      'Missing API token: send Authorization: Bearer <token> (or x-api-key: <token>)',
    );
  return token;
}
