import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  BaseError,
  BlockNotFoundError,
  createPublicClient,
  MethodNotFoundRpcError,
  type PublicClient,
  type Transport,
  http as viemHttp,
} from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Anvil, startAnvil } from './anvil.js';
import { jsonRpcHttp } from './rpc-transport.js';

/** How the loopback node answers one request: status, headers and body, or never. */
type Answer = { status?: number; type?: string; body: string; stallAfterHeaders?: boolean } | 'hold';

let anvil: Anvil;
let node: http.Server;
let nodeUrl: string;
let answer: (body: { id: number; method: string }) => Answer = () => 'hold';
const seen: http.IncomingHttpHeaders[] = [];

beforeAll(async () => {
  anvil = await startAnvil();
  node = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push(req.headers);
      const a = answer(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      if (a === 'hold') return;
      res.writeHead(a.status ?? 200, { 'content-type': a.type ?? 'application/json' });
      if (a.stallAfterHeaders) res.write(a.body.slice(0, 5));
      else res.end(a.body);
    });
  });
  await new Promise<void>((resolve) => node.listen(0, '127.0.0.1', resolve));
  nodeUrl = `http://127.0.0.1:${(node.address() as AddressInfo).port}`;
});

afterAll(async () => {
  node.closeAllConnections();
  await new Promise((resolve) => node.close(resolve));
  await anvil?.stop();
});

const clientOf = (transport: Transport): PublicClient => createPublicClient({ transport, cacheTime: 0 });
const ours = (url = nodeUrl, timeoutMs = 400, maxResponseBytes?: number) =>
  clientOf(jsonRpcHttp(url, { timeoutMs, maxResponseBytes }));
const viems = (url = nodeUrl, timeoutMs = 400) =>
  clientOf(viemHttp(url, { timeout: timeoutMs, retryCount: 0 }));

/** What a caller can tell of a failure: its classes along the cause chain and their fields. */
function failureOf(err: unknown) {
  expect(err).toBeInstanceOf(BaseError);
  const chain: Record<string, unknown>[] = [];
  let e = err as (BaseError & Record<string, unknown>) | undefined;
  while (e instanceof Error) {
    chain.push({
      name: e.name,
      code: e.code,
      status: e.status,
      details: e instanceof BaseError ? e.details : undefined,
    });
    e = e.cause as typeof e;
  }
  return chain;
}

async function failure(client: PublicClient, method = 'eth_blockNumber') {
  const err = await client.request({ method } as never).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, `${method} should fail`).toBeDefined();
  return err;
}

describe('JSON-RPC over undici', () => {
  test('reads a real node as viem’s own transport does', async () => {
    const a = clientOf(jsonRpcHttp(anvil.rpcUrl));
    const b = clientOf(viemHttp(anvil.rpcUrl));
    expect(await a.getChainId()).toBe(await b.getChainId());
    const [ourBlock, viemBlock] = await Promise.all([
      a.getBlock({ blockNumber: 0n }),
      b.getBlock({ blockNumber: 0n }),
    ]);
    expect(ourBlock).toEqual(viemBlock);
    // A block the node does not have: null, which viem turns into its own error.
    await expect(a.getBlock({ blockNumber: 10n ** 9n })).rejects.toBeInstanceOf(BlockNotFoundError);
  });

  test.each<[string, Answer]>([
    [
      'a JSON-RPC error',
      { body: '{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"header not found"}}' },
    ],
    [
      'a method the node lacks',
      { body: '{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no such method"}}' },
    ],
    ['a 503 with text', { status: 503, type: 'text/plain', body: 'upstream down' }],
    [
      'a 429 with a JSON-RPC error',
      { status: 429, body: '{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"rate"}}' },
    ],
    ['a 500 with JSON that is no JSON-RPC error', { status: 500, body: '{"error":"boom"}' }],
    ['a 200 that is not JSON', { type: 'text/html', body: '<html>proxy</html>' }],
  ])('%s fails as with viem’s own transport', async (_, given) => {
    answer = () => given;
    expect(failureOf(await failure(ours()))).toEqual(failureOf(await failure(viems())));
  });

  test('the method-missing error keeps its class, which the follower relies on', async () => {
    answer = () => ({ body: '{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no such method"}}' });
    expect(await failure(ours(), 'eth_getBlockReceipts')).toBeInstanceOf(MethodNotFoundRpcError);
  });

  test('a node that never answers, or stalls after its headers, times out within the deadline', async () => {
    for (const given of [
      'hold',
      { body: '{"jsonrpc":"2.0","id":1,"result":"0x1"}', stallAfterHeaders: true },
    ] as Answer[]) {
      answer = () => given;
      const started = performance.now();
      const err = await failure(ours(nodeUrl, 300));
      expect(failureOf(err)[0]!.name).toBe('TimeoutError');
      expect(performance.now() - started).toBeLessThan(5_000);
    }
  });

  test('an unreachable node is an HttpRequestError, as with viem’s transport, naming the cause', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
    const [theirs] = failureOf(await failure(viems(url)));
    const [mine] = failureOf(await failure(ours(url)));
    expect(mine).toEqual({ ...theirs, details: expect.stringContaining('ECONNREFUSED') });
  });

  test('an answer larger than the limit is cut off', async () => {
    answer = () => ({ body: JSON.stringify({ jsonrpc: '2.0', id: 1, result: 'x'.repeat(200_000) }) });
    const err = await failure(ours(nodeUrl, 2_000, 100_000));
    expect(failureOf(err)[0]!.name).toBe('ResponseBodyTooLargeError');
    expect(await ours(nodeUrl, 2_000, 300_000).request({ method: 'eth_blockNumber' } as never)).toHaveLength(
      200_000,
    );
  });

  test('credentials in the URL are sent as Basic authorization, not in the URL', async () => {
    answer = () => ({ body: '{"jsonrpc":"2.0","id":1,"result":"0x2a"}' });
    const withCredentials = nodeUrl.replace('http://', 'http://us%40er:p%3Ass@');
    expect(await ours(withCredentials).getBlockNumber()).toBe(42n);
    expect(seen.at(-1)!.authorization).toBe(`Basic ${Buffer.from('us@er:p:ss').toString('base64')}`);
  });
});
