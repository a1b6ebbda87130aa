import { LedgerhookError } from '../errors.js';

/** Work that did not finish within its deadline. */
export class DeadlineExceededError extends LedgerhookError {
  readonly code = 'ETIMEDOUT';
  constructor(what: string, ms: number) {
    super(`${what} did not finish within ${ms} ms`);
  }
}

/**
 * Settles like `promise`, or rejects with DeadlineExceededError after `ms`. The work itself is not
 * stopped: use this where an answer is owed on time (a readiness probe) and the work is bounded
 * elsewhere.
 */
export function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineExceededError(what, ms)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}
