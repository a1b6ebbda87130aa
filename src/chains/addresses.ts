import { isAddress as isSolanaAddress } from '@solana/kit';
import algosdk from 'algosdk';
import { address as btcAddress } from 'bitcoinjs-lib';
import { createKeccak } from 'hash-wasm';
import { type BitcoinChain, bitcoinParams } from './bitcoin/params.js';
import type { Family } from './networks.js';
import { tronAddress } from './tron/address.js';

export type AddressCheck = { ok: true; address: string } | { ok: false; reason: string };

const EVM_ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/**
 * One keccak-256 hasher for the process (WebAssembly, made once), cheaper per hash than js-sha3 or
 * viem's (noble), and a list of 100,000 addresses is one hash each
 * (bench/results/2026-12-07-measurements-behind-the-code.md#keccak-256-hasher).
 */
const keccak = await createKeccak(256);

/** The characters of a checksummed address, reused: building it a character at a time made garbage. */
const spelled: number[] = [0x30, 0x78, ...new Array<number>(40).fill(0)];

/**
 * EIP-55: a hex letter is upper case where the keccak-256 of the lower-case hex has a nibble of 8
 * or more.
 */
function checksummed(lowerHex: string): string {
  keccak.init();
  keccak.update(lowerHex);
  const hash = keccak.digest('binary');
  for (let i = 0; i < 40; i++) {
    const c = lowerHex.charCodeAt(i);
    const byte = hash[i >> 1]!;
    // a-f (0x61-0x66) to A-F where the nibble is 8 or more; digits as they are.
    spelled[i + 2] = c > 0x39 && (i % 2 === 0 ? byte >> 4 : byte & 15) >= 8 ? c - 0x20 : c;
  }
  return String.fromCharCode.apply(null, spelled);
}

function evm(input: string): AddressCheck {
  if (!EVM_ADDRESS.test(input))
    return { ok: false, reason: 'is not an EVM address (0x followed by 40 hex characters)' };
  // Mixed case carries an EIP-55 checksum, which must then be right; one case carries none.
  const body = input.slice(2);
  const lower = body.toLowerCase();
  const address = checksummed(lower);
  const mixed = body !== lower && body !== body.toUpperCase();
  if (mixed && address !== input) return { ok: false, reason: 'has a wrong EIP-55 checksum' };
  return { ok: true, address };
}

function bitcoin(input: string, chain: BitcoinChain = 'mainnet'): AddressCheck {
  const params = bitcoinParams(chain);
  if (input.toLowerCase().startsWith(`${params.bech32}1`)) {
    // Bech32 is case-insensitive but must not mix cases; it is normalised to lower case.
    if (input !== input.toLowerCase() && input !== input.toUpperCase())
      return { ok: false, reason: 'mixes upper and lower case' };
    try {
      const lower = input.toLowerCase();
      const decoded = btcAddress.fromBech32(lower);
      const validProgram =
        decoded.prefix === params.bech32 &&
        ((decoded.version === 0 && (decoded.data.length === 20 || decoded.data.length === 32)) ||
          (decoded.version >= 1 &&
            decoded.version <= 16 &&
            decoded.data.length >= 2 &&
            decoded.data.length <= 40));
      return validProgram
        ? { ok: true, address: lower }
        : { ok: false, reason: `is not a valid ${chain} segwit address` };
    } catch {
      return { ok: false, reason: 'is not valid bech32/bech32m (checksum or characters)' };
    }
  }
  try {
    const decoded = btcAddress.fromBase58Check(input);
    if (
      (decoded.version === params.pubKeyHash || decoded.version === params.scriptHash) &&
      decoded.hash.length === 20
    )
      return { ok: true, address: input };
    return { ok: false, reason: `is not a ${chain} P2PKH or P2SH address` };
  } catch {
    return { ok: false, reason: `is not a valid Bitcoin address (bech32 ${params.bech32}1… or base58check)` };
  }
}

function algorand(input: string): AddressCheck {
  if (!algosdk.isValidAddress(input))
    return { ok: false, reason: 'is not an Algorand address (58 base32 characters with checksum)' };
  // The last character carries 2 padding bits that isValidAddress ignores: refuse any spelling but
  // the canonical one, which is the only one the chain reports and the watchers can match.
  if (algosdk.encodeAddress(algosdk.decodeAddress(input).publicKey) !== input)
    return { ok: false, reason: 'is not in canonical form (its last character has non-zero padding bits)' };
  return { ok: true, address: input };
}

function solana(input: string): AddressCheck {
  return isSolanaAddress(input)
    ? { ok: true, address: input }
    : { ok: false, reason: 'is not a Solana address (base58, 32 bytes)' };
}

const CHECKS: Record<Family, (input: string, bitcoinChain?: BitcoinChain) => AddressCheck> = {
  evm,
  bitcoin,
  algorand,
  solana,
  tron: tronAddress,
};

/**
 * Validates an address for a chain family and returns its normal form (EIP-55, lower-case
 * bech32, base58 for Tron). A Bitcoin network's addresses carry its chain's prefixes (mainnet by default).
 */
export function normalizeAddress(family: Family, input: string, bitcoinChain?: BitcoinChain): AddressCheck {
  const trimmed = input.trim();
  if (trimmed === '' || trimmed.length > 128) return { ok: false, reason: 'is empty or too long' };
  return CHECKS[family](trimmed, bitcoinChain);
}
