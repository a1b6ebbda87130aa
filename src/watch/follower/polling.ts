import type { Network } from '../../chains/networks.js';
import { describeNodeError, isNodeError, redactNodeUrls } from '../../chains/node-errors.js';
import type { Sleeper } from '../../shared/sleeper.js';
import { isDatabaseUnavailable } from '../../store/unavailable.js';

/**
 * A failed round as /readyz shows it (to anyone: it needs no token): which node failed and how,
 * by its host alone, or that the database is unavailable; never a node URL's path, query or
 * credentials, even when the node echoes them back in an error.
 */
export function describeWatchError(network: Network, err: unknown): string {
  if (!isNodeError(err) && isDatabaseUnavailable(err)) return 'The database is unavailable';
  return redactNodeUrls(network, describeNodeError(err));
}

export interface PollingOptions {
  /** Pause between successful rounds (a wake-up cuts it short). */
  intervalMs: number;
  /** Longest pause between retries after failures; the pause doubles from `intervalMs`. */
  maxBackoffMs: number;
  sleeper: Sleeper;
  /** A failed round in one line, for /readyz and the log (describeWatchError). */
  describe: (err: unknown) => string;
  isRunning: () => boolean;
  /** One round of work; may return a pause other than the interval (e.g. a standby's). */
  round: () => Promise<number | undefined>;
  /** Health shown in /readyz, and the failed rounds counted for /metrics. */
  status: { healthy: boolean; lastError: string | null; errors: number };
  /** A failed round: log it, forget what it may have left inconsistent. */
  onError: (message: string, retryInMs: number, err: unknown) => void;
}

/**
 * The loop of a chain watcher: rounds at an interval while the node answers, retries with
 * doubling backoff while it does not. A failing node never stops the process.
 */
export async function runPolling(options: PollingOptions): Promise<void> {
  const { sleeper, status } = options;
  let backoff = options.intervalMs;
  while (options.isRunning()) {
    try {
      const pause = await options.round();
      if (pause === undefined) {
        status.healthy = true;
        status.lastError = null;
        backoff = options.intervalMs;
      }
      await sleeper.sleep(pause ?? options.intervalMs);
    } catch (err) {
      if (!options.isRunning()) break;
      status.healthy = false;
      status.errors++;
      // Which node and what failed (status, refusal, timeout…), not only "HTTP request failed.".
      status.lastError = options.describe(err);
      options.onError(status.lastError, backoff, err);
      await sleeper.sleep(backoff);
      backoff = Math.min(options.maxBackoffMs, backoff * 2);
    }
  }
}
