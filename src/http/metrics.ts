import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { AnchorerStatus } from '../anchor/anchorer.js';
import type { AnchorStats } from '../anchor/batches.js';
import { timedOutByServer } from '../http-kit/request-timeout.js';
import type { OutboxStats } from '../notify/outbox.js';
import type { FollowerStatus } from '../watch/follower/follower.js';
import type { MempoolStatus } from '../watch/mempool/evm-mempool.js';
import type { RiskStatus } from '../watch/risk/provider.js';

/** Where the gauges read from, each optional: a process without a role reports nothing of it. */
export interface MetricSources {
  followers?: () => FollowerStatus[];
  mempools?: () => MempoolStatus[];
  /** Distinct watched addresses per network. */
  watchedAddresses?: () => Record<string, number>;
  /** Per network, logs that matched a followed event's topic0 but do not fit its ABI. */
  mismatchedLogs?: () => Record<string, number>;
  outbox?: () => Promise<OutboxStats>;
  /** Subscriptions by state: active, disabled, deleted. */
  subscriptions?: () => Promise<Record<string, number>>;
  /** Risk score lookups and their failures (in a watcher process with a risk provider). */
  risk?: () => RiskStatus;
  /** Registry anchoring: leaves waiting and batches by state (when anchoring is on). */
  anchoring?: () => Promise<AnchorStats>;
  /** The anchorer of this process, if it runs one. */
  anchorer?: () => AnchorerStatus | undefined;
  /** Long-polls of the event feed waiting in this process. */
  feedWaiting?: () => number;
}

/** Database-derived gauges are read at most this often, however often Prometheus scrapes. */
const DATABASE_READ_INTERVAL_MS = 5_000;

/** A function that runs `read` at most once per interval, sharing the result (or failure). */
function throttled<T>(read: () => Promise<T>, intervalMs: number): () => Promise<T> {
  let last: { at: number; value: Promise<T> } | undefined;
  return () => {
    const now = Date.now();
    if (!last || now - last.at >= intervalMs) last = { at: now, value: read() };
    const value = last.value;
    // A failed read is not kept: the next scrape tries again.
    value.catch(() => {
      if (last?.value === value) last = undefined;
    });
    return value;
  };
}

/**
 * The HTTP metrics (requests, latency, requests that ended before their answer); returns what
 * instruments a server with them, and what counts a request timed out before its headers came.
 */
