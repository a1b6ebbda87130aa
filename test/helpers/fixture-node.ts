import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'lossless-json';

/**
 * A stand-in for a chain node or indexer: a real HTTP server on loopback that answers from
 * recorded fixture files (or inline bodies) by method and path, and records every request.
 * Generic on purpose: REST APIs (Algorand indexer/algod, Esplora) map each path to a reply;
 * JSON-RPC APIs (Solana, bitcoind) map `POST /` to a function that looks at `request.json`.
 */

/** test/fixtures, where `file` paths that are not absolute are resolved. */
export const FIXTURES_DIR = fileURLToPath(new URL('../fixtures/', import.meta.url));

/** The absolute path of a file under test/fixtures. */
export const fixturePath = (...segments: string[]): string => path.join(FIXTURES_DIR, ...segments);

export interface FixtureRequest {
  method: string;
  /** The request target as sent, query included. */
  url: string;
  /** Without the query. */
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The body parsed as JSON (JSON.parse), when it is JSON. */
  json?: unknown;
  /** The route key that answered it; undefined when none matched. */
  route?: string;
}

export interface FixtureReply {
  /** Default 200. */
  status?: number;
  /** A file to send as is: absolute, or relative to test/fixtures. */
  file?: string;
  /** A value to send as JSON; bigints are written as exact integers. */
  json?: unknown;
  /** A body to send verbatim. */
  body?: string;
  /** content-type defaults to application/json for `json` and .json files, text/plain otherwise. */
  headers?: Record<string, string>;
  /** Answer only after this many milliseconds. */
  delayMs?: number;
  /** Never answer: the connection stays open until the client gives up or the server closes. */
  hang?: boolean;
}

export type FixtureRoute = FixtureReply | ((request: FixtureRequest) => FixtureReply | Promise<FixtureReply>);

/**
 * Routes are keyed `METHOD /path` (the path without the query, e.g. `GET /v2/transactions/ABC`)
 * or `METHOD /path?query` to match one exact query string, which then wins.
 */
export type FixtureRoutes = Record<string, FixtureRoute>;

export interface FixtureNodeOptions {
  /** The answer when no route matches; default 404 `{"message":"no fixture for METHOD /path"}`. */
  fallback?: FixtureRoute;
}

export interface FixtureNode {
  /** Base URL, `http://127.0.0.1:<port>`, without a trailing slash. */
  url: string;
  /** Every request received, in order. */
  requests: FixtureRequest[];
  /** Adds or replaces a route. */
  route(key: string, route: FixtureRoute): void;
  close(): Promise<void>;
}

function render(reply: FixtureReply): { status: number; headers: Record<string, string>; body: Buffer } {
  let body: Buffer;
  let type = 'text/plain';
  if (reply.file !== undefined) {
    const file = path.isAbsolute(reply.file) ? reply.file : fixturePath(reply.file);
    body = fs.readFileSync(file);
    if (file.endsWith('.json')) type = 'application/json';
  } else if (reply.json !== undefined) {
    body = Buffer.from(stringify(reply.json) ?? 'null');
    type = 'application/json';
  } else {
    body = Buffer.from(reply.body ?? '');
  }
  return {
    status: reply.status ?? 200,
    headers: { 'content-type': type, ...reply.headers },
    body,
  };
}

export async function startFixtureNode(
  initialRoutes: FixtureRoutes,
  options: FixtureNodeOptions = {},
): Promise<FixtureNode> {
  const routes = new Map(Object.entries(initialRoutes));
  const requests: FixtureRequest[] = [];
  const open = new Set<http.ServerResponse>();

  const fallback: FixtureRoute =
    options.fallback ??
    ((request) => ({ status: 404, json: { message: `no fixture for ${request.method} ${request.path}` } }));

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void (async () => {
        const target = new URL(req.url ?? '/', 'http://fixture.invalid');
        const method = req.method ?? 'GET';
        const body = Buffer.concat(chunks).toString('utf8');
        const request: FixtureRequest = {
          method,
          url: req.url ?? '/',
          path: target.pathname,
          query: target.searchParams,
          headers: req.headers,
          body,
        };
        try {
          request.json = body === '' ? undefined : JSON.parse(body);
        } catch {
          request.json = undefined;
        }
        const exact = `${method} ${target.pathname}${target.search}`;
        const byPath = `${method} ${target.pathname}`;
        const key = routes.has(exact) ? exact : routes.has(byPath) ? byPath : undefined;
        request.route = key;
        requests.push(request);

        const route = key === undefined ? fallback : routes.get(key)!;
        let reply: FixtureReply;
        try {
          reply = typeof route === 'function' ? await route(request) : route;
        } catch (err) {
          reply = { status: 500, body: `fixture route failed: ${(err as Error).message}` };
        }
        open.add(res);
        res.on('close', () => open.delete(res));
        if (reply.hang) return;
        const send = () => {
          if (res.destroyed) return;
          const rendered = render(reply);
          res.writeHead(rendered.status, rendered.headers);
          res.end(rendered.body);
        };
        if (reply.delayMs) setTimeout(send, reply.delayMs);
        else send();
      })();
    });
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    route(key, route) {
      routes.set(key, route);
    },
    async close() {
      for (const res of open) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
