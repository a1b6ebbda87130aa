/**
 * Solana lookups replayed from real recorded getTransaction answers (test/fixtures/chains/solana,
 * see its README for provenance), served by a loopback JSON-RPC server. Every expected value was
 * worked out by hand from the recorded data; the arithmetic is in the comments.
 */
import fs from 'node:fs';
import { afterEach, describe, expect, test } from 'vitest';
import {
  type FixtureNode,
  type FixtureRequest,
  fixturePath,
  startFixtureNode,
} from '../../../test/helpers/fixture-node.js';
import { UpstreamUnavailableError, ValidationError } from '../../errors.js';
import type { TransactionView } from '../transaction-view.js';
import { createSolanaLookup, isSolanaTxId, solanaMemo, solanaTxType } from './lookup.js';

const read = (name: string) => fs.readFileSync(fixturePath('chains/solana', name), 'utf8');

const SOL_TRANSFER =
  '2kHbPUGzehenUXQbBfAVZGcuTrSUVDMEyU2aGcjFbuUAJkG28CyQPCGZF68u369MU7WHMvJboyioqyihvtR75nLn';
const USDC_TRANSFER =
  '4LXpF3MCdp69iFmD27Sn812UNpqFPHM4qXH7Y12E964p9GHXvwMe1XEmyasogVT2N4XEctdQQLf1sHY6Gvsa5sFX';
/** USDC_TRANSFER's second signature (the nonce authority's). */
const USDC_SECOND_SIGNATURE =
  '5EDZTSg5WD8gr6KeYZbE1hBTr1S7WuCJSpdx4EjCTW6Ykgt1KUgtfPFzQ99faPyiz411AKDuaci54zF7997QtEvH';
const MULTI_TRANSFER =
  '2msqMqeUTTZhgite3PvWSLJhZJ3m4v4UMbDAcXymTPpXwKM5PcKfZFfxn4izZ2UTZmngYJeWSf1ztdD6kdeDkdbr';

const FILES: Record<string, string> = {
  [SOL_TRANSFER]: 'getTransaction-jsonParsed-sol-transfer-mainnet.json',
  [USDC_TRANSFER]: 'getTransaction-jsonParsed-spl-usdc-transferChecked-mainnet.json',
  [MULTI_TRANSFER]: 'getTransaction-jsonParsed-multi-sol-transfer-mainnet.json',
};

/** Constructed answer: mainnet-beta's genesis hash (public constant; no recorded getGenesisHash). */
const GENESIS = '5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d';
const GENESIS_ID = 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp';

const NEVER = {
  closeRewards: null,
  closingAmount: null,
  firstValid: null,
  lastValid: null,
  receiverRewards: null,
  senderRewards: null,
} as const;

const SOL_TRANSFER_VIEW: TransactionView = {
  ...NEVER,
  id: SOL_TRANSFER,
  signature: SOL_TRANSFER,
  confirmedRound: 399683256n, // "slot"
  roundTime: 1770867996n, // "blockTime"
  intraRoundOffset: 775n, // "transactionIndex"
  // meta.fee; the payer's balance fell by 531702556 − 506775438 = 24927118 = 24922118 sent + 5000.
  fee: 5000n,
  sender: '4Y5YjAPB4hMdCsiFy7BaBSscyiAvB7cuAbhxnBZ5xmgy', // accountKeys[0], the fee payer
  txType: 'transfer', // the only instruction: system "transfer"
  note: null, // no memo
  genesisHash: GENESIS,
  genesisId: GENESIS_ID,
};

const USDC_VIEW: TransactionView = {
  ...NEVER,
  id: USDC_TRANSFER,
  signature: USDC_TRANSFER,
  confirmedRound: 419685246n,
  roundTime: 1778761079n,
  intraRoundOffset: 371n,
  // meta.fee; the payer's balance fell by 401428673570 − 401428625200 = 48370.
  fee: 48370n,
  sender: '3V9bd3EN5aNuhE4RiHGbZ1eZakJ1F9cDb8V4YLjCG8cg',
  // Instructions: advanceNonce (skipped), spl-token transferChecked, ComputeBudget ×2.
  txType: 'spl-token:transferChecked',
  note: null,
  genesisHash: GENESIS,
  genesisId: GENESIS_ID,
};

const MULTI_VIEW: TransactionView = {
  ...NEVER,
  id: MULTI_TRANSFER,
  signature: MULTI_TRANSFER,
  confirmedRound: 419246800n,
  roundTime: 1778585634n,
  intraRoundOffset: 512n,
  // meta.fee; the payer's balance fell by 2564837528284397 − 2564806499091677 = 31029192720
  // = 105673070 + 30923508650 sent + 11000.
  fee: 11000n,
  sender: '5tzFkiKscXHK5ZXCGbXZxdw7gTjjD1mBwuoFbhUvuAi9',
  // Instructions: advanceNonce, ComputeBudget ×2 (all skipped), then two system transfers.
  txType: 'transfer',
  note: null,
  genesisHash: GENESIS,
  genesisId: GENESIS_ID,
};

