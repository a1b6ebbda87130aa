/**
 * A tiny authoritative DNS server on loopback UDP, answering A and AAAA questions from a map, so tests
 * can give public-looking names private addresses through a real resolver (c-ares over real sockets).
 */
import dgram from 'node:dgram';
import net from 'node:net';
import { createDnsResolve } from '../../src/notify/egress.js';

export interface DnsServer {
  readonly port: number;
  /** Every question received, as "name TYPE", in order. */
  readonly queries: string[];
  /** Sets (or with an empty list, empties) the addresses of a name; unknown names get NXDOMAIN. */
  set(name: string, addresses: string[]): void;
  close(): Promise<void>;
}

const TYPE_A = 1;
const TYPE_AAAA = 28;
const RCODE_FORMERR = 1;
const RCODE_NXDOMAIN = 3;
const RCODE_NOTIMP = 4;

interface Question {
  name: string;
  type: number;
  /** The question section as received, echoed in the answer. */
  raw: Buffer;
}

function parseQuestion(msg: Buffer): Question | undefined {
  let offset = 12;
  const labels: string[] = [];
  while (true) {
    const length = msg[offset];
    if (length === undefined || length > 63) return undefined; // truncated, or a compression pointer
    offset += 1;
    if (length === 0) break;
    if (offset + length > msg.length) return undefined;
    labels.push(msg.toString('latin1', offset, offset + length));
    offset += length;
  }
  if (offset + 4 > msg.length) return undefined;
  const type = msg.readUInt16BE(offset);
  return { name: labels.join('.').toLowerCase(), type, raw: msg.subarray(12, offset + 4) };
}

function encodeAddress(address: string): Buffer {
  if (net.isIPv4(address)) return Buffer.from(address.split('.').map(Number));
  // Expand "::" and write eight 16-bit groups.
  const [head = '', tail] = address.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = new Array<string>(8 - headGroups.length - tailGroups.length).fill('0');
  const groups = tail === undefined ? headGroups : [...headGroups, ...zeros, ...tailGroups];
  const out = Buffer.alloc(16);
  groups.forEach((group, i) => {
    out.writeUInt16BE(Number.parseInt(group, 16), i * 2);
  });
  return out;
}

function respond(query: Buffer, records: Map<string, string[]>, log: string[]): Buffer | undefined {
  if (query.length < 12) return undefined;
  const id = query.readUInt16BE(0);
  const flags = query.readUInt16BE(2);
  if (flags & 0x8000) return undefined; // a response, not a query
  const opcode = (flags >> 11) & 0xf;
  const header = (rcode: number, answers: number, question: Buffer | undefined) => {
    const h = Buffer.alloc(12);
    h.writeUInt16BE(id, 0);
    // QR, opcode echoed, AA, RD echoed, RA, rcode.
    h.writeUInt16BE(0x8000 | (opcode << 11) | 0x0400 | (flags & 0x0100) | 0x0080 | rcode, 2);
    h.writeUInt16BE(question ? 1 : 0, 4);
    h.writeUInt16BE(answers, 6);
    return h;
  };
  if (opcode !== 0) return header(RCODE_NOTIMP, 0, undefined);
  const question = query.readUInt16BE(4) === 1 ? parseQuestion(query) : undefined;
  if (!question) return header(RCODE_FORMERR, 0, undefined);
  log.push(
    `${question.name} ${question.type === TYPE_A ? 'A' : question.type === TYPE_AAAA ? 'AAAA' : question.type}`,
  );

  const addresses = records.get(question.name);
  if (!addresses) return Buffer.concat([header(RCODE_NXDOMAIN, 0, question.raw), question.raw]);
  const family = question.type === TYPE_A ? 4 : question.type === TYPE_AAAA ? 6 : 0;
  const answers = addresses
    .filter((address) => net.isIP(address) === family)
    .map((address) => {
      const rdata = encodeAddress(address);
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // pointer to the name in the question
      rr.writeUInt16BE(question.type, 2);
      rr.writeUInt16BE(1, 4); // class IN
      rr.writeUInt32BE(0, 6); // TTL 0: the resolver must not cache, so answers can change between lookups
      rr.writeUInt16BE(rdata.length, 10);
      return Buffer.concat([rr, rdata]);
    });
  return Buffer.concat([header(0, answers.length, question.raw), question.raw, ...answers]);
}

export async function startDnsServer(initial: Record<string, string[]> = {}): Promise<DnsServer> {
  const records = new Map(
    Object.entries(initial).map(([name, addresses]) => [name.toLowerCase(), addresses]),
  );
  const queries: string[] = [];
  const socket = dgram.createSocket('udp4');
  socket.on('message', (msg, rinfo) => {
    const reply = respond(msg, records, queries);
    if (reply) socket.send(reply, rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(0, '127.0.0.1', () => {
      socket.off('error', reject);
      resolve();
    });
  });
  return {
    port: socket.address().port,
    queries,
    set(name, addresses) {
      records.set(name.toLowerCase(), addresses);
    },
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

/** A resolver asking only `server`, as the service does with LEDGERHOOK_DNS_SERVERS. */
export function dnsResolverFor(server: DnsServer): (hostname: string) => Promise<string[]> {
  return createDnsResolve([`127.0.0.1:${server.port}`]);
}
