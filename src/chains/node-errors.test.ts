import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createPublicClient, HttpRequestError, http as httpTransport } from 'viem';
import { afterEach, describe, expect, test } from 'vitest';
import { UpstreamUnavailableError } from '../errors.js';
import {
  describeNodeError,
  isLogRangeTooLarge,
  isNodeError,
  isStateUnavailable,
  nodeUnavailable,
} from './node-errors.js';

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

/** A real viem client of a loopback node that answers every request with `error` (with HTTP `status`). */
async function answering(error: { code: number; message: string }, status = 200) {
  const host = await serve((_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id: 0, error }));
  });
  return createPublicClient({ transport: httpTransport(`http://${host}`, { retryCount: 0 }), cacheTime: 0 });
}

/** What a request threw (undefined when it did not). */
const failureOf = (request: Promise<unknown>): Promise<unknown> =>
  request.then(
    () => undefined,
    (err: unknown) => err,
  );

describe('describeNodeError', () => {
  test('names a node that does not answer in time', async () => {
    const host = await serve(() => {
      // never answers
    });
    expect(await failureAt(host, 200)).toBe(`The node at ${host} did not answer in time`);
  });

  test('names a node that drops the connection without answering', async () => {
    const host = await serve((req) => req.socket.destroy());
    expect(await failureAt(host)).toMatch(
      new RegExp(
        `^The node at ${host} (reset|closed) the connection \\((ECONNRESET|UND_ERR_SOCKET|EPIPE)\\)$`,
      ),
    );
  });

  test('names the JSON-RPC error a node answers', async () => {
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

  test('names a DNS failure, as fetch reports it (the cause of its TypeError)', () => {
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

  test('keeps the first line of an error that is not about reaching the node', () => {
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

  test("says which network's node failed and how, never the library's message or the node's URL", async () => {
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

  test('keeps the JSON-RPC code a node answered, not what it said', async () => {
    const host = await serve((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: 0, error: { code: -32000, message: `no ${req.url}` } }));
    });
    expect(nodeUnavailable(networkAt(host), await viemFailure(host)).message).toBe(
      'The ETH node is unavailable: The node answered JSON-RPC error -32000',
    );
  });

  test('passes our own words on without the host or a secret the node echoed', () => {
    const host = 'node.example:8545';
    const ours = new UpstreamUnavailableError(
      `The node at ${host} answered 503: no /v3/SECRET?key=SECRET`,
      7,
    );
    const told = nodeUnavailable(networkAt(host), ours);
    expect(told.message).toBe('The ETH node is unavailable: The node answered 503: no [redacted]?[redacted]');
    expect(told.retryAfterSeconds).toBe(7);
  });

  test('says nothing of an error it does not recognise', () => {
    const odd = new TypeError(`Cannot read ${secretUrl('node.example')}`);
    expect(isNodeError(odd)).toBe(false);
    expect(nodeUnavailable(networkAt('node.example'), odd).message).toBe(
      'The ETH node is unavailable: The node failed unexpectedly',
    );
  });
});

describe('isLogRangeTooLarge: an eth_getLogs range a smaller one may pass', () => {
  const answered = (error: { code: number; message: string }, status = 200) =>
    answering(error, status).then((client) =>
      failureOf(client.getLogs({ fromBlock: 0n, toBlock: 100_000n })),
    );

  test.each([
    [-32005, 'query returned more than 10000 results'],
    [-32602, 'query exceeds max results 20000, retry with the range 1-2'],
    [-32602, 'query exceeds max block range 100000'],
    [-32000, 'Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range'],
    [-32000, 'exceed maximum block range: 5000'],
    [-32000, 'block range is too wide'],
    [-32602, 'eth_getLogs is limited to a 10,000 range'],
    [-32000, 'Block range limit exceeded.'],
    [-32000, 'Exceeded max range limit for eth_getLogs: 2000'],
    [-32000, 'query timeout exceeded'],
  ])('recognises %i "%s"', async (code, message) => {
    expect(isLogRangeTooLarge(await answered({ code, message }))).toBe(true);
  });

  test('recognises it in the body of an HTTP 400 some providers answer with', async () => {
    expect(
      isLogRangeTooLarge(
        await answered({ code: -32005, message: 'query returned more than 10000 results' }, 400),
      ),
    ).toBe(true);
  });

  test.each([
    [-32005, 'daily request count exceeded, request rate limited'],
    [-32000, 'header not found'],
    [429, 'Your app has exceeded its compute units per second capacity'],
    [-32601, 'the method eth_getLogs does not exist/is not available'],
  ])('refuses %i "%s": a smaller range would not pass', async (code, message) => {
    expect(isLogRangeTooLarge(await answered({ code, message }))).toBe(false);
  });

  test('refuses a node that does not answer', async () => {
    const host = await serve((req) => req.socket.destroy());
    expect(isLogRangeTooLarge(await viemFailure(host))).toBe(false);
  });
});

describe("isStateUnavailable: a node that no longer has a block's state", () => {
  const traced = (error: { code: number; message: string }) =>
    answering(error).then((client) =>
      failureOf(client.request({ method: 'trace_block' as never, params: ['0x1'] as never })),
    );

  // Every client's own words are checked in trace-reader.test.ts, through a real proxy.
  test.each([
    [-32000, 'execution reverted'],
    [-32000, 'header not found'],
    [-32005, 'request rate limited'],
    [-32601, 'the method trace_block does not exist/is not available'],
    [-32000, 'nonce too low: address 0xF0607e43F7Fb2C888324dEAb09E34e4aBfEE6483, tx: 8046 state: 8047'],
  ])('is not %i "%s": that may pass, or is another failure', async (code, message) => {
    expect(isStateUnavailable(await traced({ code, message }))).toBe(false);
  });

  test('is not a node that does not answer', async () => {
    const host = await serve((req) => req.socket.destroy());
    expect(isStateUnavailable(await viemFailure(host))).toBe(false);
  });
});
