/**
 * Risk scores for the `addressesRiskRatio` field of a notification (docs/watching-chains.md): the addresses a
 * watched address dealt with in one transaction, each with a score from 0 (nothing known) to 100.
 * Scores come from pluggable providers; whatever they do, a notification is never delayed past a
 * short deadline nor failed by them: the field is left out instead.
 */
import type { Logger } from 'pino';
import { LedgerhookError } from '../../errors.js';

/** Scores from 0 (nothing known) to 100 for the addresses it knows; the others are left out. */
export interface RiskProvider {
  /** Names the provider in metrics and logs (`lists`, `http`). */
  readonly name: string;
  scores(network: string, addresses: string[], signal?: AbortSignal): Promise<Map<string, number>>;
  close?(): Promise<void>;
}

export type RiskFailureReason = 'timeout' | 'error' | 'circuit_open';

/** A provider that answered nothing within its time. */
export class RiskTimeoutError extends LedgerhookError {
  constructor(ms: number) {
    super(`no risk scores within ${ms} ms`);
  }
}

/** A provider that is not asked at the moment because it kept failing. */
export class RiskCircuitOpenError extends LedgerhookError {
  constructor(message = 'the risk provider failed repeatedly and is not asked until its cool-down ends') {
    super(message);
  }
}

export function failureReason(err: unknown): RiskFailureReason {
  if (err instanceof RiskCircuitOpenError) return 'circuit_open';
  if (err instanceof RiskTimeoutError) return 'timeout';
  return 'error';
}

export interface RiskFailureCount {
  network: string;
  provider: string;
  reason: RiskFailureReason;
  count: number;
}

/** What `/metrics` reads: lookups per network and failures per network, provider and reason. */
export interface RiskStatus {
  lookups: Record<string, number>;
  failures: RiskFailureCount[];
}

/** Counters kept in memory and read by the metrics on each scrape (prom-client's `collect`). */
export function createRiskStats() {
  const lookups = new Map<string, number>();
  const failures = new Map<string, RiskFailureCount>();
  return {
    lookup(network: string): void {
      lookups.set(network, (lookups.get(network) ?? 0) + 1);
    },
    failure(network: string, provider: string, reason: RiskFailureReason): void {
      const key = `${network}\0${provider}\0${reason}`;
      const entry = failures.get(key) ?? { network, provider, reason, count: 0 };
      entry.count++;
      failures.set(key, entry);
    },
    status(): RiskStatus {
      return {
        lookups: Object.fromEntries(lookups),
        failures: [...failures.values()].map((entry) => ({ ...entry })),
      };
    },
  };
}

export type RiskStats = ReturnType<typeof createRiskStats>;

export const DEFAULT_RISK_DEADLINE_MS = 250;
/** A provider that keeps failing is logged once a minute, not once per notification. */
const FAILURE_LOG_INTERVAL_MS = 60_000;

export interface EnrichOptions {
  /** How long a notification may wait for its scores. */
  deadlineMs?: number;
  stats?: RiskStats;
  logger?: Pick<Logger, 'warn'>;
}

type Outcome = { scores: Map<string, number> } | { failure: RiskFailureReason; error: unknown };

/** Settles with the provider's scores or its failure, never later than `signal` aborts. */
function settle(provider: RiskProvider, network: string, addresses: string[], signal: AbortSignal) {
  return new Promise<Outcome>((resolve) => {
    const onAbort = () => resolve({ failure: 'timeout', error: signal.reason });
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    // Called inside a promise chain so that a provider throwing synchronously is a failure too.
    Promise.resolve()
      .then(() => provider.scores(network, addresses, signal))
      .then(
        (scores) => resolve({ scores }),
        (error: unknown) => resolve({ failure: failureReason(error), error }),
      )
      .finally(() => signal.removeEventListener('abort', onAbort));
  });
}

const lastLogged = new Map<string, number>();

function logFailure(logger: EnrichOptions['logger'], network: string, provider: string, outcome: Outcome) {
  if (!logger || !('failure' in outcome)) return;
  const key = `${network}\0${provider}\0${outcome.failure}`;
  const now = Date.now();
  if (now - (lastLogged.get(key) ?? -Infinity) < FAILURE_LOG_INTERVAL_MS) return;
  lastLogged.set(key, now);
  const err = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
  logger.warn(
    { network, provider, reason: outcome.failure, err },
    'risk scores unavailable: notifications go out without addressesRiskRatio (logged once a minute)',
  );
}

/**
 * The `addressesRiskRatio` value for the counterparties of one transaction: one `{address: score}`
 * per address, in the given order, 0 where nothing is known. Several providers are combined by
 * taking each address's highest score. Undefined (the field is left out) when any provider failed
 * or missed the deadline: a 0 must mean "no provider knows anything", not "one did not answer".
 * Never throws and never waits past the deadline; a late answer is dropped.
 */
export async function enrichWithRisk(
  providers: RiskProvider | readonly RiskProvider[],
  network: string,
  addresses: readonly string[],
  options: EnrichOptions = {},
): Promise<Record<string, number>[] | undefined> {
  const list = Array.isArray(providers) ? providers : [providers as RiskProvider];
  const deadlineMs = options.deadlineMs ?? DEFAULT_RISK_DEADLINE_MS;
  options.stats?.lookup(network);
  const unique = [...new Set(addresses)];
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new RiskTimeoutError(deadlineMs)), deadlineMs);
  try {
    const outcomes = await Promise.all(list.map((p) => settle(p, network, unique, controller.signal)));
    const highest = new Map<string, number>();
    let failed = false;
    outcomes.forEach((outcome, i) => {
      const name = list[i]!.name;
      if ('failure' in outcome) {
        failed = true;
        options.stats?.failure(network, name, outcome.failure);
        logFailure(options.logger, network, name, outcome);
        return;
      }
      for (const [address, score] of outcome.scores) {
        highest.set(address, Math.max(highest.get(address) ?? 0, score));
      }
    });
    if (failed) return undefined;
    return addresses.map((address) => ({ [address]: highest.get(address) ?? 0 }));
  } finally {
    clearTimeout(timer);
  }
}
