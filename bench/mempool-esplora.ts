// The loopback Esplora node of bench:mempool (bench/mempool.ts), as its own process so that serving
// never shares an event loop with what it measures: a real HTTP server on 127.0.0.1 holding a pool of
// synthetic transactions (bench/mempool-synthetic.ts) that turns over at a steady rate, in steps (e.g.
// 2 in and the 2 oldest out every 100 ms for 20 a second). It speaks Esplora's REST API:
//   GET /mempool/txids          the pool's txids, a JSON array (oldest first; Esplora's order is arbitrary)
//   GET /tx/:txid               a pool transaction (status {confirmed: false}); 404 "Transaction not found"
//   GET /blocks/tip/height, /blocks/tip/hash, /block-height/:h, /block/:hash, /block/:hash/txs/0
//                               one synthetic block (the tip the follower starts at), never a new one
// Transactions leave the pool unmined (evicted, in effect): no block is ever found.
//
// Options (environment): BENCH_MEMPOOL_POOL (100000), BENCH_MEMPOOL_RATE (20 a second), BENCH_MEMPOOL_STEP
// (100 ms), BENCH_MEMPOOL_WATCHED (1000000: watched addresses it may pay), BENCH_MEMPOOL_HIT_EVERY (10:
// one transaction in that many pays a watched address).
//
// IPC in:  {cmd: 'open'|'close'}      serve the pool, or an empty one (404 for every txid) meanwhile;
//                                     turnover goes on either way
//          {cmd: 'stats'}             the counters below
//          {cmd: 'appearances', from, to}  the transactions that entered in [from, to), watched or not
// IPC out: {ev: 'ready', ...}, {ev: 'opened', at, watched}, {ev: 'stats', stats}, {ev: 'appearances', list}
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { synthesize, synthesizeTip } from './mempool-synthetic.js';

export interface NodeStats {
  /** Answers to GET /mempool/txids and 200s to GET /tx/:txid since the node started. */
  listRequests: number;
  txServed: number;
  txNotFound: number;
  /** Transactions that entered and left since the node started (the initial pool not counted). */
  entered: number;
  left: number;
  pool: number;
  open: boolean;
  /** Of the pool as it was at the last open: how many were neither fetched nor gone yet, and when none was. */
  startupRemaining: number;
  startupDoneAt: number | null;
}

export type NodeCommand =
  | { cmd: 'open' }
  | { cmd: 'close' }
  | { cmd: 'stats' }
  | { cmd: 'appearances'; from: number; to: number };

export type NodeMessage =
  | { ev: 'ready'; port: number; pool: number; meanBodyBytes: number; generateSeconds: number }
  | { ev: 'opened'; at: number; watched: string[] }
  | { ev: 'closed' }
  | { ev: 'stats'; stats: NodeStats }
  | { ev: 'appearances'; list: Appearance[] };

/** A transaction that entered the pool: its txid, when (epoch ms), and whether it pays a watched address. */
export type Appearance = [txid: string, at: number, watched: boolean];

interface Entry {
  body: Buffer;
  /** When it entered the pool (epoch ms, sub-millisecond, the host's clock as bench/lib.ts `now`). */
  at: number;
  watched: boolean;
}

const clock = () => performance.timeOrigin + performance.now();

function option(name: string, fallback: number): number {
  const raw = process.env[name];
  const value = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isFinite(value) || value <= 0)
    throw new Error(`${name} must be a positive number, got "${raw}"`);
  return value;
}

const POOL = Math.floor(option('BENCH_MEMPOOL_POOL', 100_000));
const RATE = option('BENCH_MEMPOOL_RATE', 20);
const STEP_MS = option('BENCH_MEMPOOL_STEP', 100);
const WATCHED = Math.floor(option('BENCH_MEMPOOL_WATCHED', 1_000_000));
const HIT_EVERY = Math.floor(option('BENCH_MEMPOOL_HIT_EVERY', 10));
const TIP_HEIGHT = 900_000;

const pool = new Map<string, Entry>();
let listBody: Buffer | undefined;
let open = true;
/** Transactions by entry, for latency, in order of entry. */
const appearances: Appearance[] = [];
const stats: NodeStats = {
  listRequests: 0,
  txServed: 0,
  txNotFound: 0,
  entered: 0,
  left: 0,
  pool: 0,
  open,
  startupRemaining: 0,
  startupDoneAt: null,
};
let startupPending = new Set<string>();

function add(at: number): void {
  const watched = Math.random() * HIT_EVERY < 1;
  const { txid, body } = synthesize(watched ? Math.floor(Math.random() * WATCHED) : undefined);
  pool.set(txid, { body, at, watched });
  appearances.push([txid, at, watched]);
  listBody = undefined;
}

