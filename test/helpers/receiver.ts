import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { waitFor } from './process.js';

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** Milliseconds since the receiver started. */
  at: number;
}

export interface Reply {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  /** Never answer (the connection stays open until the client gives up). */
  hang?: boolean;
  /** Answer after this many milliseconds. */
  delayMs?: number;
}

/** Decides the answer to each request; the default acknowledges as the contract asks. */
export type Responder = (request: ReceivedRequest, index: number) => Reply;

export const ACK: Reply = {
  status: 200,
  headers: { 'content-type': 'application/json' },
  body: '{"status":"success"}',
};

export interface Receiver {
  url: string;
  requests: ReceivedRequest[];
  respond(responder: Responder): void;
  /** Resolves when at least `count` requests have arrived. */
  waitForRequests(count: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

/** A real HTTP server on loopback that records every request and answers as told. */
export async function startReceiver(responder: Responder = () => ACK): Promise<Receiver> {
  const started = Date.now();
  const requests: ReceivedRequest[] = [];
  let respond = responder;
  const hanging = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const received: ReceivedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now() - started,
      };
      requests.push(received);
      const reply = respond(received, requests.length - 1);
      if (reply.hang) {
        hanging.add(res);
        return;
      }
      const send = () => {
        res.writeHead(reply.status ?? 200, reply.headers ?? {});
        res.end(reply.body ?? '');
      };
      if (reply.delayMs) setTimeout(send, reply.delayMs);
      else send();
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    requests,
    respond(next) {
      respond = next;
    },
    waitForRequests: (count, timeoutMs = 15_000) =>
      waitFor(
        () => (requests.length >= count ? requests : undefined),
        `${count} webhook requests`,
        timeoutMs,
      ),
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Every request's JSON body, its Standard Webhooks signature verified with the secret of the
 * subscription it names (throws on the first that does not verify).
 */
export function verifiedBodies(
  requests: readonly ReceivedRequest[],
  secrets: ReadonlyMap<string, string>,
): Record<string, unknown>[] {
  return requests.map((r) => {
    const body = JSON.parse(r.body) as Record<string, unknown>;
    new Webhook(secrets.get(body.subscriptionId as string)!).verify(
      r.body,
      r.headers as Record<string, string>,
    );
    return body;
  });
}
