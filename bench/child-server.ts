/**
 * For the servers bench/api.ts starts as child processes (hello-server.ts, bare-create.ts): ends
 * the process after `close` on SIGTERM or SIGINT, and, when started with a stdin pipe
 * (EXIT_WITH_STDIN=1), once that pipe closes, so a bench that dies takes its servers with it.
 */
export function exitWhenStopped(close: () => Promise<unknown>): void {
  const stop = () => {
    close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  if (process.env.EXIT_WITH_STDIN === '1') {
    process.stdin.on('end', stop);
    process.stdin.resume();
  }
}
