/**
 * Which trace method a network's node is read with, against a real anvil (which answers both)
 * behind a JSON-RPC proxy that plays nodes refusing one or both.
 */
import { createPublicClient, http, type PublicClient, parseEther } from 'viem';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import {
  anvilClients,
  artifact,
  deploy,
  mined,
  type RpcProxy,
  startRpcProxy,
} from '../../../test/helpers/anvil.js';
import { type Anvil, startAnvil } from './anvil.js';
import { createTraceReader, type TracesStatus } from './trace-reader.js';

const TRACE_METHODS = ['debug_traceBlockByNumber', 'trace_block'];

describe('the trace reader', () => {
  let anvil: Anvil;
  let proxy: RpcProxy;
  let client: PublicClient;
  /** A block with one internal transfer: a forwarder paying 0x…dead 1 ether. */
  let block: { hash: `0x${string}`; number: bigint; transactions: { hash: `0x${string}` }[] };
  let forwarder: `0x${string}`;

  const refuse = (methods: string[]) =>
    proxy.intercept((request) =>
      methods.includes(request.method)
        ? { error: { code: -32601, message: `the method ${request.method} does not exist/is not available` } }
        : undefined,
    );
  const read = (reader: ReturnType<typeof createTraceReader>) => reader.read(block.number)(block);
  const asked = () => proxy.methods.filter((m) => TRACE_METHODS.includes(m));

  beforeAll(async () => {
    anvil = await startAnvil();
    const { publicClient, wallets } = anvilClients(anvil);
    forwarder = (await deploy(publicClient, wallets[0]!, 'Forwarder')).address.toLowerCase() as `0x${string}`;
    const receipt = await mined(
      publicClient,
      wallets[0]!.writeContract({
        address: forwarder,
        abi: artifact('Forwarder').abi,
        functionName: 'forward',
        args: ['0x000000000000000000000000000000000000dEaD'],
        value: parseEther('1'),
      }),
    );
    const full = await publicClient.getBlock({ blockNumber: receipt.blockNumber });
    block = {
      hash: full.hash,
      number: full.number,
      transactions: full.transactions.map((hash) => ({ hash })),
    };
    proxy = await startRpcProxy(anvil.rpcUrl);
    client = createPublicClient({ transport: http(proxy.url, { retryCount: 0 }), cacheTime: 0 });
  });
  afterAll(async () => {
    await proxy?.close();
    await anvil?.stop();
  });
  beforeEach(() => {
    proxy.intercept(() => undefined);
    proxy.methods.length = 0;
  });

  /** The block's one transaction and its one internal transfer. */
  const forwarded = () => [
    [
      {
        traceAddress: '0',
        frame: 'call',
        from: forwarder,
        to: '0x000000000000000000000000000000000000dead',
        value: 10n ** 18n,
      },
    ],
  ];

  test('auto reads callTracer where the node has it, and says so', async () => {
    const changes: TracesStatus[] = [];
    const reader = createTraceReader(client, 'auto', { onChange: (s) => changes.push({ ...s }) });
    expect(reader.status()).toMatchObject({ available: false, reason: 'not probed yet' });
    const moved = await read(reader);
    expect(moved).toEqual(forwarded());
    expect(reader.status()).toEqual({ available: true, method: 'debug_traceBlockByNumber', reason: null });
    expect(changes).toEqual([reader.status()]);
    expect(asked()).toEqual(['debug_traceBlockByNumber']);
  });

  test('auto falls back to trace_block on a node without debug methods, with the same transfers', async () => {
    refuse(['debug_traceBlockByNumber']);
    const reader = createTraceReader(client, 'auto');
    expect(await read(reader)).toEqual(forwarded());
    expect(reader.status()).toMatchObject({ available: true, method: 'trace_block' });
    // Known from then on: one request per block.
    await read(reader);
    expect(asked()).toEqual(['debug_traceBlockByNumber', 'trace_block', 'trace_block']);
  });

  test('a node refusing both: no traces, the reason, and the node asked again only after ten minutes', async () => {
    refuse(TRACE_METHODS);
    let now = 1_000_000;
    const reader = createTraceReader(client, 'auto', { now: () => now });
    expect(await read(reader)).toBeUndefined();
    expect(reader.status()).toEqual({
      available: false,
      method: null,
      reason:
        'the node refuses debug_traceBlockByNumber and trace_block: internal transfers are not notified',
    });
    expect(await read(reader)).toBeUndefined();
    expect(asked()).toHaveLength(2);
    // Another node behind the endpoint now (or the operator turned tracing on): found again.
    proxy.intercept(() => undefined);
    now += 9 * 60_000;
    expect(await read(reader)).toBeUndefined();
    now += 60_000;
    expect(await read(reader)).toEqual(forwarded());
    expect(reader.status().available).toBe(true);
  });

  test('a method named by the setting is the only one asked; off asks nothing', async () => {
    refuse(['debug_traceBlockByNumber']);
    const debugOnly = createTraceReader(client, 'debug');
    expect(await read(debugOnly)).toBeUndefined();
    expect(debugOnly.status().reason).toMatch(/refuses debug_traceBlockByNumber: /);
    const parity = createTraceReader(client, 'parity');
    expect(await read(parity)).toEqual(forwarded());
    const off = createTraceReader(client, 'off');
    expect(await read(off)).toBeUndefined();
    expect(off.status()).toMatchObject({ available: false, reason: /off/ });
    expect(asked()).toEqual(['debug_traceBlockByNumber', 'trace_block']);
  });

  test('a node that fails (not refuses) fails the read, to be retried: traces are not turned off', async () => {
    proxy.intercept((request) => (TRACE_METHODS.includes(request.method) ? { httpStatus: 503 } : undefined));
    const reader = createTraceReader(client, 'auto');
    await expect(read(reader)).rejects.toThrow();
    expect(reader.status().reason).toBe('not probed yet');
  });

  test('an answer of another block fails the read', async () => {
    proxy.intercept((request) => (TRACE_METHODS.includes(request.method) ? { result: [] } : undefined));
    await expect(read(createTraceReader(client, 'debug'))).rejects.toThrow(/TraceMismatch|transaction/);
    await expect(read(createTraceReader(client, 'parity'))).rejects.toThrow(/TraceMismatch|transaction/);
  });

  /** What each client answers for a block whose state it no longer has, as their sources write it. */
  const PRUNED_STATE: [string, { code: number; message: string; data?: string }][] = [
    ['geth, hash scheme', { code: -32000, message: 'required historical state unavailable (reexec=128)' }],
    ['geth, path scheme', { code: -32000, message: 'historical state not available in path scheme yet' }],
    [
      'geth, state history',
      { code: -32000, message: `historical state 0x${'ab'.repeat(32)} is not available` },
    ],
    ['geth, a missing trie node', { code: -32000, message: `missing trie node ${'cd'.repeat(32)} (path )` }],
    ['reth', { code: -32000, message: 'state at block #21000000 is pruned' }],
    ['reth, EIP-4444', { code: 4444, message: 'Pruned history unavailable' }],
    ['erigon 3', { code: -32000, message: 'old data not available due to pruning' }],
    ['nethermind', { code: -32002, message: `No state available for block 21000000 (0x${'ef'.repeat(32)})` }],
    [
      'nethermind, before its state check',
      {
        code: -32603,
        message: 'Internal error',
        data: `Nethermind.Trie.MissingTrieNodeException: Node 0x${'12'.repeat(32)} is missing from the DB`,
      },
    ],
  ];

  test.each(PRUNED_STATE)(
    "%s: a block whose state is pruned is a gap at once, with the node's words",
    async (_, error) => {
      proxy.intercept((request) => (TRACE_METHODS.includes(request.method) ? { error } : undefined));
      for (const setting of ['auto', 'debug', 'parity'] as const) {
        const outcome = await read(createTraceReader(client, setting));
        expect(outcome).toEqual({
          gap: expect.stringMatching(
            /^the node no longer has this block's state \(The node answered JSON-RPC error/,
          ),
        });
        expect((outcome as { gap: string }).gap).not.toContain(proxy.url.replace('http://', ''));
      }
    },
  );

  test("other failures are retried until the block's traces have failed for the wait, then it is a gap", async () => {
    proxy.intercept((request) => (TRACE_METHODS.includes(request.method) ? { httpStatus: 503 } : undefined));
    let now = 1_000_000;
    const reader = createTraceReader(client, 'debug', { now: () => now, waitMs: 60_000 });
    await expect(read(reader)).rejects.toThrow();
    now += 59_000;
    await expect(read(reader)).rejects.toThrow();
    now += 1_000;
    expect(await read(reader)).toEqual({
      gap: 'its traces kept failing for 60 s (The node answered HTTP 503)',
    });
    // The wait is counted per block: the next failure of it starts again.
    await expect(read(reader)).rejects.toThrow();
  });

  test('an answer of another block, failing for the wait, is a gap too; with a wait of 0 it never is', async () => {
    proxy.intercept((request) => (TRACE_METHODS.includes(request.method) ? { result: [] } : undefined));
    let now = 0;
    const waiting = createTraceReader(client, 'parity', { now: () => now, waitMs: 1_000 });
    await expect(read(waiting)).rejects.toThrow();
    now += 1_000;
    expect(await read(waiting)).toEqual({ gap: expect.stringMatching(/^its traces kept failing for 1 s/) });
    const forever = createTraceReader(client, 'parity', { now: () => now, waitMs: 0 });
    await expect(read(forever)).rejects.toThrow();
    now += 86_400_000;
    await expect(read(forever)).rejects.toThrow();
  });

  test('a block traced after failing is read in full, and its failures forgotten', async () => {
    let failing = true;
    proxy.intercept((request) =>
      failing && TRACE_METHODS.includes(request.method) ? { httpStatus: 502 } : undefined,
    );
    let now = 0;
    const reader = createTraceReader(client, 'debug', { now: () => now, waitMs: 10_000 });
    await expect(read(reader)).rejects.toThrow();
    failing = false;
    expect(await read(reader)).toEqual(forwarded());
    failing = true;
    now += 10_000;
    await expect(read(reader)).rejects.toThrow();
  });
});
