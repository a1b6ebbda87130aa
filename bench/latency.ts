// Latency benchmark (bench/README.md): block mined → notification received at the receiver, p50,
// p99 and max, with the real service as a child process following a local anvil chain. Each block
// carries one transfer to a watched dev account; it counts as mined when `evm_mine` returns, and as
// notified when the receiver (in this process, on loopback, the same clock) has read the request.
// Beside it, the floor measured in the same run: fetching the block and its receipts right after it
// is mined and POSTing a notification-sized body to the same receiver, with no polling in between.
// Usage: npm run bench:latency [-- --blocks 200 --poll-intervals 2000,250 --block-time 250]
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Hex } from 'viem';
import { type Anvil, startAnvil } from '../src/chains/evm/anvil.js';
import {
  apiCall,
  type Backend,
  backendOption,
  backendsLine,
  cleanEnv,
  createScratchDatabaseIfUrl,
  databaseUrlOption,
  exitWithUsage,
  fixed,
  formatTable,
  freePort,
  jsonRpc,
  ledgerhookDatabaseEnv,
  logLevelOption,
  machineLine,
  makeTempDir,
  now,
  numberOption,
  onCleanup,
  percent,
  postJson,
  processCpuSeconds,
  quantile,
  runMain,
  type Server,
  serverToken,
  sleep,
  startServer,
  startTimingReceiver,
  stopServer,
  type TimingReceiver,
  toQuantity,
  waitUntilServing,
  wholeNumberOption,
} from './lib.js';

const NETWORK = 'DEVNET';
const DEFAULT_POLL_MS = 2_000;

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  blocks: number;
  warmup: number;
  blockTimeMs: number;
  pollIntervals: number[];
  floorBlocks: number;
  logLevel: string;
  databaseUrl: string | undefined;
  backend: Backend;
}

