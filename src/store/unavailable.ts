import { LedgerhookError } from '../errors.js';

/** A database query that got no answer within its deadline; its connection was closed. */
export class QueryTimeoutError extends LedgerhookError {
  readonly code = 'ETIMEDOUT';
  constructor(readonly timeoutMs: number) {
    super(`the database did not answer within ${timeoutMs} ms`);
  }
}

/** Socket errors: the server is down, unreachable, or the connection broke. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ENOTFOUND',
]);

/**
 * SQLSTATEs meaning "not now" rather than "not this": the server is shutting down or starting
 * (57P01-57P03), out of connections, memory or disk (class 53), or stopped a statement at its
 * deadline (57014 statement_timeout, 25P03 idle in transaction too long).
 */
function unavailableSqlState(code: string): boolean {
  return (
    code.startsWith('08') ||
    code.startsWith('53') ||
    code === '57P01' ||
    code === '57P02' ||
    code === '57P03' ||
    code === '57014' ||
    code === '25P03'
  );
}

/** What pg, pg-pool and PGlite say, without a code, when a connection is gone or never came. */
const MESSAGES = [
  'Connection terminated unexpectedly',
  'Connection terminated',
  'Connection terminated due to connection timeout',
  'timeout exceeded when trying to connect',
  'timeout expired',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Cannot use a pool after calling end on the pool',
  'Query read timeout',
  'PGlite is closed',
];

/**
 * True when `err` (or what drizzle wrapped in it) means the database cannot be reached right now:
 * refused, reset, timed out, terminated, shutting down, out of connections. Such a request may
 * succeed later unchanged, so it is 503 with Retry-After, never 500.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  let current: unknown = err;
  for (let depth = 0; current && depth < 5; depth++) {
    const { code, message } = current as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && (NETWORK_CODES.has(code) || unavailableSqlState(code))) return true;
    if (typeof message === 'string' && MESSAGES.includes(message)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
