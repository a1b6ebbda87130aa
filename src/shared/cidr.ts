/**
 * IP addresses and CIDR allowlists as the configuration writes them (LEDGERHOOK_ALLOW_CIDRS), and
 * whether an address is inside one: read by config.ts, checked by notify/egress.ts.
 */
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { ConfigError } from '../errors.js';

export type Ip = ipaddr.IPv4 | ipaddr.IPv6;

/** An address in strict notation (no "127.1", no hex octets, no zone id), or undefined. */
export function parseIp(address: string): Ip | undefined {
  // net.isIP is strict (no "127.1", no hex octets) and rejects zone ids, unlike ipaddr.parse.
  if (net.isIP(address) === 0 || address.includes('%')) return undefined;
  return ipaddr.parse(address);
}

/** An allowlisted network. IPv4-mapped IPv6 networks are stored as IPv4 ones. */
export interface Cidr {
  readonly network: Ip;
  readonly prefix: number;
  /** As written in the configuration. */
  readonly text: string;
}

/** IPv4-mapped IPv6 addresses are the IPv4 address on the wire, so they are matched as IPv4. */
function normalise(ip: Ip): Ip {
  return ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()
    ? (ip as ipaddr.IPv6).toIPv4Address()
    : ip;
}

/**
 * Parses a comma-separated CIDR list such as "127.0.0.0/8,::1/128" (a bare address means that one
 * host). For development and tests only; a /0 network is refused because it would disable the check.
 */
export function parseAllowCidrs(text: string | undefined, variable = 'LEDGERHOOK_ALLOW_CIDRS'): Cidr[] {
  if (text === undefined) return [];
  const cidrs: Cidr[] = [];
  for (const raw of text.split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const [addressText = '', prefixText, ...rest] = entry.split('/');
    const ip = parseIp(addressText);
    const bits = ip?.kind() === 'ipv4' ? 32 : 128;
    const prefix = prefixText === undefined ? bits : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
    if (!ip || rest.length > 0 || !(prefix <= bits)) {
      throw new ConfigError(
        variable,
        `has an invalid CIDR "${entry}" (expected e.g. 127.0.0.0/8 or ::1/128)`,
      );
    }
    const mapped = ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress() && prefix >= 96;
    const cidr = mapped
      ? { network: normalise(ip), prefix: prefix - 96, text: entry }
      : { network: ip, prefix, text: entry };
    if (cidr.prefix === 0) {
      throw new ConfigError(variable, `must not contain "${entry}": it would allow every address`);
    }
    cidrs.push(cidr);
  }
  return cidrs;
}

export function isAllowlisted(ip: Ip, allow: readonly Cidr[]): boolean {
  const candidate = normalise(ip);
  return allow.some(
    (cidr) => cidr.network.kind() === candidate.kind() && candidate.match(cidr.network, cidr.prefix),
  );
}
