import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { type DnsServer, dnsResolverFor, startDnsServer } from '../../test/helpers/dns-server.js';
import { ConfigError } from '../config.js';
import {
  classifyAddress,
  createEgress,
  type Egress,
  EgressBlockedError,
  type EgressOptions,
  findEgressBlock,
  parseAllowCidrs,
} from './egress.js';

// A self-signed certificate for tls.example-public.com only (P-256, valid 2000-2099), test use only.
const TLS_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgPYWBN7tGy7rj3+6L
w1uXqaKCxpzbRYde26rlSuvWDW+hRANCAASpuaAnMsXXM3nlf95Kcl7YcZX2i8ky
LuzeWLHYESXXFy4P4jBtRCBKzWIKkkn92MO8qzjQ5Gw9/57pcioOXmdR
-----END PRIVATE KEY-----
`;
const TLS_CERT = `-----BEGIN CERTIFICATE-----
MIIBqjCCAVCgAwIBAgIBATAKBggqhkjOPQQDAjAhMR8wHQYDVQQDDBZ0bHMuZXhh
bXBsZS1wdWJsaWMuY29tMCAXDTAwMDEwMTAwMDAwMFoYDzIwOTkxMjMxMjM1OTU5
WjAhMR8wHQYDVQQDDBZ0bHMuZXhhbXBsZS1wdWJsaWMuY29tMFkwEwYHKoZIzj0C
AQYIKoZIzj0DAQcDQgAEqbmgJzLF1zN55X/eSnJe2HGV9ovJMi7s3lix2BEl1xcu
D+IwbUQgSs1iCpJJ/djDvKs40ORsPf+e6XIqDl5nUaN3MHUwIQYDVR0RBBowGIIW
dGxzLmV4YW1wbGUtcHVibGljLmNvbTAMBgNVHRMBAf8EAjAAMA4GA1UdDwEB/wQE
AwIHgDATBgNVHSUEDDAKBggrBgEFBQcDATAdBgNVHQ4EFgQUpeDuG9XcAabQoos9
FUXVj1Z0A+8wCgYIKoZIzj0EAwIDSAAwRQIgPkFBRuB/Ns2if3yn9u2hd9KLCjC4
EYUoUawQWYV3uXQCIQCIYCNHnVKKM1zEfIwkSkT4awDBjw1OjQaF47yfN5joGg==
-----END CERTIFICATE-----
`;

interface Received {
  method: string;
  url: string;
  host: string | undefined;
  body: string;
  /** The TLS server name the client sent, for HTTPS receivers. */
  servername: string | false | undefined;
}

interface Receiver {
  port: number;
  received: Received[];
  close(): Promise<void>;
}

/** A webhook receiver on 127.0.0.1 recording what actually arrives. */
async function startReceiver(tls?: { key: string; cert: string }): Promise<Receiver> {
  const received: Received[] = [];
  const handler: http.RequestListener = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({
        method: req.method ?? '',
        url: req.url ?? '',
        host: req.headers.host,
        body: Buffer.concat(chunks).toString('utf8'),
        servername: (req.socket as { servername?: string | false }).servername,
      });
      res.writeHead(204).end();
    });
  };
  const server = tls ? https.createServer(tls, handler) : http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    received,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function blockOf(promise: Promise<unknown>): Promise<EgressBlockedError> {
  const err = await promise.then(
    () => expect.fail('expected the egress policy to refuse'),
    (e: unknown) => e,
  );
  const block = findEgressBlock(err);
  if (!block) throw err;
  return block;
}

let dnsServer: DnsServer;
let receiver: Receiver;
const egresses: Egress[] = [];

function egress(options: EgressOptions = {}): Egress {
  const created = createEgress({ resolve: dnsResolverFor(dnsServer), ...options });
  egresses.push(created);
  return created;
}

beforeAll(async () => {
  dnsServer = await startDnsServer({
    'hooks.example-public.com': ['10.0.0.7'],
    'rebind.example.org': ['127.0.0.1'],
    'mixed.example-public.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c', '192.168.1.20'],
    'public.example-public.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
    'v6only.example-public.com': ['fd00::1'],
    'empty.example-public.com': [],
    'tls.example-public.com': ['127.0.0.1'],
    'wrong-name.example-public.com': ['127.0.0.1'],
  });
  receiver = await startReceiver();
});

afterEach(async () => {
  await Promise.all(egresses.splice(0).map((e) => e.close()));
  receiver.received.length = 0;
});

afterAll(async () => {
  await receiver.close();
  await dnsServer.close();
});

describe('classifyAddress', () => {
  test.each([
    '8.8.8.8',
    '1.1.1.1',
    '93.184.215.14',
    '2606:4700::1111',
    '2001:4860:4860::8888',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ])('allows the public address %s', (address) => {
    expect(classifyAddress(address).range).toBe('unicast');
  });

  test.each([
    ['0.0.0.0', 'unspecified'],
    ['127.0.0.1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['192.168.0.1', 'private'],
    ['169.254.169.254', 'linkLocal'],
    ['100.64.0.1', 'carrierGradeNat'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['fe80::1', 'linkLocal'],
    ['fc00::1', 'uniqueLocal'],
    ['fd12:3456::1', 'uniqueLocal'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'reserved'],
    ['2001::1', 'teredo'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:a9fe:a9fe', 'linkLocal'],
    ['::7f00:1', 'ipv4Compatible'],
    ['::808:808', 'ipv4Compatible'],
    ['64:ff9b::a00:1', 'private'],
    ['64:ff9b:1::808:808', 'nat64Local'],
    ['2002:7f00:1::1', 'loopback'],
    ['2002:c0a8:101::1', 'private'],
    ['fec0::1', 'deprecatedSiteLocal'],
    ['100::1', 'discard'],
    ['4000::1', 'nonGlobal'],
    ['e000::1', 'nonGlobal'],
    ['127.1', 'invalid'],
    ['fe80::1%eth0', 'invalid'],
    ['not-an-address', 'invalid'],
  ])('refuses %s (%s)', (address, range) => {
    expect(classifyAddress(address).range).toBe(range);
  });

  test('names the embedded IPv4 address it judged', () => {
    expect(classifyAddress('::ffff:127.0.0.1')).toEqual({ range: 'loopback', embeddedIpv4: '127.0.0.1' });
    expect(classifyAddress('64:ff9b::a00:1')).toEqual({ range: 'private', embeddedIpv4: '10.0.0.1' });
  });
});

describe('parseAllowCidrs', () => {
  test('parses comma-separated IPv4 and IPv6 networks', () => {
    const cidrs = parseAllowCidrs(' 127.0.0.0/8, ::1/128 ,10.1.0.0/16,192.168.5.5,');
    expect(cidrs.map((c) => [c.text, c.network.kind(), c.prefix])).toEqual([
      ['127.0.0.0/8', 'ipv4', 8],
      ['::1/128', 'ipv6', 128],
      ['10.1.0.0/16', 'ipv4', 16],
      ['192.168.5.5', 'ipv4', 32],
    ]);
  });

  test('stores IPv4-mapped networks as IPv4 ones', () => {
    const [cidr] = parseAllowCidrs('::ffff:127.0.0.0/104');
    expect([cidr?.network.toString(), cidr?.prefix]).toEqual(['127.0.0.0', 8]);
  });

  test('is empty when unset or blank', () => {
    expect(parseAllowCidrs(undefined)).toEqual([]);
    expect(parseAllowCidrs('  ')).toEqual([]);
  });

  test.each(['0.0.0.0/0', '::/0', '::ffff:0.0.0.0/96', '10.0.0.0/8,0.0.0.0/0'])(
    'refuses %s, which would allow everything',
    (text) => {
      expect(() => parseAllowCidrs(text)).toThrow(ConfigError);
      expect(() => parseAllowCidrs(text)).toThrow(
        /^LEDGERHOOK_ALLOW_CIDRS must not contain ".*": it would allow/,
      );
    },
  );

  test.each([
    'garbage',
    '10.0.0.0/33',
    '::1/129',
    '10.0.0.0/',
    '10.0.0.0/8/8',
    '10.0.0.0/-1',
    '127.1/8',
    'fe80::1%eth0/64',
    '127.0.0.0/8,localhost',
  ])('refuses the malformed list %j', (text) => {
    expect(() => parseAllowCidrs(text)).toThrow(/^LEDGERHOOK_ALLOW_CIDRS has an invalid CIDR/);
  });

  test('names the variable it was given', () => {
    expect(() => parseAllowCidrs('nope', 'TEST_CIDRS')).toThrow(
      expect.objectContaining({ name: 'ConfigError', variable: 'TEST_CIDRS' }),
    );
  });
});

describe('checkUrl', () => {
  test.each([
    [
      'http://127.0.0.1',
      'forbidden_address',
      'callback host 127.0.0.1 resolves to a loopback address (127.0.0.1)',
    ],
    [
      'http://10.0.0.1/hook',
      'forbidden_address',
      'callback host 10.0.0.1 resolves to a private address (10.0.0.1)',
    ],
    [
      'http://169.254.169.254/latest/meta-data',
      'forbidden_address',
      'callback host 169.254.169.254 resolves to a link-local address (169.254.169.254)',
    ],
    ['http://[::1]:8080/', 'forbidden_address', 'callback host ::1 resolves to a loopback address (::1)'],
    [
      'http://[::ffff:127.0.0.1]',
      'forbidden_address',
      'callback host ::ffff:7f00:1 resolves to a loopback address (::ffff:7f00:1, embedding 127.0.0.1)',
    ],
    [
      'http://100.64.0.1',
      'forbidden_address',
      'callback host 100.64.0.1 resolves to a carrier-grade NAT address',
    ],
    [
      'http://0.0.0.0',
      'forbidden_address',
      'callback host 0.0.0.0 resolves to an unspecified address (0.0.0.0)',
    ],
    [
      'http://[fe80::1]',
      'forbidden_address',
      'callback host fe80::1 resolves to a link-local address (fe80::1)',
    ],
    [
      'http://[64:ff9b::a00:1]',
      'forbidden_address',
      'callback host 64:ff9b::a00:1 resolves to a private address (64:ff9b::a00:1, embedding 10.0.0.1)',
    ],
    ['http://0x7f.1/', 'forbidden_address', 'callback host 127.0.0.1 resolves to a loopback address'],
    ['ftp://example.com/', 'scheme', 'callback URL must use http or https (got "ftp")'],
    ['file:///etc/passwd', 'scheme', 'callback URL must use http or https (got "file")'],
    ['not a url', 'invalid_url', 'callback URL is not a valid absolute URL'],
    [
      'https://hooks.example-public.com/webhook',
      'forbidden_address',
      'callback host hooks.example-public.com resolves to a private address (10.0.0.7)',
    ],
    [
      'http://rebind.example.org',
      'forbidden_address',
      'callback host rebind.example.org resolves to a loopback address (127.0.0.1)',
    ],
    [
      'https://mixed.example-public.com',
      'forbidden_address',
      'callback host mixed.example-public.com resolves to a private address (192.168.1.20)',
    ],
    [
      'https://v6only.example-public.com',
      'forbidden_address',
      'callback host v6only.example-public.com resolves to a unique-local address (fd00::1)',
    ],
    [
      'https://missing.example-public.com',
      'dns_failure',
      'callback host missing.example-public.com could not be',
    ],
    [
      'https://empty.example-public.com',
      'no_address',
      'callback host empty.example-public.com has no IP addresses',
    ],
  ])('refuses %s (%s)', async (url, reason, message) => {
    const block = await blockOf(egress().checkUrl(url));
    expect(block).toBeInstanceOf(EgressBlockedError);
    expect(block.reason).toBe(reason);
    expect(block.message).toContain(message);
  });

  test('accepts a host whose addresses are all public, and returns them', async () => {
    await expect(egress().checkUrl('https://public.example-public.com/hook')).resolves.toEqual([
      '93.184.215.14',
      '2606:2800:21f:cb07:6820:80da:af6b:8b2c',
    ]);
    await expect(egress().checkUrl(new URL('http://8.8.8.8/'))).resolves.toEqual(['8.8.8.8']);
  });

  test('accepts allowlisted addresses, matching IPv4-mapped IPv6 against IPv4 networks', async () => {
    const allowed = egress({ allowCidrs: parseAllowCidrs('127.0.0.0/8,fd00::/8') });
    await expect(allowed.checkUrl('http://127.0.0.1:9000/')).resolves.toEqual(['127.0.0.1']);
    await expect(allowed.checkUrl('http://[::ffff:127.0.0.1]/')).resolves.toEqual(['::ffff:7f00:1']);
    await expect(allowed.checkUrl('http://rebind.example.org/')).resolves.toEqual(['127.0.0.1']);
    await expect(allowed.checkUrl('http://v6only.example-public.com/')).resolves.toEqual(['fd00::1']);
    // The allowlist permits only what is inside it.
    expect((await blockOf(allowed.checkUrl('http://hooks.example-public.com/'))).address).toBe('10.0.0.7');
    expect((await blockOf(allowed.checkUrl('http://[::1]/'))).reason).toBe('forbidden_address');
  });

  test('bounds DNS resolution by the connect timeout', async () => {
    const hanging = createEgress({ resolve: () => new Promise<string[]>(() => {}), connectTimeoutMs: 50 });
    egresses.push(hanging);
    const block = await blockOf(hanging.checkUrl('https://slow.example-public.com/'));
    expect(block.reason).toBe('dns_failure');
    expect(block.message).toBe(
      'callback host slow.example-public.com could not be resolved (no answer within 50 ms)',
    );
  });
});

describe('dispatcher', () => {
  const post = (dispatcher: Egress['dispatcher'], url: string) =>
    request(url, {
      dispatcher,
      method: 'POST',
      body: '{"event":"test"}',
      headers: { 'content-type': 'application/json' },
    });

  test('refuses a loopback receiver without an allowlist; nothing arrives', async () => {
    // The request rejects with the EgressBlockedError itself.
    const block = await post(egress().dispatcher, `http://127.0.0.1:${receiver.port}/hook`).then(
      () => expect.fail('expected a refusal'),
      (e: unknown) => e as EgressBlockedError,
    );
    expect(block).toBeInstanceOf(EgressBlockedError);
    expect(block.reason).toBe('forbidden_address');
    expect(block.message).toBe('callback host 127.0.0.1 resolves to a loopback address (127.0.0.1)');
    expect(receiver.received).toEqual([]);
  });

  test('reaches the loopback receiver when 127.0.0.0/8 is allowlisted', async () => {
    const { dispatcher } = egress({ allowCidrs: parseAllowCidrs('127.0.0.0/8') });
    const res = await post(dispatcher, `http://127.0.0.1:${receiver.port}/hook?n=1`);
    expect(res.statusCode).toBe(204);
    await res.body.dump();
    expect(receiver.received).toEqual([
      expect.objectContaining({ method: 'POST', url: '/hook?n=1', body: '{"event":"test"}' }),
    ]);
  });

  test.each([
    'http://[::1]:9/',
    'http://169.254.169.254/latest/meta-data',
    'http://[::ffff:127.0.0.1]:9/',
    'https://10.0.0.1/',
  ])('refuses the IP literal %s before connecting', async (url) => {
    expect((await blockOf(post(egress().dispatcher, url))).reason).toBe('forbidden_address');
  });

  test('resolves host names at connect time and refuses private answers', async () => {
    const { dispatcher } = egress();
    const block = await blockOf(post(dispatcher, `http://rebind.example.org:${receiver.port}/hook`));
    expect(block.message).toBe('callback host rebind.example.org resolves to a loopback address (127.0.0.1)');
    const mixed = await blockOf(post(dispatcher, `http://mixed.example-public.com:${receiver.port}/`));
    expect(mixed.address).toBe('192.168.1.20');
    expect(receiver.received).toEqual([]);
  });

  test('re-checks at connect time, so a name that passed checkUrl and then rebinds is refused', async () => {
    const { checkUrl, dispatcher } = egress();
    dnsServer.set('flip.example-public.com', ['93.184.215.14']);
    await expect(checkUrl(`http://flip.example-public.com:${receiver.port}/`)).resolves.toEqual([
      '93.184.215.14',
    ]);
    dnsServer.set('flip.example-public.com', ['127.0.0.1']);
    const queriesBefore = dnsServer.queries.length;
    const block = await blockOf(post(dispatcher, `http://flip.example-public.com:${receiver.port}/`));
    expect(block.address).toBe('127.0.0.1');
    expect(dnsServer.queries.slice(queriesBefore)).toContain('flip.example-public.com A');
    expect(receiver.received).toEqual([]);
  });

  test('connects a host name to the address it checked, keeping the name in the Host header', async () => {
    const { dispatcher } = egress({ allowCidrs: parseAllowCidrs('127.0.0.0/8') });
    const res = await post(dispatcher, `http://rebind.example.org:${receiver.port}/named`);
    expect(res.statusCode).toBe(204);
    await res.body.dump();
    expect(receiver.received).toEqual([
      expect.objectContaining({ url: '/named', host: `rebind.example.org:${receiver.port}` }),
    ]);
  });

  test('uses the system resolver by default', async () => {
    const system = createEgress();
    egresses.push(system);
    expect((await blockOf(system.checkUrl('http://localhost:8080/'))).reason).toBe('forbidden_address');
    const block = await blockOf(post(system.dispatcher, `http://localhost:${receiver.port}/`));
    expect(block.message).toMatch(/^callback host localhost resolves to a loopback address/);
    expect(receiver.received).toEqual([]);
  });

  test('reports a DNS failure at connect time as dns_failure', async () => {
    const block = await blockOf(post(egress().dispatcher, 'http://missing.example-public.com/'));
    expect(block.reason).toBe('dns_failure');
  });

  test('bounds resolution plus connection by the connect timeout', async () => {
    const hanging = createEgress({ resolve: () => new Promise<string[]>(() => {}), connectTimeoutMs: 50 });
    egresses.push(hanging);
    const err = await post(hanging.dispatcher, 'http://slow.example-public.com/').then(
      () => expect.fail('expected a connect timeout'),
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'UND_ERR_CONNECT_TIMEOUT' });
  });

  describe('over TLS', () => {
    let tlsReceiver: Receiver;
    beforeAll(async () => {
      tlsReceiver = await startReceiver({ key: TLS_KEY, cert: TLS_CERT });
    });
    afterAll(() => tlsReceiver.close());

    test('sends the original host name as SNI and verifies the certificate against it', async () => {
      const { dispatcher } = egress({ allowCidrs: parseAllowCidrs('127.0.0.0/8'), ca: TLS_CERT });
      const res = await post(dispatcher, `https://tls.example-public.com:${tlsReceiver.port}/secure`);
      expect(res.statusCode).toBe(204);
      await res.body.dump();
      expect(tlsReceiver.received).toEqual([
        expect.objectContaining({ url: '/secure', servername: 'tls.example-public.com' }),
      ]);
    });

    test('rejects a certificate that does not name the host, even though the address is the same', async () => {
      const { dispatcher } = egress({ allowCidrs: parseAllowCidrs('127.0.0.0/8'), ca: TLS_CERT });
      for (const url of [
        `https://wrong-name.example-public.com:${tlsReceiver.port}/`,
        `https://127.0.0.1:${tlsReceiver.port}/`,
      ]) {
        await expect(post(dispatcher, url)).rejects.toMatchObject({ code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
      }
    });
  });
});
