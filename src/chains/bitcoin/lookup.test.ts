/**
 * Bitcoin lookups replayed from real recorded node answers (test/fixtures/chains/bitcoin, see its
 * README for provenance; files under constructed/ are derived or invented and say how), served by
 * a loopback server speaking Esplora's REST API or bitcoind's JSON-RPC. Every expected value below
 * was worked out by hand from the recorded data; the arithmetic is in the comments.
 */
import fs from 'node:fs';
import { Transaction } from 'bitcoinjs-lib';
import { afterEach, describe, expect, test } from 'vitest';
import {
  type FixtureNode,
  type FixtureRequest,
  fixturePath,
  startFixtureNode,
} from '../../../test/helpers/fixture-node.js';
import { UpstreamUnavailableError, ValidationError } from '../../errors.js';
import type { TransactionView } from '../transaction-view.js';
import {
  btcToSatoshi,
  createBitcoindLookup,
  createBitcoinLookup,
  createEsploraLookup,
  isBitcoinTxId,
  opReturnPayload,
} from './lookup.js';

const read = (name: string) => fs.readFileSync(fixturePath('chains/bitcoin', name), 'utf8');

// Block 170 (recorded getblock): Satoshi → Hal Finney, the first person-to-person transaction.
const BLOCK_170 = '00000000d1145790a8694403d4063f323d499e655c83426834d4ce2f8dd4a2ee';
const COINBASE_170 = 'b1fea52486ce0c62bb442b530a3f0132b826c74e473d1f2c220bfa78111c5082';
const HAL = 'f4184fc596403b9d638783cf57adfe4c75c605f6356fbc91338530e9831e9e16';
/** The output HAL spends: block 9's coinbase (constructed; its txid recomputes from its hex). */
const BLOCK_9_COINBASE = '0437cd7f8525ceed2324359c2d0ba26006d92d856a9c20fa0241106ee5a597c9';
// The two recorded Esplora transactions (mempool.space, March 2021).
const ESPLORA_A = '5e0668bf1cd24f2f8656ee82d4886f5303a06b26838e24b7db73afc59e228985';
const ESPLORA_B = '07c9d3fbffc20f96ea7c93ef3bcdf346c8a8456c25850ea76be62b24a7cf690c';
/** Constructed: unsigned, never broadcast; spends ESPLORA_A:1 and carries an OP_RETURN output. */
const OP_RETURN_TX = '27420eacd826c4651ffc6cfe77108b45c2a5eb60ea440237ccee3be3648b4f99';

/**
 * Constructed answer: mainnet's genesis hash (a public constant; it recomputes as the double
 * SHA-256 of the well-known genesis header). No recorded getblockhash / block-height answer exists.
 */
const GENESIS = '000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f';
const GENESIS_ID = 'bip122:000000000019d6689c085ae165831e93';

/** Fields that never apply to Bitcoin. */
const NEVER = {
  closeRewards: null,
  closingAmount: null,
  firstValid: null,
  lastValid: null,
  receiverRewards: null,
  senderRewards: null,
  signature: null,
} as const;

/** HAL, from the recorded block and transaction. */
const HAL_VIEW: TransactionView = {
  ...NEVER,
  id: HAL,
  confirmedRound: 170n, // getblock: "height": 170 (Esplora: status.block_height)
  roundTime: 1231731025n, // "blocktime"/"time": 1231731025
  intraRoundOffset: 1n, // getblock "tx": [COINBASE_170, HAL] → index 1
  // In: block 9's coinbase output 0, 50.00000000 BTC = 5 000 000 000 sat.
  // Out: 10 + 40 BTC = 1 000 000 000 + 4 000 000 000 sat. Fee: 0.
  fee: 0n,
  // The spent output is pay-to-pubkey (scriptPubKey type "pubkey", 41 04 11db93…a3 ac): no
  // address, so no sender (decision: no P2PKH address is derived from the bare key).
  sender: null,
  txType: 'transfer',
  note: null, // both outputs are P2PK, no OP_RETURN
  genesisHash: GENESIS,
  genesisId: GENESIS_ID,
};

const COINBASE_VIEW: TransactionView = {
  ...NEVER,
  id: COINBASE_170,
  confirmedRound: 170n,
  roundTime: 1231731025n,
  intraRoundOffset: 0n, // first in the block
  fee: 0n, // a coinbase pays no fee
  sender: null, // vin[0] is {"coinbase": "04ffff001d0102"}: no previous output
  txType: 'coinbase',
  note: null,
  genesisHash: GENESIS,
  genesisId: GENESIS_ID,
};