interface RpcRequest {
  method: string;
  params: [string, { commitment?: string }] | [];
}

/**
 * A Solana node: getTransaction answers the recorded file (verbatim) when the signature is known
 * at the asked commitment, and null otherwise, as the node does; getGenesisHash the constant.
 */
async function startSolana(
  options: { commitments?: string[]; files?: Record<string, string> } = {},
): Promise<FixtureNode> {
  const commitments = options.commitments ?? ['finalized', 'confirmed'];
  const bodies = options.files ?? Object.fromEntries(Object.entries(FILES).map(([sig, f]) => [sig, read(f)]));
  return startFixtureNode({
    'POST /': (request) => {
      const call = request.json as RpcRequest;
      const headers = { 'content-type': 'application/json' };
      if (call.method === 'getGenesisHash')
        return { headers, body: `{"jsonrpc":"2.0","result":"${GENESIS}","id":1}` };
      if (call.method === 'getTransaction') {
        const [signature, config] = call.params;
        const body = signature ? bodies[signature] : undefined;
        if (body && commitments.includes(config?.commitment ?? 'finalized')) return { headers, body };
        return { headers, body: '{"jsonrpc":"2.0","result":null,"id":1}' };
      }
      return {
        headers,
        body: '{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":1}',
      };
    },
  });
}

const calls = (requests: FixtureRequest[]) => requests.map((r) => r.json as RpcRequest);

let node: FixtureNode | undefined;
afterEach(async () => {
  await node?.close();
  node = undefined;
});

describe('isSolanaTxId', () => {
  test('accepts base58 signatures of 64 bytes', () => {
    for (const sig of [SOL_TRANSFER, USDC_TRANSFER, USDC_SECOND_SIGNATURE, MULTI_TRANSFER])
      expect(isSolanaTxId(sig)).toBe(true);
    expect(isSolanaTxId('1'.repeat(64))).toBe(true); // 64 zero bytes
  });

  test.each([
    ['empty', ''],
    ['a public key (32 bytes)', '4Y5YjAPB4hMdCsiFy7BaBSscyiAvB7cuAbhxnBZ5xmgy'],
    ['63 bytes', '2r5sGazgJ8JUquAqpFGp8okRYQ9FfpgXgcdmx4F5CwPFBa3MYFTyh73zTU4nxM9G1Xnh6KEBtocioRbVmj8kpW'],
    ['65 bytes', 'cyAS3CENbx54Fn39N7p6DqFn93iCEMHr4gX2CYNwyHidmwzazQfbeS8rCgV249cWrJo4wmkgKXdivayPAQoCBRG2'],
    ['a 0 (not base58)', `${SOL_TRANSFER.slice(0, -1)}0`],
    ['an O (not base58)', `${SOL_TRANSFER.slice(0, -1)}O`],
    ['an l (not base58)', `${SOL_TRANSFER.slice(0, -1)}l`],
    ['too long', `${SOL_TRANSFER}${SOL_TRANSFER}`],
    ['a Bitcoin txid', 'f4184fc596403b9d638783cf57adfe4c75c605f6356fbc91338530e9831e9e16'],
    ['surrounding space', ` ${SOL_TRANSFER}`],
  ])('rejects %s', (_, id) => {
    expect(isSolanaTxId(id)).toBe(false);
  });
});

describe('solanaTxType and solanaMemo', () => {
  const computeBudget = {
    accounts: [],
    data: 'LagYCX',
    programId: 'ComputeBudget111111111111111111111111111111',
  };
  const advanceNonce = {
    parsed: { info: {}, type: 'advanceNonce' },
    program: 'system',
    programId: '11111111111111111111111111111111',
  };
  const memo = {
    parsed: 'hi',
    program: 'spl-memo',
    programId: 'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr',
  };
  const unparsed = { accounts: [], data: '3Bxs', programId: 'JUP6LkbZbjS1jKKwapdHNy74zcZ3tLUZoi5QNyVTaV4' };

  test('names the first instruction that is not bookkeeping', () => {
    expect(solanaTxType([computeBudget, memo, advanceNonce, unparsed])).toBe('unknown');
    expect(
      solanaTxType([{ parsed: { type: 'create', info: {} }, program: 'spl-associated-token-account' }]),
    ).toBe('spl-associated-token-account:create');
    expect(solanaTxType([advanceNonce])).toBe('advanceNonce'); // only bookkeeping: the first one
    expect(solanaTxType([memo])).toBe('spl-memo');
    expect(solanaTxType([])).toBe('unknown');
  });

  test('reads a memo, parsed or not, as base64', () => {
    expect(solanaMemo([computeBudget, memo])).toBe('aGk='); // "hi"
    // Unparsed: base58 data 4xVKpLFEdt is the bytes of "hi memo".
    expect(solanaMemo([{ ...memo, parsed: undefined, data: '4xVKpLFEdt' }])).toBe('aGkgbWVtbw==');
    expect(solanaMemo([computeBudget, advanceNonce])).toBeNull();
  });
});

