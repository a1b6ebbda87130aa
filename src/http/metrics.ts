import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

/** Prometheus metrics of one service instance (its own registry, so tests can run several). */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
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
    registry,
    /** Counts delivery attempts; pass to the dispatcher as its observer. */
    delivery: {
      attempt(outcome: string, durationMs: number): void {
        attempts.inc({ outcome });
        attemptDuration.observe(durationMs / 1000);
      },
    },
    instrument(app: FastifyInstance): void {
      app.addHook('onResponse', async (request, reply) => {
        // The route pattern, not the raw URL, keeps the label set small.
        const route = request.routeOptions.url ?? 'unmatched';
        requests.inc({ method: request.method, route, status_code: String(reply.statusCode) });
        duration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
      });
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
