import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { getAddress, type Hex, parseEther } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import { loadNetworks } from '../../src/chains/networks.js';
import { createTransactions } from '../../src/transactions/service.js';
import { TRANSACTION_FIELDS } from '../../src/transactions/types.js';
import { anvilClients, artifact, deploy, type RpcProxy, startRpcProxy } from '../helpers/anvil.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { backends } from '../helpers/env.js';
import { type FixtureNode, fixturePath, startFixtureNode } from '../helpers/fixture-node.js';
import { snapshotDatabase } from '../helpers/snapshot.js';

const ALGO_PAY = 'RXZ6XSMUNRX7DFMUQCKFHMOSEZ7EYIOKKFNPUXKXAEL32PFRU7TQ';
// Block 170: the coinbase and Satoshi's payment to Hal Finney (recorded; see test/fixtures/chains/bitcoin).
const BLOCK_170 = '00000000d1145790a8694403d4063f323d499e655c83426834d4ce2f8dd4a2ee';
const BTC_COINBASE_170 = 'b1fea52486ce0c62bb442b530a3f0132b826c74e473d1f2c220bfa78111c5082';
const BTC_HAL = 'f4184fc596403b9d638783cf57adfe4c75c605f6356fbc91338530e9831e9e16';
const BTC_GENESIS = '000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f';
const SOL_TRANSFER =
  '2kHbPUGzehenUXQbBfAVZGcuTrSUVDMEyU2aGcjFbuUAJkG28CyQPCGZF68u369MU7WHMvJboyioqyihvtR75nLn';

