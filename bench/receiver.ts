// The webhook receiver for bench/delivery.ts: a minimal node:http server on loopback that reads each
// request body and answers 200 {"status":"success"} (the acknowledgement Ledgerhook expects). It runs
// as its own process, so it never shares an event loop with the sender it measures, and reports over
// IPC when it has acknowledged the expected number of distinct webhook-ids.
//
// IPC in:  { cmd: 'reset', expect }  forget the counts; report 'done' at `expect` distinct ids
//          { cmd: 'stats' }          answer with the counts so far
// IPC out: { ev: 'listening', port } once, then { ev: 'done', stats } and { ev: 'stats', stats }
//
// Requests to paths under /warmup are answered the same way but counted apart (warm-up traffic).
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceiverStats {
  /** Measured requests answered, and how many distinct webhook-ids they carried. */
  total: number;
  distinct: number;
  /** Epoch milliseconds (sub-millisecond precision) of the first measured request's arrival. */
  firstAt: number | null;
  /** When the answer that made `distinct` reach `expect` was written. */
  doneAt: number | null;
  /** When the last measured answer was written. */
  lastAt: number | null;
  /** Body bytes of the measured requests. */
  bodyBytes: number;
  warmup: number;
}

export type ReceiverMessage =
  | { ev: 'listening'; port: number }
  | { ev: 'done' | 'stats'; stats: ReceiverStats };
export type ReceiverCommand = { cmd: 'reset'; expect: number } | { cmd: 'stats' };

const clock = () => performance.timeOrigin + performance.now();
const ACK = Buffer.from('{"status":"success"}');
const ACK_HEADERS = { 'content-type': 'application/json', 'content-length': String(ACK.length) };

let ids = new Set<string>();
let expect = Number.POSITIVE_INFINITY;
let stats: ReceiverStats = fresh();

function fresh(): ReceiverStats {
  return { total: 0, distinct: 0, firstAt: null, doneAt: null, lastAt: null, bodyBytes: 0, warmup: 0 };
}

function send(message: ReceiverMessage): void {
  process.send?.(message);
}

const server = http.createServer((req, res) => {
  const warmup = req.url?.startsWith('/warmup') === true;
  if (!warmup && stats.firstAt === null) stats.firstAt = clock();
  let bytes = 0;
  req.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
  });
  req.on('end', () => {
    res.writeHead(200, ACK_HEADERS);
    res.end(ACK);
    if (warmup) {
      stats.warmup++;
      return;
    }
    const now = clock();
    stats.total++;
    stats.bodyBytes += bytes;
    stats.lastAt = now;
    const id = req.headers['webhook-id'];
    if (typeof id === 'string' && !ids.has(id)) {
      ids.add(id);
      stats.distinct = ids.size;
      if (stats.distinct === expect) {
        stats.doneAt = now;
        send({ ev: 'done', stats });
      }
    }
  });
});
server.keepAliveTimeout = 30_000;

process.on('message', (message: ReceiverCommand) => {
  if (message.cmd === 'reset') {
    ids = new Set();
    expect = message.expect;
    stats = fresh();
  } else if (message.cmd === 'stats') {
    send({ ev: 'stats', stats });
  }
});
// Started by bench/delivery.ts over IPC: when that process goes, so does this one.
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));

server.listen(0, process.env.HOST || '127.0.0.1', () => {
  send({ ev: 'listening', port: (server.address() as AddressInfo).port });
});
