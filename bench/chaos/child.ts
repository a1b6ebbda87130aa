// The chaos run's helper processes (the proxies, the receivers): started through tsx with an IPC
// channel, asked things by numbered requests, killed with the run like every other child.
import { cleanEnv, type Server, startServer } from '../lib.js';

export interface Child {
  server: Server;
  /** What the child sent first ({ ev: 'listening', ... }). */
  hello: Record<string, unknown>;
  request<T = Record<string, unknown>>(message: Record<string, unknown>, timeoutMs?: number): Promise<T>;
  /** Messages the child sends of its own accord (not answers). */
  onEvent(listener: (message: Record<string, unknown>) => void): void;
  pid: number;
}

export async function startChild(name: string, script: string, args: string[]): Promise<Child> {
  const server = startServer(name, [script, ...args], cleanEnv({}), { ipc: true });
  let seq = 0;
  const waiting = new Map<number, (message: Record<string, unknown>) => void>();
  const listeners: Array<(message: Record<string, unknown>) => void> = [];
  const hello = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start:\n${server.tail()}`)), 60_000);
    void server.exited.then(() => reject(new Error(`${name} exited:\n${server.tail()}`)));
    server.proc.on('message', (message: Record<string, unknown>) => {
      if (message.ev === 'listening') {
        clearTimeout(timer);
        resolve(message);
      } else if (typeof message.seq === 'number') {
        waiting.get(message.seq)?.(message);
        waiting.delete(message.seq);
      } else {
        for (const listener of listeners) listener(message);
      }
    });
  });
  return {
    server,
    hello,
    pid: server.proc.pid!,
    onEvent: (listener) => listeners.push(listener),
    request<T>(message: Record<string, unknown>, timeoutMs = 60_000): Promise<T> {
      const id = ++seq;
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(id);
          reject(new Error(`${name} did not answer ${JSON.stringify(message)} in time`));
        }, timeoutMs);
        waiting.set(id, (answer) => {
          clearTimeout(timer);
          resolve(answer as T);
        });
        server.proc.send({ ...message, seq: id });
      });
    },
  };
}

export interface TcpProxy {
  port: number;
  child: Child;
  /** Forwards new connections to `port` and closes the existing ones (a virtual IP moved). */
  switchTarget(port: number): Promise<number>;
  cut(): Promise<void>;
  restore(): Promise<void>;
}

export async function startProxy(name: string, targetPort: number): Promise<TcpProxy> {
  const child = await startChild(name, 'bench/chaos/proxy-child.ts', [String(targetPort)]);
  return {
    port: child.hello.port as number,
    child,
    switchTarget: async (port) => (await child.request<{ closed: number }>({ cmd: 'target', port })).closed,
    cut: async () => {
      await child.request({ cmd: 'cut' });
    },
    restore: async () => {
      await child.request({ cmd: 'restore' });
    },
  };
}
