/**
 * Bounded shutdown: every step gets a deadline, and a step that has not finished by then is left
 * behind (and named) rather than waited for, so that stopping always ends.
 */

export interface StopStep {
  /** What the log calls it when it is late. */
  name: string;
  /** Stops the part; `until` (epoch ms) is the step's deadline, for parts that can use it. */
  stop: (until: number) => Promise<unknown>;
}

export interface StopLog {
  warn(details: object, message: string): void;
}

/**
 * Runs `steps` together, each until `until` (epoch ms). Resolves with the names of the steps that
 * had not finished by then; a step that fails is logged and counts as finished.
 */
export async function stopAll(steps: StopStep[], until: number, log: StopLog): Promise<string[]> {
  const late: string[] = [];
  await Promise.all(
    steps.map(async (step) => {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), Math.max(0, until - Date.now()));
      });
      const work = Promise.resolve()
        .then(() => step.stop(until))
        .then(
          () => 'done' as const,
          (err: unknown) => {
            log.warn({ err, step: step.name }, 'stopping failed; going on');
            return 'done' as const;
          },
        );
      const outcome = await Promise.race([work, deadline]);
      clearTimeout(timer);
      if (outcome === 'late') {
        late.push(step.name);
        log.warn({ step: step.name }, 'did not stop in time; left behind');
      }
    }),
  );
  return late;
}

/** The part of an HTTP server (Node's, or a Fastify instance's) that shutdown needs. */
export interface ClosableServer {
  close(): Promise<unknown>;
  server: { closeAllConnections(): void };
}

/**
 * Closes an HTTP server: it stops accepting at once and lets requests in flight finish until
 * `forceAt` (epoch ms), then closes the connections still open (a slow client, a stuck request).
 */
export async function closeServer(http: ClosableServer, forceAt: number): Promise<void> {
  const timer = setTimeout(() => http.server.closeAllConnections(), Math.max(0, forceAt - Date.now()));
  try {
    await http.close();
  } finally {
    clearTimeout(timer);
  }
}
