/** Delays after the 1st, 2nd, … failed attempt: 10 attempts over about three days. */
export const DEFAULT_RETRY_SCHEDULE_MS = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  14 * 3_600_000,
  20 * 3_600_000,
  24 * 3_600_000,
];

// Durations are read by the configuration too: parsed in shared/, used here.
export { parseDuration, parseSchedule } from '../shared/durations.js';

export interface RetryDecision {
  /** Delay before the next attempt, or undefined when the attempts are used up. */
  delayMs: number | undefined;
}

export interface RetryPolicy {
  readonly maxAttempts: number;
  /**
   * After `attemptsSoFar` failed attempts (counted since the notification was armed), when to try
   * again. `retryAfterMs` is the endpoint's Retry-After, honoured within 1-2x the scheduled delay.
   */
  next(attemptsSoFar: number, retryAfterMs?: number): RetryDecision;
}

export function createRetryPolicy(
  scheduleMs: readonly number[] = DEFAULT_RETRY_SCHEDULE_MS,
  random: () => number = Math.random,
): RetryPolicy {
  return {
    maxAttempts: scheduleMs.length + 1,
    next(attemptsSoFar, retryAfterMs) {
      const base = scheduleMs[attemptsSoFar - 1];
      if (base === undefined) return { delayMs: undefined };
      // ±20% jitter spreads retries of many notifications that failed together.
      const jittered = Math.round(base * (0.8 + 0.4 * random()));
      if (retryAfterMs === undefined) return { delayMs: jittered };
      return { delayMs: Math.min(Math.max(retryAfterMs, jittered), 2 * jittered) };
    },
  };
}

/** Retry-After as milliseconds: delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return undefined;
  if (/^\d+$/.test(text.trim())) return Number(text.trim()) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
