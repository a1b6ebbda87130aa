/** Durations as the configuration writes them ("250ms", "5s", "2h", "1d") and lists of them. */
import { ConfigError } from '../errors.js';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses "5s", "250ms", "2h", "5d". */
export function parseDuration(text: string, variable: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text.trim());
  if (!m)
    throw new ConfigError(
      variable,
      `has an invalid duration "${text.trim()}" (use e.g. 250ms, 5s, 5m, 2h, 1d)`,
    );
  return Math.round(Number(m[1]) * UNITS[m[2]!]!);
}

/** Parses a comma-separated schedule such as "5s,5m,30m". */
export function parseSchedule(text: string, variable = 'LEDGERHOOK_RETRY_SCHEDULE'): number[] {
  const delays = text.split(',').map((part) => parseDuration(part, variable));
  if (delays.length === 0 || delays.length > 50) throw new ConfigError(variable, 'must list 1-50 delays');
  return delays;
}
