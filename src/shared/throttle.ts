/**
 * At most `perSecond` calls to `take` resolve per second (a token bucket holding one second's
 * worth), so a background job's requests leave the rest of a node's capacity to others.
 * `perSecond` 0 means no limit.
 */
export function createThrottle(perSecond: number, now: () => number = Date.now) {
  const capacity = Math.max(1, perSecond);
  let tokens = capacity;
  let last = now();
  let queue: Promise<void> = Promise.resolve();

  function refill(): void {
    const t = now();
    tokens = Math.min(capacity, tokens + ((t - last) * perSecond) / 1000);
    last = t;
  }

  return {
    perSecond,
    /** Resolves when one more request may be made; callers are served in order. */
    take(): Promise<void> {
      if (perSecond <= 0) return Promise.resolve();
      const turn = queue.then(async () => {
        refill();
        if (tokens < 1) {
          await new Promise((resolve) => setTimeout(resolve, Math.ceil(((1 - tokens) * 1000) / perSecond)));
          refill();
        }
        tokens -= 1;
      });
      queue = turn;
      return turn;
    },
  };
}

export type Throttle = ReturnType<typeof createThrottle>;
