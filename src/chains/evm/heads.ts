import type { Logger } from 'pino';
import { createPublicClient, webSocket } from 'viem';
import type { ChainTip } from '../source.js';

interface WebSocketSubscriber {
  subscribe(args: {
    params: ['newHeads'];
    onData: (data: unknown) => void;
    onError: (err: Error) => void;
  }): Promise<{ unsubscribe: () => Promise<unknown> }>;
}

/**
 * The block a newHeads message announces (viem passes the message's params: `{ subscription,
 * result: header }`); undefined when it does not look like one, and the follower asks for the tip.
 */
export function announcedTip(data: unknown): ChainTip | undefined {
  const header = (data as { result?: { number?: unknown; hash?: unknown } } | undefined)?.result;
  if (typeof header?.number !== 'string' || typeof header.hash !== 'string') return undefined;
  if (!/^0x[0-9a-fA-F]{1,13}$/.test(header.number) || !/^0x[0-9a-fA-F]{64}$/.test(header.hash))
    return undefined;
  return { height: Number(header.number), hash: header.hash };
}

/**
 * New heads by WebSocket (`newHeads`) wake the follower at once, with the announced block's
 * height and hash; polling stays the floor, so a dropped socket only costs latency. Reconnection
 * is ours (with backoff, logged once per failure): viem's own reconnect loop prints its failures
 * to the console. Returns a function that ends the subscription at once, without waiting on the
 * node.
 */
export function subscribeToHeads(url: string, wake: (tip?: ChainTip) => void, logger: Logger): () => void {
  const log = logger.child({ component: 'heads' });
  let closed = false;
  let backoffMs = 1_000;
  /** This attempt's socket, taken when it was made: viem caches sockets by URL. */
  let current: Promise<{ close(): void }> | undefined;
  let retry: NodeJS.Timeout | undefined;

  /**
   * Closing the socket ends its subscriptions on the node. No eth_unsubscribe: over a socket
   * that died it is never answered, and viem would wait for the answer forever.
   */
  const drop = () => {
    const socket = current;
    current = undefined;
    void socket?.then((rpc) => rpc.close()).catch(() => {});
  };
  const reconnectLater = (why: string) => {
    if (closed || retry) return;
    log.warn({ err: why, retryInMs: backoffMs }, 'newHeads unavailable; following by polling meanwhile');
    drop();
    retry = setTimeout(() => {
      retry = undefined;
      connect();
    }, backoffMs);
    retry.unref();
    backoffMs = Math.min(60_000, backoffMs * 2);
  };
  function connect(): void {
    if (closed) return;
    const transport = createPublicClient({
      transport: webSocket(url, { reconnect: false, keepAlive: true, retryCount: 0 }),
    }).transport as unknown as WebSocketSubscriber & { getRpcClient(): Promise<{ close(): void }> };
    const socket = transport.getRpcClient();
    current = socket;
    transport
      .subscribe({
        params: ['newHeads'],
        onData: (data) => wake(announcedTip(data)),
        onError: (err: Error) => {
          if (current === socket) reconnectLater(err.message);
        },
      })
      .then(
        () => {
          // Closed or replaced while subscribing: this socket is no longer anyone's.
          if (current !== socket) {
            void socket.then((rpc) => rpc.close()).catch(() => {});
            return;
          }
          backoffMs = 1_000;
          // Blocks mined while the subscription was being set up brought no event: look now.
          wake();
        },
        (err: Error) => {
          if (current === socket) reconnectLater(err.message);
        },
      );
  }
  connect();
  return () => {
    closed = true;
    if (retry) clearTimeout(retry);
    drop();
  };
}
