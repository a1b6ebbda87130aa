/**
 * Tron addresses: base58check of 0x41 and the account's 20 bytes (the Bitcoin layout, another
 * version byte), and the hex forms java-tron writes: `41…` (21 bytes) in transactions and infos,
 * the bare 20 bytes in a log's address and topics.
 */
import { address as base58Address } from 'bitcoinjs-lib';

export const TRON_ADDRESS_VERSION = 0x41;

const HEX41 = /^(?:0x)?41[0-9a-fA-F]{40}$/;
const HEX20 = /^[0-9a-fA-F]{40}$/;

export type TronAddressCheck = { ok: true; address: string } | { ok: false; reason: string };

/** A base58 `T…` address or its hex form `41…`, checked and written as base58. */
export function tronAddress(input: string): TronAddressCheck {
  if (HEX41.test(input)) return { ok: true, address: tronFromHex(input.replace(/^0x/, '')) };
  let decoded: { version: number; hash: Uint8Array };
  try {
    decoded = base58Address.fromBase58Check(input);
  } catch {
    return {
      ok: false,
      reason: 'is not a Tron address (base58check T… of 34 characters, or 41 and 40 hex characters)',
    };
  }
  if (decoded.version !== TRON_ADDRESS_VERSION || decoded.hash.length !== 20)
    return { ok: false, reason: 'is not a Tron address: its version byte is not 0x41' };
  return { ok: true, address: input };
}

/** base58 of a 21-byte `41…` hex address, or of 20 bytes (a log's), as java-tron writes them. */
export function tronFromHex(hex: string): string {
  const body = hex.length === 42 ? hex.slice(2) : hex;
  if (!HEX20.test(body) || (hex.length === 42 && !/^41/i.test(hex)))
    throw new RangeError(`Not a Tron hex address: ${hex.slice(0, 50)}`);
  return base58Address.toBase58Check(Buffer.from(body, 'hex'), TRON_ADDRESS_VERSION);
}

/** The `41…` hex form of a base58 address, as java-tron's HTTP API takes it. */
export function tronToHex(address: string): string {
  const { hash } = base58Address.fromBase58Check(address);
  return `41${Buffer.from(hash).toString('hex')}`;
}