const OP_RETURN_VIEW: TransactionView = {
  ...NEVER,
  id: OP_RETURN_TX,
  confirmedRound: null, // unconfirmed (no blockhash / status.confirmed false)
  roundTime: null,
  intraRoundOffset: null,
  // In: ESPLORA_A output 1, 442557 sat (bitcoind text 0.00442557).
  // Out: 432557 sat (0.00432557) + 0 (the OP_RETURN output). Fee: 442557 − 432557 = 10000.
  fee: 10000n,
  // ESPLORA_A output 1 pays the P2WSH address below (recorded scriptpubkey_address).
  sender: 'bc1q93qyum5uf5pjyeaznfs8f3wmjveudn9wpjw5xr8dve33vgea3shs9jhvww',
  txType: 'transfer',
  // Script 6a 21 <33 bytes "ledgerhook: constructed OP_RETURN">; base64 of those bytes.
  note: 'bGVkZ2VyaG9vazogY29uc3RydWN0ZWQgT1BfUkVUVVJO',
  genesisHash: GENESIS,
  genesisId: GENESIS_ID,
};

let node: FixtureNode | undefined;
afterEach(async () => {
  await node?.close();
  node = undefined;
});

describe('the fixtures', () => {
  test('carry their own txids: each hex recomputes to its txid', () => {
    for (const name of [
      'getrawtransaction-f4184fc5-verbose.json',
      'constructed/getrawtransaction-0437cd7f-verbose.json',
      'constructed/getrawtransaction-b1fea524-verbose.json',
      'constructed/getrawtransaction-opreturn-verbose.json',
    ]) {
      const tx = JSON.parse(read(name)) as { txid: string; hex: string };
      expect(Transaction.fromHex(tx.hex).getId(), name).toBe(tx.txid);
    }
  });
});

describe('isBitcoinTxId', () => {
  test('accepts 64 hex characters, either case', () => {
    expect(isBitcoinTxId(HAL)).toBe(true);
    expect(isBitcoinTxId(HAL.toUpperCase())).toBe(true);
  });

  test.each([
    ['empty', ''],
    ['63 characters', HAL.slice(1)],
    ['65 characters', `${HAL}0`],
    ['0x prefix', `0x${HAL.slice(2)}`],
    ['a non-hex character', `${HAL.slice(0, 63)}g`],
    ['surrounding space', ` ${HAL}`],
    ['an EVM hash', `0x${HAL}`],
    [
      'a Solana signature',
      '2kHbPUGzehenUXQbBfAVZGcuTrSUVDMEyU2aGcjFbuUAJkG28CyQPCGZF68u369MU7WHMvJboyioqyihvtR75nLn',
    ],
  ])('rejects %s', (_, id) => {
    expect(isBitcoinTxId(id)).toBe(false);
  });
});

describe('btcToSatoshi', () => {
  test.each([
    ['50.00000000', 5_000_000_000n],
    ['0.00442557', 442_557n],
    ['0.00000001', 1n],
    ['0.29', 29_000_000n], // 0.29 × 1e8 is 28999999.999999996 as a float
    ['20999999.97690000', 2_099_999_997_690_000n],
    ['0.00000000', 0n],
    [10n, 1_000_000_000n], // electrum-cli's re-serialised whole amount, parsed as a bigint
  ])('%s BTC is %s sat', (btc, sat) => {
    expect(btcToSatoshi(btc)).toBe(sat);
  });

  test.each([
    ['more than 8 decimals', '0.000000001'],
    ['an exponent', '1e-8'],
    ['a negative amount', '-1.0'],
    ['a negative bigint', -1n],
    ['a float', 0.5],
    ['nothing', undefined],
  ])('refuses %s', (_, value) => {
    expect(btcToSatoshi(value)).toBeUndefined();
  });
});

