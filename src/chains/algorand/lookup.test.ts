import fs from 'node:fs';
import { afterEach, describe, expect, test } from 'vitest';
import {
  type FixtureNode,
  type FixtureRoutes,
  fixturePath,
  startFixtureNode,
} from '../../../test/helpers/fixture-node.js';
import { UpstreamUnavailableError } from '../../errors.js';
import { parseExactJson } from '../node-http.js';
import { TRANSACTION_FIELDS } from '../transaction-view.js';
import { createAlgorandLookup, isAlgorandTxId } from './lookup.js';

// Fixtures and their provenance: test/fixtures/chains/algorand/README.md. The axfer file is a
// recorded lookup response; pay, appl and acfg-multisig are DERIVED (a recorded transaction object
// in the lookup envelope); *-constructed.json files are made up for a test.
const DIR = 'chains/algorand';
const PAY = 'RXZ6XSMUNRX7DFMUQCKFHMOSEZ7EYIOKKFNPUXKXAEL32PFRU7TQ';
const AXFER = 'VIXTUMAPT7NR4RB2WVOGMETW4QY43KIDA3HWDWWXS3UEDKGTEECQ';
const APPL = 'QY4K4IC2Z5RQ5OM2LHZH7UAFJJ44VUDSVOIAI67LMVTU4BHODP5A';
const ACFG_MSIG = 'PX3P7C2RGPUPJSYLQNGALRTAOHWGEJCY3TTOYS5G7AB5XTWPO3DA';
/** Well-formed, but no transaction has it. */
const UNKNOWN = 'A'.repeat(52);
const TESTNET_GENESIS_HASH = 'SGO1GKSzyE7IEPItTxCByw9x8FmnrCDexi9/cOUJOiI=';
const PAY_SENDER = 'GD64YIY3TWGDMCNPP553DZPPR6LDUSFQOIJVFDPPXWEG3FVOJCCDBBHU5A';
const PAY_SIG = 'lf91r4jV34vpvAH/TUU0cN74FL9Z7dOzoc9onepQKjuCo+BWR48tqCJjOywEgXP0va9khRleLRRIWuSveXjbAw==';

const INDEXER_PATH = (id: string) => `GET /v2/transactions/${id}`;
const PENDING_PATH = (id: string) => `GET /v2/transactions/pending/${id}`;
// Shapes of the two services' 404 bodies (written for the tests, not recorded).
const INDEXER_404 = (id: string) => ({
  status: 404,
  json: { message: `no transaction found for transaction id: ${id}` },
});
const ALGOD_404 = {
  status: 404,
  json: { message: 'could not find the transaction in the transaction pool or in the Ledger' },
};

const readFixture = (file: string) => fs.readFileSync(fixturePath(DIR, file), 'utf8');
/** The constructed pending answer for the pay transaction, as a JSON value to vary. */
const pendingPay = () =>
  JSON.parse(readFixture('algod-pending-transaction-pay-testnet-constructed.json')) as {
    'pool-error': string;
    'confirmed-round'?: number;
    txn: { sig?: string; msig?: unknown; lsig?: unknown; txn: Record<string, unknown> };
  };

const nodes: FixtureNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.close()));
});

async function setup(indexerRoutes: FixtureRoutes, algodRoutes: FixtureRoutes = {}, timeoutMs = 5_000) {
  const indexer = await startFixtureNode(indexerRoutes);
  const algod = await startFixtureNode(algodRoutes);
  nodes.push(indexer, algod);
  const lookup = createAlgorandLookup({ indexerUrl: indexer.url, algodUrl: algod.url, timeoutMs });
  return { indexer, algod, lookup };
}

