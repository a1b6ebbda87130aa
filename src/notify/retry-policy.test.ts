import { describe, expect, test } from 'vitest';
import {
  createRetryPolicy,
  DEFAULT_RETRY_SCHEDULE_MS,
  parseRetryAfter,
  parseSchedule,
} from './retry-policy.js';

describe('retry policy', () => {
  test('ten attempts over about three days, each delay within ±20% of the schedule', () => {
    const policy = createRetryPolicy();
    expect(policy.maxAttempts).toBe(10);
    let total = 0;
    for (let failed = 1; failed <= 9; failed++) {
      const { delayMs } = policy.next(failed);
      const base = DEFAULT_RETRY_SCHEDULE_MS[failed - 1]!;
      expect(delayMs).toBeGreaterThanOrEqual(base * 0.8);
      expect(delayMs).toBeLessThanOrEqual(base * 1.2);
      total += delayMs!;
    }
    expect(policy.next(10).delayMs).toBeUndefined();
    expect(total / 86_400_000).toBeGreaterThan(2.4);
    expect(total / 86_400_000).toBeLessThan(3.6);
  });

  test('jitter spans the whole ±20% band', () => {
    expect(createRetryPolicy([1000], () => 0).next(1).delayMs).toBe(800);
    expect(createRetryPolicy([1000], () => 1).next(1).delayMs).toBe(1200);
  });

  test('Retry-After is honoured within one to two times the scheduled delay', () => {
    const policy = createRetryPolicy([10_000], () => 0.5);
    expect(policy.next(1, 15_000).delayMs).toBe(15_000);
    expect(policy.next(1, 1_000).delayMs).toBe(10_000);
    expect(policy.next(1, 3_600_000).delayMs).toBe(20_000);
  });

  test('parses schedules and Retry-After values', () => {
    expect(parseSchedule('5s,250ms,2m,1h,1d')).toEqual([5000, 250, 120_000, 3_600_000, 86_400_000]);
    expect(() => parseSchedule('5s,soon')).toThrow(/LEDGERHOOK_RETRY_SCHEDULE/);
    expect(parseRetryAfter('7')).toBe(7000);
    expect(
      parseRetryAfter(new Date(Date.UTC(2030, 0, 1, 0, 0, 30)).toUTCString(), Date.UTC(2030, 0, 1)),
    ).toBe(30_000);
    expect(parseRetryAfter('whenever')).toBeUndefined();
  });
});
