// A client of bench:mempool's loopback Esplora node (bench/mempool-esplora.ts), run as its own process
// (`node --expose-gc --import tsx`) so that its CPU and heap are its own:
//   reader  Ledgerhook's pool reader alone (createBitcoinMempoolReader, src/chains/bitcoin/mempool.ts):
//           its first polls until it has read the whole pool, the heap and RSS while it holds the pool
//           and after `reset()` (gc forced before each reading), and its CPU per new transaction while
//           polling at the service's interval; beside it, the heap of a bare Set of the pool's txids.
//   bare    the reference: plain undici requests and JSON.parse, `GET /mempool/txids` every interval
//           and `GET /tx/:txid` for each txid not seen before (8 at a time, as the reader), the least
//           any poller of Esplora does: no validation, no conversion, one Set of the txids seen (a
//           `has` per listed txid each poll), rebuilt from the list only once the txids that left
//           the pool are 1% of it.
// Usage (from bench/mempool.ts): node --expose-gc --import tsx bench/mempool-client.ts MODE URL POLL_MS STEADY_MS
// IPC out: {ev: 'steady', phase: 'start'|'end'} around the steady polling, then {ev: 'result', result}.
import { networks } from 'bitcoinjs-lib';
import { request } from 'undici';
import { createBitcoinMempoolReader } from '../src/chains/bitcoin/mempool.js';

export interface Memory {
  heapUsed: number;
  rss: number;
}

export interface ClientResult {
  mode: 'reader' | 'bare';
  /** Polls and seconds until the first poll that found nothing left unread. */
  startupPolls: number;
  startupSeconds: number;
  startupRead: number;
  /** The steady polling: seconds, polls, new transactions read, CPU seconds (user + system) of this process. */
  steadySeconds: number;
  steadyPolls: number;
  steadyRead: number;
  steadyCpuSeconds: number;
  /** Each transaction read while steady, and when the poll that read it ended (epoch ms). */
  reads: [txid: string, at: number][];
  /**
   * The reader only, each after gc: before its first poll, holding the pool it read (after the steady
   * polling), and after reset(); then the reference, a bare Set of the pool's txids, and before it.
   */
  memory?: {
    tracked: number;
    before: Memory;
    holding: Memory;
    none: Memory;
    setBefore: Memory;
    txidSet: Memory;
    txidSetSize: number;
  };
}

export type ClientMessage = { ev: 'steady'; phase: 'start' | 'end' } | { ev: 'result'; result: ClientResult };

const clock = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const FETCH_CONCURRENCY = 8;
/** The reader's default cap on new transactions read per poll (src/chains/bitcoin/mempool.ts). */
const MAX_NEW_PER_POLL = 5_000;
/**
 * The whole pool is read at the first poll that reads fewer than this: a poll at the cap may come
 * back a few short (the oldest transactions leave between the list and their read).
 */
const CAUGHT_UP = MAX_NEW_PER_POLL / 2;
/** The bare poller forgets the txids that left the pool once they outnumber 1% of it. */
const SWEEP_AT = 1.01;

function send(message: ClientMessage): void {
  process.send?.(message);
}

function memory(): Memory {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with node --expose-gc');
  gc();
  gc();
  const { heapUsed, rss } = process.memoryUsage();
  return { heapUsed, rss };
}

function cpuSeconds(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1e6;
}

/** `poll` once, then every `pollMs` after each poll ends (as src/watch/follower/polling.ts paces the watcher). */
async function steady(
  pollMs: number,
  steadyMs: number,
  poll: () => Promise<string[]>,
): Promise<
  Pick<ClientResult, 'steadySeconds' | 'steadyPolls' | 'steadyRead' | 'steadyCpuSeconds' | 'reads'>
> {
  send({ ev: 'steady', phase: 'start' });
  const cpu = process.cpuUsage();
  const start = clock();
  let polls = 0;
  const reads: [string, number][] = [];
  while (clock() - start < steadyMs) {
    await sleep(pollMs);
    const txids = await poll();
    const at = clock();
    for (const txid of txids) reads.push([txid, at]);
    polls++;
  }
  const steadyCpuSeconds = cpuSeconds(cpu);
  const steadySeconds = (clock() - start) / 1000;
  send({ ev: 'steady', phase: 'end' });
  return { steadySeconds, steadyPolls: polls, steadyRead: reads.length, steadyCpuSeconds, reads };
}