describe('isAlgorandTxId', () => {
  test('accepts real transaction ids', () => {
    for (const id of [PAY, AXFER, APPL, ACFG_MSIG]) expect(isAlgorandTxId(id)).toBe(true);
  });

  test('refuses anything else', () => {
    expect(isAlgorandTxId(PAY.toLowerCase())).toBe(false);
    expect(isAlgorandTxId(PAY.slice(0, 51))).toBe(false);
    expect(isAlgorandTxId(`${PAY}A`)).toBe(false);
    // 52 base32 characters hold 260 bits; the last 4 are padding and must be 0: only A or Q end an id.
    expect(isAlgorandTxId(`${PAY.slice(0, 51)}R`)).toBe(false);
    expect(isAlgorandTxId(`${PAY.slice(0, 50)}1Q`)).toBe(false); // 0, 1, 8, 9 are not base32
    expect(isAlgorandTxId(`0x${'ab'.repeat(32)}`)).toBe(false);
    expect(isAlgorandTxId('')).toBe(false);
  });
});

describe('Algorand lookup: confirmed transactions from the indexer', () => {
  test('maps the payment (DERIVED fixture) field by field', async () => {
    const { indexer, algod, lookup } = await setup({
      [INDEXER_PATH(PAY)]: { file: `${DIR}/indexer-transaction-pay-testnet.json` },
    });
    const result = await lookup(PAY);
    expect(result).toBeDefined();
    expect(result!.final).toBe(true);
    expect(result!.view).toStrictEqual({
      closeRewards: '0',
      closingAmount: '0',
      confirmedRound: 42225822n,
      fee: 1000n,
      firstValid: 42225820n,
      genesisHash: TESTNET_GENESIS_HASH,
      genesisId: 'testnet-v1.0',
      id: PAY,
      intraRoundOffset: 1n,
      lastValid: 42226820n,
      note: null,
      receiverRewards: '0',
      roundTime: 1721887325n,
      sender: PAY_SENDER,
      senderRewards: '0',
      signature: PAY_SIG,
      txType: 'pay',
    });
    expect(Object.keys(result!.view).sort()).toEqual([...TRANSACTION_FIELDS]);
    expect(indexer.requests.map((r) => `${r.method} ${r.url}`)).toEqual([`GET /v2/transactions/${PAY}`]);
    expect(indexer.requests[0]!.headers.accept).toBe('application/json');
    expect(algod.requests).toHaveLength(0);
  });

  test('maps the asset-transfer clawback (recorded lookup response) field by field', async () => {
    const { lookup } = await setup({
      [INDEXER_PATH(AXFER)]: { file: `${DIR}/indexer-transaction-axfer-testnet.json` },
    });
    const result = await lookup(AXFER);
    expect(result!.final).toBe(true);
    expect(result!.view).toStrictEqual({
      closeRewards: '0',
      closingAmount: '0',
      confirmedRound: 39050091n,
      fee: 1000n,
      firstValid: 39050089n,
      genesisHash: TESTNET_GENESIS_HASH,
      genesisId: 'testnet-v1.0',
      id: AXFER,
      intraRoundOffset: 9n,
      lastValid: 39051089n,
      // base64 as the indexer gives it: "Transfer 5 assets wit id $642327435".
      note: 'VHJhbnNmZXIgNSBhc3NldHMgd2l0IGlkICQ2NDIzMjc0MzU=',
      receiverRewards: '0',
      roundTime: 1713177404n,
      // The clawback account that signed, not the revoked account (asset-transfer-transaction.sender).
      sender: 'ATJJRFAQVMD3YVX47HZLK2GRNKZLS3YDRLJ62JJPLUCZPDJE7QPQZDTVGY',
      senderRewards: '0',
      signature: 'LYTng1fmA+JQ8AocqDfp/OBvrds/WXa936muT3b4Ym98qIzouEnbMf7cOj099GV+ABecBzmw6+JrzOH/WU7TDQ==',
      txType: 'axfer',
    });
    expect(Buffer.from(result!.view.note!, 'base64').toString('utf8')).toBe(
      'Transfer 5 assets wit id $642327435',
    );
  });

  test('maps the application call (DERIVED fixture) field by field', async () => {
    const { lookup } = await setup({
      [INDEXER_PATH(APPL)]: { file: `${DIR}/indexer-transaction-appl-testnet.json` },
    });
    const result = await lookup(APPL);
    expect(result!.final).toBe(true);
    expect(result!.view).toStrictEqual({
      closeRewards: '0',
      closingAmount: '0',
      confirmedRound: 42227864n,
      fee: 2000n,
      firstValid: 42227859n,
      genesisHash: TESTNET_GENESIS_HASH,
      genesisId: 'testnet-v1.0',
      id: APPL,
      intraRoundOffset: 2n,
      lastValid: 42228859n,
      note: null,
      receiverRewards: '0',
      roundTime: 1721892883n,
      sender: '25M5BT2DMMED3V6CWDEYKSNEFGPXX4QBIINCOICLXXRU3UGTSGRMF3MTOE',
      senderRewards: '0',
      signature: 'aJjwZDVvDhYTp/IEjFz/y1cNSlC065MVv5dpTNXkIjr/ApI1J9VlTYyT+1Ib+KkpR1VMqdmruQdndrRWhkKTDQ==',
      txType: 'appl',
    });
  });

  test('passes a multisig through as its object, and maps an old mainnet record without genesis-hash (DERIVED fixture)', async () => {
    const { lookup } = await setup({
      [INDEXER_PATH(ACFG_MSIG)]: { file: `${DIR}/indexer-transaction-acfg-multisig-mainnet.json` },
    });
    const result = await lookup(ACFG_MSIG);
    expect(result!.final).toBe(true);
    const { signature, ...rest } = result!.view;
    expect(rest).toStrictEqual({
      closeRewards: '0',
      closingAmount: '0',
      confirmedRound: 4162690n,
      fee: 1000n,
      firstValid: 4162539n,
      genesisHash: null, // the 2020 indexer output has no genesis-hash
      genesisId: 'mainnet-v1.0',
      id: ACFG_MSIG,
      intraRoundOffset: 0n,
      lastValid: 4163539n,
      note: MSIG_NOTE,
      receiverRewards: '0',
      roundTime: 1578516789n,
      sender: 'ARCC3TMGVD7KXY7GYTE7U5XXUJXFRD2SXLAWRV57XJ6HWHRR37GNGNMPSY',
      senderRewards: '704',
      txType: 'acfg',
    });
    expect(Buffer.from(rest.note!, 'base64').toString('utf8')).toMatch(
      /^Love never fails\. .* even as I am fully known\.$/,
    );
    // signature.multisig as the indexer returns it, integers (threshold, version) as bigint.
    const msig = signature as { subsignature: Record<string, string>[]; threshold: bigint; version: bigint };
    expect(msig.threshold).toBe(5n);
    expect(msig.version).toBe(1n);
    expect(msig.subsignature).toHaveLength(11);
    expect(msig.subsignature[0]).toStrictEqual({
      'public-key': 'QFkQCMaKY5Xu7aqqLbQxj3CTSB0s3aPErGrtuoxzBcs=',
      signature: 'bP6EVEvrGbkF2g+VZevqxVdpEQ5i0935AmgEZKiH+g3TkqlhrxPWVKW0MMJC9RG31qATGmbsbbXHf1/X7hL6BA==',
    });
    expect(msig.subsignature[4]).toStrictEqual({
      'public-key': 'QFkYsAzH2FeS3QUwP2wWNi5ODdyz5TrX/jZbN5MYSS4=',
    });
    expect(msig.subsignature.filter((s) => s.signature !== undefined)).toHaveLength(5);
    const recorded = parseExactJson(readFixture('indexer-transaction-acfg-multisig-mainnet.json')) as {
      transaction: { signature: { multisig: unknown } };
    };
    expect(signature).toStrictEqual(recorded.transaction.signature.multisig);
  });

  test('passes a logicsig through as its object (CONSTRUCTED fixture)', async () => {
    const { lookup } = await setup({
      [INDEXER_PATH(PAY)]: { file: `${DIR}/indexer-transaction-logicsig-constructed.json` },
    });
    const result = await lookup(PAY);
    expect(result!.view.signature).toStrictEqual({ args: ['AQID'], logic: 'BoEBQw==' });
    expect(result!.view.sender).toBe(PAY_SENDER);
  });

  test('keeps integers beyond 2^53 exact (CONSTRUCTED fixture)', async () => {
    const { lookup } = await setup({
      [INDEXER_PATH(PAY)]: { file: `${DIR}/indexer-transaction-bigfee-constructed.json` },
    });
    expect(readFixture('indexer-transaction-bigfee-constructed.json')).toContain('"fee": 9007199254740993,');
    const result = await lookup(PAY);
    expect(result!.view.fee).toBe(9007199254740993n);
    expect(result!.view.senderRewards).toBe('18446744073709551615');
    expect(result!.view.confirmedRound).toBe(42225822n);
  });

  test('joins base URLs that carry a path and a trailing slash', async () => {
    const indexer = await startFixtureNode({
      [`GET /idx/v2/transactions/${PAY}`]: { file: `${DIR}/indexer-transaction-pay-testnet.json` },
    });
    nodes.push(indexer);
    const lookup = createAlgorandLookup({
      indexerUrl: `${indexer.url}/idx/`,
      algodUrl: `${indexer.url}/algod/`,
    });
    expect((await lookup(PAY))!.view.id).toBe(PAY);
  });
});

