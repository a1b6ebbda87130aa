// The subset of autocannon's programmatic API the benchmarks use (the package ships no types).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  namespace autocannon {
    interface Options {
      url: string;
      connections?: number;
      /** Seconds. */
      duration?: number;
      /** Requests to send, instead of a duration. */
      amount?: number;
      method?: string;
      headers?: Record<string, string>;
      body?: string;
      /** Seconds before a request counts as a timeout. */
      timeout?: number;
      pipelining?: number;
      /** Requests sent in turn by each connection; `setupRequest` may change one before it is sent. */
      requests?: { setupRequest?: (request: Request) => Request }[];
    }

    /** A request as `setupRequest` sees it (the options' fields, and the path). */
    interface Request {
      method?: string;
      path?: string;
      headers?: Record<string, string>;
      body?: string;
    }

    interface Stats {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      total: number;
      p50: number;
      p99: number;
    }

    interface Result {
      /** Per-second samples of completed requests. */
      requests: Stats & { sent: number };
      /** Milliseconds, 2xx responses only, whole milliseconds. */
      latency: Stats;
      throughput: Stats;
      duration: number;
      errors: number;
      timeouts: number;
      resets: number;
      non2xx: number;
      '2xx': number;
      statusCodeStats: Record<string, { count: number }>;
    }

    /** Emits `response` (client, statusCode, bytes, responseTimeMs) for every response. */
    interface Instance extends EventEmitter, PromiseLike<Result> {
      stop(): void;
    }
  }

  function autocannon(options: autocannon.Options): autocannon.Instance;
  export = autocannon;
}
