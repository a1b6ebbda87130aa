// Ingest benchmark (bench/README.md): EVM blocks and transfers per second through the follower
// and the matcher with 1,000,000 watched addresses, beside the time to merely fetch the same blocks and
// receipts from the node in the same run: the limit of this machine and this node.
// A local anvil chain is built first (native transfers and ERC-20 transfers of a BenchToken, many per
// block); then the blocks are fetched (the reference), and the follower processes them in this process
// on embedded PGlite and (with DATABASE_URL) PostgreSQL, from a cursor set just before the first block.
// The evm-events pass (ingest-evm-events.ts) times a block's match with 10,000 contract event
// subscriptions beside today's; then Bitcoin, Algorand and Solana passes (ingest-*.ts).
// Usage: npm run bench:ingest [-- --blocks 100 --transfers-per-block 200 --watched 1000000]
//        npm run bench:ingest -- --rpc URL --from N --to M --watch FILE   (an existing chain's range)
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { type Abi, encodeFunctionData, getAddress, type Hex, isAddress, type PublicClient } from 'viem';
import { createAccounts } from '../src/accounts/service.js';
import { createTokenInfoCache, readBlockActivity } from '../src/chains/evm/activity.js';
import { type Anvil, startAnvil } from '../src/chains/evm/anvil.js';
import { evmSource, type FetchEvmActivity } from '../src/chains/evm/source.js';
import { createTraceReader } from '../src/chains/evm/trace-reader.js';
import type { EvmBlockActivity } from '../src/chains/evm/types.js';
import { loadNetworks, type Network, type NetworkCatalog } from '../src/chains/networks.js';
import type { BlockSource } from '../src/chains/source.js';
import { createIdempotency } from '../src/idempotency/service.js';
import { createEnvelope } from '../src/secrets/envelope.js';
import type { Db, Store } from '../src/store/db.js';
import { createSubscriptions } from '../src/subscriptions/service.js';
import { createFollower } from '../src/watch/follower/follower.js';
import type { AddressIndex } from '../src/watch/matching/address-index.js';
import { evmMatcher } from '../src/watch/notifications/evm.js';
import { chainCursors, chainHeaders } from '../src/watch/schema.js';
import { evmClient } from '../src/watch/watcher.js';
import { buildIndex, type IndexReport, NETWORK } from './evm-index.js';
import { algorandPass } from './ingest-algorand.js';
import { bitcoinPass } from './ingest-bitcoin.js';
import { evmEventsPass } from './ingest-evm-events.js';
import { solanaPass } from './ingest-solana.js';
import { solanaStreamPass } from './ingest-solana-stream.js';
import { tronPass } from './ingest-tron.js';
import {
  type Backend,
  backendsLine,
  backendsOption,
  childPids,
  commCpuDelta,
  commCpuSeconds,
  databaseUrlOption,
  exitWithUsage,
  fixed,
  formatTable,
  grouped,
  isLoopback,
  jsonRpc,
  jsonRpcBatch,
  logLevelOption,
  machineLine,
  now,
  numberOption,
  onCleanup,
  percent,
  processCpuSeconds,
  profiled,
  ROOT,
  type RpcCall,
  runMain,
  sleep,
  toQuantity,
  wholeNumberOption,
  withFreshStore,
} from './lib.js';

/** ERC-20 transfers per `transferMany` transaction. */
const BATCH = 20;
/** Distinct watched addresses the matching transfers go to, each a real subscription in the database. */
const HIT_POOL = 100;
/** Blocks fetched at once by the pipelined reference: a node's real limit, and the follower's read-ahead. */
const IN_FLIGHT = 8;

// ---------------------------------------------------------------------------------------------
// Options

interface Options {
  blocks: number;
  transfersPerBlock: number;
  watched: number;
  hitRate: number;
  /** The evm-events pass: contract event subscriptions applied, and the cases' event hit rates. */
  eventSubscriptions: number;
  eventHitRates: number[];
  matchSamples: number;
  logLevel: string;
  databaseUrl: string | undefined;
  backends: Backend[];
  /** Which chains' passes run (all by default). */
  passes: Pass[];
  /** Where each EVM pass writes a CPU profile of this process (none when undefined). */
  profileDir: string | undefined;
  /** --rpc: an existing chain's range instead of the passes (undefined: the chain is built on anvil). */
  followed: FollowedOptions | undefined;
  /** --serve-chain: where the built chain's watched addresses are written; nothing is measured. */
  serveChain: string | undefined;
  /** How the traced passes read traces (internal transfers); off: no traced passes. */
  traces: BenchTraces;
  /** The solana-stream pass: minutes streamed; its and the tron pass's random watched addresses. */
  minutes: number;
  streamWatched: number;
}

const BENCH_TRACES = ['debug', 'parity', 'off'] as const;
type BenchTraces = (typeof BENCH_TRACES)[number];

interface FollowedOptions {
  rpcUrl: string;
  from: number;
  to: number;
  watchFile: string | undefined;
}

/** A node's URL as printed: its origin only (a path or query may hold an API key). */
const redactUrl = (url: string) => new URL(url).origin;

const PASSES = [
  'evm',
  'evm-hits',
  'evm-events',
  'bitcoin',
  'algorand',
  'solana',
  'tron',
  'solana-stream',
] as const;
/** solana-stream runs for minutes: only when named. */
const DEFAULT_PASSES = PASSES.filter((p) => p !== 'solana-stream');

/**
 * The evm-hits pass: blocks full of hits (issue 33), the reference chain's shape with every
 * transfer notified: 2,000 blocks of 20 transfers (10 native, 10 ERC-20), each to a watched address.
 */
const FULL_HITS = { blocks: 2_000, transfersPerBlock: 20, hitRate: 1 } as const;
type Pass = (typeof PASSES)[number];