function registerHttpMetrics(registry: Registry) {
  const requests = new Counter({
    name: 'ledgerhook_http_requests_total',
    help: 'HTTP requests served, by method, route and status code',
    labelNames: ['method', 'route', 'status_code'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'ledgerhook_http_request_duration_seconds',
    help: 'HTTP request latency, by method and route',
    labelNames: ['method', 'route'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });

  const clientAborts = new Counter({
    name: 'ledgerhook_http_client_aborts_total',
    help: "Requests that ended before their answer, by method, route and reason: client_closed (the client closed the connection: a body cut short, a hang-up while waiting) or request_timeout (the request, headers or body, did not arrive within the server's timeout: answered 408; method unknown and route unmatched when the headers never came)",
    labelNames: ['method', 'route', 'reason'] as const,
    registers: [registry],
  });

  function instrument(app: FastifyInstance): void {
    // The children of each label set, found by one string: prom-client hashes a labels object
    // on every call otherwise, a few per cent of a cheap request's CPU (bench/README.md).
    const series = new Map<string, { requests: { inc(): void }; duration: { observe(v: number): void } }>();
    app.addHook('onResponse', async (request, reply) => {
      // The route pattern, not the raw URL, keeps the label set small.
      const route = request.routeOptions.url ?? 'unmatched';
      const key = `${request.method} ${reply.statusCode} ${route}`;
      let found = series.get(key);
      if (!found) {
        found = {
          requests: requests.labels({
            method: request.method,
            route,
            status_code: String(reply.statusCode),
          }),
          duration: duration.labels({ method: request.method, route }),
        };
        series.set(key, found);
      }
      found.requests.inc();
      found.duration.observe(reply.elapsedTime / 1000);
    });
    // A client that hangs up gets no response, so onResponse never counts it; nor does it count
    // the 408 Node itself sends when the request does not arrive in time.
    app.addHook('onRequestAbort', async (request) => {
      clientAborts.inc({
        method: request.method,
        route: request.routeOptions.url ?? 'unmatched',
        reason: timedOutByServer(request.raw) ? 'request_timeout' : 'client_closed',
      });
    });
  }

  return {
    instrument,
    /** A connection cut off (408) before its request's headers came: there is no request to label. */
    headersTimedOut(): void {
      clientAborts.inc({ method: 'unknown', route: 'unmatched', reason: 'request_timeout' });
    },
  };
}

/** The delivery metrics of this process's dispatcher; returns the dispatcher's observer. */
function registerDeliveryMetrics(registry: Registry) {
  const attempts = new Counter({
    name: 'ledgerhook_delivery_attempts_total',
    help: 'Webhook delivery attempts made by this process, by outcome (delivered, retry, failed)',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const attemptDuration = new Histogram({
    name: 'ledgerhook_delivery_attempt_duration_seconds',
    help: 'Time from sending a webhook to its answer (or timeout)',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15],
    registers: [registry],
  });

  return {
    attempt(outcome: string, durationMs: number): void {
      attempts.inc({ outcome });
      attemptDuration.observe(durationMs / 1000);
    },
  };
}

/** Sets a gauge per label set from a fresh reading, dropping label sets that are gone. */
function perNetwork<T extends { network: string }>(
  registry: Registry,
  name: string,
  help: string,
  read: () => T[],
  value: (s: T) => number | null,
) {
  return new Gauge({
    name,
    help,
    labelNames: ['network'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const s of read()) {
        const v = value(s);
        if (v !== null) this.set({ network: s.network }, v);
      }
    },
  });
}

/** The chain followers and mempool watchers of a watcher process, per network, and the addresses it watches. */
function registerFollowerMetrics(registry: Registry, sources: MetricSources): void {
  const followers = () => sources.followers?.() ?? [];
  perNetwork(
    registry,
    'ledgerhook_follower_height',
    'Last block processed by this process’s follower',
    followers,
    (s) => s.height,
  );
  perNetwork(
    registry,
    'ledgerhook_follower_head',
    'Latest block the node reported',
    followers,
    (s) => s.head,
  );
  perNetwork(
    registry,
    'ledgerhook_follower_lag_blocks',
    'Blocks between the node’s head and the last processed',
    followers,
    (s) => (s.head === null || s.height === null ? null : Math.max(0, s.head - s.height)),
  );
  perNetwork(
    registry,
    'ledgerhook_follower_healthy',
    '1 while the follower’s last round succeeded',
    followers,
    (s) => (s.healthy ? 1 : 0),
  );
  perNetwork(
    registry,
    'ledgerhook_internal_transfers_available',
    'EVM networks: 1 while internal transfers are read from the node’s traces, 0 while they are not (traces off, or refused by the node)',
    followers,
    (s) => (s.internalTransfers === undefined ? null : s.internalTransfers ? 1 : 0),
  );
  perNetwork(
    registry,
    'ledgerhook_trace_gaps_open',
    'EVM networks: blocks committed without their internal transfers because the node could not trace them, not filled yet',
    followers,
    (s) => s.traceGaps?.count ?? null,
  );
  perNetwork(
    registry,
    'ledgerhook_follower_standby',
    '1 while another process holds the network',
    followers,
    (s) => (s.standby ? 1 : 0),
  );
  new Counter({
    name: 'ledgerhook_node_errors_total',
    help: 'Failed rounds of a network’s follower or mempool watcher (node unreachable, failing, or the database)',
    labelNames: ['network', 'component'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const s of followers()) this.inc({ network: s.network, component: 'follower' }, s.errors);
      for (const s of sources.mempools?.() ?? [])
        this.inc({ network: s.network, component: 'mempool' }, s.errors);
    },
  });
  new Counter({
    name: 'ledgerhook_contract_logs_not_fitting_total',
    help: 'Logs whose topic0 matched a followed contract event but whose topics or data do not fit its ABI (an ERC-721 Transfer against ERC-20’s): not that event, not notified',
    labelNames: ['network'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [network, n] of Object.entries(sources.mismatchedLogs?.() ?? {})) this.inc({ network }, n);
    },
  });
  new Gauge({
    name: 'ledgerhook_watched_addresses',
    help: 'Distinct addresses watched, per network (in a watcher process)',
    labelNames: ['network'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [network, n] of Object.entries(sources.watchedAddresses?.() ?? {})) this.set({ network }, n);
    },
  });
}

/** Risk score lookups and their failures (in a watcher process with a risk provider). */
function registerRiskMetrics(registry: Registry, sources: MetricSources): void {
  new Counter({
    name: 'ledgerhook_risk_lookups_total',
    help: 'Risk score lookups for addressesRiskRatio, per network',
    labelNames: ['network'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [network, n] of Object.entries(sources.risk?.().lookups ?? {})) this.inc({ network }, n);
    },
  });
  new Counter({
    name: 'ledgerhook_risk_failures_total',
    help: 'Risk providers that failed a lookup, so the notification went out without addressesRiskRatio: timeout, error, circuit_open',
    labelNames: ['network', 'provider', 'reason'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const { count, ...labels } of sources.risk?.().failures ?? []) this.inc(labels, count);
    },
  });
}

