/**
 * The activity arithmetic on hand-made transactions whose nets are worked out in the comments,
 * and address decoding on published vectors. The same functions run on real blocks in
 * source.test.ts.
 */

import { address as btcAddress, networks, payments } from 'bitcoinjs-lib';
import { describe, expect, test } from 'vitest';
import { addressesOf, addressOfScript, type BitcoinTransaction, formatBtc, netChange } from './activity.js';
import { bitcoinParams } from './params.js';

const BTC = 100_000_000n;
const script = (hex: string) => Buffer.from(hex, 'hex');
const HASH20 = '751e76e8199196d454941c45d1b3a323f1433bd6';
const HASH32 = '1863143c14c5166804bd19203356da136c985678cd4d27a1b8c6329604903262';
/** BIP350's valid v1 example: OP_1 and the secp256k1 generator's x coordinate. */
const TAPROOT = '512079be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798';

describe('addressOfScript', () => {
  test('decodes every standard output type on mainnet', () => {
    const net = networks.bitcoin;
    // BIP173's P2WPKH and P2WSH examples, and the P2PKH/P2SH of the same hash160.
    expect(addressOfScript(script(`0014${HASH20}`), net)).toBe('bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4');
    expect(addressOfScript(script(`0020${HASH32}`), net)).toBe(
      'bc1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3qccfmv3',
    );
    expect(addressOfScript(script(`76a914${HASH20}88ac`), net)).toBe(
      payments.p2pkh({ hash: script(HASH20) }).address,
    );
    expect(addressOfScript(script(`a914${HASH20}87`), net)).toBe(
      payments.p2sh({ hash: script(HASH20) }).address,
    );
    expect(addressOfScript(script(TAPROOT), net)).toBe(
      'bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0',
    );
  });

  test('uses the network prefixes of testnet and regtest', () => {
    const p2wpkh = script(`0014${HASH20}`);
    expect(addressOfScript(p2wpkh, bitcoinParams('testnet'))).toBe(
      'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx',
    );
    expect(addressOfScript(p2wpkh, bitcoinParams('regtest'))).toMatch(/^bcrt1q/);
    expect(addressOfScript(script(TAPROOT), networks.testnet)).toMatch(/^tb1p/);
    const p2pkh = addressOfScript(script(`76a914${HASH20}88ac`), networks.testnet)!;
    expect(p2pkh).toMatch(/^[mn]/);
    // Round trip through bitcoinjs-lib's own encoder for the same network.
    expect(Buffer.from(btcAddress.toOutputScript(p2pkh, networks.testnet)).toString('hex')).toBe(
      `76a914${HASH20}88ac`,
    );
  });

  test('names no address for P2PK, bare multisig, OP_RETURN and non-standard scripts', () => {
    const pubkey =
      '0411db93e1dcdb8a016b49840f8c53bc1eb68a382e97b1482ecad7b148a6909a5cb2e0eaddfb84ccf9744464f82e160bfa9b8b64f9d4c03f999b8643f656b412a3';
    expect(addressOfScript(script(`41${pubkey}ac`), networks.bitcoin)).toBeNull(); // block 9's coinbase output
    expect(addressOfScript(script(`5141${pubkey}51ae`), networks.bitcoin)).toBeNull(); // 1-of-1 bare multisig
    expect(addressOfScript(script('6a0568656c6c6f'), networks.bitcoin)).toBeNull(); // OP_RETURN "hello"
    expect(addressOfScript(script(''), networks.bitcoin)).toBeNull();
    expect(addressOfScript(script(`0015${'00'.repeat(21)}`), networks.bitcoin)).toBeNull(); // v0, wrong length
  });
});

const A = 'bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4';
const B = '1BgGZ9tcN4rm9KBzDn7KprQz87SZ26SAMH';
const C = '3P14159f73E4gFr7JterCCQh9QjiTjiZrG';

function tx(
  inputs: [string | null, bigint][],
  outputs: [string | null, bigint][],
  coinbase = false,
): BitcoinTransaction {
  const endpoint = ([address, value]: [string | null, bigint]) => ({ address, value });
  return {
    txid: 'ab'.repeat(32),
    coinbase,
    inputs: inputs.map(endpoint),
    outputs: outputs.map(endpoint),
    spends: coinbase ? [] : inputs.map((_, i) => `${'cd'.repeat(32)}:${i}`),
  };
}

describe('netChange and addressesOf', () => {
  test('nets a payment with change back to the payer, and names the single payee', () => {
    // A spends 1.5 BTC, pays B 1 BTC and itself 0.4999 back: A −1.0001 (fee included), B +1.
    const payment = tx(
      [[A, 150_000_000n]],
      [
        [B, BTC],
        [A, 49_990_000n],
      ],
    );
    expect(netChange(payment, A)).toEqual({ amount: -100_010_000n, counterAddress: B });
    expect(netChange(payment, B)).toEqual({ amount: BTC, counterAddress: A });
    expect(addressesOf(payment)).toEqual([A, B]);
  });

  test('names no counterparty when the other side has two addresses', () => {
    const split = tx(
      [[A, 3n * BTC]],
      [
        [B, BTC],
        [C, BTC],
        [null, 0n],
      ],
    );
    expect(netChange(split, A)).toEqual({ amount: -3n * BTC }); // B and C on the other side
    expect(netChange(split, B)).toEqual({ amount: BTC, counterAddress: A });
    // Two payers: B receives from A and C.
    const joint = tx(
      [
        [A, BTC],
        [C, BTC],
      ],
      [[B, 2n * BTC - 1000n]],
    );
    expect(netChange(joint, B)).toEqual({ amount: 2n * BTC - 1000n });
  });

  test('sums several inputs and outputs of one address', () => {
    const consolidation = tx(
      [
        [A, 10n],
        [A, 20n],
        [B, 30n],
      ],
      [
        [A, 5n],
        [A, 7n],
      ],
    );
    expect(netChange(consolidation, A)).toEqual({ amount: -18n }); // 12 − 30; no other output address
    expect(netChange(consolidation, B)).toEqual({ amount: -30n, counterAddress: A });
  });

  test('credits coinbase outputs with no counterparty, and nets nothing for an untouched address', () => {
    const coinbase = tx(
      [],
      [
        [A, 625_000_000n],
        [null, 0n],
      ],
      true,
    );
    expect(netChange(coinbase, A)).toEqual({ amount: 625_000_000n });
    expect(netChange(coinbase, B)).toEqual({ amount: 0n });
    expect(addressesOf(coinbase)).toEqual([A]);
  });

  test('lists no address for a transaction between scripts without addresses', () => {
    // Block 170's f4184fc5: pay-to-pubkey in, pay-to-pubkey out (10 + 40 BTC).
    expect(
      addressesOf(
        tx(
          [[null, 50n * BTC]],
          [
            [null, 10n * BTC],
            [null, 40n * BTC],
          ],
        ),
      ),
    ).toEqual([]);
  });
});

describe('formatBtc', () => {
  test('writes satoshi as signed BTC without trailing zeros', () => {
    expect(formatBtc(-50_000_000n)).toBe('-0.5');
    expect(formatBtc(50n * BTC)).toBe('50');
    expect(formatBtc(1n)).toBe('0.00000001');
    expect(formatBtc(-1n)).toBe('-0.00000001');
    expect(formatBtc(0n)).toBe('0');
    expect(formatBtc(2_099_999_997_690_000n)).toBe('20999999.9769');
  });
});
