import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Accounts, Principal } from '../accounts/service.js';
import { UnauthorizedError } from '../errors.js';

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

function presentedToken(request: FastifyRequest): string {
  const header = request.headers.authorization;
  const apiKey = request.headers['x-api-key'];
  if (Array.isArray(apiKey)) throw new UnauthorizedError('Send one x-api-key header, not several');
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