describe('createSolanaLookup', () => {
  test('maps the recorded SOL transfer field by field', async () => {
    node = await startSolana();
    expect(await createSolanaLookup({ url: node.url })(SOL_TRANSFER)).toStrictEqual({
      view: SOL_TRANSFER_VIEW,
      final: true, // found at commitment finalized
    });
    expect(calls(node.requests)).toContainEqual({
      jsonrpc: '2.0',
      id: 1,
      method: 'getTransaction',
      params: [
        SOL_TRANSFER,
        { encoding: 'jsonParsed', maxSupportedTransactionVersion: 0, commitment: 'finalized' },
      ],
    });
    expect(
      calls(node.requests)
        .map((c) => c.method)
        .sort(),
    ).toEqual(['getGenesisHash', 'getTransaction']);
  });

  test('maps the recorded USDC transferChecked field by field', async () => {
    node = await startSolana();
    expect(await createSolanaLookup({ url: node.url })(USDC_TRANSFER)).toStrictEqual({
      view: USDC_VIEW,
      final: true,
    });
  });

  test('maps the recorded multi-transfer field by field', async () => {
    node = await startSolana();
    expect(await createSolanaLookup({ url: node.url })(MULTI_TRANSFER)).toStrictEqual({
      view: MULTI_VIEW,
      final: true,
    });
  });

  test('is not final while only confirmed', async () => {
    node = await startSolana({ commitments: ['confirmed'] });
    expect(await createSolanaLookup({ url: node.url })(SOL_TRANSFER)).toStrictEqual({
      view: SOL_TRANSFER_VIEW,
      final: false,
    });
    expect(
      calls(node.requests)
        .filter((c) => c.method === 'getTransaction')
        .map((c) => (c.params[1] as { commitment: string }).commitment),
    ).toEqual(['finalized', 'confirmed']);
  });

  test('reads a memo as the note (constructed: a memo instruction added to the recorded transfer)', async () => {
    const recorded = JSON.parse(read(FILES[SOL_TRANSFER]!)) as {
      result: { transaction: { message: { instructions: unknown[] } } };
    };
    recorded.result.transaction.message.instructions.push({
      parsed: 'Ledgerhook memo ✓ 1',
      program: 'spl-memo',
      programId: 'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr',
      stackHeight: 1,
    });
    node = await startSolana({ files: { [SOL_TRANSFER]: JSON.stringify(recorded) } });
    expect(await createSolanaLookup({ url: node.url })(SOL_TRANSFER)).toStrictEqual({
      // base64 of the memo's UTF-8 bytes (✓ is e2 9c 93).
      view: { ...SOL_TRANSFER_VIEW, note: 'TGVkZ2VyaG9vayBtZW1vIOKckyAx' },
      final: true,
    });
  });

  test('leaves the index null when the node does not report it', async () => {
    const text = read(FILES[MULTI_TRANSFER]!).replace('"transactionIndex": 512,', '');
    node = await startSolana({ files: { [MULTI_TRANSFER]: text } });
    expect((await createSolanaLookup({ url: node.url })(MULTI_TRANSFER))?.view).toStrictEqual({
      ...MULTI_VIEW,
      intraRoundOffset: null,
    });
  });

  test('resolves undefined for an unknown signature (null at both commitments)', async () => {
    node = await startSolana();
    expect(await createSolanaLookup({ url: node.url })(USDC_SECOND_SIGNATURE)).toBeUndefined();
  });

  test('reads the genesis hash once', async () => {
    node = await startSolana();
    const lookup = createSolanaLookup({ url: node.url });
    await lookup(SOL_TRANSFER);
    await lookup(USDC_TRANSFER);
    expect(calls(node.requests).filter((c) => c.method === 'getGenesisHash')).toHaveLength(1);
  });

  test('refuses a malformed id before any request', async () => {
    node = await startSolana();
    await expect(createSolanaLookup({ url: node.url })('0xdead')).rejects.toBeInstanceOf(ValidationError);
    expect(node.requests).toHaveLength(0);
  });

  test.each([
    ['answers 500', { status: 500, body: 'boom' }],
    ['rate-limits (429)', { status: 429, body: 'slow down' }],
    [
      'answers a JSON-RPC error',
      { body: '{"jsonrpc":"2.0","error":{"code":-32005,"message":"Node is behind"},"id":1}' },
    ],
    ['answers something that is not JSON-RPC', { body: '<html>proxy</html>' }],
  ])('is unavailable when the node %s', async (_, reply) => {
    node = await startFixtureNode({ 'POST /': reply });
    await expect(createSolanaLookup({ url: node.url })(SOL_TRANSFER)).rejects.toBeInstanceOf(
      UpstreamUnavailableError,
    );
  });

  test('is unavailable when the node does not answer in time', async () => {
    node = await startFixtureNode({ 'POST /': { hang: true } });
    await expect(createSolanaLookup({ url: node.url, timeoutMs: 200 })(SOL_TRANSFER)).rejects.toBeInstanceOf(
      UpstreamUnavailableError,
    );
  });
});