describe('opReturnPayload', () => {
  const hex = (text: string) => Buffer.from(text).toString('hex');
  test('is the pushed data, base64', () => {
    expect(opReturnPayload(`6a05${hex('hello')}`)).toBe(Buffer.from('hello').toString('base64'));
  });

  test('concatenates several pushes, small-number opcodes standing for their byte', () => {
    // OP_RETURN PUSH2 "ab" OP_1 OP_16 OP_1NEGATE PUSH1 0x00 OP_0 → 61 62 01 10 81 00
    expect(opReturnPayload(`6a02${hex('ab')}51604f010000`)).toBe(
      Buffer.from([0x61, 0x62, 0x01, 0x10, 0x81, 0x00]).toString('base64'),
    );
  });

  test('reads OP_PUSHDATA1 (80 bytes, the standard maximum)', () => {
    const data = Buffer.alloc(80, 0xab);
    expect(opReturnPayload(`6a4c50${data.toString('hex')}`)).toBe(data.toString('base64'));
  });

  test('is undefined for a bare OP_RETURN, a truncated push, or another script', () => {
    expect(opReturnPayload('6a')).toBeUndefined();
    expect(opReturnPayload('6a05aabb')).toBeUndefined();
    expect(opReturnPayload('001465c96c830168b8f0b584294d3b9716bb8584c2d8')).toBeUndefined();
    expect(opReturnPayload('6a0')).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------

/** Result texts by `method JSON(params)`: the recorded or constructed bytes, untouched. */
function bitcoindAnswers(): Map<string, string> {
  const key = (method: string, params: unknown[]) => `${method} ${JSON.stringify(params)}`;
  return new Map([
    // Recorded (its amounts are electrum-cli's 10 and 40, bigints to the parser).
    [key('getrawtransaction', [HAL, true]), read('getrawtransaction-f4184fc5-verbose.json')],
    // Constructed (see the README): amounts in bitcoind's 8-decimal text.
    [
      key('getrawtransaction', [BLOCK_9_COINBASE, true]),
      read('constructed/getrawtransaction-0437cd7f-verbose.json'),
    ],
    [
      key('getrawtransaction', [COINBASE_170, true]),
      read('constructed/getrawtransaction-b1fea524-verbose.json'),
    ],
    [
      key('getrawtransaction', [ESPLORA_A, true]),
      read('constructed/getrawtransaction-5e0668bf-verbose.json'),
    ],
    [
      key('getrawtransaction', [OP_RETURN_TX, true]),
      read('constructed/getrawtransaction-opreturn-verbose.json'),
    ],
    [key('getblock', [BLOCK_170, 1]), read('constructed/getblock-170-verbosity1.json')],
    [key('getblockhash', [0]), JSON.stringify(GENESIS)],
  ]);
}

interface RpcRequest {
  method: string;
  params: unknown[];
  id: unknown;
}

/** bitcoind: each call of a batch answered from `answers`; unknown keys get error -5 like the node. */
async function startBitcoind(answers = bitcoindAnswers()): Promise<FixtureNode> {
  const reply = (call: RpcRequest) => {
    const result = answers.get(`${call.method} ${JSON.stringify(call.params)}`);
    const id = JSON.stringify(call.id);
    if (result !== undefined) return `{"result":${result},"error":null,"id":${id}}`;
    const message =
      call.method === 'getblock' ? 'Block not found' : 'No such mempool or blockchain transaction';
    return `{"result":null,"error":{"code":-5,"message":"${message}"},"id":${id}}`;
  };
  return startFixtureNode({
    'POST /': (request) => {
      const calls = request.json as RpcRequest | RpcRequest[];
      return {
        headers: { 'content-type': 'application/json' },
        body: Array.isArray(calls) ? `[${calls.map(reply).join(',')}]` : reply(calls),
      };
    },
  });
}

const rpcCalls = (requests: FixtureRequest[]) =>
  requests.flatMap((r) => (r.json as RpcRequest[]).map((c) => `${c.method} ${JSON.stringify(c.params)}`));

describe('createBitcoindLookup', () => {
  test('maps block 170’s Satoshi → Hal transaction field by field', async () => {
    node = await startBitcoind();
    const lookup = createBitcoindLookup({ url: node.url });
    // confirmations 658741 ≥ 6: final.
    expect(await lookup(HAL)).toStrictEqual({ view: HAL_VIEW, final: true });
    expect(rpcCalls(node.requests).sort()).toEqual(
      [
        `getrawtransaction ["${HAL}",true]`,
        `getrawtransaction ["${BLOCK_9_COINBASE}",true]`,
        `getblock ["${BLOCK_170}",1]`,
        'getblockhash [0]',
      ].sort(),
    );
    // Every request is a batch (bitcoind then answers 200 even when a call fails).
    for (const r of node.requests) expect(Array.isArray(r.json)).toBe(true);
  });

  test('maps the coinbase of block 170', async () => {
    node = await startBitcoind();
    const lookup = createBitcoindLookup({ url: node.url });
    // Constructed from the recorded block: confirmations 627543 → final.
    expect(await lookup(COINBASE_170)).toStrictEqual({ view: COINBASE_VIEW, final: true });
    // No previous output to read for a coinbase.
    expect(rpcCalls(node.requests).filter((c) => c.startsWith('getrawtransaction'))).toEqual([
      `getrawtransaction ["${COINBASE_170}",true]`,
    ]);
  });

  test('reads the OP_RETURN payload, a decimal fee and a segwit sender of an unconfirmed transaction', async () => {
    node = await startBitcoind();
    const lookup = createBitcoindLookup({ url: node.url });
    expect(await lookup(OP_RETURN_TX)).toStrictEqual({ view: OP_RETURN_VIEW, final: false });
    expect(rpcCalls(node.requests).filter((c) => c.startsWith('getblock '))).toEqual([]);
  });

  test('is final from the 6th confirmation on', async () => {
    const recorded = read('getrawtransaction-f4184fc5-verbose.json');
    for (const [confirmations, final] of [
      [5, false],
      [6, true],
    ] as const) {
      const answers = bitcoindAnswers();
      answers.set(
        `getrawtransaction ${JSON.stringify([HAL, true])}`,
        recorded.replace('"confirmations": 658741', `"confirmations": ${confirmations}`),
      );
      node = await startBitcoind(answers);
      expect(await createBitcoindLookup({ url: node.url })(HAL)).toStrictEqual({ view: HAL_VIEW, final });
      await node.close();
      node = undefined;
    }
  });

  test('looks an upper-case id up in lower case', async () => {
    node = await startBitcoind();
    expect((await createBitcoindLookup({ url: node.url })(HAL.toUpperCase()))?.view).toStrictEqual(HAL_VIEW);
  });

  test('leaves height and index null, and the view not final, when the block is gone (reorganisation)', async () => {
    const answers = bitcoindAnswers();
    answers.delete(`getblock ${JSON.stringify([BLOCK_170, 1])}`);
    node = await startBitcoind(answers);
    expect(await createBitcoindLookup({ url: node.url })(HAL)).toStrictEqual({
      view: { ...HAL_VIEW, confirmedRound: null, intraRoundOffset: null },
      final: false,
    });
  });

  test('leaves fee and sender null, and the view not final, when a spent transaction is unknown', async () => {
    const answers = bitcoindAnswers();
    answers.delete(`getrawtransaction ${JSON.stringify([ESPLORA_A, true])}`);
    node = await startBitcoind(answers);
    expect(await createBitcoindLookup({ url: node.url })(OP_RETURN_TX)).toStrictEqual({
      view: { ...OP_RETURN_VIEW, fee: null, sender: null },
      final: false,
    });
  });

  test('resolves undefined for an unknown transaction (error -5)', async () => {
    node = await startBitcoind();
    expect(await createBitcoindLookup({ url: node.url })('00'.repeat(32))).toBeUndefined();
  });

  test('reads the genesis hash once', async () => {
    node = await startBitcoind();
    const lookup = createBitcoindLookup({ url: node.url });
    await lookup(HAL);
    await lookup(COINBASE_170);
    expect(rpcCalls(node.requests).filter((c) => c.startsWith('getblockhash'))).toHaveLength(1);
  });

  test('sends the credentials of the URL, or of `auth`, as HTTP Basic', async () => {
    node = await startBitcoind();
    const url = new URL(node.url);
    url.username = 'rpc';
    url.password = 'p@ss:word';
    await createBitcoindLookup({ url: url.toString() })(HAL);
    expect(node.requests[0]?.headers.authorization).toBe(
      `Basic ${Buffer.from('rpc:p@ss:word').toString('base64')}`,
    );
    await createBitcoindLookup({ url: node.url, auth: { username: '__cookie__', password: 'x' } })(HAL);
    expect(node.requests.at(-1)?.headers.authorization).toBe(
      `Basic ${Buffer.from('__cookie__:x').toString('base64')}`,
    );
  });

  test('refuses a malformed id before any request', async () => {
    node = await startBitcoind();
    await expect(createBitcoindLookup({ url: node.url })('xyz')).rejects.toBeInstanceOf(ValidationError);
    expect(node.requests).toHaveLength(0);
  });

  test.each([
    ['answers 500', { status: 500, body: 'boom' }],
    ['refuses the credentials (401)', { status: 401, body: '' }],
    [
      'is still loading (error -28)',
      { body: '[{"result":null,"error":{"code":-28,"message":"Loading block index…"},"id":0}]' },
    ],
    ['answers something that is not JSON-RPC', { body: '<html>proxy</html>' }],
  ])('is unavailable when the node %s', async (_, reply) => {
    node = await startFixtureNode({ 'POST /': reply });
    await expect(createBitcoindLookup({ url: node.url })(HAL)).rejects.toBeInstanceOf(
      UpstreamUnavailableError,
    );
  });

  test('is unavailable when the node does not answer in time', async () => {
    node = await startFixtureNode({ 'POST /': { hang: true } });
    const started = Date.now();
    await expect(createBitcoindLookup({ url: node.url, timeoutMs: 200 })(HAL)).rejects.toBeInstanceOf(
      UpstreamUnavailableError,
    );
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

// ---------------------------------------------------------------------------------------------

/** The two recorded Esplora transactions, each the body of its GET /tx/{txid} (all numbers are integers). */
function recordedEsploraTxs(): Record<string, string> {
  const txs = JSON.parse(read('esplora-address-txs-bc1qvhykeqcpdzu0pdvy99xnh9ckhwzcfskct6h6l2.json')) as {
    txid: string;
  }[];
  return Object.fromEntries(txs.map((tx) => [tx.txid, JSON.stringify(tx)]));
}

async function startEsplora(tipHeight = '175'): Promise<FixtureNode> {
  const recorded = recordedEsploraTxs();
  return startFixtureNode({
    [`GET /tx/${ESPLORA_A}`]: { body: recorded[ESPLORA_A], headers: { 'content-type': 'application/json' } },
    [`GET /tx/${ESPLORA_B}`]: { body: recorded[ESPLORA_B], headers: { 'content-type': 'application/json' } },
    [`GET /tx/${HAL}`]: { file: 'chains/bitcoin/constructed/esplora-tx-f4184fc5.json' },
    [`GET /tx/${COINBASE_170}`]: { file: 'chains/bitcoin/constructed/esplora-tx-b1fea524.json' },
    [`GET /tx/${OP_RETURN_TX}`]: { file: 'chains/bitcoin/constructed/esplora-tx-opreturn.json' },
    // Constructed: block 170's txids, in the order of the recorded getblock. The txid lists of
    // the recorded Esplora transactions' blocks were not recorded: those paths answer 404.
    [`GET /block/${BLOCK_170}/txids`]: { json: [COINBASE_170, HAL] },
    // Constructed: a tip height (Esplora answers text). 175 gives block 170 six confirmations.
    'GET /blocks/tip/height': { body: tipHeight },
    'GET /block-height/0': { body: GENESIS },
  });
}

const esploraPaths = (requests: FixtureRequest[]) => requests.map((r) => r.path);

describe('createEsploraLookup', () => {
  test('maps the first recorded transaction field by field', async () => {
    node = await startEsplora();
    expect(await createEsploraLookup({ url: node.url })(ESPLORA_A)).toStrictEqual({
      view: {
        ...NEVER,
        id: ESPLORA_A,
        confirmedRound: 674358n, // status.block_height
        roundTime: 1615595727n, // status.block_time
        // The block's txid list was not recorded (404): the index is unknown.
        intraRoundOffset: null,
        // In: 263216 + 33247 + 172952 = 469415 sat. Out: 2920 + 442557 = 445477. Fee: 23938
        // (the recorded "fee" field says the same).
        fee: 23938n,
        sender: 'bc1qvhykeqcpdzu0pdvy99xnh9ckhwzcfskct6h6l2', // vin[0].prevout.scriptpubkey_address
        txType: 'transfer',
        note: null, // two segwit outputs, no OP_RETURN
        genesisHash: GENESIS,
        genesisId: GENESIS_ID,
      },
      final: false, // incomplete (no index): not cached for good
    });
  });

  test('maps the second recorded transaction field by field', async () => {
    node = await startEsplora();
    expect(await createEsploraLookup({ url: node.url })(ESPLORA_B)).toStrictEqual({
      view: {
        ...NEVER,
        id: ESPLORA_B,
        confirmedRound: 674357n,
        roundTime: 1615594996n,
        intraRoundOffset: null,
        // In: 470675 + 899778 = 1370453 sat. Out: 263216 + 1088924 = 1352140. Fee: 18313.
        fee: 18313n,
        sender: 'bc1qzhcd446gq6crvyngwqudfad6kgq2lnuw9r2a86',
        txType: 'transfer',
        note: null,
        genesisHash: GENESIS,
        genesisId: GENESIS_ID,
      },
      final: false,
    });
    expect(esploraPaths(node.requests).sort()).toEqual(
      [
        `/tx/${ESPLORA_B}`,
        '/block/00000000000000000008d0d007995a8bc9d60de17bd6b55e28a6e4c6918cb206/txids',
        '/blocks/tip/height',
        '/block-height/0',
      ].sort(),
    );
  });

  test('gives the same views as bitcoind for block 170 (Esplora shape constructed from the recorded block)', async () => {
    node = await startEsplora();
    const lookup = createEsploraLookup({ url: node.url });
    // P2PK input: Esplora gives no scriptpubkey_address either, so the sender is null.
    expect(await lookup(HAL)).toStrictEqual({ view: HAL_VIEW, final: true });
    expect(await lookup(COINBASE_170)).toStrictEqual({ view: COINBASE_VIEW, final: true });
  });

  test('maps an unconfirmed transaction with an OP_RETURN output, asking nothing about blocks', async () => {
    node = await startEsplora();
    expect(await createEsploraLookup({ url: node.url })(OP_RETURN_TX)).toStrictEqual({
      view: OP_RETURN_VIEW,
      final: false,
    });
    expect(esploraPaths(node.requests).sort()).toEqual([`/tx/${OP_RETURN_TX}`, '/block-height/0'].sort());
  });

  test('is final from the 6th confirmation on (tip − height + 1)', async () => {
    node = await startEsplora('174'); // 174 − 170 + 1 = 5
    expect((await createEsploraLookup({ url: node.url })(HAL))?.final).toBe(false);
    node.route('GET /blocks/tip/height', { body: '175' }); // 6
    expect((await createEsploraLookup({ url: node.url })(HAL))?.final).toBe(true);
  });

  test('resolves undefined for an unknown transaction (404)', async () => {
    node = await startEsplora();
    node.route(`GET /tx/${'00'.repeat(32)}`, { status: 404, body: 'Transaction not found' });
    expect(await createEsploraLookup({ url: node.url })('00'.repeat(32))).toBeUndefined();
  });

  test('reads the genesis hash once, and again after a failed read', async () => {
    node = await startEsplora();
    node.route('GET /block-height/0', { status: 503, body: 'busy' });
    const lookup = createEsploraLookup({ url: node.url });
    await expect(lookup(HAL)).rejects.toBeInstanceOf(UpstreamUnavailableError);
    node.route('GET /block-height/0', { body: GENESIS });
    await lookup(HAL);
    await lookup(COINBASE_170);
    expect(esploraPaths(node.requests).filter((p) => p === '/block-height/0')).toHaveLength(2);
  });

  test('refuses a malformed id before any request', async () => {
    node = await startEsplora();
    await expect(createEsploraLookup({ url: node.url })(`0x${HAL}`)).rejects.toBeInstanceOf(ValidationError);
    expect(node.requests).toHaveLength(0);
  });

  test('is unavailable when the node answers 500', async () => {
    node = await startEsplora();
    node.route(`GET /tx/${HAL}`, { status: 500, body: 'boom' });
    await expect(createEsploraLookup({ url: node.url })(HAL)).rejects.toBeInstanceOf(
      UpstreamUnavailableError,
    );
  });

  test('is unavailable when the node does not answer in time', async () => {
    node = await startEsplora();
    node.route(`GET /tx/${HAL}`, { hang: true });
    await expect(createEsploraLookup({ url: node.url, timeoutMs: 200 })(HAL)).rejects.toBeInstanceOf(
      UpstreamUnavailableError,
    );
  });

  test('is unavailable when the node cannot be reached', async () => {
    node = await startEsplora();
    const url = node.url;
    await node.close();
    node = undefined;
    await expect(createEsploraLookup({ url })(HAL)).rejects.toBeInstanceOf(UpstreamUnavailableError);
  });
});

describe('createBitcoinLookup', () => {
  test('speaks the configured API: Esplora by default, bitcoind on request', async () => {
    node = await startEsplora();
    expect((await createBitcoinLookup({ url: node.url })(HAL))?.view).toStrictEqual(HAL_VIEW);
    await node.close();
    node = await startBitcoind();
    expect((await createBitcoinLookup({ api: 'bitcoind', url: node.url })(HAL))?.view).toStrictEqual(
      HAL_VIEW,
    );
  });
});