describe.each(backends)('GET /api/v1/transaction on %s', (backend) => {
  let anvil: Anvil;
  let proxy: RpcProxy;
  let algorand: FixtureNode;
  let esplora: FixtureNode;
  let solana: FixtureNode;
  let t: TestApp;
  let dir: string;
  let configFile: string;

  beforeAll(async () => {
    anvil = await startAnvil();
    proxy = await startRpcProxy(anvil.rpcUrl);
    algorand = await startFixtureNode({
      [`GET /v2/transactions/${ALGO_PAY}`]: {
        file: fixturePath('chains/algorand/indexer-transaction-pay-testnet.json'),
      },
    });
    esplora = await startFixtureNode({
      [`GET /tx/${BTC_HAL}`]: { file: fixturePath('chains/bitcoin/constructed/esplora-tx-f4184fc5.json') },
      [`GET /block/${BLOCK_170}/txids`]: { json: [BTC_COINBASE_170, BTC_HAL] },
      'GET /blocks/tip/height': { body: '170000' },
      'GET /block-height/0': { body: BTC_GENESIS },
    });
    const solTransfer = fs.readFileSync(
      fixturePath('chains/solana/getTransaction-jsonParsed-sol-transfer-mainnet.json'),
      'utf8',
    );
    solana = await startFixtureNode({
      'POST /': (request) => {
        const call = request.json as { method: string; params: unknown[] };
        const headers = { 'content-type': 'application/json' };
        if (call.method === 'getGenesisHash') {
          return {
            headers,
            body: '{"jsonrpc":"2.0","result":"5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d","id":1}',
          };
        }
        if (call.method === 'getTransaction' && call.params[0] === SOL_TRANSFER)
          return { headers, body: solTransfer };
        return { headers, body: '{"jsonrpc":"2.0","result":null,"id":1}' };
      },
    });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-lookup-'));
    configFile = path.join(dir, 'ledgerhook.json');
    fs.writeFileSync(
      configFile,
      JSON.stringify({
        networks: {
          DEVNET: { family: 'evm', chainId: anvil.chainId, symbol: 'ETH', rpc: [proxy.url] },
          ALGO: { rpc: [algorand.url], indexer: [algorand.url] },
          BTC: { rpc: [esplora.url] },
          SOL: { rpc: [solana.url] },
        },
      }),
    );
    t = await startTestApp(backend, { LEDGERHOOK_CONFIG: configFile });
  });
  afterAll(async () => {
    await t?.close();
    await algorand?.close();
    await esplora?.close();
    await solana?.close();
    await proxy?.close();
    await anvil?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('an EVM transaction paying a fee above 2^53 wei comes back digit-exact, every field present', async () => {
    const { publicClient, wallets } = anvilClients(anvil);
    const gasPrice = 10n ** 15n; // 21,000 gas × 10^15 wei = 2.1 × 10^19 wei
    const hash = await wallets[1]!.sendTransaction({
      to: wallets[2]!.account.address,
      value: parseEther('1'),
      gasPrice,
    });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    const expectedFee = receipt.gasUsed * receipt.effectiveGasPrice;
    expect(expectedFee > 2n ** 53n).toBe(true);

    const res = await t.request('GET', `/api/v1/transaction/DEVNET/${hash}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/json');
    // The fee is written as exact digits; a float would have rounded it.
    expect(res.text).toContain(`"fee":${expectedFee}`);
    const body = res.body as Record<string, unknown>;
    // Every field of the view, then the internal transfers (anvil has traces): none here.
    expect(Object.keys(body)).toEqual([...TRANSACTION_FIELDS, 'internalTransfers']);
    expect(body.internalTransfers).toEqual([]);
    expect(body).toMatchObject({
      id: hash,
      confirmedRound: Number(receipt.blockNumber),
      intraRoundOffset: 0,
      sender: wallets[1]!.account.address,
      txType: 'transfer',
      note: null,
      genesisId: `eip155:${anvil.chainId}`,
      firstValid: null,
      closeRewards: null,
    });
  });

  test('an EVM transaction paying through a contract lists its internal transfers, exact in wei; without traces, no such key', async () => {
    const { publicClient, wallets } = anvilClients(anvil);
    const { address: forwarder } = await deploy(publicClient, wallets[0]!, 'Forwarder');
    const to = wallets[4]!.account.address;
    const value = 10n ** 18n + 7n;
    const hash = await wallets[1]!.writeContract({
      address: forwarder,
      abi: artifact('Forwarder').abi,
      functionName: 'forward',
      args: [to],
      value,
    });
    await publicClient.waitForTransactionReceipt({ hash });
    // Refused first (as most public nodes do): the view alone, and nothing cached that would hide
    // the transfers once the node traces (it is not final yet anyway).
    proxy.intercept((request) =>
      request.method === 'debug_traceTransaction' || request.method === 'trace_transaction'
        ? { error: { code: -32601, message: `the method ${request.method} does not exist/is not available` } }
        : undefined,
    );
    const withoutTraces = createTransactions({
      db: t.app.store.db,
      networks: loadNetworks({ LEDGERHOOK_CONFIG: configFile }),
    });
    try {
      const bare = JSON.parse(await withoutTraces.get('DEVNET', hash)) as Record<string, unknown>;
      expect(Object.keys(bare)).toEqual([...TRANSACTION_FIELDS]);
    } finally {
      proxy.intercept(() => undefined);
    }
    const res = await t.request('GET', `/api/v1/transaction/DEVNET/${hash}`);
    expect(res.status).toBe(200);
    expect(res.text).toContain(`"value":${value}`);
    expect((res.body as { internalTransfers: unknown }).internalTransfers).toEqual([
      { traceAddress: '0', type: 'call', from: getAddress(forwarder), to, value: Number(value) },
    ]);
  });

  test('a final transaction is cached: the node is not asked again', async () => {
    const { publicClient, wallets } = anvilClients(anvil);
    const hash: Hex = await wallets[1]!.sendTransaction({ to: wallets[3]!.account.address, value: 1n });
    await publicClient.waitForTransactionReceipt({ hash });
    await publicClient.request({ method: 'anvil_mine' as never, params: ['0x50'] as never }); // 80 blocks deep
    const first = await t.request('GET', `/api/v1/transaction/DEVNET/${hash}`);
    expect(first.status).toBe(200);
    const asked = proxy.methods.length;
    const second = await t.request(
      'GET',
      `/api/v1/transaction/DEVNET/${hash.toUpperCase().replace('0X', '0x')}`,
    );
    expect(second.text).toBe(first.text);
    expect(proxy.methods.length).toBe(asked);
  });

  test('an Algorand transaction from the indexer', async () => {
    const res = await t.request('GET', `/api/v1/transaction/ALGO/${ALGO_PAY}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: ALGO_PAY, fee: 1000, confirmedRound: 42225822, txType: 'pay' });
  });

  test('a Bitcoin transaction from Esplora: block 170, Satoshi to Hal Finney', async () => {
    const res = await t.request('GET', `/api/v1/transaction/BTC/${BTC_HAL}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: BTC_HAL,
      confirmedRound: 170,
      intraRoundOffset: 1,
      fee: 0,
      txType: 'transfer',
      // The input spends a pay-to-pubkey output, which has no address.
      sender: null,
      signature: null,
      genesisHash: BTC_GENESIS,
      genesisId: 'bip122:000000000019d6689c085ae165831e93',
    });
  });

  test('a Solana transfer from getTransaction', async () => {
    const res = await t.request('GET', `/api/v1/transaction/SOL/${SOL_TRANSFER}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      id: SOL_TRANSFER,
      signature: SOL_TRANSFER,
      confirmedRound: 399683256,
      txType: 'transfer',
    });
    expect(typeof (res.body as { fee: unknown }).fee).toBe('number');
  });

  test('unknown network → 400 listing the configured ones; malformed ids → 400; nothing stored', async () => {
    const before = await snapshotDatabase(t.app.store);
    const unknown = await t.request('GET', `/api/v1/transaction/DOGE/${'a'.repeat(64)}`);
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ errors: [{ parameter: 'network' }] });
    expect((unknown.body as { detail: string }).detail).toMatch(/ETH.*BSC.*POL.*GLRM.*ALGO.*BTC.*SOL/);
    for (const [network, id] of [
      ['DEVNET', '0x1234'],
      ['ETH', 'ab'.repeat(32)],
      ['BTC', `0x${'ab'.repeat(32)}`],
      ['ALGO', 'rxz6xsmunrx7dfmuqckfhmosez7eyiokkfnpuxkxael32pfru7tq'],
      ['SOL', '0OIl'.repeat(22)],
    ] as const) {
      const res = await t.request('GET', `/api/v1/transaction/${network}/${id}`);
      expect(res.status, `${network} ${id}`).toBe(400);
      expect(res.body).toMatchObject({ errors: [{ parameter: 'txId' }] });
    }
    expect(await snapshotDatabase(t.app.store)).toEqual(before);
  });

  test('an unknown transaction is 404; a failing node is 503 with Retry-After', async () => {
    const missing = await t.request('GET', `/api/v1/transaction/DEVNET/0x${'12'.repeat(32)}`);
    expect(missing.status).toBe(404);
    proxy.intercept(() => ({ httpStatus: 500 }));
    try {
      const failing = await t.request('GET', `/api/v1/transaction/DEVNET/0x${'34'.repeat(32)}`);
      expect(failing.status).toBe(503);
      expect(failing.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(failing.body).toMatchObject({
        status: 503,
        type: 'urn:ledgerhook:problem:upstream_unavailable',
      });
      // The client learns which network failed and how, not where the operator's node lives.
      const detail = (failing.body as { detail: string }).detail;
      expect(detail).toMatch(/^The DEVNET node is unavailable: .*500/);
      expect(failing.text).not.toContain(new URL(proxy.url).host);
      expect(failing.text).not.toContain(new URL(proxy.url).port);
    } finally {
      proxy.intercept(() => undefined);
    }
    const algoMissing = await t.request('GET', `/api/v1/transaction/ALGO/${'A'.repeat(52)}`);
    expect(algoMissing.status).toBe(404);
  });
});
