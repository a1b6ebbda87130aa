/**
 * The Algorand anchor chain against the loopback algod (test/helpers/algorand-node.ts): what it
 * sends is taken apart byte by byte and checked against the params the node gave, with the
 * signature verified by Node's own ed25519 and the id recomputed with Node's SHA-512/256, not by
 * algosdk, which built them.
 */
import { createHash, createPublicKey, randomBytes, verify } from 'node:crypto';
import algosdk from 'algosdk';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import {
  type AlgorandNode,
  assembleRun,
  startAlgorandNode,
  TESTNET,
} from '../../../test/helpers/algorand-node.js';
import { anchorPayload, rootInPayload } from '../../anchor/receipt.js';
import { ConfigError, UpstreamUnavailableError } from '../../errors.js';
import { AlgorandTxRejectedError, algorandAnchorChain } from './anchor.js';
import { base32, blockFromIndexer } from './blocks.js';

let node: AlgorandNode;
let account: algosdk.Account;
let mnemonic: string;

beforeEach(async () => {
  node = await startAlgorandNode();
  // Rounds 100–102: the tip, and so every new transaction's first valid round, is 102.
  node.setRounds(assembleRun(100, 3));
  account = algosdk.generateAccount();
  mnemonic = algosdk.secretKeyToMnemonic(account.sk);
});
afterEach(() => node.close());

const chain = (extra: { algodToken?: string; validityRounds?: number } = {}) =>
  algorandAnchorChain({ algodUrl: node.url, key: mnemonic, timeoutMs: 2000, ...extra });

const root = () => randomBytes(32);

/** The hash algod reports for a round the node holds. */
const hashOfRound = (round: number) => {
  const held = assembleRun(100, round - 99).at(-1)!;
  return blockFromIndexer(held.indexer).hash;
};

/**
 * A single-signature SignedTxn as canonical msgpack is the map {sig, txn} with its keys sorted:
 * 0x82, "sig" (0xa3 + 3 bytes), bin8 of 64 (0xc4 0x40 + 64 bytes), "txn" (0xa3 + 3 bytes), then
 * the transaction's own msgpack to the end: the bytes that were signed, after "TX".
 */
function splitSigned(blob: Buffer): { sig: Buffer; txnBytes: Buffer } {
  expect(blob.subarray(0, 7).equals(Buffer.from([0x82, 0xa3, 0x73, 0x69, 0x67, 0xc4, 0x40]))).toBe(true);
  expect(blob.subarray(71, 75).equals(Buffer.from([0xa3, 0x74, 0x78, 0x6e]))).toBe(true);
  return { sig: blob.subarray(7, 71), txnBytes: blob.subarray(75) };
}

