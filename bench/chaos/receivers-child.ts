// The chaos run's webhook receivers, run as their own process: several HTTP servers on loopback.
// Receiver 0 is the probe: it always answers 200 and reports each arrival at once over IPC, so the
// run can time recoveries. The others answer 200 {"status":"success"}, 500 at random (failRate)
// or not at all (hangRate: the request is held past the delivery timeout, then the socket is
// destroyed), and can be taken down (port refusing) and brought back. Every request is one JSON
// line in the log file: time, receiver, webhook-id, outcome, event type and, for address
// notifications, the chain event it describes (bench/chaos/keys.ts); one in `sampleEvery` also
// carries what the signature check needs.
//
// argv: <JSON options>
// IPC in:  { seq, cmd: 'down', receiver } | { seq, cmd: 'up', receiver } | { seq, cmd: 'flush' }
// IPC out: { ev: 'listening', ports } once; { seq, ev: 'ok' } per command;
//          { ev: 'probe', id, txId, eventType, t } for each request to the probe receiver
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { bodyKey } from './keys.js';

export interface ReceiverOptions {
  count: number;
  logFile: string;
  failRate: number;
  hangRate: number;
  hangMs: number;
  sampleEvery: number;
}

export interface ReceivedLine {
  t: number;
  r: number;
  id: string;
  /** 200, 500, or 0: held and never answered */
  o: number;
  ty: string;
  sub?: string;
  k?: string;
  /** Sampled: the signature headers and raw body. */
  sig?: { ts: string; sig: string; body: string };
}

const options = JSON.parse(process.argv[2]!) as ReceiverOptions;
const log = fs.createWriteStream(options.logFile, { flags: 'a' });
const ACK = Buffer.from('{"status":"success"}');
const ACK_HEADERS = { 'content-type': 'application/json', 'content-length': String(ACK.length) };
let requests = 0;

function handle(index: number, req: http.IncomingMessage, res: http.ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const raw = Buffer.concat(chunks).toString('utf8');
    const id = String(req.headers['webhook-id'] ?? '');
    const eventType = String(req.headers['ledgerhook-event-type'] ?? '');
    let body: Record<string, unknown> = {};
    try {
      body = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      // recorded without a key
    }
    const roll = Math.random();
    const outcome =
      index === 0
        ? 200
        : roll < options.failRate
          ? 500
          : roll < options.failRate + options.hangRate
            ? 0
            : 200;
    const line: ReceivedLine = { t: Date.now(), r: index, id, o: outcome, ty: eventType };
    if (typeof body.subscriptionId === 'string') line.sub = body.subscriptionId;
    if (eventType.startsWith('address.transaction')) line.k = bodyKey(body);
    if (++requests % options.sampleEvery === 0) {
      line.sig = {
        ts: String(req.headers['webhook-timestamp'] ?? ''),
        sig: String(req.headers['webhook-signature'] ?? ''),
        body: raw,
      };
    }
    log.write(`${JSON.stringify(line)}\n`);
    if (index === 0) process.send?.({ ev: 'probe', id, txId: body.txId, eventType, t: line.t });
    if (outcome === 200) {
      res.writeHead(200, ACK_HEADERS);
      res.end(ACK);
    } else if (outcome === 500) {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('chaos: a random failure');
    } else {
      setTimeout(() => res.destroy(), options.hangMs);
    }
  });
}

const servers: http.Server[] = [];
const ports: number[] = [];

function listen(index: number, port: number): Promise<number> {
  const server = http.createServer((req, res) => handle(index, req, res));
  server.keepAliveTimeout = 30_000;
  servers[index] = server;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });
}

async function command(message: { seq: number; cmd: string; receiver?: number }): Promise<void> {
  if (message.cmd === 'down') {
    const server = servers[message.receiver!]!;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  } else if (message.cmd === 'up') {
    await listen(message.receiver!, ports[message.receiver!]!);
  } else if (message.cmd === 'flush') {
    await new Promise<void>((resolve) => log.write('', () => resolve()));
  }
  process.send?.({ seq: message.seq, ev: 'ok' });
}

process.on('message', (message: { seq: number; cmd: string; receiver?: number }) => {
  command(message).catch((err: unknown) => {
    process.stderr.write(`receivers: ${String(err)}\n`);
    process.exit(1);
  });
});
process.on('disconnect', () => log.end(() => process.exit(0)));

for (let i = 0; i < options.count; i++) ports.push(await listen(i, 0));
process.send?.({ ev: 'listening', ports });
