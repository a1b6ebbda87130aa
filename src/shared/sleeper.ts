/**
 * A sleep that another part of the program can cut short: a loop waits for work or a timeout,
 * whichever comes first. A wake-up that arrives while the loop is busy is kept, so the next sleep
 * returns at once and no signal is lost.
 */
export function createSleeper() {
  let wakeUp: (() => void) | undefined;
  let wokenWhileBusy = false;
  return {
    sleep(ms: number): Promise<void> {
      if (wokenWhileBusy) {
        wokenWhileBusy = false;
        return Promise.resolve();
      }
      return new Promise((resolve) => {
        const timer = setTimeout(done, ms);
        function done() {
          clearTimeout(timer);
          wakeUp = undefined;
          resolve();
        }
        wakeUp = done;
      });
    },
    wake(): void {
      if (wakeUp) wakeUp();
      else wokenWhileBusy = true;
    },
  };
}

export type Sleeper = ReturnType<typeof createSleeper>;