describe('the Algorand anchor chain', () => {
  test('signs a zero-amount self-payment whose note is "LHK1" + the root, checked byte for byte', async () => {
    const anchor = chain();
    const merkleRoot = root();
    const tx = await anchor.sign(anchorPayload(merkleRoot));
    await anchor.broadcast(tx);

    expect(node.posted).toHaveLength(1);
    const blob = Buffer.from(node.posted[0]!);
    expect(blob.equals(Buffer.from(tx.raw, 'base64'))).toBe(true);

    // Independently of algosdk: the signature over "TX" ‖ the transaction, and the id.
    const { sig, txnBytes } = splitSigned(blob);
    const signedBytes = Buffer.concat([Buffer.from('TX'), txnBytes]);
    const publicKey = createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(account.addr.publicKey).toString('base64url') },
      format: 'jwk',
    });
    expect(verify(null, signedBytes, publicKey, sig)).toBe(true);
    expect(tx.txId).toBe(base32(createHash('sha512-256').update(signedBytes).digest()));

    // The fields, against the node's /v2/transactions/params: last-round 102, fee 0 per byte,
    // min-fee 1000, testnet's genesis.
    const signed = algosdk.decodeSignedTransaction(blob);
    const txn = signed.txn;
    const address = account.addr.toString();
    expect(txn.type).toBe('pay');
    expect(txn.payment?.amount).toBe(0n);
    expect(txn.sender.toString()).toBe(address);
    expect(txn.payment?.receiver.toString()).toBe(address);
    expect(txn.payment?.closeRemainderTo).toBeUndefined();
    expect(txn.rekeyTo).toBeUndefined();
    expect(txn.fee).toBe(1000n);
    expect(txn.firstValid).toBe(102n);
    expect(txn.lastValid).toBe(1102n);
    expect(txn.genesisID).toBe(TESTNET.genesisId);
    expect(Buffer.from(txn.genesisHash!).toString('base64')).toBe(TESTNET.genesisHash);
    const note = Buffer.from(txn.note);
    expect(note.subarray(0, 4).toString('ascii')).toBe('LHK1');
    expect(note).toHaveLength(36);
    expect(rootInPayload(note)?.equals(merkleRoot)).toBe(true);
    expect(txn.txID()).toBe(tx.txId);
    // What was signed is the canonical encoding of those fields, nothing more.
    expect(Buffer.from(algosdk.encodeMsgpack(txn)).equals(txnBytes)).toBe(true);
    expect(tx.details).toEqual({ firstValid: 102, lastValid: 1102 });
    expect(anchor.address).toBe(address);
    expect(anchor.kind).toBe('algorand-note');
    expect(anchor.finalDepth).toBe(1);
  });

  test("its chain identity is the node's genesis hash, read once", async () => {
    const anchor = chain();
    expect(await anchor.chainIdentity()).toBe(TESTNET.genesisHash);
    expect(await anchor.chainIdentity()).toBe(TESTNET.genesisHash);
    expect(node.requests.filter((r) => r.path === '/v2/transactions/params')).toHaveLength(1);
  });

  test('refuses to sign once the node is on another network than the one it first reported', async () => {
    const anchor = chain();
    await anchor.chainIdentity();
    node.setGenesis({
      genesisId: 'mainnet-v1.0',
      genesisHash: 'wGHE2Pwdvd7S12BL5FaOP20EGYesN73ktiC1qzkkit8=',
    });
    await expect(anchor.sign(anchorPayload(root()))).rejects.toThrow(UpstreamUnavailableError);
  });

  test('sending a transaction the node already has, pending or committed, is not an error', async () => {
    const anchor = chain();
    const tx = await anchor.sign(anchorPayload(root()));
    await anchor.broadcast(tx);
    await anchor.broadcast(tx);
    node.setRounds(assembleRun(100, 4));
    node.confirm(tx.txId, 103);
    await anchor.broadcast(tx);
    expect(node.posted).toHaveLength(3);
    expect([...node.pool.keys()]).toEqual([tx.txId]);
  });

  test('is not included while pending; once committed, at its round with that round’s hash', async () => {
    const anchor = chain();
    const tx = await anchor.sign(anchorPayload(root()));
    expect(await anchor.inclusion(tx.txId)).toBeUndefined(); // not sent yet: algod answers 404
    await anchor.broadcast(tx);
    expect(await anchor.inclusion(tx.txId)).toBeUndefined();
    node.setRounds(assembleRun(100, 4));
    node.confirm(tx.txId, 103);
    const included = await anchor.inclusion(tx.txId);
    expect(included).toEqual({ blockNumber: 103, blockHash: hashOfRound(103), success: true });
    expect(await anchor.hashAt(103)).toBe(included?.blockHash);
    expect(await anchor.hashAt(104)).toBeUndefined();
    expect(await anchor.tip()).toBe(103);
  });

  test('a transaction the pool dropped (pool-error) is not included', async () => {
    const anchor = chain();
    const tx = await anchor.sign(anchorPayload(root()));
    await anchor.broadcast(tx);
    node.evict(tx.txId, 'TransactionPool.Remember: txn dead: round 1103 outside of 102--1102');
    expect(await anchor.inclusion(tx.txId)).toBeUndefined();
  });

  test('may be replaced only once its last valid round has passed, and then by a fresh window', async () => {
    const anchor = chain({ validityRounds: 10 });
    const payload = anchorPayload(root());
    const tx = await anchor.sign(payload);
    expect(tx.details).toEqual({ firstValid: 102, lastValid: 112 });
    expect(anchor.mayReplace(tx, 102)).toBe(false);
    expect(anchor.mayReplace(tx, 112)).toBe(false);
    expect(anchor.mayReplace(tx, 113)).toBe(true);
    // Details as they come back from the database (JSON) serve as well.
    expect(anchor.mayReplace({ ...tx, details: { firstValid: '102', lastValid: '112' } }, 113)).toBe(true);

    // Signing a replacement while the first can still be committed is refused.
    await expect(anchor.sign(payload, tx)).rejects.toThrow(/may not be replaced yet/);
    node.setRounds(assembleRun(113, 1));
    const replacement = await anchor.sign(payload, tx);
    expect(replacement.details).toEqual({ firstValid: 113, lastValid: 123 });
    expect(replacement.txId).not.toBe(tx.txId);
  });

  test("a transaction the node refuses for another reason throws with algod's message", async () => {
    const anchor = chain({ validityRounds: 10 });
    const tx = await anchor.sign(anchorPayload(root()));
    node.setRounds(assembleRun(200, 1));
    const refusal = anchor.broadcast(tx);
    await expect(refusal).rejects.toThrow(AlgorandTxRejectedError);
    await expect(refusal).rejects.toThrow(
      'TransactionPool.Remember: txn dead: round 201 outside of 102--112',
    );
  });

  test('a node answering 5xx or dropping the connection is UpstreamUnavailableError, for every call', async () => {
    const anchor = chain();
    const tx = await anchor.sign(anchorPayload(root()));
    const calls: [string, () => Promise<unknown>][] = [
      ['sign', () => anchor.sign(anchorPayload(root()))],
      ['broadcast', () => anchor.broadcast(tx)],
      ['inclusion', () => anchor.inclusion(tx.txId)],
      ['tip', () => anchor.tip()],
      ['hashAt', () => anchor.hashAt(101)],
    ];
    for (const [name, call] of calls) {
      node.failNext(1, 503);
      await expect(call(), `${name} on 503`).rejects.toThrow(UpstreamUnavailableError);
      node.dropNext(1);
      await expect(call(), `${name} on a dropped connection`).rejects.toThrow(UpstreamUnavailableError);
    }
    // The node back: nothing is remembered of the failures.
    await anchor.broadcast(tx);
    expect(await anchor.tip()).toBe(102);
  });

  test('sends X-Algo-API-Token when a token is given', async () => {
    const anchor = chain({ algodToken: 'a-token' });
    const tx = await anchor.sign(anchorPayload(root()));
    await anchor.broadcast(tx);
    await anchor.inclusion(tx.txId);
    await anchor.tip();
    expect(node.requests.length).toBeGreaterThanOrEqual(5);
    for (const request of node.requests) expect(request.headers['x-algo-api-token']).toBe('a-token');
  });

  test('takes the key as a mnemonic or a base64 secret key, and refuses validity windows algod would', () => {
    const base64Key = Buffer.from(account.sk).toString('base64');
    const address = account.addr.toString();
    expect(algorandAnchorChain({ algodUrl: node.url, key: base64Key }).address).toBe(address);
    const spaced = `  ${mnemonic.toUpperCase().split(' ').join('  \n')} `;
    expect(algorandAnchorChain({ algodUrl: node.url, key: spaced }).address).toBe(address);
    expect(() => chain({ validityRounds: 0 })).toThrow(RangeError);
    expect(() => chain({ validityRounds: 1001 })).toThrow(RangeError);
  });

  test('a bad key throws an error naming LEDGERHOOK_ANCHOR_KEY that does not contain the key', () => {
    const words = mnemonic.split(' ');
    // Another valid word in place of the first: the checksum no longer matches.
    const otherWord = algosdk.secretKeyToMnemonic(algosdk.generateAccount().sk).split(' ')[0]!;
    const wrongWord = [otherWord === words[0] ? 'zoo' : otherWord, ...words.slice(1)].join(' ');
    const mismatched = Buffer.concat([Buffer.from(account.sk.subarray(0, 32)), randomBytes(32)]);
    const badKeys = [
      wrongWord,
      words.slice(0, 24).join(' '),
      [...words.slice(0, 24), 'notaword'].join(' '),
      mismatched.toString('base64'), // a seed with someone else's public key
      randomBytes(32).toString('base64'),
      `${Buffer.from(account.sk).toString('base64')}!`,
      'not a key at all',
    ];
    for (const key of badKeys) {
      let error: unknown;
      try {
        algorandAnchorChain({ algodUrl: node.url, key });
      } catch (err) {
        error = err;
      }
      expect(error, key.slice(0, 8)).toBeInstanceOf(ConfigError);
      const message = (error as Error).message;
      expect(message).toMatch(/^LEDGERHOOK_ANCHOR_KEY /);
      expect(message).not.toContain(key);
      // Nor any part of it: two consecutive words of a mnemonic, 12 characters of a base64 key.
      const parts = key.includes(' ')
        ? key.split(' ').flatMap((w, i, all) => (i + 1 < all.length ? [`${w} ${all[i + 1]}`] : []))
        : [key.slice(0, 12), key.slice(-12)];
      for (const part of parts) expect(message).not.toContain(part);
      expect(message).not.toContain(words.slice(1, 3).join(' '));
      expect(message).not.toContain(Buffer.from(account.sk).toString('base64').slice(0, 12));
    }
  });
});