describe('Algorand lookup: pending transactions from algod', () => {
  test('answers a transaction still in the pool from the pending endpoint (CONSTRUCTED response)', async () => {
    const { indexer, algod, lookup } = await setup(
      { [INDEXER_PATH(PAY)]: INDEXER_404(PAY) },
      { [PENDING_PATH(PAY)]: { file: `${DIR}/algod-pending-transaction-pay-testnet-constructed.json` } },
    );
    const result = await lookup(PAY);
    expect(result!.final).toBe(false);
    expect(result!.view).toStrictEqual({
      closeRewards: null,
      closingAmount: null,
      confirmedRound: null,
      fee: 1000n,
      firstValid: 42225820n,
      genesisHash: TESTNET_GENESIS_HASH,
      genesisId: 'testnet-v1.0',
      id: PAY,
      intraRoundOffset: null,
      lastValid: 42226820n,
      note: null,
      receiverRewards: null,
      roundTime: null,
      sender: PAY_SENDER,
      senderRewards: null,
      signature: PAY_SIG,
      txType: 'pay',
    });
    expect(indexer.requests.map((r) => r.url)).toEqual([`/v2/transactions/${PAY}`]);
    expect(algod.requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      `GET /v2/transactions/pending/${PAY}?format=json`,
    ]);
  });

  test('maps a note, and a fee that msgpack omitted (0, e.g. paid by the group) (CONSTRUCTED variant)', async () => {
    const body = pendingPay();
    body.txn.txn.note = 'aGVsbG8=';
    delete body.txn.txn.fee;
    const { lookup } = await setup(
      { [INDEXER_PATH(PAY)]: INDEXER_404(PAY) },
      { [PENDING_PATH(PAY)]: { json: body } },
    );
    const { view } = (await lookup(PAY))!;
    expect(view.fee).toBe(0n);
    expect(view.note).toBe('aGVsbG8=');
  });

  test('reports the round of a transaction algod has committed but the indexer has not ingested, not final (CONSTRUCTED variant)', async () => {
    const body = pendingPay();
    body['confirmed-round'] = 42225822;
    const { lookup } = await setup(
      { [INDEXER_PATH(PAY)]: INDEXER_404(PAY) },
      { [PENDING_PATH(PAY)]: { json: body } },
    );
    const result = await lookup(PAY);
    expect(result!.final).toBe(false);
    expect(result!.view.confirmedRound).toBe(42225822n);
    expect(result!.view.roundTime).toBeNull();
    expect(result!.view.intraRoundOffset).toBeNull();
  });

  test('treats a transaction evicted from the pool (pool-error) as unknown (CONSTRUCTED variant)', async () => {
    const body = pendingPay();
    body['pool-error'] = 'TransactionPool.Remember: transaction already in ledger';
    const { lookup } = await setup(
      { [INDEXER_PATH(PAY)]: INDEXER_404(PAY) },
      { [PENDING_PATH(PAY)]: { json: body } },
    );
    expect(await lookup(PAY)).toBeUndefined();
  });

  test("maps algod's multisig and logicsig short keys to the indexer's spelling (CONSTRUCTED variants)", async () => {
    const msigBody = pendingPay();
    delete msigBody.txn.sig;
    msigBody.txn.msig = { subsig: [{ pk: 'cGsx', s: 'c2ln' }, { pk: 'cGsy' }], thr: 1, v: 1 };
    const lsigBody = pendingPay();
    delete lsigBody.txn.sig;
    lsigBody.txn.lsig = { arg: ['AQID'], l: 'BoEBQw==', msig: { subsig: [{ pk: 'cGsx' }], thr: 1, v: 1 } };
    const { lookup, algod } = await setup({ [INDEXER_PATH(PAY)]: INDEXER_404(PAY) });
    algod.route(PENDING_PATH(PAY), { json: msigBody });
    expect((await lookup(PAY))!.view.signature).toStrictEqual({
      subsignature: [{ 'public-key': 'cGsx', signature: 'c2ln' }, { 'public-key': 'cGsy' }],
      threshold: 1n,
      version: 1n,
    });
    algod.route(PENDING_PATH(PAY), { json: lsigBody });
    expect((await lookup(PAY))!.view.signature).toStrictEqual({
      args: ['AQID'],
      logic: 'BoEBQw==',
      'multisig-signature': { subsignature: [{ 'public-key': 'cGsx' }], threshold: 1n, version: 1n },
    });
  });
});