async function get(url: string): Promise<{ status: number; text: string }> {
  const res = await request(url);
  return { status: res.statusCode, text: await res.body.text() };
}

async function mapBounded<T>(items: T[], limit: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await task(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

async function runReader(url: string, pollMs: number, steadyMs: number): Promise<ClientResult> {
  const reader = createBitcoinMempoolReader({ url, network: networks.bitcoin });
  const before = memory();
  const start = clock();
  let startupPolls = 0;
  let startupRead = 0;
  for (;;) {
    const { entered } = await reader.poll();
    startupPolls++;
    startupRead += entered.length;
    if (entered.length < CAUGHT_UP) break;
  }
  const startupSeconds = (clock() - start) / 1000;
  const result = await steady(pollMs, steadyMs, async () =>
    (await reader.poll()).entered.map((tx) => tx.txid),
  );
  const tracked = reader.tracked();
  const holding = memory();
  reader.reset();
  const none = memory();
  // The reference: the pool's txids as JSON.parse gives them, in a Set, and nothing else.
  let text: string | undefined = (await get(`${url}/mempool/txids`)).text;
  const setBefore = memory();
  const txids = new Set(JSON.parse(text) as string[]);
  text = undefined;
  const txidSet = memory();
  const txidSetSize = txids.size;
  txids.clear();
  return {
    mode: 'reader',
    startupPolls,
    startupSeconds,
    startupRead,
    ...result,
    memory: { tracked, before, holding, none, setBefore, txidSet, txidSetSize },
  };
}

async function runBare(url: string, pollMs: number, steadyMs: number): Promise<ClientResult> {
  let seen = new Set<string>();
  /** One poll: the list, then each txid not seen; returns the transactions it read. */
  const poll = async (max: number): Promise<string[]> => {
    const list = JSON.parse((await get(`${url}/mempool/txids`)).text) as string[];
    const fresh: string[] = [];
    for (const txid of list) {
      if (fresh.length >= max) break;
      if (!seen.has(txid)) fresh.push(txid);
    }
    const fetched: string[] = [];
    await mapBounded(fresh, FETCH_CONCURRENCY, async (txid) => {
      const { status, text } = await get(`${url}/tx/${txid}`);
      if (status !== 200) return;
      JSON.parse(text);
      fetched.push(txid);
    });
    for (const txid of fetched) seen.add(txid);
    // What left the pool is forgotten once it is 1% of it: the seen txids still listed are kept.
    if (seen.size > list.length * SWEEP_AT) {
      const next = new Set<string>();
      for (const txid of list) if (seen.has(txid)) next.add(txid);
      seen = next;
    }
    return fetched;
  };
  const start = clock();
  let startupPolls = 0;
  let startupRead = 0;
  for (;;) {
    const read = (await poll(MAX_NEW_PER_POLL)).length;
    startupPolls++;
    startupRead += read;
    if (read < CAUGHT_UP) break;
  }
  const startupSeconds = (clock() - start) / 1000;
  const result = await steady(pollMs, steadyMs, () => poll(MAX_NEW_PER_POLL));
  return { mode: 'bare', startupPolls, startupSeconds, startupRead, ...result };
}

async function main(): Promise<void> {
  const [mode, url, pollRaw, steadyRaw] = process.argv.slice(2);
  if ((mode !== 'reader' && mode !== 'bare') || !url || !pollRaw || !steadyRaw)
    throw new Error('usage: mempool-client.ts reader|bare URL POLL_MS STEADY_MS');
  const run = mode === 'reader' ? runReader : runBare;
  const result = await run(url, Number(pollRaw), Number(steadyRaw));
  await new Promise<void>((resolve) =>
    process.send?.({ ev: 'result', result } as ClientMessage, () => resolve()),
  );
}

// The parent disconnects once it has the result: then exit (process.exit, not a signal, so that
// --cpu-prof writes its profile on the way out).
process.on('disconnect', () => process.exit(0));
main().then(
  () => {},
  (err: unknown) => {
    process.stderr.write(
      `mempool-client: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