function readOptions(): Options {
  const { values } = parseArgs({
    options: {
      blocks: { type: 'string' },
      warmup: { type: 'string' },
      'block-time': { type: 'string' },
      'poll-intervals': { type: 'string' },
      'floor-blocks': { type: 'string' },
      backend: { type: 'string' },
      'log-level': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    exitWithUsage([
      'Usage: npm run bench:latency [-- options]',
      '  --blocks N            blocks measured per poll interval (BENCH_BLOCKS, default 200)',
      '  --warmup N            unmeasured blocks before them (BENCH_WARMUP, default 5)',
      '  --block-time MS       mean time between blocks, each uniformly 0.5-1.5 times it (BENCH_BLOCK_TIME, default 250)',
      '  --poll-intervals LIST LEDGERHOOK_WATCH_POLL_INTERVAL of each run, in ms (BENCH_POLL_INTERVALS, default 2000,250)',
      '  --floor-blocks N      blocks of each floor (reference) run (BENCH_FLOOR_BLOCKS, default 50)',
      '  --backend B           pglite or postgres (BENCH_BACKEND; default postgres with DATABASE_URL, else pglite)',
      '  --log-level L         LOG_LEVEL of Ledgerhook (BENCH_LOG_LEVEL, default warn)',
      'DATABASE_URL set: Ledgerhook runs on that PostgreSQL, in a database created for each run and dropped after it.',
      '',
    ]);
  }
  const databaseUrl = databaseUrlOption();
  const backend = backendOption(values.backend, databaseUrl);
  const pollRaw = values['poll-intervals'] ?? process.env.BENCH_POLL_INTERVALS ?? '2000,250';
  const pollIntervals = pollRaw.split(',').map((p) => {
    const ms = Number(p.trim());
    if (!Number.isInteger(ms) || ms < 10)
      throw new Error(`poll intervals are whole milliseconds >= 10, got "${p}"`);
    return ms;
  });
  return {
    blocks: wholeNumberOption(values.blocks, 'BENCH_BLOCKS', 200, 1),
    warmup: wholeNumberOption(values.warmup, 'BENCH_WARMUP', 5, 0),
    blockTimeMs: numberOption(values['block-time'], 'BENCH_BLOCK_TIME', 250, 1),
    pollIntervals,
    floorBlocks: wholeNumberOption(values['floor-blocks'], 'BENCH_FLOOR_BLOCKS', 50, 1),
    logLevel: logLevelOption(values['log-level']),
    databaseUrl,
    backend,
  };
}

// ---------------------------------------------------------------------------------------------
// The receiver: in this process, so that arrival and mining times come from one clock

// ---------------------------------------------------------------------------------------------
// The chain: one transfer per block, from dev account 0 to the watched dev account 1

interface Chain {
  anvil: Anvil;
  from: Hex;
  to: Hex;
  nonce: number;
}

/** Sends the transfer, mines it, and returns its hash and the moment `evm_mine` returned. */
async function mineTransfer(chain: Chain): Promise<{ hash: Hex; minedAt: number }> {
  const url = chain.anvil.rpcUrl;
  const hash = await jsonRpc<Hex>(url, 'eth_sendTransaction', [
    {
      from: chain.from,
      to: chain.to,
      value: toQuantity(1_000_000_000n),
      gas: toQuantity(21_000),
      maxFeePerGas: toQuantity(100_000_000_000n),
      maxPriorityFeePerGas: toQuantity(1_000_000_000n),
      nonce: toQuantity(chain.nonce++),
    },
  ]);
  await jsonRpc(url, 'evm_mine');
  return { hash, minedAt: now() };
}

/**
 * `blocks` blocks mined at random intervals (uniformly 0.5-1.5 times the block time, so blocks fall at
 * every phase of the follower's polling), without waiting for their notifications; then waits for all.
 * Returns the latency of each, mined → received.
 */
async function mineAndWait(
  chain: Chain,
  receiver: TimingReceiver,
  blocks: number,
  options: Options,
  server: Server | undefined,
  timeoutMs: number,
): Promise<number[]> {
  const mined = new Map<string, number>();
  for (let i = 0; i < blocks; i++) {
    await sleep(options.blockTimeMs * (0.5 + Math.random()));
    const { hash, minedAt } = await mineTransfer(chain);
    mined.set(hash, minedAt);
  }
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const missing = [...mined.keys()].filter((hash) => !receiver.arrivals.has(hash));
    if (missing.length === 0) break;
    if (server && server.exitCode !== undefined)
      throw new Error(`${server.name} exited (code ${server.exitCode}):\n${server.tail()}`);
    if (Date.now() > deadline) {
      throw new Error(
        `${missing.length} of ${blocks} notifications not received ${timeoutMs / 1000} s after the last block` +
          (server ? `; ${server.name} output:\n${server.tail()}` : ''),
      );
    }
    await sleep(5);
  }
  return [...mined].map(([hash, minedAt]) => receiver.arrivals.get(hash)! - minedAt);
}

// ---------------------------------------------------------------------------------------------
// Measurement

interface Row {
  label: string;
  latencies: number[];
  pollMs: number | undefined;
  /** Percent of one core used by Ledgerhook over the measured blocks. */
  serverCpu: number | undefined;
}

interface RpcBlock {
  hash: Hex;
  transactions: unknown[];
}

/**
 * The floor: right after each block is mined, fetch it with its transactions and receipts (what the
 * follower reads) and POST a notification-sized body to the receiver: no polling, no database, no
 * queue. What any design pays at least, on this machine.
 */
async function floor(chain: Chain, receiver: TimingReceiver, options: Options, label: string): Promise<Row> {
  const latencies: number[] = [];
  for (let i = 0; i < options.floorBlocks; i++) {
    await sleep(options.blockTimeMs * (0.5 + Math.random()) * 0.2);
    const { hash, minedAt } = await mineTransfer(chain);
    const head = await jsonRpc<Hex>(chain.anvil.rpcUrl, 'eth_blockNumber');
    const block = await jsonRpc<RpcBlock>(chain.anvil.rpcUrl, 'eth_getBlockByNumber', [head, true]);
    await jsonRpc(chain.anvil.rpcUrl, 'eth_getBlockReceipts', [block.hash]);
    const body = JSON.stringify({
      address: chain.from,
      txId: hash,
      type: 'native',
      blockNumber: Number(head),
      asset: 'ETH',
      amount: '-0.000000001',
      mempool: false,
      counterAddress: chain.to,
      id: crypto.randomUUID(),
      subscriptionId: crypto.randomUUID(),
      chain: NETWORK,
      watchedAddress: chain.to,
      confirmations: 1,
    });
    await postJson(receiver.url, body);
    latencies.push(receiver.arrivals.get(hash)! - minedAt);
  }
  return { label, latencies, pollMs: undefined, serverCpu: undefined };
}

interface ReadyBody {
  networks?: { network: string; height: number | null; lastError?: string | null }[];
}

/** Ledgerhook as shipped, following the anvil chain with this poll interval; one run measured. */
async function runLedgerhook(
  chain: Chain,
  receiver: TimingReceiver,
  options: Options,
  configFile: string,
  pollMs: number,
): Promise<Row> {
  const label = `${options.backend}, poll ${pollMs} ms${pollMs === DEFAULT_POLL_MS ? ' (default)' : ''}`;
  const scratch = await createScratchDatabaseIfUrl(
    options.backend === 'postgres' ? options.databaseUrl : undefined,
    `latency_${pollMs}`,
  );
  try {
    const port = await freePort();
    const env = cleanEnv({
      PORT: String(port),
      LEDGERHOOK_DATA_DIR: makeTempDir('ledgerhook-bench-latency-'),
      LEDGERHOOK_CONFIG: configFile,
      LEDGERHOOK_ALLOW_CIDRS: '127.0.0.0/8',
      LEDGERHOOK_WATCH_POLL_INTERVAL: `${pollMs}ms`,
      LOG_LEVEL: options.logLevel,
      ...ledgerhookDatabaseEnv(scratch?.url, 'ledgerhook-bench-latency'),
    });
    const server = startServer('ledgerhook', ['src/main.ts', 'serve'], env); // builds dist/ the first time
    const started = now();
    try {
      const base = `http://127.0.0.1:${port}`;
      await waitUntilServing(server, `${base}/healthz`);
      const token = await serverToken(server, env);
      const created = await apiCall(base, token, 'POST', '/api/v1/subscription', {
        type: 'ADDRESS_TRANSACTION',
        attr: { address: chain.to, chain: NETWORK, url: receiver.url },
        mempool: false,
      });
      if (created.status !== 201)
        throw new Error(`creating the subscription: HTTP ${created.status} ${JSON.stringify(created.body)}`);

      // The follower starts with the subscription, at the node's head.
      const head = Number(await jsonRpc<Hex>(chain.anvil.rpcUrl, 'eth_blockNumber'));
      const deadline = Date.now() + 30_000 + pollMs;
      for (;;) {
        const ready = (await (await fetch(`${base}/readyz`)).json()) as ReadyBody;
        const devnet = ready.networks?.find((n) => n.network === NETWORK);
        if (devnet?.height != null && devnet.height >= head) break;
        if (Date.now() > deadline)
          throw new Error(
            `the ${NETWORK} follower did not start: ${JSON.stringify(ready)}\n${server.tail()}`,
          );
        await sleep(20);
      }
      process.stdout.write(
        `  ${label}: serving and following after ${fixed((now() - started) / 1000, 1)} s; ` +
          `${options.warmup} warm-up blocks, then ${options.blocks} measured... `,
      );
      const timeoutMs = 30_000 + 2 * pollMs;
      if (options.warmup > 0) await mineAndWait(chain, receiver, options.warmup, options, server, timeoutMs);
      const cpuBefore = processCpuSeconds(server.proc.pid);
      const t0 = now();
      const latencies = await mineAndWait(chain, receiver, options.blocks, options, server, timeoutMs);
      const cpuAfter = processCpuSeconds(server.proc.pid);
      const serverCpu =
        cpuBefore === undefined || cpuAfter === undefined
          ? undefined
          : ((cpuAfter - cpuBefore) / ((now() - t0) / 1000)) * 100;
      const sorted = [...latencies].sort((a, b) => a - b);
      process.stdout.write(
        `p50 ${fixed(quantile(sorted, 0.5), 0)} ms, p99 ${fixed(quantile(sorted, 0.99), 0)} ms\n`,
      );
      return { label, latencies, pollMs, serverCpu };
    } finally {
      await stopServer(server);
    }
  } finally {
    await scratch?.drop();
  }
}

// ---------------------------------------------------------------------------------------------
// The run

function formatRows(rows: Row[]): string {
  return formatTable(
    [
      'run',
      'blocks',
      'min ms',
      'p50 ms',
      'p90 ms',
      'p99 ms',
      'max ms',
      'mean ms',
      'mean - poll/2 ms',
      'service cpu',
    ],
    rows.map((r) => {
      const sorted = [...r.latencies].sort((a, b) => a - b);
      const mean = sorted.reduce((sum, x) => sum + x, 0) / sorted.length;
      return [
        r.label,
        String(sorted.length),
        fixed(sorted[0] ?? Number.NaN, 1),
        fixed(quantile(sorted, 0.5), 1),
        fixed(quantile(sorted, 0.9), 1),
        fixed(quantile(sorted, 0.99), 1),
        fixed(sorted[sorted.length - 1] ?? Number.NaN, 1),
        fixed(mean, 1),
        r.pollMs === undefined ? '-' : fixed(mean - r.pollMs / 2, 1),
        percent(r.serverCpu),
      ];
    }),
  );
}

async function main(): Promise<void> {
  const options = readOptions();
  process.stdout.write(
    `bench:latency: ${backendsLine([options.backend], options.databaseUrl)}; ` +
      `poll intervals ${options.pollIntervals.join(', ')} ms; ${options.blocks} blocks per run, one every ` +
      `${fixed(options.blockTimeMs * 0.5, 0)}-${fixed(options.blockTimeMs * 1.5, 0)} ms; ${machineLine()}\n`,
  );
  const anvil = await startAnvil({ noMining: true });
  onCleanup(() => anvil.stop());
  const from = anvil.accounts[0]!.address;
  const chain: Chain = {
    anvil,
    from,
    to: anvil.accounts[1]!.address,
    nonce: Number(await jsonRpc<Hex>(anvil.rpcUrl, 'eth_getTransactionCount', [from, 'pending'])),
  };
  const configDir = makeTempDir('ledgerhook-bench-latency-config-');
  const configFile = path.join(configDir, 'ledgerhook.json');
  fs.writeFileSync(
    configFile,
    JSON.stringify({
      networks: {
        [NETWORK]: {
          family: 'evm',
          chainId: anvil.chainId,
          symbol: 'ETH',
          rpc: [anvil.rpcUrl],
          ws: [anvil.wsUrl],
        },
      },
    }),
  );
  // Block notifications are timed; mempool ones are not (the subscription asks for none).
  const receiver = await startTimingReceiver((body) => body.mempool !== true);

  const before = await floor(chain, receiver, options, 'floor (before)');
  process.stdout.write(
    `  floor (before): p50 ${fixed(
      quantile(
        [...before.latencies].sort((a, b) => a - b),
        0.5,
      ),
      1,
    )} ms\n`,
  );
  const rows: Row[] = [];
  for (const pollMs of options.pollIntervals) {
    rows.push(await runLedgerhook(chain, receiver, options, configFile, pollMs));
  }
  const after = await floor(chain, receiver, options, 'floor (after)');
  const reference: Row = {
    label: 'floor: fetch block + receipts, POST (reference)',
    latencies: [...before.latencies, ...after.latencies],
    pollMs: undefined,
    serverCpu: undefined,
  };

  process.stdout.write(
    [
      '',
      `block mined (evm_mine returned) → notification read by the receiver; ${options.blocks} blocks per run, ` +
        `one transfer each, mined every ${fixed(options.blockTimeMs * 0.5, 0)}-${fixed(options.blockTimeMs * 1.5, 0)} ms ` +
        `without waiting for notifications; Ledgerhook on ${options.backend}, LOG_LEVEL ${options.logLevel}`,
      formatRows([reference, ...rows]),
      `reference: ${options.floorBlocks} blocks before and ${options.floorBlocks} after the Ledgerhook runs, fetched ` +
        'and POSTed by this process as soon as evm_mine returned.',
      `receiver: ${receiver.duplicates} duplicate block notifications, ${receiver.others} mempool ones (not measured; the subscription asks for none).`,
      "The service is given the node's WebSocket endpoint: newHeads wakes the follower as each block arrives,",
      'so latency is fetching, matching, committing and the dispatcher sending. The poll interval',
      '(LEDGERHOOK_WATCH_POLL_INTERVAL) is only the floor for when the socket is down. "mean - poll/2" was the',
      'measure of that remainder while following by polling alone; with newHeads it is not meaningful.',
      'service cpu: percent of one core used by the Ledgerhook process over the measured blocks.',
      '',
    ].join('\n'),
  );
}

runMain('bench:latency', main); // cleans up: stops Ledgerhook and anvil, removes temp dirs, drops databases
