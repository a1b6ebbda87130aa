/**
 * The `http` risk provider (docs/risk.md): POSTs `{"network", "addresses"}` to an operator's URL
 * and reads `{"scores"}` back (an address left out scores 0). Answers are cached per (network,
 * address) for a TTL; after `failureThreshold` failures in a row the service is not called for
 * `cooldownMs`, then one trial request closes the circuit or opens it again. The URL is the
 * operator's, like a node's, not a user's input: it does not go through the webhooks' SSRF-safe
 * egress, which would refuse the private or loopback address such a service usually has.
 * Redirects are not followed.
 */
import type { Logger } from 'pino';
import { Agent, type Dispatcher, request } from 'undici';
import { RiskCircuitOpenError, type RiskProvider, RiskTimeoutError } from './provider.js';

/** Larger answers are refused: a score per address needs far less. */
const MAX_RESPONSE_BYTES = 1024 * 1024;

export interface CircuitBreakerOptions {
  failureThreshold: number;
  cooldownMs: number;
  now: () => number;
}

export type CircuitState = 'closed' | 'open' | 'half_open';

/** Closed → (threshold failures in a row) → open → (cool-down over) → half-open: one trial. */
export function createCircuitBreaker({ failureThreshold, cooldownMs, now }: CircuitBreakerOptions) {
  let state: CircuitState = 'closed';
  let failures = 0;
  let openUntil = 0;
  let trialInFlight = false;
  return {
    state: () => state,
    /** Whether a call may be made now; in half-open state only the one trial may. */
    tryAcquire(): boolean {
      if (state === 'closed') return true;
      if (state === 'open' && now() < openUntil) return false;
      if (trialInFlight) return false;
      state = 'half_open';
      trialInFlight = true;
      return true;
    },
    success(): void {
      state = 'closed';
      failures = 0;
      trialInFlight = false;
    },
    /** Returns true when this failure opened the circuit. */
    failure(): boolean {
      failures++;
      trialInFlight = false;
      if (state !== 'half_open' && failures < failureThreshold) return false;
      state = 'open';
      openUntil = now() + cooldownMs;
      return true;
    },
  };
}

export interface HttpRiskProviderOptions {
  url: string;
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** A request without a complete answer by then fails. */
  timeoutMs: number;
  /** How long an answer is reused; 0 turns the cache off. */
  cacheTtlMs: number;
  /** Failures in a row that open the circuit; 5 by default. */
  failureThreshold?: number;
  /** How long an open circuit stays open; 30 s by default. */
  cooldownMs?: number;
  /** Entries kept at most; the oldest are dropped first. */
  maxCacheEntries?: number;
  logger?: Pick<Logger, 'warn' | 'info'>;
  now?: () => number;
}

/** The host of the URL, for logs: its path or query may hold an API key. */
const hostOf = (url: string) => new URL(url).host;

/** Reads a JSON body of at most MAX_RESPONSE_BYTES. */
async function readJson(body: Dispatcher.ResponseData['body']): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > MAX_RESPONSE_BYTES) {
      body.destroy();
      throw new Error(`answered more than ${MAX_RESPONSE_BYTES} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

/** The scores of an answer; anything but numbers from 0 to 100 makes the whole answer invalid. */
export function parseScoresAnswer(answer: unknown): Map<string, number> {
  const scores = (answer as { scores?: unknown } | null)?.scores;
  if (typeof scores !== 'object' || scores === null || Array.isArray(scores))
    throw new Error('answered without a "scores" object');
  const result = new Map<string, number>();
  for (const [address, score] of Object.entries(scores)) {
    if (typeof score !== 'number' || !(score >= 0 && score <= 100))
      throw new Error(`answered a score for ${address} that is not a number from 0 to 100`);
    result.set(address, score);
  }
  return result;
}

export function createHttpRiskProvider(options: HttpRiskProviderOptions): RiskProvider & {
  close(): Promise<void>;
  circuit(): CircuitState;
} {
  const now = options.now ?? Date.now;
  const maxEntries = options.maxCacheEntries ?? 100_000;
  const host = hostOf(options.url);
  const agent = new Agent({ connect: { timeout: options.timeoutMs }, keepAliveTimeout: 30_000 });
  const breaker = createCircuitBreaker({
    failureThreshold: options.failureThreshold ?? 5,
    cooldownMs: options.cooldownMs ?? 30_000,
    now,
  });
  const cache = new Map<string, { score: number; expires: number }>();
  const cacheKey = (network: string, address: string) => `${network}\0${address}`;

  function cached(network: string, address: string): number | undefined {
    const key = cacheKey(network, address);
    const entry = cache.get(key);
    if (!entry) return undefined;
    if (entry.expires > now()) return entry.score;
    cache.delete(key);
    return undefined;
  }

  function remember(network: string, addresses: string[], scores: Map<string, number>): void {
    if (options.cacheTtlMs <= 0) return;
    const expires = now() + options.cacheTtlMs;
    for (const address of addresses) {
      const key = cacheKey(network, address);
      // Re-inserting moves the key to the end, so the map's order is the order of expiry.
      cache.delete(key);
      cache.set(key, { score: scores.get(address) ?? 0, expires });
    }
    for (const key of cache.keys()) {
      if (cache.size <= maxEntries) break;
      cache.delete(key);
    }
  }

  async function ask(
    network: string,
    addresses: string[],
    signal?: AbortSignal,
  ): Promise<Map<string, number>> {
    const timeout = AbortSignal.timeout(options.timeoutMs);
    try {
      const { statusCode, body } = await request(options.url, {
        method: 'POST',
        dispatcher: agent,
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
        },
        body: JSON.stringify({ network, addresses }),
      });
      if (statusCode < 200 || statusCode > 299) {
        await body.dump();
        throw new Error(`the risk service at ${host} answered HTTP ${statusCode}`);
      }
      return parseScoresAnswer(await readJson(body));
    } catch (err) {
      if (timeout.aborted || signal?.aborted) throw new RiskTimeoutError(options.timeoutMs);
      throw err;
    }
  }

  return {
    name: 'http',
    circuit: () => breaker.state(),
    async scores(network, addresses, signal) {
      const result = new Map<string, number>();
      const missing: string[] = [];
      for (const address of addresses) {
        const score = cached(network, address);
        if (score === undefined) missing.push(address);
        else if (score > 0) result.set(address, score);
      }
      if (missing.length === 0) return result;
      if (!breaker.tryAcquire()) throw new RiskCircuitOpenError();
      let scores: Map<string, number>;
      try {
        scores = await ask(network, missing, signal);
      } catch (err) {
        if (breaker.failure())
          options.logger?.warn(
            { host, err: (err as Error).message },
            'risk service failing: not asked for a while',
          );
        throw err;
      }
      if (breaker.state() !== 'closed') options.logger?.info({ host }, 'risk service answers again');
      breaker.success();
      remember(network, missing, scores);
      for (const address of missing) {
        const score = scores.get(address);
        if (score !== undefined) result.set(address, score);
      }
      return result;
    },
    close: () => agent.close(),
  };
}
