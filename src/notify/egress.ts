/**
 * Outbound HTTP for webhook delivery, safe against SSRF (docs/webhooks.md): callback hosts are
 * resolved here, every address must be public unicast (or in a configured allowlist), and the
 * socket connects to exactly the addresses checked, so a DNS answer that changes in between
 * (rebinding) cannot reach an internal service. `egress.checkUrl(url)` at subscription time;
 * `request(url, { dispatcher: egress.dispatcher })` at delivery, which a refused connection
 * rejects with the EgressBlockedError itself (`findEgressBlock(err)` also looks through `cause`).
 */
import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import { LedgerhookError } from '../errors.js';
import { type Cidr, isAllowlisted, parseIp } from '../shared/cidr.js';

/** Resolves a host name to its IP addresses (as strings, IPv4 and IPv6 mixed). */
export type Resolve = (hostname: string) => Promise<string[]>;

export type EgressBlockReason = 'invalid_url' | 'scheme' | 'dns_failure' | 'no_address' | 'forbidden_address';

/** A callback URL or connection refused by the egress policy; `message` is fit to show a user. */
export class EgressBlockedError extends LedgerhookError {
  constructor(
    readonly reason: EgressBlockReason,
    message: string,
    readonly host?: string,
    /** The refused address, for `forbidden_address`. */
    readonly address?: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The EgressBlockedError behind a failed request, if the egress policy caused it. */
export function findEgressBlock(err: unknown): EgressBlockedError | undefined {
  let current = err;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if (current instanceof EgressBlockedError) return current;
    current = current.cause;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Address classification

export interface AddressClass {
  /**
   * 'unicast' for a public address, the only kind we connect to. Otherwise an ipaddr.js range name
   * ('loopback', 'private', 'linkLocal', ...) or one of ours: 'ipv4Compatible', 'nat64Local',
   * 'nonGlobal' (IPv6 outside 2000::/3) or 'invalid'.
   */
  range: string;
  /** The IPv4 address that was judged, when embedded in an IPv6 one (mapped, NAT64, 6to4). */
  embeddedIpv4?: string;
}

const NAT64 = ipaddr.IPv6.parseCIDR('64:ff9b::/96');
const SIX_TO_FOUR = ipaddr.IPv6.parseCIDR('2002::/16');
const IPV4_COMPATIBLE = ipaddr.IPv6.parseCIDR('::/96');
// Only 2000::/3 is allocated for global unicast; everything else in IPv6 is special or unassigned.
const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR('2000::/3');

function ipv4FromWords(high: number, low: number): ipaddr.IPv4 {
  return new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
}

/** The IPv4 address an IPv6 one carries and reaches, where the IPv6 form is only a wrapper. */
function embeddedIpv4(ip: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const p = ip.parts;
  if (ip.isIPv4MappedAddress()) return ip.toIPv4Address();
  if (ip.match(NAT64)) return ipv4FromWords(p[6]!, p[7]!);
  if (ip.match(SIX_TO_FOUR)) return ipv4FromWords(p[1]!, p[2]!);
  return undefined;
}

/** Classifies an address conservatively: anything that is not plainly public unicast is not 'unicast'. */
export function classifyAddress(address: string): AddressClass {
  const ip = parseIp(address);
  if (!ip) return { range: 'invalid' };
  if (ip.kind() === 'ipv4') return { range: ip.range() };
  const v6 = ip as ipaddr.IPv6;
  const v4 = embeddedIpv4(v6);
  if (v4) return { range: v4.range(), embeddedIpv4: v4.toString() };
  const range = v6.range();
  if (range === 'rfc6052') return { range: 'nat64Local' }; // 64:ff9b:1::/48, local-use NAT64
  if (range !== 'unicast') return { range };
  if (v6.match(IPV4_COMPATIBLE)) return { range: 'ipv4Compatible' };
  if (!v6.match(GLOBAL_UNICAST_V6)) return { range: 'nonGlobal' };
  return { range };
}

const RANGE_PHRASES: Record<string, string> = {
  unspecified: 'an unspecified',
  loopback: 'a loopback',
  private: 'a private',
  linkLocal: 'a link-local',
  carrierGradeNat: 'a carrier-grade NAT',
  multicast: 'a multicast',
  broadcast: 'a broadcast',
  reserved: 'a reserved',
  benchmarking: 'a benchmarking',
  uniqueLocal: 'a unique-local',
  deprecatedSiteLocal: 'a site-local',
  discard: 'a discard-only',
  teredo: 'a Teredo',
  rfc6145: 'an IPv4-translated',
  nat64Local: 'a local-use NAT64',
  ipv4Compatible: 'an IPv4-compatible',
  nonGlobal: 'a non-global',
  invalid: 'an invalid',
};

function rangePhrase(range: string): string {
  return `${RANGE_PHRASES[range] ?? `a special-purpose (${range})`} address`;
}

// ---------------------------------------------------------------------------------------------
// Allowlist: configured CIDRs (shared/cidr.ts, read by the configuration too)

export { type Cidr, parseAllowCidrs } from '../shared/cidr.js';

// ---------------------------------------------------------------------------------------------
// Resolution and checking, shared by checkUrl and the connector

const systemResolve: Resolve = async (hostname) =>
  (await dns.promises.lookup(hostname, { all: true })).map((entry) => entry.address);

interface CheckedAddress {
  address: string;
  family: 4 | 6;
}

/** Why `address` (which `host` resolved to) may not be contacted, or undefined if it may. */
function refusal(host: string, address: string, allow: readonly Cidr[]): EgressBlockedError | undefined {
  const ip = parseIp(address);
  if (ip && isAllowlisted(ip, allow)) return undefined;
  const { range, embeddedIpv4: v4 } = classifyAddress(address);
  if (range === 'unicast') return undefined;
  const shown = v4 ? `${address}, embedding ${v4}` : address;
  return new EgressBlockedError(
    'forbidden_address',
    `callback host ${host} resolves to ${rangePhrase(range)} (${shown})`,
    host,
    address,
  );
}

function unbracket(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

function withTimeout<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// ---------------------------------------------------------------------------------------------
// The egress

export interface EgressOptions {
  /** From parseAllowCidrs; empty in production. */
  allowCidrs?: readonly Cidr[];
  /** Defaults to the system resolver, `dns.promises.lookup(host, { all: true })`. */
  resolve?: Resolve;
  /** Bounds DNS resolution plus TCP and TLS setup of each connection, and resolution in checkUrl. */
  connectTimeoutMs?: number;
  /** Trust these CA certificates instead of Node's bundled roots (tests, private PKI). */
  ca?: string | Buffer | Array<string | Buffer>;
}

export interface Egress {
  /** An undici dispatcher whose connections only go to checked addresses. */
  readonly dispatcher: Dispatcher;
  /**
   * Validates a callback URL: http(s), and every address its host resolves to is allowed.
   * Returns those addresses; throws EgressBlockedError otherwise.
   */
  checkUrl(url: string | URL): Promise<string[]>;
  close(): Promise<void>;
}

export function createEgress(options: EgressOptions = {}): Egress {
  const allow = options.allowCidrs ?? [];
  const resolve = options.resolve ?? systemResolve;
  const connectTimeoutMs = options.connectTimeoutMs ?? 5000;
  if (!Number.isInteger(connectTimeoutMs) || connectTimeoutMs <= 0) {
    throw new RangeError(`connectTimeoutMs must be a positive integer (got ${connectTimeoutMs})`);
  }

  /** Resolves `hostname` (an IP literal stands for itself) and refuses it unless all addresses pass. */
  async function resolveChecked(hostname: string, timeoutMs?: number): Promise<CheckedAddress[]> {
    const host = unbracket(hostname);
    let addresses: string[];
    if (net.isIP(host) !== 0) {
      addresses = [host];
    } else {
      try {
        const pending = resolve(host);
        addresses = await (timeoutMs === undefined
          ? pending
          : withTimeout(pending, timeoutMs, () => new Error(`no answer within ${timeoutMs} ms`)));
      } catch (err) {
        const detail = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
        const message = `callback host ${host} could not be resolved (${detail})`;
        throw new EgressBlockedError('dns_failure', message, host, undefined, { cause: err });
      }
    }
    if (addresses.length === 0) {
      throw new EgressBlockedError('no_address', `callback host ${host} has no IP addresses`, host);
    }
    // Refuse the host if ANY address is forbidden: a mixed answer is how rebinding attacks hide.
    const checked: CheckedAddress[] = [];
    for (const address of addresses) {
      const blocked = refusal(host, address, allow);
      if (blocked) throw blocked;
      checked.push({ address, family: net.isIPv6(address) ? 6 : 4 });
    }
    return checked;
  }

  // net.connect hands host names to this lookup, so the socket connects only to checked addresses.
  // It runs after undici has started its connect timer, which therefore bounds resolution as well.
  const lookup: net.LookupFunction = (hostname, lookupOptions, callback) => {
    resolveChecked(hostname).then(
      (checked) => {
        const family = lookupOptions.family;
        const wanted = family === 4 || family === 6 ? checked.filter((a) => a.family === family) : checked;
        const first = wanted[0];
        if (!first) {
          callback(
            new EgressBlockedError(
              'no_address',
              `callback host ${hostname} has no IPv${family} address`,
              hostname,
            ),
            '',
          );
        } else if (lookupOptions.all) {
          callback(null, wanted);
        } else {
          callback(null, first.address, first.family);
        }
      },
      (err: Error) => callback(err, ''),
    );
  };

  const baseConnect = buildConnector({
    timeout: connectTimeoutMs,
    lookup,
    ...(options.ca ? { ca: options.ca } : {}),
  });

  // net.connect skips `lookup` for IP literals, so those are checked here. Host names keep their name
  // all the way to tls.connect: SNI and certificate verification use the original host name.
  const connect: buildConnector.connector = (connectOptions, callback) => {
    const { hostname, protocol } = connectOptions;
    let blocked: EgressBlockedError | undefined;
    if (protocol !== 'http:' && protocol !== 'https:') {
      blocked = new EgressBlockedError(
        'scheme',
        `callback URL must use http or https (got "${protocol}")`,
        hostname,
      );
    } else if (net.isIP(unbracket(hostname)) !== 0) {
      blocked = refusal(unbracket(hostname), unbracket(hostname), allow);
    }
    if (blocked) {
      const error = blocked;
      queueMicrotask(() => callback(error, null)); // never call back synchronously, like net does
      return;
    }
    baseConnect(connectOptions, callback);
  };

  const agent = new Agent({ connect });

  return {
    dispatcher: agent,
    async checkUrl(input) {
      let url: URL;
      try {
        url = input instanceof URL ? input : new URL(input);
      } catch {
        throw new EgressBlockedError('invalid_url', 'callback URL is not a valid absolute URL');
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') {
        throw new EgressBlockedError(
          'scheme',
          `callback URL must use http or https (got "${url.protocol.replace(/:$/, '')}")`,
          url.hostname,
        );
      }
      if (url.hostname === '') throw new EgressBlockedError('invalid_url', 'callback URL has no host');
      const checked = await resolveChecked(url.hostname, connectTimeoutMs);
      return checked.map((a) => a.address);
    },
    close: () => agent.close(),
  };
}

/**
 * A resolver that asks the given DNS servers (host:port) for A and AAAA records together, instead
 * of the system resolver; a name with records of one type only contributes none of the other.
 */
export function createDnsResolve(servers: readonly string[]): Resolve {
  const resolver = new dns.promises.Resolver({ timeout: 2000, tries: 2 });
  resolver.setServers([...servers]);
  const noData = (err: NodeJS.ErrnoException): string[] => {
    if (err.code === dns.NODATA) return [];
    throw err;
  };
  return async (hostname) => {
    const [v4, v6] = await Promise.all([
      resolver.resolve4(hostname).catch(noData),
      resolver.resolve6(hostname).catch(noData),
    ]);
    return [...v4, ...v6];
  };
}