function followedOptions(values: {
  rpc?: string;
  from?: string;
  to?: string;
  watch?: string;
}): FollowedOptions | undefined {
  if (values.rpc === undefined) {
    if (values.from !== undefined || values.to !== undefined || values.watch !== undefined)
      throw new Error('--from, --to and --watch go with --rpc URL');
    return undefined;
  }
  const height = (flag: string, value: string | undefined) => {
    if (value === undefined || !/^\d+$/.test(value))
      throw new Error(`--rpc needs --${flag} N (a block number)`);
    return Number(value);
  };
  const from = height('from', values.from);
  const to = height('to', values.to);
  if (from < 1 || to < from) throw new Error('--from N --to M: 1 <= N <= M');
  if (values.watch !== undefined && !fs.existsSync(values.watch))
    throw new Error(`--watch ${values.watch}: no such file`);
  return { rpcUrl: values.rpc, from, to, watchFile: values.watch };
}

function readOptions(): Options {
  const { values } = parseArgs({
    options: {
      blocks: { type: 'string' },
      'transfers-per-block': { type: 'string' },
      watched: { type: 'string' },
      'hit-rate': { type: 'string' },
      'event-subscriptions': { type: 'string' },
      'event-hit-rates': { type: 'string' },
      'match-samples': { type: 'string' },
      backends: { type: 'string' },
      'log-level': { type: 'string' },
      passes: { type: 'string' },
      profile: { type: 'string' },
      rpc: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      watch: { type: 'string' },
      'serve-chain': { type: 'string' },
      traces: { type: 'string' },
      minutes: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    exitWithUsage([
      'Usage: npm run bench:ingest [-- options]',
      '  --blocks N               blocks measured (BENCH_BLOCKS, default 100)',
      '  --transfers-per-block N  transfers per block, half native, half ERC-20 in batches of 20',
      '                           (BENCH_TRANSFERS_PER_BLOCK, default 200)',
      '  --watched N              random watched addresses in the matcher (BENCH_WATCHED, default 1000000)',
      '  --hit-rate R             share of transfers to a watched address, notified (BENCH_HIT_RATE, default 0.01)',
      '  --backends LIST          pglite,postgres (BENCH_BACKENDS; default pglite, plus postgres with DATABASE_URL)',
      '                           PGlite runs on this thread; BENCH_PGLITE_WORKER=1 puts it on a worker thread, as',
      '                           the service does by default (LEDGERHOOK_PGLITE_WORKER)',
      '  --log-level L            level of the follower logger (BENCH_LOG_LEVEL, default warn)',
      '  --passes LIST            evm,evm-hits,evm-events,bitcoin,algorand,solana,tron,solana-stream (BENCH_PASSES,',
      '                           default all but solana-stream, which runs only when named);',
      '                           evm-hits is 2,000 blocks of 20 transfers, every one notified (--blocks,',
      '                           --transfers-per-block and --hit-rate do not apply to it)',
      '                           solana-stream: slots every 400 ms for --minutes, followed with --watched',
      '                           random watched addresses (default 10000000 for it)',
      '                           tron: 20 copies of mainnet block 69351239 with --watched random watched',
      '                           addresses (default 10000000 for it)',
      '  --event-subscriptions N  evm-events: contract event subscriptions applied (BENCH_EVENT_SUBSCRIPTIONS,',
      '                           default 10000)',
      '  --event-hit-rates LIST   evm-events: one case per share of followed logs made to match a subscription',
      '                           (BENCH_EVENT_HIT_RATES, default 0.01,0.1)',
      '  --match-samples N        evm-events: block matches timed per matcher and case (BENCH_MATCH_SAMPLES,',
      '                           default 3000)',
      '  --minutes N              solana-stream: minutes of the stream (BENCH_MINUTES, default 5)',
      '  --profile DIR            write a CPU profile of each EVM pass, evm-events case and solana-stream backend',
      '                           of this process to DIR',
      '  --traces M               debug (callTracer, the default), parity (trace_block) or off: the EVM pass also',
      "                           runs the follower reading each block's traces, beside fetching block, receipts",
      '                           and traces 8 blocks in flight (BENCH_TRACES)',
      '  --rpc URL --from N --to M [--watch FILE]',
      '                           instead of the passes: follow blocks N..M of the EVM node at URL (no chain',
      '                           built, anvil not started), the addresses of FILE (one per line) subscribed',
      '                           beside the --watched random ones; reports the time to the last block',
      '                           committed, peak rss, and the raw-fetch references over the same range',
      '  --serve-chain FILE       instead of the passes: build the chain on anvil (--blocks, --transfers-per-block,',
      '                           --hit-rate), write its watched addresses to FILE, print the --rpc command',
      '                           that follows it, and serve it until interrupted',
      'DATABASE_URL set: also on that PostgreSQL, in a database created for the run and dropped after it.',
      '',
    ]);
  }
  const databaseUrl = databaseUrlOption();
  const backends = backendsOption(values.backends, databaseUrl);
  const passes = (values.passes ?? process.env.BENCH_PASSES ?? DEFAULT_PASSES.join(','))
    .split(',')
    .map((p) => p.trim());
  for (const p of passes) {
    if (!(PASSES as readonly string[]).includes(p))
      throw new Error(`unknown pass "${p}" (${PASSES.join(', ')})`);
  }
  const traces = values.traces ?? process.env.BENCH_TRACES ?? 'debug';
  if (!(BENCH_TRACES as readonly string[]).includes(traces))
    throw new Error(`--traces must be one of ${BENCH_TRACES.join(', ')} (got "${traces}")`);
  const hitRate = numberOption(values['hit-rate'], 'BENCH_HIT_RATE', 0.01, 0);
  if (hitRate > 1) throw new Error('BENCH_HIT_RATE must be at most 1');
  const eventHitRates = (values['event-hit-rates'] ?? process.env.BENCH_EVENT_HIT_RATES ?? '0.01,0.1')
    .split(',')
    .map((rate) => Number(rate.trim()));
  if (eventHitRates.some((rate) => !(rate >= 0 && rate <= 1)))
    throw new Error('--event-hit-rates: a comma-separated list of shares between 0 and 1');
  return {
    blocks: wholeNumberOption(values.blocks, 'BENCH_BLOCKS', 100, 1),
    transfersPerBlock: wholeNumberOption(values['transfers-per-block'], 'BENCH_TRANSFERS_PER_BLOCK', 200, 2),
    watched: wholeNumberOption(values.watched, 'BENCH_WATCHED', 1_000_000, 0),
    hitRate,
    eventSubscriptions: wholeNumberOption(
      values['event-subscriptions'],
      'BENCH_EVENT_SUBSCRIPTIONS',
      10_000,
      1,
    ),
    eventHitRates,
    matchSamples: wholeNumberOption(values['match-samples'], 'BENCH_MATCH_SAMPLES', 3_000, 1),
    logLevel: logLevelOption(values['log-level']),
    databaseUrl,
    backends,
    passes: passes as Pass[],
    profileDir: values.profile,
    followed: followedOptions(values),
    serveChain: values['serve-chain'],
    traces: traces as BenchTraces,
    minutes: wholeNumberOption(values.minutes, 'BENCH_MINUTES', 5, 1),
    streamWatched: wholeNumberOption(values.watched, 'BENCH_WATCHED', 10_000_000, 0),
  };
}

// ---------------------------------------------------------------------------------------------
// The chain

/** A range of an EVM chain the follower is measured on: built on anvil, or an existing node's (--rpc). */
interface FollowedRange {
  rpcUrl: string;
  networks: NetworkCatalog;
  network: Network;
  first: number;
  last: number;
  /** Watched addresses with a subscription each (besides the random ones of the index), EIP-55. */
  subscribed: string[];
}

interface Chain extends FollowedRange {
  anvil: Anvil;
  transactions: number;
  native: number;
  erc20: number;
  /** The watched addresses transfers were sent to (EIP-55), one subscription each. */
  hitAddresses: Hex[];
  seconds: number;
}

interface RpcBlock {
  hash: Hex;
  parentHash: Hex;
  transactions: unknown[];
}

function benchTokenArtifact(): { abi: Abi; bytecode: Hex } {
  const file = path.join(ROOT, 'test/fixtures/contracts/artifacts.json');
  const artifacts = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, { abi: Abi; bytecode: Hex }>;
  const token = artifacts.BenchToken;
  if (!token) throw new Error(`${file} has no BenchToken: npx tsx test/fixtures/contracts/build.ts`);
  return token;
}

const randomHexAddress = (): Hex => `0x${crypto.randomBytes(20).toString('hex')}`;

/** Mines what is pending and checks that the block took all `expected` transactions. */
async function mine(url: string, expected: number): Promise<number> {
  await jsonRpc(url, 'evm_mine');
  const count = Number(await jsonRpc<Hex>(url, 'eth_getBlockTransactionCountByNumber', ['latest']));
  if (count !== expected)
    throw new Error(`the mined block holds ${count} transactions, ${expected} were sent`);
  return Number(await jsonRpc<Hex>(url, 'eth_blockNumber'));
}

/**
 * Builds the measured blocks on an anvil without automining: each block's transactions are sent in
 * one JSON-RPC batch (anvil signs for its unlocked dev accounts), then `evm_mine`. Half the transfers
 * are native (dev accounts 1-9 to fresh addresses), half ERC-20 Transfer events of a BenchToken
 * (`transferMany` from dev account 0, 20 recipients per transaction). Every 1/hitRate-th transfer goes
 * to one of the watched addresses.
 */
async function buildChain(options: Options): Promise<Chain> {
  const t0 = now();
  const anvil = await startAnvil({ noMining: true });
  onCleanup(() => anvil.stop());
  const url = anvil.rpcUrl;
  const networks = loadNetworks({}, [
    {
      name: NETWORK,
      aliases: [],
      family: 'evm',
      chainId: anvil.chainId,
      symbol: 'ETH',
      decimals: 18,
      rpcUrls: [url],
      wsUrls: [anvil.wsUrl],
      indexerUrls: [],
    },
  ]);
  const fees = {
    maxFeePerGas: toQuantity(100_000_000_000n),
    maxPriorityFeePerGas: toQuantity(1_000_000_000n),
  };
  const accounts = anvil.accounts.map((a) => a.address);
  const nonces = accounts.map(() => 0);
  const send = (from: number, tx: Record<string, string>): RpcCall => ({
    method: 'eth_sendTransaction',
    params: [{ from: accounts[from], nonce: toQuantity(nonces[from]!++), ...fees, ...tx }],
  });

  // The token, and a supply for dev account 0, in blocks before the measured ones.
  const { abi, bytecode } = benchTokenArtifact();
  const [deployHash] = await jsonRpcBatch<Hex>(url, [
    send(0, { data: bytecode, gas: toQuantity(3_000_000) }),
  ]);
  await mine(url, 1);
  const token = (await jsonRpc<{ contractAddress: Hex }>(url, 'eth_getTransactionReceipt', [deployHash]))
    .contractAddress;
  const mint = encodeFunctionData({ abi, functionName: 'mint', args: [accounts[0], 10n ** 30n] });
  await jsonRpcBatch(url, [send(0, { to: token, data: mint, gas: toQuantity(200_000) })]);
  const setupEnd = await mine(url, 1);

  const hitAddresses = Array.from({ length: HIT_POOL }, () => getAddress(randomHexAddress()));
  let hitCredit = 0;
  let hits = 0;
  const recipient = (): Hex => {
    hitCredit += options.hitRate;
    if (hitCredit < 1) return randomHexAddress();
    hitCredit -= 1;
    return hitAddresses[hits++ % HIT_POOL]!;
  };

  const native = Math.ceil(options.transfersPerBlock / 2);
  const erc20 = options.transfersPerBlock - native;
  let transactions = 0;
  for (let b = 0; b < options.blocks; b++) {
    const calls: RpcCall[] = [];
    for (let i = 0; i < native; i++) {
      const value = BigInt(1 + Math.floor(Math.random() * 1e15));
      calls.push(send(1 + (i % 9), { to: recipient(), value: toQuantity(value), gas: toQuantity(21_000) }));
    }
    for (let done = 0; done < erc20; done += BATCH) {
      const to = Array.from({ length: Math.min(BATCH, erc20 - done) }, recipient);
      const data = encodeFunctionData({ abi, functionName: 'transferMany', args: [to, 1_000_000n] });
      calls.push(send(0, { to: token, data, gas: toQuantity(80_000 + 40_000 * to.length) }));
    }
    await jsonRpcBatch(url, calls);
    await mine(url, calls.length);
    transactions += calls.length;
    if ((b + 1) % 25 === 0 && b + 1 < options.blocks)
      process.stdout.write(`  built ${b + 1} of ${options.blocks} blocks\n`);
  }
  return {
    anvil,
    networks,
    network: networks.find(NETWORK)!,
    first: setupEnd + 1,
    last: setupEnd + options.blocks,
    transactions,
    native: native * options.blocks,
    erc20: erc20 * options.blocks,
    hitAddresses,
    subscribed: hitAddresses,
    rpcUrl: url,
    seconds: (now() - t0) / 1000,
  };
}

// ---------------------------------------------------------------------------------------------
// Measurement

interface Row {
  label: string;
  blocks: number;
  transfers: number;
  seconds: number;
  notifications: number | undefined;
  /** Percent of one core: this process (follower, matcher and PGlite), anvil, local postgres processes. */
  benchCpu: number | undefined;
  anvilCpu: number | undefined;
  postgresCpu: number | undefined;
}

interface CpuMark {
  at: number;
  self: number;
  anvil: number | undefined;
  postgres: Map<number, number> | undefined;
}

function cpuMark(anvilPid: number | undefined, postgres: boolean): CpuMark {
  const self = process.cpuUsage();
  return {
    at: now(),
    self: (self.user + self.system) / 1e6,
    anvil: processCpuSeconds(anvilPid),
    postgres: postgres ? commCpuSeconds('postgres') : undefined,
  };
}

function cpuShares(a: CpuMark, b: CpuMark) {
  const seconds = (b.at - a.at) / 1000;
  const pct = (x: number | undefined, y: number | undefined) =>
    x === undefined || y === undefined ? undefined : ((y - x) / seconds) * 100;
  const pg = commCpuDelta(a.postgres, b.postgres);
  return {
    seconds,
    benchCpu: pct(a.self, b.self),
    anvilCpu: pct(a.anvil, b.anvil),
    postgresCpu: pg === undefined ? undefined : (pg / seconds) * 100,
  };
}

/**
 * The limit: each block with its transactions (`eth_getBlockByNumber`, full) and then its receipts
 * (`eth_getBlockReceipts` by hash), one after the other like the follower, parsed from JSON and
 * nothing more.
 */
async function rawFetch(
  chain: FollowedRange,
  label: string,
  transfers: number,
  anvilPid?: number,
): Promise<Row> {
  const url = chain.rpcUrl;
  const a = cpuMark(anvilPid, false);
  for (let n = chain.first; n <= chain.last; n++) {
    const block = await jsonRpc<RpcBlock>(url, 'eth_getBlockByNumber', [toQuantity(n), true]);
    const receipts = await jsonRpc<unknown[]>(url, 'eth_getBlockReceipts', [block.hash]);
    if (receipts.length !== block.transactions.length) throw new Error(`block ${n}: receipts missing`);
  }
  const b = cpuMark(anvilPid, false);
  return {
    label,
    blocks: chain.last - chain.first + 1,
    transfers,
    notifications: undefined,
    ...cpuShares(a, b),
  };
}

/**
 * The limit of a pipelined indexer: the same requests with `inFlight` blocks fetched at once (a
 * node's real limit; the follower reads up to 8 ahead).
 */
async function rawFetchInFlight(
  chain: FollowedRange,
  label: string,
  transfers: number,
  anvilPid: number | undefined,
  inFlight: number,
  /** Also each block's traces, after its receipts. */
  traces?: Exclude<BenchTraces, 'off'>,
): Promise<Row> {
  const url = chain.rpcUrl;
  const a = cpuMark(anvilPid, false);
  let next = chain.first;
  const worker = async (): Promise<void> => {
    for (let n = next++; n <= chain.last; n = next++) {
      const block = await jsonRpc<RpcBlock>(url, 'eth_getBlockByNumber', [toQuantity(n), true]);
      const receipts = await jsonRpc<unknown[]>(url, 'eth_getBlockReceipts', [block.hash]);
      if (receipts.length !== block.transactions.length) throw new Error(`block ${n}: receipts missing`);
      if (traces === 'debug') {
        const traced = await jsonRpc<unknown[]>(url, 'debug_traceBlockByNumber', [
          toQuantity(n),
          { tracer: 'callTracer' },
        ]);
        if (traced.length !== block.transactions.length) throw new Error(`block ${n}: traces missing`);
      } else if (traces === 'parity') {
        const traced = await jsonRpc<unknown[]>(url, 'trace_block', [toQuantity(n)]);
        if (traced.length < block.transactions.length) throw new Error(`block ${n}: traces missing`);
      }
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const b = cpuMark(anvilPid, false);
  return {
    label,
    blocks: chain.last - chain.first + 1,
    transfers,
    notifications: undefined,
    ...cpuShares(a, b),
  };
}

/** What the follower does per block before matching: the block and its receipts read (readBlockActivity), transfers extracted. */
async function fetchAndExtract(
  chain: FollowedRange,
  anvilPid: number | undefined,
): Promise<{ row: Row; blocks: EvmBlockActivity[] }> {
  const client = evmClient([chain.rpcUrl]);
  const blocks: EvmBlockActivity[] = [];
  const a = cpuMark(anvilPid, false);
  for (let n = chain.first; n <= chain.last; n++) blocks.push(await readBlockActivity(client, BigInt(n)));
  const b = cpuMark(anvilPid, false);
  const transfers = blocks.reduce((sum, block) => sum + block.transfers.length, 0);
  return {
    row: {
      label: 'fetch + extract (readBlockActivity)',
      blocks: blocks.length,
      transfers,
      notifications: undefined,
      ...cpuShares(a, b),
    },
    blocks,
  };
}

// ---------------------------------------------------------------------------------------------
// The matcher's index

/** Lookups per second in the index, for the from and to of every transfer of the chain (repeated). */
function lookupRate(index: AddressIndex, blocks: EvmBlockActivity[]): { perSecond: number; matched: number } {
  const addresses = blocks.flatMap((b) => b.transfers.flatMap((t) => [t.from, t.to]));
  let lookups = 0;
  let matched = 0;
  const t0 = now();
  do {
    matched = 0;
    for (const address of addresses) matched += index.lookup(NETWORK, address).length;
    lookups += addresses.length;
  } while (now() - t0 < 500);
  return { perSecond: lookups / ((now() - t0) / 1000), matched };
}

// ---------------------------------------------------------------------------------------------
// The follower

/** What the follower must write: the notifications are known on a chain built here, not on a node's (--rpc). */
interface Expected {
  transfers: number;
  notifications: number | undefined;
}

/** The node's chain as if it ended at `last`: the follower stops there whatever the node's head. */
function endingAt<Activity>(source: BlockSource<Activity>, last: number): BlockSource<Activity> {
  let lastHash: string | undefined;
  return {
    ...source,
    async tip() {
      const tip = await source.tip();
      if (tip.height <= last) return tip;
      lastHash ??= await source.hashAt(last);
      if (lastHash === undefined) throw new Error(`the node has no block ${last}`);
      return { height: last, hash: lastHash };
    },
  };
}

interface FollowerResult {
  row: Row;
  notes: string[];
}

const rowsOf = <T>(result: unknown): T[] => (result as { rows: T[] }).rows;

/**
 * On a migrated store: the default account, one subscription per watched address that transfers go
 * to (through the subscription service, which also puts them in the index), the cursor set to the
 * block before the first measured one; then the follower, timed from its start to its cursor reaching
 * the last block.
 */
async function runFollower(
  backend: Backend,
  store: Store,
  chain: FollowedRange,
  index: AddressIndex,
  expected: Expected,
  options: Options,
  anvilPid: number | undefined,
  postgresLocal: boolean,
  traces: BenchTraces,
): Promise<FollowerResult> {
  const { db } = store;
  await store.migrate();
  const issued = await createAccounts({ db }).bootstrap();
  if (!issued) throw new Error(`${backend}: the database already had accounts`);
  const envelope = createEnvelope(crypto.randomBytes(32));
  const subscriptions = createSubscriptions({
    db,
    envelope,
    idempotency: createIdempotency({ db, envelope }),
    networks: chain.networks,
    urls: { checkUrl: async () => {} },
    onChange: (change) => index.apply(change),
  });
  const created: string[] = [];
  for (const address of chain.subscribed) {
    const sub = await subscriptions.create(issued.info.accountId, {
      type: 'ADDRESS_TRANSACTION',
      attr: { address, chain: NETWORK, url: 'http://127.0.0.1:9/hook' },
      mempool: false,
    });
    created.push(sub.body.id);
  }
  try {
    const before = await jsonRpc<RpcBlock>(chain.rpcUrl, 'eth_getBlockByNumber', [
      toQuantity(chain.first - 1),
      false,
    ]);
    await db.insert(chainCursors).values({
      network: NETWORK,
      height: chain.first - 1,
      hash: before.hash,
      updatedAt: new Date(),
    });
    await db.insert(chainHeaders).values({
      network: NETWORK,
      height: chain.first - 1,
      hash: before.hash,
      parentHash: before.parentHash,
    });

    const client: PublicClient = evmClient([chain.rpcUrl]);
    let fetchMs = 0;
    let transactionMs = 0;
    let transactionCount = 0;
    // The same database, with the time spent in transactions (a block's notifications, headers and
    // cursor are written in one) added up.
    const timedDb = new Proxy(db, {
      get(target, property) {
        if (property === 'transaction') {
          return async (...args: Parameters<Db['transaction']>) => {
            const t = now();
            try {
              return await target.transaction(...args);
            } finally {
              transactionMs += now() - t;
              transactionCount++;
            }
          };
        }
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const reader = traces === 'off' ? undefined : createTraceReader(client, traces);
    const timedFetch: FetchEvmActivity = async (c, n, r) => {
      const t = now();
      try {
        return await readBlockActivity(c, n, r);
      } finally {
        fetchMs += now() - t;
      }
    };
    const follower = createFollower({
      db: timedDb,
      network: chain.network,
      source: endingAt(evmSource(client, timedFetch, undefined, reader), chain.last),
      match: evmMatcher({ network: chain.network, index, tokens: createTokenInfoCache(client) }),
      logger: pino({ level: options.logLevel }),
      pollIntervalMs: 1_000,
    });
    process.stdout.write(
      `  ${backend}: following ${chain.last - chain.first + 1} blocks${traces === 'off' ? '' : ` with traces (${traces})`}... `,
    );
    let gcMs = 0;
    const gcObserver = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) gcMs += entry.duration;
    });
    gcObserver.observe({ entryTypes: ['gc'] });
    // Sampled every 20 ms: reading it costs a system call (every 1 ms it showed in the profile).
    let peakRss = process.memoryUsage.rss();
    const rssSampler = setInterval(() => {
      peakRss = Math.max(peakRss, process.memoryUsage.rss());
    }, 20);
    const a = cpuMark(anvilPid, postgresLocal);
    let b: CpuMark;
    try {
      b = await profiled(options.profileDir, `follower-${backend}`, async () => {
        follower.start();
        onCleanup(() => follower.stop()); // on a signal: before the database is dropped under it
        const deadline = Date.now() + 600_000;
        for (;;) {
          const status = follower.status();
          if (status.height === chain.last) return cpuMark(anvilPid, postgresLocal);
          if (status.lastError) throw new Error(`${backend}: the follower failed: ${status.lastError}`);
          if (Date.now() > deadline)
            throw new Error(`${backend}: the follower is at ${status.height} after 600 s`);
          await sleep(1);
        }
      });
    } finally {
      clearInterval(rssSampler);
      gcObserver.disconnect();
      await follower.stop();
    }
    const shares = cpuShares(a, b);

    const [counts] = rowsOf<{ n: number; pending: number }>(
      await db.execute(
        sql`SELECT count(*)::int AS n, count(*) FILTER (WHERE state = 'pending')::int AS pending
            FROM notifications WHERE chain = ${NETWORK}`,
      ),
    );
    const notifications = counts?.n ?? 0;
    if (expected.notifications !== undefined && notifications !== expected.notifications) {
      throw new Error(
        `${backend}: ${notifications} notifications written, ${expected.notifications} expected`,
      );
    }
    const blocks = chain.last - chain.first + 1;
    const restMs = shares.seconds * 1000 - transactionMs;
    const share = (ms: number) => percent((ms / (shares.seconds * 1000)) * 100);
    process.stdout.write(`${fixed(shares.seconds, 2)} s\n`);
    return {
      row: {
        label: `follower + matcher, ${backend}${traces === 'off' ? '' : `, traces (${traces})`}`,
        blocks,
        transfers: expected.transfers,
        notifications,
        ...shares,
      },
      notes: [
        `${backend}${traces === 'off' ? '' : ` with traces`}: per block ${fixed((shares.seconds * 1000) / blocks, 1)} ms = write transaction ` +
          `${fixed(transactionMs / blocks, 1)} ms (${share(transactionMs)}; ${transactionCount} transactions, ` +
          `${fixed(blocks / Math.max(1, transactionCount), 1)} blocks each) + waiting for the next block, match, ` +
          `build notifications ${fixed(restMs / blocks, 1)} ms (${share(restMs)}); each block's read (fetch + extract, ` +
          `up to ${IN_FLIGHT} at once, so they overlap) took ${fixed(fetchMs / blocks, 1)} ms; garbage collection paused it ` +
          `${fixed(gcMs / blocks, 1)} ms per block (${share(gcMs)}, counted in the parts above); ` +
          `${notifications} notifications written (${counts?.pending ?? 0} pending)` +
          `${expected.notifications === undefined ? '' : ', as expected'}; peak rss during the pass ` +
          `${fixed(peakRss / MB, 0)} MB (sampled every 20 ms, the index of watched addresses included)`,
      ],
    };
  } finally {
    for (const id of created) index.apply({ type: 'remove', id });
  }
}

/** The follower on a fresh database of `backend`. */
async function benchFollower(
  backend: Backend,
  chain: FollowedRange,
  index: AddressIndex,
  expected: Expected,
  options: Options,
  anvilPid: number | undefined,
  traces: BenchTraces = 'off',
): Promise<FollowerResult> {
  return withFreshStore(backend, options.databaseUrl, 'ingest', async (store) => {
    const postgresLocal = backend === 'postgres' && isLoopback(options.databaseUrl!);
    const result = await runFollower(
      backend,
      store,
      chain,
      index,
      expected,
      options,
      anvilPid,
      postgresLocal,
      traces,
    );
    if (backend === 'postgres' && !postgresLocal)
      result.notes.push('postgres cpu not measured (not on this host)');
    return result;
  });
}

// ---------------------------------------------------------------------------------------------
// The run

function formatRows(rows: Row[], reference: Row, pipelined: Row): string {
  const perSecond = (r: Row, n: number) => n / r.seconds;
  return formatTable(
    [
      'pass',
      'blocks',
      'transfers',
      'seconds',
      'blocks/s',
      'transfers/s',
      'ratio to 1 at a time',
      `ratio to ${IN_FLIGHT} in flight`,
      'notifications',
      'bench cpu',
      'bench cpu ms/block',
      'anvil cpu',
      'postgres cpu',
    ],
    rows.map((r) => [
      r.label,
      String(r.blocks),
      String(r.transfers),
      fixed(r.seconds, 2),
      fixed(perSecond(r, r.blocks), 1),
      String(Math.round(perSecond(r, r.transfers))),
      fixed(reference.seconds / r.seconds, 3),
      fixed(pipelined.seconds / r.seconds, 3),
      r.notifications === undefined ? '-' : String(r.notifications),
      percent(r.benchCpu),
      // CPU time of this process per block: unlike the seconds, it holds on a busy machine.
      r.benchCpu === undefined ? '-' : fixed(((r.benchCpu / 100) * r.seconds * 1000) / r.blocks, 1),
      percent(r.anvilCpu),
      percent(r.postgresCpu),
    ]),
  );
}

function meanRow(label: string, a: Row, b: Row): Row {
  const avg = (x: number | undefined, y: number | undefined) =>
    x === undefined || y === undefined ? undefined : (x + y) / 2;
  return {
    label,
    blocks: a.blocks,
    transfers: a.transfers,
    seconds: (a.seconds + b.seconds) / 2,
    notifications: undefined,
    benchCpu: avg(a.benchCpu, b.benchCpu),
    anvilCpu: avg(a.anvilCpu, b.anvilCpu),
    postgresCpu: undefined,
  };
}

const MB = 1024 * 1024;

/**
 * The references (raw fetch, 1 at a time and 8 in flight, before and after the followers), the
 * source's fetch + extract, and the follower on each backend, over one range; printed with `about`
 * (what the range holds) and `matcher` (the index's line).
 */
async function measureRange(
  range: FollowedRange,
  options: Options,
  built: IndexReport,
  expected: Expected,
  anvilPid: number | undefined,
  about: string,
  matcherNotes: (index: AddressIndex) => string,
): Promise<void> {
  const { transfers } = expected;
  process.stdout.write('  raw fetch (before)... ');
  const before = await profiled(options.profileDir, 'raw-fetch', () =>
    rawFetch(range, 'raw fetch (before)', transfers, anvilPid),
  );
  process.stdout.write(`${fixed(before.seconds, 2)} s\n  raw fetch, ${IN_FLIGHT} in flight (before)... `);
  const pipelinedBefore = await profiled(options.profileDir, 'raw-fetch-in-flight', () =>
    rawFetchInFlight(range, 'before', transfers, anvilPid, IN_FLIGHT),
  );
  process.stdout.write(`${fixed(pipelinedBefore.seconds, 2)} s\n  fetch + extract... `);
  const extract = (
    await profiled(options.profileDir, 'fetch-extract', () => fetchAndExtract(range, anvilPid))
  ).row;
  process.stdout.write(`${fixed(extract.seconds, 2)} s\n`);

  const results: FollowerResult[] = [];
  for (const backend of options.backends) {
    results.push(await benchFollower(backend, range, built.index, expected, options, anvilPid));
  }

  const matcherNote = matcherNotes(built.index);
  process.stdout.write('  raw fetch (after)... ');
  const after = await rawFetch(range, 'raw fetch (after)', transfers, anvilPid);
  process.stdout.write(`${fixed(after.seconds, 2)} s\n  raw fetch, ${IN_FLIGHT} in flight (after)... `);
  const pipelinedAfter = await rawFetchInFlight(range, 'after', transfers, anvilPid, IN_FLIGHT);
  process.stdout.write(`${fixed(pipelinedAfter.seconds, 2)} s\n`);
  const reference = meanRow('raw fetch: block + receipts, 1 at a time (reference)', before, after);
  const pipelined = meanRow(
    `raw fetch, ${IN_FLIGHT} blocks in flight (reference)`,
    pipelinedBefore,
    pipelinedAfter,
  );
  const spread = Math.abs(before.seconds - after.seconds) / reference.seconds;

  process.stdout.write(
    [
      '',
      about,
      formatRows([reference, pipelined, extract, ...results.map((r) => r.row)], reference, pipelined),
      `reference: mean of the raw fetch before (${fixed(before.seconds, 2)} s) and after (${fixed(after.seconds, 2)} s) ` +
        `the follower runs, spread ${(spread * 100).toFixed(0)}%` +
        `${spread > 0.15 ? ': the machine was busy, treat the ratios as rough' : ''}`,
      `matcher: ${grouped(built.addresses)} watched addresses (plus ${range.subscribed.length} subscribed per backend) indexed in ` +
        `${fixed(built.applySeconds, 2)} s; heap + array buffers +${fixed(built.heapBytes / MB, 0)} MB ` +
        `(${Math.round(built.heapBytes / Math.max(1, built.addresses))} bytes/address), rss +${fixed(built.rssBytes / MB, 0)} MB` +
        matcherNote,
      ...results.flatMap((r) => r.notes),
      `this process: peak rss ${fixed((process.resourceUsage().maxRSS * 1024) / MB, 0)} MB over the whole run`,
      "ratios: a reference's seconds over the pass seconds (1 = as fast as merely fetching that way).",
      'cpu: percent of one core over the pass: this process (viem, matcher, follower, PGlite), anvil, and',
      'all postgres processes of this host (other users of that server count too).',
      '',
    ].join('\n'),
  );
  if (options.traces !== 'off')
    await measureTraced(range, options, built, expected, anvilPid, reference, pipelined, options.traces);
}

/**
 * The follower reading each block's traces as well (internal transfers), beside the limit with
 * traces: block, receipts and traces fetched 8 blocks in flight, in the same run. What traces
 * cost is the difference to the untraced limit: time and the node's CPU per block.
 */
async function measureTraced(
  range: FollowedRange,
  options: Options,
  built: IndexReport,
  expected: Expected,
  anvilPid: number | undefined,
  reference: Row,
  untraced: Row,
  traces: Exclude<BenchTraces, 'off'>,
): Promise<void> {
  const { transfers } = expected;
  const fetchTraced = (label: string) =>
    rawFetchInFlight(range, label, transfers, anvilPid, IN_FLIGHT, traces);
  process.stdout.write(`  raw fetch with traces, ${IN_FLIGHT} in flight (before)... `);
  const before = await fetchTraced('before');
  process.stdout.write(`${fixed(before.seconds, 2)} s
`);
  const results: FollowerResult[] = [];
  for (const backend of options.backends) {
    results.push(await benchFollower(backend, range, built.index, expected, options, anvilPid, traces));
  }
  process.stdout.write(`  raw fetch with traces, ${IN_FLIGHT} in flight (after)... `);
  const after = await fetchTraced('after');
  process.stdout.write(`${fixed(after.seconds, 2)} s
`);
  const pipelined = meanRow(
    `raw fetch + traces (${traces}), ${IN_FLIGHT} blocks in flight (reference)`,
    before,
    after,
  );
  const perBlock = (r: Row) => (r.seconds * 1000) / r.blocks;
  const anvilPerBlock = (r: Row) =>
    r.anvilCpu === undefined ? undefined : ((r.anvilCpu / 100) * r.seconds * 1000) / r.blocks;
  const [withCpu, withoutCpu] = [anvilPerBlock(pipelined), anvilPerBlock(untraced)];
  process.stdout.write(
    [
      '',
      `with traces (${traces === 'debug' ? 'debug_traceBlockByNumber, callTracer' : 'trace_block'}):`,
      formatRows([pipelined, ...results.map((r) => r.row)], reference, pipelined),
      `the cost of traces, fetching ${IN_FLIGHT} blocks in flight: ${fixed(perBlock(untraced), 2)} ms per block without, ` +
        `${fixed(perBlock(pipelined), 2)} ms with (+${fixed(perBlock(pipelined) - perBlock(untraced), 2)} ms); ` +
        (withCpu === undefined || withoutCpu === undefined
          ? 'node cpu not measured'
          : `node (anvil) cpu ${fixed(withoutCpu, 2)} ms per block without, ${fixed(withCpu, 2)} ms with`),
      ...results.flatMap((r) => r.notes),
      '',
    ].join('\n'),
  );
}

/** The EVM pass on a chain built on anvil: references, fetch + extract, the follower per backend. */
async function evmPass(options: Options): Promise<void> {
  process.stdout.write(
    '  building the chain on anvil (automine off, a JSON-RPC batch then evm_mine per block)...\n',
  );
  const chain = await buildChain(options);
  const anvilPid = childPids('anvil')[0];
  process.stdout.write(
    `  chain: blocks ${chain.first}-${chain.last}, ${grouped(chain.transactions)} transactions, built in ${fixed(chain.seconds, 1)} s\n`,
  );

  // Unmeasured: anvil's first answers for a block are slower, and the JIT warms up.
  const { row: extractRow, blocks } = await fetchAndExtract(chain, anvilPid);
  const transfers = extractRow.transfers;
  const planned = chain.native + chain.erc20;
  if (transfers !== planned) throw new Error(`the chain holds ${transfers} transfers, ${planned} were sent`);

  process.stdout.write(`  matcher: indexing ${grouped(options.watched)} watched addresses... `);
  const built = buildIndex(chain, options.watched);
  process.stdout.write(`${fixed(built.applySeconds, 1)} s\n`);
  const hitSet = new Set(chain.hitAddresses.map((a) => a.toLowerCase()));
  // One notification per watching subscription: the sender's and the recipient's (one if the same).
  const watchedBy = (address: string) => (hitSet.has(address.toLowerCase()) ? 1 : 0);
  const notifications = blocks.reduce(
    (sum, b) =>
      sum + b.transfers.reduce((n, t) => n + watchedBy(t.from) + (t.to === t.from ? 0 : watchedBy(t.to)), 0),
    0,
  );
  await measureRange(
    chain,
    options,
    built,
    { transfers, notifications },
    anvilPid,
    `chain: ${options.blocks} blocks, ${grouped(transfers)} transfers (${grouped(chain.native)} native, ` +
      `${grouped(chain.erc20)} ERC-20 in batches of ${BATCH}) in ${grouped(chain.transactions)} transactions; ` +
      `${grouped(notifications)} transfers to watched addresses (hit rate ${options.hitRate})`,
    (index) => `; ${grouped(lookupRate(index, blocks).perSecond)} lookups/s alone (2 per transfer)`,
  );
}

/** The addresses of a --watch file: one per line; blank lines and lines starting with # are skipped. */
function readWatchFile(file: string): string[] {
  const addresses: string[] = [];
  for (const [i, line] of fs.readFileSync(file, 'utf8').split(/\r?\n/).entries()) {
    const text = line.trim();
    if (text === '' || text.startsWith('#')) continue;
    if (!isAddress(text, { strict: false })) throw new Error(`${file}:${i + 1}: not an EVM address: ${text}`);
    addresses.push(getAddress(text.toLowerCase()));
  }
  return [...new Set(addresses)];
}

/**
 * --rpc: an existing chain's blocks `from`..`to` (no chain built, anvil not started), the addresses
 * of the --watch file subscribed beside the random ones of the index, so that another indexer can
 * be measured on the same range and addresses. The follower stops at `to` whatever the node's head.
 */
async function rangePass(options: Options, followed: FollowedOptions): Promise<void> {
  const { rpcUrl, from, to } = followed;
  const chainId = Number(await jsonRpc<Hex>(rpcUrl, 'eth_chainId'));
  const head = Number(await jsonRpc<Hex>(rpcUrl, 'eth_blockNumber'));
  if (to > head) throw new Error(`--to ${to} is above the node's head ${head}`);
  const networks = loadNetworks({}, [
    {
      name: NETWORK,
      aliases: [],
      family: 'evm',
      chainId,
      symbol: 'ETH',
      decimals: 18,
      rpcUrls: [rpcUrl],
      wsUrls: [],
      indexerUrls: [],
    },
  ]);
  const range: FollowedRange = {
    rpcUrl,
    networks,
    network: networks.find(NETWORK)!,
    first: from,
    last: to,
    subscribed: followed.watchFile ? readWatchFile(followed.watchFile) : [],
  };
  process.stdout.write(
    `  following ${redactUrl(rpcUrl)} (chain id ${chainId}, head ${head}), blocks ${from}-${to}, ` +
      `${range.subscribed.length} addresses of ${followed.watchFile ?? 'no --watch file'} subscribed\n`,
  );
  // Unmeasured, as on anvil: the node's first answers for a block are slower, and the JIT warms up.
  const transfers = (await fetchAndExtract(range, undefined)).row.transfers;
  process.stdout.write(`  matcher: indexing ${grouped(options.watched)} watched addresses... `);
  const built = buildIndex(range, options.watched);
  process.stdout.write(`${fixed(built.applySeconds, 1)} s\n`);
  await measureRange(
    range,
    options,
    built,
    { transfers, notifications: undefined },
    undefined,
    `range: blocks ${from}-${to} of chain ${chainId}, ${grouped(transfers)} transfers; ` +
      "the follower's seconds are from its start to the last block committed",
    () => '',
  );
}

/**
 * --serve-chain: the bench's chain on anvil, served until interrupted, and the addresses its
 * transfers are sent to written to `file`: a chain to give the --rpc mode, or another indexer.
 */
async function serveChain(options: Options, file: string): Promise<void> {
  process.stdout.write('  building the chain on anvil...\n');
  const chain = await buildChain(options);
  fs.writeFileSync(file, `${chain.hitAddresses.join('\n')}\n`);
  process.stdout.write(
    [
      `  chain: blocks ${chain.first}-${chain.last} at ${chain.rpcUrl}, ${grouped(chain.transactions)} transactions; ` +
        `${chain.hitAddresses.length} watched addresses written to ${file}`,
      '  follow it (in another shell) with:',
      `    npm run bench:ingest -- --rpc ${chain.rpcUrl} --from ${chain.first} --to ${chain.last} --watch ${file}`,
      '  serving until interrupted (Ctrl-C)',
      '',
    ].join('\n'),
  );
  await new Promise<never>(() => setInterval(() => {}, 60_000));
}

async function main(): Promise<void> {
  const options = readOptions();
  process.stdout.write(
    `bench:ingest: ${options.followed ? `blocks ${options.followed.from}-${options.followed.to} of a node` : `${options.blocks} blocks of ${options.transfersPerBlock} transfers`}, ` +
      `${grouped(options.watched)} watched addresses, hit rate ${options.hitRate}; ` +
      `${backendsLine(options.backends, options.databaseUrl)}; ` +
      `${machineLine()}\n`,
  );

  if (options.serveChain) return serveChain(options, options.serveChain);
  if (options.followed) return rangePass(options, options.followed);
  if (options.passes.includes('evm')) await evmPass(options);
  if (options.passes.includes('evm-hits')) {
    process.stdout.write(
      `evm-hits: ${grouped(FULL_HITS.blocks)} blocks of ${FULL_HITS.transfersPerBlock} transfers, every one to a watched address\n`,
    );
    await evmPass({ ...options, ...FULL_HITS });
  }
  if (options.passes.includes('evm-events'))
    process.stdout.write(`${(await evmEventsPass(options)).join('\n')}\n`);
  if (options.passes.includes('bitcoin'))
    process.stdout.write(`${(await bitcoinPass(options)).join('\n')}\n`);
  if (options.passes.includes('algorand'))
    process.stdout.write(`${(await algorandPass(options)).join('\n')}\n`);
  if (options.passes.includes('solana')) process.stdout.write(`${(await solanaPass(options)).join('\n')}\n`);
  if (options.passes.includes('tron'))
    process.stdout.write(`${(await tronPass({ ...options, watched: options.streamWatched })).join('\n')}\n`);
  if (options.passes.includes('solana-stream'))
    process.stdout.write(
      `${(await solanaStreamPass({ ...options, watched: options.streamWatched })).join('\n')}\n`,
    );
  process.stdout.write('\n');
}

runMain('bench:ingest', main); // cleans up: stops anvil, removes temp dirs, drops the database