describe('Algorand lookup: unknown ids and failing nodes', () => {
  test('resolves undefined when neither the indexer nor algod knows the id', async () => {
    const { indexer, algod, lookup } = await setup(
      { [INDEXER_PATH(UNKNOWN)]: INDEXER_404(UNKNOWN) },
      { [PENDING_PATH(UNKNOWN)]: ALGOD_404 },
    );
    expect(await lookup(UNKNOWN)).toBeUndefined();
    expect(indexer.requests).toHaveLength(1);
    expect(algod.requests).toHaveLength(1);
  });

  test('resolves undefined for a malformed id without asking any node', async () => {
    const { indexer, algod, lookup } = await setup({});
    for (const id of ['../status', PAY.toLowerCase(), `${PAY}?x=1`, '']) {
      expect(await lookup(id)).toBeUndefined();
    }
    expect(indexer.requests).toHaveLength(0);
    expect(algod.requests).toHaveLength(0);
  });

  test('throws UpstreamUnavailableError when the indexer answers 500, without asking algod', async () => {
    const { algod, lookup } = await setup(
      { [INDEXER_PATH(PAY)]: { status: 500, json: { message: 'database unavailable' } } },
      { [PENDING_PATH(PAY)]: { file: `${DIR}/algod-pending-transaction-pay-testnet-constructed.json` } },
    );
    await expect(lookup(PAY)).rejects.toBeInstanceOf(UpstreamUnavailableError);
    await expect(lookup(PAY)).rejects.toThrow(/answered 500/);
    expect(algod.requests).toHaveLength(0);
  });

  test('throws UpstreamUnavailableError when algod answers 500 after an indexer 404', async () => {
    const { lookup } = await setup(
      { [INDEXER_PATH(PAY)]: INDEXER_404(PAY) },
      { [PENDING_PATH(PAY)]: { status: 503, body: 'overloaded' } },
    );
    await expect(lookup(PAY)).rejects.toBeInstanceOf(UpstreamUnavailableError);
  });

  test('throws UpstreamUnavailableError when the indexer does not answer within timeoutMs', async () => {
    const { algod, lookup } = await setup({ [INDEXER_PATH(PAY)]: { hang: true } }, {}, 300);
    const started = Date.now();
    const error = await lookup(PAY).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(UpstreamUnavailableError);
    expect((error as Error).message).toMatch(/did not answer within 300 ms/);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(algod.requests).toHaveLength(0);
  });

  test('throws UpstreamUnavailableError when an answer is slower than timeoutMs', async () => {
    const { lookup } = await setup(
      { [INDEXER_PATH(PAY)]: { delayMs: 1_000, file: `${DIR}/indexer-transaction-pay-testnet.json` } },
      {},
      200,
    );
    await expect(lookup(PAY)).rejects.toBeInstanceOf(UpstreamUnavailableError);
  });

  test('throws UpstreamUnavailableError when the indexer cannot be reached', async () => {
    const { indexer, algod } = await setup({});
    const deadUrl = indexer.url;
    await indexer.close();
    const lookup = createAlgorandLookup({ indexerUrl: deadUrl, algodUrl: algod.url, timeoutMs: 2_000 });
    await expect(lookup(PAY)).rejects.toThrow(/could not be reached/);
  });

  test('throws UpstreamUnavailableError on an answer that is not an indexer transaction', async () => {
    const { lookup } = await setup({
      [INDEXER_PATH(PAY)]: { body: '<html>proxy error</html>', headers: { 'content-type': 'text/html' } },
      [INDEXER_PATH(AXFER)]: { file: `${DIR}/indexer-transaction-pay-testnet.json` }, // the wrong transaction
      [INDEXER_PATH(APPL)]: { status: 401, json: { message: 'unauthorized' } },
    });
    await expect(lookup(PAY)).rejects.toThrow(/unexpected body/);
    await expect(lookup(AXFER)).rejects.toThrow(/transaction id is RXZ6/);
    await expect(lookup(APPL)).rejects.toThrow(/answered 401/);
  });
});

