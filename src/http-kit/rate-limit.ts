import rateLimit from '@fastify/rate-limit';
import type { FastifyContextConfig, FastifyInstance, FastifyRequest } from 'fastify';
import { RateLimitedError } from '../errors.js';

/** At most `max` requests per `windowMs`, per account, in one process. */
export interface RateLimit {
  max: number;
  windowMs: number;
}

/** Route config for a route with a limit of its own; without one the general limit applies. */
export function routeRateLimit(limit: RateLimit | undefined): FastifyContextConfig {
  return limit ? { rateLimit: { max: limit.max, timeWindow: limit.windowMs } } : {};
}

/**
 * Limits requests per account (the authenticated principal, so it must be registered in a scope
 * that authenticates first): over the limit is 429 with Retry-After and the IETF draft's
 * RateLimit-Limit, -Remaining and -Reset headers. Counts are kept in this process's memory.
 */
export async function registerRateLimit(scope: FastifyInstance, limit: RateLimit | undefined): Promise<void> {
  await scope.register(rateLimit, {
    // With no general limit, only routes that carry their own (routeRateLimit) are limited.
    global: limit !== undefined,
    max: limit?.max ?? 1,
    timeWindow: limit?.windowMs ?? 1_000,
    ...limitedBy((request) => request.principal.accountId, 'for this account'),
  });
}

/**
 * Limits requests per client IP address, for routes anyone may ask without a token (the public
 * pass page): over the limit is 429 with Retry-After, as for accounts. Behind a reverse proxy every
 * client shares the proxy's address.
 */
export async function registerIpRateLimit(
  scope: FastifyInstance,
  limit: RateLimit | undefined,
): Promise<void> {
  if (limit === undefined) return;
  await scope.register(rateLimit, {
    global: true,
    max: limit.max,
    timeWindow: limit.windowMs,
    ...limitedBy((request) => request.ip, 'from this address'),
  });
}

/** What both limits share: who is counted, the draft headers, and the 429 problem naming them. */
function limitedBy(key: (request: FastifyRequest) => string, who: string) {
  return {
    // Route-level onRequest hooks run after the scope's, so authentication has named the account.
    hook: 'onRequest' as const,
    keyGenerator: key,
    enableDraftSpec: true,
    cache: 100_000,
    errorResponseBuilder: (_request: FastifyRequest, context: { max: number; after: string; ttl: number }) =>
      new RateLimitedError(
        `Too many requests ${who} (at most ${context.max} in a window); retry in ${context.after}`,
        Math.max(1, Math.ceil(context.ttl / 1000)),
      ),
  };
}