/** Long-polls of the event feed waiting in this process. */
function registerFeedMetrics(registry: Registry, sources: MetricSources): void {
  new Gauge({
    name: 'ledgerhook_feed_waiting_requests',
    help: 'Long-polls of GET /api/v1/events waiting for an event in this process',
    registers: [registry],
    collect() {
      this.set(sources.feedWaiting?.() ?? 0);
    },
  });
}

/** The outbox, read from the database at most every {@link DATABASE_READ_INTERVAL_MS}. */
function registerOutboxMetrics(registry: Registry, sources: MetricSources): void {
  const outbox = throttled(() => sources.outbox?.() ?? Promise.resolve(undefined), DATABASE_READ_INTERVAL_MS);
  new Gauge({
    name: 'ledgerhook_outbox_notifications',
    help: 'Notifications waiting in the outbox by state: pending (due or scheduled for a retry), held (for confirmations), failed (replayable)',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const stats = await outbox().catch(() => undefined);
      if (stats) for (const [state, n] of Object.entries(stats.byState)) this.set({ state }, n);
    },
  });
  new Gauge({
    name: 'ledgerhook_outbox_due_notifications',
    help: 'Pending notifications due now that no dispatcher holds',
    registers: [registry],
    async collect() {
      this.reset();
      const stats = await outbox().catch(() => undefined);
      if (stats) this.set(stats.due);
    },
  });
  new Gauge({
    name: 'ledgerhook_outbox_oldest_due_seconds',
    help: 'How long the oldest due notification has waited for a dispatcher (0 when none is due)',
    registers: [registry],
    async collect() {
      this.reset();
      const stats = await outbox().catch(() => undefined);
      if (stats) this.set(stats.oldestDueSeconds);
    },
  });
}

/** Registry anchoring (leaves waiting, batches by state, read like the outbox) and this process's anchorer. */
function registerAnchoringMetrics(registry: Registry, sources: MetricSources): void {
  const anchoring = throttled(
    () => sources.anchoring?.() ?? Promise.resolve(undefined),
    DATABASE_READ_INTERVAL_MS,
  );
  new Gauge({
    name: 'ledgerhook_anchor_leaves_waiting',
    help: 'Registry leaves waiting for an anchor batch',
    registers: [registry],
    async collect() {
      this.reset();
      const stats = await anchoring().catch(() => undefined);
      if (stats) this.set(stats.waiting);
    },
  });
  new Gauge({
    name: 'ledgerhook_anchor_batches',
    help: 'Anchor batches by state: pending (its transaction not yet deep enough), anchored, final',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const stats = await anchoring().catch(() => undefined);
      if (stats) for (const [state, n] of Object.entries(stats.batches)) this.set({ state }, n);
    },
  });
  new Gauge({
    name: 'ledgerhook_anchorer_healthy',
    help: "1 while this process's anchorer's last round succeeded (its node answered), else 0; absent in a standby",
    labelNames: ['network'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const status = sources.anchorer?.();
      if (status && !status.standby) this.set({ network: status.network }, status.healthy ? 1 : 0);
    },
  });
}

/** Subscriptions by state, read like the outbox. */
function registerSubscriptionMetrics(registry: Registry, sources: MetricSources): void {
  const subscriptionStates = throttled(
    () => sources.subscriptions?.() ?? Promise.resolve(undefined),
    DATABASE_READ_INTERVAL_MS,
  );
  new Gauge({
    name: 'ledgerhook_subscriptions',
    help: 'Subscriptions of every account by state: active, disabled (by 410 or failing too long), deleted',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const counts = await subscriptionStates().catch(() => undefined);
      if (counts) for (const [state, n] of Object.entries(counts)) this.set({ state }, n);
    },
  });
}

/** Prometheus metrics of one service instance (its own registry, so tests can run several). */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const http = registerHttpMetrics(registry);
  const delivery = registerDeliveryMetrics(registry);
  /** Where the gauges read from: filled in by `observe`, read at every scrape. */
  const sources: MetricSources = {};
  registerFollowerMetrics(registry, sources);
  registerRiskMetrics(registry, sources);
  registerFeedMetrics(registry, sources);
  registerOutboxMetrics(registry, sources);
  registerAnchoringMetrics(registry, sources);
  registerSubscriptionMetrics(registry, sources);

  return {
    registry,
    /** Where the gauges read from; set once the services exist. */
    observe(next: MetricSources): void {
      Object.assign(sources, next);
    },
    /** Counts delivery attempts; pass to the dispatcher as its observer. */
    delivery,
    /** Adds the HTTP metrics' hooks to a server. */
    instrument: http.instrument,
    headersTimedOut: http.headersTimedOut,
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
