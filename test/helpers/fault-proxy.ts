import net from 'node:net';

/**
 * - `pass`: bytes flow both ways (frozen connections thaw, as after a network partition heals).
 * - `refuse`: the server is down: existing connections are closed and new ones refused.
 * - `black-hole`: connections are accepted and held but nothing is forwarded; existing ones freeze.
 * - `reset`: every connection, existing or new, is reset (RST).
 * - `mute`: what clients send is forwarded, what the server answers is dropped (answers lost on
 *   the way back: the server did the work, the client never hears of it).
 */
export type FaultMode = 'pass' | 'refuse' | 'black-hole' | 'reset' | 'mute';

export interface FaultProxy {
  readonly port: number;
  readonly mode: FaultMode;
  /** `url` with its host and port replaced by the proxy's. */
  through(url: string): string;
  setMode(mode: FaultMode): Promise<void>;
  /** Connections the proxy holds now, whatever their state. */
  connections(): number;
  close(): Promise<void>;
}

interface Link {
  client: net.Socket;
  /** Absent while a connection accepted during a black-hole waits to be forwarded. */
  upstream?: net.Socket;
  flowing: boolean;
  /** Flowing, but the server's answers are dropped. */
  muted: boolean;
}

/**
 * A TCP proxy on loopback that forwards to `target` and injects faults on command, so a test
 * can take a real database away from a real service and give it back.
 */
export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  let mode: FaultMode = 'pass';
  const links = new Set<Link>();
  const server = net.createServer((client) => accept(client));
  await listen(server, 0);
  const { port } = server.address() as net.AddressInfo;

  function drop(link: Link, reset: boolean): void {
    links.delete(link);
    for (const socket of [link.client, link.upstream]) {
      if (!socket || socket.destroyed) continue;
      if (reset) socket.resetAndDestroy();
      else socket.destroy();
    }
  }

  function freeze(link: Link): void {
    link.muted = false;
    link.client.pause();
    if (!link.upstream || !link.flowing) return;
    link.flowing = false;
    link.client.unpipe(link.upstream);
    link.upstream.unpipe(link.client);
    link.upstream.pause();
  }

  /** Forwards both ways; whatever arrived while frozen goes first, then any end of either side. */
  function forward(link: Link): void {
    if (link.flowing) {
      if (link.muted) link.upstream?.pipe(link.client);
      link.muted = false;
      return;
    }
    link.flowing = true;
    if (!link.upstream) {
      const upstream = net.connect(target.port, target.host);
      link.upstream = upstream;
      upstream.on('error', () => drop(link, true));
      upstream.on('close', () => drop(link, false));
    }
    link.client.pipe(link.upstream);
    link.upstream.pipe(link.client);
  }

  /** Forwards the client's bytes; the server's are read and discarded. */
  function mute(link: Link): void {
    forward(link);
    link.muted = true;
    link.upstream?.unpipe(link.client);
    link.upstream?.resume();
  }

  function accept(client: net.Socket): void {
    const link: Link = { client, flowing: false, muted: false };
    links.add(link);
    client.on('error', () => drop(link, true));
    client.on('close', () => drop(link, false));
    if (mode === 'reset') drop(link, true);
    else if (mode === 'black-hole') freeze(link);
    else if (mode === 'mute') mute(link);
    else forward(link);
  }

  return {
    port,
    get mode() {
      return mode;
    },
    through(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    async setMode(next) {
      const previous = mode;
      mode = next;
      if (next === 'refuse' || next === 'reset') {
        for (const link of [...links]) drop(link, next === 'reset');
      } else if (next === 'black-hole') {
        for (const link of links) freeze(link);
      } else if (next === 'mute') {
        for (const link of links) mute(link);
      } else {
        for (const link of links) forward(link);
      }
      if (next === 'refuse' && server.listening) await new Promise<void>((r) => server.close(() => r()));
      if (previous === 'refuse' && next !== 'refuse') await listen(server, port);
    },
    connections: () => links.size,
    async close() {
      mode = 'refuse';
      for (const link of [...links]) drop(link, false);
      if (server.listening) await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

function listen(server: net.Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
}
