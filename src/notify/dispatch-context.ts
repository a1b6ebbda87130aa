/**
 * What the parts of the dispatcher share (claims, sending, recording, the loop): its options with
 * their defaults resolved, built once per dispatcher, and the shapes that pass between the parts.
 */
import crypto from 'node:crypto';
import os from 'node:os';
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { Envelope } from '../secrets/envelope.js';
import type { Db, Store } from '../store/db.js';
import type { RetryPolicy } from './retry-policy.js';

/** What the dispatcher reports about each attempt, e.g. to Prometheus. */
export interface DeliveryObserver {
  attempt(outcome: 'delivered' | 'retry' | 'failed', durationMs: number): void;
}

export interface DispatcherOptions {
  store: Store;
  observer?: DeliveryObserver;
  /**
   * Release every claim at start. Only safe when no other dispatcher can share the database
   * (the embedded one, held by this process alone): claims left by a killed process go at once
   * instead of waiting for their lease to run out.
   */
  releaseAllClaimsOnStart?: boolean;
  envelope: Envelope;
  /** Outbound HTTP through the SSRF-safe connector. */
  httpDispatcher: Dispatcher;
  policy: RetryPolicy;
  logger: Logger;
  workerId?: string;
  /** Deliveries in flight at once. */
  concurrency?: number;
  /** Rows claimed per query. */
  batchSize?: number;
  /** How long a claim is held; longer than the request timeout, so a live worker never loses one. */
  leaseMs?: number;
  /** The floor under LISTEN/NOTIFY: due retries are found at least this often. */
  pollIntervalMs?: number;
  requestTimeoutMs?: number;
  /** A subscription failing for this long without one success is disabled. */
  disableAfterMs?: number;
  maxResponseBytes?: number;
  userAgent?: string;
  now?: () => number;
}

/** The dispatcher's options with every default filled in, and its logger. */
export interface DispatchContext {
  options: DispatcherOptions;
  store: Store;
  db: Db;
  envelope: Envelope;
  httpDispatcher: Dispatcher;
  policy: RetryPolicy;
  workerId: string;
  concurrency: number;
  batchSize: number;
  leaseMs: number;
  pollIntervalMs: number;
  requestTimeoutMs: number;
  disableAfterMs: number;
  maxResponseBytes: number;
  userAgent: string;
  now: () => number;
  log: Logger;
}

export function dispatchContext(options: DispatcherOptions): DispatchContext {
  const { store, envelope, httpDispatcher, policy, logger } = options;
  const db: Db = store.db;
  const workerId =
    options.workerId ?? `${os.hostname()}:${process.pid}:${crypto.randomBytes(3).toString('hex')}`;
  const concurrency = options.concurrency ?? 256;
  const batchSize = options.batchSize ?? 200;
  const leaseMs = options.leaseMs ?? 60_000;
  const pollIntervalMs = options.pollIntervalMs ?? 1_000;
  const requestTimeoutMs = options.requestTimeoutMs ?? 15_000;
  const disableAfterMs = options.disableAfterMs ?? 5 * 86_400_000;
  const maxResponseBytes = options.maxResponseBytes ?? 20 * 1024;
  const userAgent = options.userAgent ?? 'Ledgerhook-Webhooks';
  const now = options.now ?? Date.now;
  const log = logger.child({ component: 'dispatcher', workerId });
  return {
    options,
    store,
    db,
    envelope,
    httpDispatcher,
    policy,
    workerId,
    concurrency,
    batchSize,
    leaseMs,
    pollIntervalMs,
    requestTimeoutMs,
    disableAfterMs,
    maxResponseBytes,
    userAgent,
    now,
    log,
  };
}

/** A claimed notification, with what sending it needs of its subscription. */
export interface Job {
  id: string;
  subscriptionId: string;
  /** Sent as the Ledgerhook-Event-Type header, so receivers can route without parsing. */
  eventType: string;
  body: string;
  attempts: number;
  scheduleStep: number;
  armedBy: string;
  url: string;
  ack: string;
  /** Changes when the secret is rotated, so cached credentials are reloaded. */
  credentialsVersion: string;
  subscriptionStatus: string;
  subscriptionDeleted: boolean;
}

export type Outcome = 'delivered' | 'retry' | 'failed';

/** A finished job, waiting to be recorded. */
export interface Completion {
  id: string;
  subscriptionId: string;
  /** Absent when nothing was sent (the subscription was disabled meanwhile). */
  attempt?: {
    number: number;
    trigger: string;
    startedAt: Date;
    durationMs: number;
    statusCode: number | null;
    error: string | null;
    responseBody: string | null;
  };
  outcome: Outcome;
  scheduleStep: number;
  delayMs: number | null;
  statusCode: number | null;
  error: string | null;
  /** Disable the subscription at once (410 Gone). */
  disableReason?: string;
}

export const rowsOf = <T>(result: unknown): T[] => (result as { rows: T[] }).rows;
/** Binds a JS array as one PostgreSQL array parameter (drizzle would otherwise expand it into a list). */
export const list = (values: unknown[]) => sql.param(values);
