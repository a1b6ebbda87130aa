/**
 * What the loopback chain nodes share: an HTTP server on 127.0.0.1 that can be stopped (the node
 * unreachable, its connections dropped) and started again on the same port, so that a follower
 * pointed at it sees an outage and a recovery.
 */
import type http from 'node:http';
import net, { type AddressInfo } from 'node:net';

export interface RestartableNode {
  /** Stop listening (unreachable) and drop connections; start() listens again on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export interface ListeningServer {
  port: number;
  start(): Promise<void>;
  /** Runs `beforeStop` (wake long polls, end sockets), then closes the server and its connections. */
  stop(): Promise<void>;
}

/** Listens on a free loopback port, remembered for restarts. */
export async function listenOnLoopback(
  server: http.Server,
  beforeStop?: () => void,
): Promise<ListeningServer> {
  let port = 0;
  const start = () =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      beforeStop?.();
      if (!server.listening) return resolve();
      server.close(() => resolve());
      server.closeAllConnections();
    });
  await start();
  port = (server.address() as AddressInfo).port;
  return { port, start, stop };
}

/** A loopback port with nothing listening on it (a node that refuses connections). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
