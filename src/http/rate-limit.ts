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
    // Route-level onRequest hooks run after the scope's, so authentication has named the account.
    hook: 'onRequest',
    keyGenerator: (request: FastifyRequest) => request.principal.accountId,
    enableDraftSpec: true,
    cache: 100_000,
    errorResponseBuilder: (_request, context) =>
      new RateLimitedError(
        `Too many requests for this account (at most ${context.max} in a window); retry in ${context.after}`,
        Math.max(1, Math.ceil(context.ttl / 1000)),
      ),
  });
}