const MSIG_NOTE =
  'TG92ZSBuZXZlciBmYWlscy4gQnV0IHdoZXJlIHRoZXJlIGFyZSBwcm9waGVjaWVzLCB0aGV5IHdpbGwgY2Vhc2U7IHdoZXJlIHRoZXJlIGFyZSB0b25ndWVzLCB0aGV5IHdpbGwgYmUgc3RpbGxlZDsgd2hlcmUgdGhlcmUgaXMga25vd2xlZGdlLCBpdCB3aWxsIHBhc3MgYXdheS4gRm9yIHdlIGtub3cgaW4gcGFydCBhbmQgd2UgcHJvcGhlc3kgaW4gcGFydCwgYnV0IHdoZW4gY29tcGxldGVuZXNzIGNvbWVzLCB3aGF0IGlzIGluIHBhcnQgZGlzYXBwZWFycy4gV2hlbiBJIHdhcyBhIGNoaWxkLCBJIHRhbGtlZCBsaWtlIGEgY2hpbGQsIEkgdGhvdWdodCBsaWtlIGEgY2hpbGQsIEkgcmVhc29uZWQgbGlrZSBhIGNoaWxkLiAgV2hlbiBJIGJlY2FtZSBhIG1hbiwgSSBwdXQgdGhlIHdheXMgb2YgY2hpbGRob29kIGJlaGluZCBtZS4gRm9yIG5vdyB3ZSBzZWUgb25seSBhIHJlZmxlY3Rpb24gYXMgaW4gYSBtaXJyb3I7IHRoZW4gd2Ugc2hhbGwgc2VlIGZhY2UgdG8gZmFjZS4gTm93IEkga25vdyBpbiBwYXJ0OyB0aGVuIEkgc2hhbGwga25vdyBmdWxseSwgZXZlbiBhcyBJIGFtIGZ1bGx5IGtub3duLg==';
