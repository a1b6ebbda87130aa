/**
 * What every check of `ledgerhook doctor` reports: one line, its outcome first, what to do about
 * it last; and the deadline every check runs under, so that the command always ends.
 */

export type Outcome = 'ok' | 'warn' | 'FAIL' | 'skip';

import { LedgerhookError } from '../errors.js';

export interface Check {
  outcome: Outcome;
  /** What was checked: `database`, `network ETH`, `master key`… */
  subject: string;
  detail: string;
  /** What to do about a failure or a warning. */
  fix?: string;
}

export function formatCheck({ outcome, subject, detail, fix }: Check): string {
  return `${outcome.padEnd(6)}${subject}: ${detail}${fix ? ` — ${fix}` : ''}`;
}

/** "3s", "500ms": a duration as the configuration writes it. */
export function formatDuration(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}

/** A check that ran out of time. */
export class DeadlineError extends LedgerhookError {
  constructor(readonly ms: number) {
    super(`did not answer within ${formatDuration(ms)}`);
  }
}

/** `work`, or a DeadlineError after `ms`; the timer never holds the process. */
export function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError(ms)), ms);
    timer.unref();
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

/** The errors an error wraps (`cause`, AggregateError's `errors`), the outermost first. */
function* chain(err: unknown): Generator<Record<string, unknown>> {
  const seen = new Set<unknown>();
  const queue = [err];
  while (queue.length > 0) {
    const current = queue.shift();
    if (!current || typeof current !== 'object' || seen.has(current)) continue;
    seen.add(current);
    const record = current as Record<string, unknown>;
    yield record;
    queue.push(record.cause);
    if (Array.isArray(record.errors)) queue.push(...record.errors);
  }
}

const NETWORK_CODES: Record<string, string> = {
  ECONNREFUSED: 'refused the connection (nothing listens there)',
  ECONNRESET: 'closed the connection',
  ENOTFOUND: 'has a host name that does not resolve',
  EAI_AGAIN: 'has a host name that could not be resolved now',
  EHOSTUNREACH: 'is on a host that cannot be reached',
  ENETUNREACH: 'is on a network that cannot be reached',
  ETIMEDOUT: 'did not accept a connection in time',
};

/**
 * A failure to reach something, as one short clause ("refused the connection…", "did not answer
 * within 3s"), from whatever library raised it (viem, undici, node-postgres).
 */
export function describeUnreachable(err: unknown, timeoutMs: number): string {
  for (const e of chain(err)) {
    const code = typeof e.code === 'string' ? e.code : undefined;
    if (code && NETWORK_CODES[code]) return NETWORK_CODES[code]!;
    if (
      e.name === 'TimeoutError' ||
      e.name === 'DeadlineError' ||
      /timed? ?out|took too long/i.test(String(e.message))
    )
      return `did not answer within ${formatDuration(timeoutMs)}`;
    // node-http.ts says so without the cause.
    if (/could not be reached/.test(String(e.message))) return 'could not be reached';
  }
  const errors = [...chain(err)];
  const outer = String(errors[0]?.shortMessage ?? errors[0]?.message ?? err).split('\n')[0];
  const inner = String(errors.at(-1)?.message ?? '').split('\n')[0];
  return `failed: ${outer}${inner && inner !== outer ? ` (${inner})` : ''}`;
}

/** The first PostgreSQL (or system) error code in an error or what it wraps (drizzle wraps the driver's). */
export function errorCode(err: unknown): string | undefined {
  for (const e of chain(err)) if (typeof e.code === 'string') return e.code;
  return undefined;
}
