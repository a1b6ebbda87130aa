/**
 * Stopping, bounded by the configured deadline: each part registers its step as it starts, and
 * the parts made late (or only in a process with their role) are found in {@link LateParts}.
 */
import type { Logger } from 'pino';
import type { Anchorer } from '../anchor/anchorer.js';
import type { BackfillRunner } from '../backfill/runner.js';
import type { Config } from '../config.js';
import type { NotificationDispatcher } from '../notify/dispatcher.js';
import { type StopStep, stopAll } from '../shared/shutdown.js';
import type { Watcher } from '../watch/watcher.js';
import type { OpenedStore } from './store.js';

/** What stopping keeps back from its deadline for closing the database (and for recording results before it). */
export function shutdownReserveMs(shutdownTimeoutMs: number): number {
  return Math.min(1_000, Math.floor(shutdownTimeoutMs / 4));
}

/**
 * The parts made after the parts that reach them, or only in a process with their role: stopping,
 * the subscriptions, the metrics, the backfills and the readiness probe find them here once they exist.
 */
export interface LateParts {
  dispatcher?: NotificationDispatcher;
  watcher?: Watcher;
  anchorer?: Anchorer;
  backfillRunner?: BackfillRunner;
}

/** Stopping as {@link startApp} describes it; each part registers its step as it starts. */
export interface Shutdown {
  /** The parts that use the store, stopped together before it closes. */
  steps: StopStep[];
  /** What stopping keeps back from its deadline for closing the database. */
  reserveMs: number;
  /** Stops everything, once; a second call gets the first one's result. */
  close(): Promise<string[]>;
}

/** Stopping: the dispatcher stops claiming first, then the steps, then the database (with a reserve of its own). */
export function createShutdown(
  config: Config,
  opened: OpenedStore,
  logger: Logger,
  parts: LateParts,
): Shutdown {
  const { store, lock } = opened;
  /** The parts that use the store, stopped together before it closes. */
  const steps: StopStep[] = [];
  const reserveMs = shutdownReserveMs(config.shutdownTimeoutMs);
  let closing: Promise<string[]> | undefined;
  const shutdown = async (): Promise<string[]> => {
    const deadline = Date.now() + config.shutdownTimeoutMs;
    // First of all, before any await: from here on nothing is claimed or sent.
    parts.dispatcher?.stopClaiming();
    const late = await stopAll(steps.splice(0), deadline - reserveMs, logger);
    late.push(...(await stopAll([{ name: 'database', stop: () => store.close() }], deadline, logger)));
    lock?.release();
    return late;
  };
  const close = () => {
    closing ??= shutdown();
    return closing;
  };
  return { steps, reserveMs, close };
}
