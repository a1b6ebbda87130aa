import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createPublicClient, HttpRequestError, http as httpTransport } from 'viem';
import { afterEach, describe, expect, it } from 'vitest';
import { UpstreamUnavailableError } from '../errors.js';
import { describeNodeError, isNodeError, nodeUnavailable } from './node-errors.js';

const servers: http.Server[] = [];

/** A loopback HTTP server answering every request with `handler`. */
async function serve(handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

const secretUrl = (host: string) => `http://user:pass@${host}/v3/SECRET?key=SECRET`;

/** A real viem client's failure against `host`, whose URL carries secrets. */
async function viemFailure(host: string, timeout = 10_000): Promise<unknown> {
  const client = createPublicClient({
    transport: httpTransport(secretUrl(host), { retryCount: 0, timeout }),
    cacheTime: 0,
  });
  const error = await client.getBlock({ blockTag: 'latest' }).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(error).toBeDefined();
  return error;
}

/** What a real viem client's failure against `host` is described as; the URL carries a secret. */
async function failureAt(host: string, timeout = 10_000): Promise<string> {
  const text = describeNodeError(await viemFailure(host, timeout));
  expect(text).not.toMatch(/SECRET|user|pass/);
  return text;
}

describe('describeNodeError', () => {
  it('names a node that does not answer in time', async () => {
    const host = await serve(() => {
      // never answers
    });
    expect(await failureAt(host, 200)).toBe(`The node at ${host} did not answer in time`);
  });

  it('names a node that drops the connection without answering', async () => {
    const host = await serve((req) => req.socket.destroy());
    expect(await failureAt(host)).toMatch(
      new RegExp(
        `^The node at ${host} (reset|closed) the connection \\((ECONNRESET|UND_ERR_SOCKET|EPIPE)\\)$`,
      ),
    );
  });

  it('names the JSON-RPC error a node answers', async () => {
    const host = await serve((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ jsonrpc: '2.0', id: 0, error: { code: -32005, message: 'daily limit reached' } }),
      );
    });
    expect(await failureAt(host)).toBe(
      `The node at ${host} answered JSON-RPC error -32005: daily limit reached`,
    );
  });

  it('names a DNS failure, as fetch reports it (the cause of its TypeError)', () => {
    // No test leaves loopback, so the resolver is not asked: this is the shape undici gives.
    const dns = Object.assign(new Error('getaddrinfo ENOTFOUND node.example'), {
      code: 'ENOTFOUND',
      hostname: 'node.example',
    });
    const error = new HttpRequestError({
      url: 'https://node.example/v3/SECRET',
      cause: new TypeError('fetch failed', { cause: dns }),
    });
    expect(describeNodeError(error)).toBe('The node at node.example was not found by DNS (ENOTFOUND)');
  });

  it('keeps the first line of an error that is not about reaching the node', () => {
    expect(describeNodeError(new Error('receipt of 0xab is in another block\nmore detail'))).toBe(
      'receipt of 0xab is in another block',
    );
  });
});

describe('nodeUnavailable, what a client is told', () => {
  const networkAt = (host: string) => ({
    name: 'ETH',
    rpcUrls: [secretUrl(host)],
    wsUrls: [],
    indexerUrls: [],
  });

  it("says which network's node failed and how, never the library's message or the node's URL", async () => {
    const host = await serve((req, res) => {
      res.writeHead(502, { 'content-type': 'text/plain' }).end(`bad gateway for ${req.url}`);
    });
    const error = await viemFailure(host);
    // viem's own message quotes the URL with its key, the request and its version.
    expect((error as Error).message).toMatch(/SECRET[\s\S]*viem@/);
    expect(isNodeError(error)).toBe(true);
    const told = nodeUnavailable(networkAt(host), error);
    expect(told.message).toBe('The ETH node is unavailable: The node answered HTTP 502');
    expect(told.cause).toBe(error);
  });

  it('keeps the JSON-RPC code a node answered, not what it said', async () => {
    const host = await serve((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: 0, error: { code: -32000, message: `no ${req.url}` } }));
    });
    expect(nodeUnavailable(networkAt(host), await viemFailure(host)).message).toBe(
      'The ETH node is unavailable: The node answered JSON-RPC error -32000',
    );
  });

  it('passes our own words on without the host or a secret the node echoed', () => {
    const host = 'node.example:8545';
    const ours = new UpstreamUnavailableError(
      `The node at ${host} answered 503: no /v3/SECRET?key=SECRET`,
      7,
    );
    const told = nodeUnavailable(networkAt(host), ours);
    expect(told.message).toBe('The ETH node is unavailable: The node answered 503: no [redacted]?[redacted]');
    expect(told.retryAfterSeconds).toBe(7);
  });

  it('says nothing of an error it does not recognise', () => {
    const odd = new TypeError(`Cannot read ${secretUrl('node.example')}`);
    expect(isNodeError(odd)).toBe(false);
    expect(nodeUnavailable(networkAt('node.example'), odd).message).toBe(
      'The ETH node is unavailable: The node failed unexpectedly',
    );
  });
});
