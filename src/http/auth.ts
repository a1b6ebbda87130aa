import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Accounts, Principal } from '../accounts/service.js';
import { UnauthorizedError } from '../errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
}

const BEARER = /^Bearer ([^\s]+)$/;

/** Every route registered in `scope` requires `Authorization: Bearer <token>` of a live token. */
export function requireBearerToken(scope: FastifyInstance, accounts: Accounts): void {
  scope.decorateRequest('principal', null as unknown as Principal);
  // onRequest runs before the body is read, so an unauthenticated client cannot make us parse it.
  scope.addHook('onRequest', async (request: FastifyRequest) => {
    const header = request.headers.authorization;
    if (!header)
      throw new UnauthorizedError('Missing Authorization header: send Authorization: Bearer <token>');
    const match = BEARER.exec(header);
    if (!match?.[1]) throw new UnauthorizedError('Malformed Authorization header: expected "Bearer <token>"');
    const principal = await accounts.authenticate(match[1]);
    if (!principal) throw new UnauthorizedError('Unknown or revoked API token');
    request.principal = principal;
  });
}