function removeOldest(): void {
  const oldest = pool.keys().next();
  if (oldest.done) return;
  pool.delete(oldest.value);
  settleStartup(oldest.value);
  listBody = undefined;
}

/** A transaction of the pool at the last open was read, or left: the startup read is done when none is left. */
function settleStartup(txid: string): void {
  if (!startupPending.delete(txid) || startupPending.size > 0) return;
  stats.startupDoneAt = clock();
}

const generateStart = clock();
for (let i = 0; i < POOL; i++) add(generateStart);
appearances.length = 0; // the initial pool is not timed
const generateSeconds = (clock() - generateStart) / 1000;
let bodyBytes = 0;
for (const entry of pool.values()) bodyBytes += entry.body.length;

const tip = synthesizeTip(TIP_HEIGHT);

function list(): Buffer {
  if (!open) return Buffer.from('[]');
  listBody ??= Buffer.from(pool.size === 0 ? '[]' : `["${[...pool.keys()].join('","')}"]`);
  return listBody;
}

const JSON_HEADERS = { 'content-type': 'application/json' };
const TEXT_HEADERS = { 'content-type': 'text/plain' };

function reply(res: http.ServerResponse, status: number, body: Buffer | string, headers = JSON_HEADERS) {
  res.writeHead(status, { ...headers, 'content-length': String(Buffer.byteLength(body)) });
  res.end(body);
}

const TX = /^\/tx\/([0-9a-f]{64})$/;

const server = http.createServer((req, res) => {
  const path = req.url ?? '/';
  if (req.method !== 'GET') return reply(res, 405, 'Method Not Allowed', TEXT_HEADERS);
  if (path === '/mempool/txids') {
    stats.listRequests++;
    return reply(res, 200, list());
  }
  const tx = TX.exec(path);
  if (tx) {
    const entry = open ? pool.get(tx[1]!) : undefined;
    if (!entry) {
      stats.txNotFound++;
      return reply(res, 404, 'Transaction not found', TEXT_HEADERS);
    }
    stats.txServed++;
    settleStartup(tx[1]!);
    return reply(res, 200, entry.body);
  }
  if (path === '/blocks/tip/height') return reply(res, 200, String(TIP_HEIGHT), TEXT_HEADERS);
  if (path === '/blocks/tip/hash' || path === `/block-height/${TIP_HEIGHT}`)
    return reply(res, 200, tip.hash, TEXT_HEADERS);
  if (path === `/block/${tip.hash}`) return reply(res, 200, tip.header);
  if (path === `/block/${tip.hash}/txs/0`) return reply(res, 200, tip.txs);
  if (path.startsWith('/block-height/')) return reply(res, 404, 'Block not found', TEXT_HEADERS);
  return reply(res, 404, 'Not Found', TEXT_HEADERS);
});
server.keepAliveTimeout = 30_000;

// Turnover: step n at start + n × STEP_MS, so the rate holds whatever the timers' drift; a step's
// share of the rate may be fractional (carried to the next step).
const perStep = (RATE * STEP_MS) / 1000;
const turnoverStart = clock();
let steps = 0;
let carried = 0;
function step(): void {
  const at = clock();
  carried += perStep;
  const count = Math.floor(carried);
  carried -= count;
  for (let i = 0; i < count; i++) {
    removeOldest();
    add(at);
    stats.entered++;
    stats.left++;
  }
  steps++;
  setTimeout(step, Math.max(0, turnoverStart + (steps + 1) * STEP_MS - clock()));
}

function send(message: NodeMessage): void {
  process.send?.(message);
}

process.on('message', (message: NodeCommand) => {
  if (message.cmd === 'open') {
    open = true;
    listBody = undefined;
    startupPending = new Set(pool.keys());
    stats.startupDoneAt = null;
    const watched = [...pool].filter(([, e]) => e.watched).map(([txid]) => txid);
    send({ ev: 'opened', at: clock(), watched });
  } else if (message.cmd === 'close') {
    open = false;
    listBody = undefined;
    send({ ev: 'closed' });
  } else if (message.cmd === 'stats') {
    send({
      ev: 'stats',
      stats: { ...stats, pool: pool.size, open, startupRemaining: startupPending.size },
    });
  } else if (message.cmd === 'appearances') {
    send({
      ev: 'appearances',
      list: appearances.filter(([, at]) => at >= message.from && at < message.to),
    });
  }
});
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));

server.listen(0, '127.0.0.1', () => {
  setTimeout(step, STEP_MS);
  send({
    ev: 'ready',
    port: (server.address() as AddressInfo).port,
    pool: pool.size,
    meanBodyBytes: bodyBytes / pool.size,
    generateSeconds,
  });
});
