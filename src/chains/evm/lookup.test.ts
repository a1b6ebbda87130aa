import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createPublicClient,
  createTestClient,
  createWalletClient,
  encodeFunctionData,
  type Hash,
  type Hex,
  http as httpTransport,
  keccak256,
  type PublicClient,
  parseEther,
  parseGwei,
  recoverAddress,
  serializeTransaction,
  type TestClient,
} from 'viem';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import {
  type AnvilClients,
  anvilClients,
  artifact,
  type DevWallet,
  deploy,
  mined,
  type ProxyAnswer,
  type RpcProxy,
  startRpcProxy,
} from '../../../test/helpers/anvil.js';
import { ZERO_BLOB, zeroBlobKzg } from '../../../test/helpers/kzg.js';
import { waitFor } from '../../../test/helpers/process.js';
import { UpstreamUnavailableError } from '../../errors.js';
import { type LookupResult, TRANSACTION_FIELDS, type TransactionView } from '../transaction-view.js';
import { type Anvil, startAnvil } from './anvil.js';
import { createEvmLookup, isEvmTxId } from './lookup.js';

let anvil: Anvil;
let clients: AnvilClients;
let testClient: TestClient;
let proxy: RpcProxy;
let genesisHash: Hex;
let token: { address: Hex; deployHash: Hash };

const wallet = (i: number): DevWallet => clients.wallets[i]!;
const account = (i: number): Hex => anvil.accounts[i]!.address;
const base64 = (data: Hex) => Buffer.from(data.slice(2), 'hex').toString('base64');
const { abi: tokenAbi, bytecode: tokenBytecode } = artifact('TestToken');

/** A client that gives up at once, so that failure tests do not wait for retries. */
const clientAt = (url: string, timeout?: number): PublicClient =>
  createPublicClient({ chain: clients.chain, transport: httpTransport(url, { retryCount: 0, timeout }) });

/** Requests seen by the proxy, with their parameters. */
const seen: { method: string; params: unknown[] }[] = [];
function answerWith(decide: (method: string, params: unknown[]) => ProxyAnswer | undefined): void {
  proxy.intercept((request) => {
    seen.push({ method: request.method, params: request.params ?? [] });
    return decide(request.method, request.params ?? []);
  });
}

async function lookupOrFail(
  hash: Hash,
  lookup = createEvmLookup(clients.publicClient),
): Promise<LookupResult> {
  const result = await lookup(hash);
  if (!result) throw new Error(`no transaction ${hash}`);
  return result;
}

/** The hash the sender signed, rebuilt from the transaction as the node reports it. */
async function signingHash(hash: Hash): Promise<Hex> {
  const tx = await clients.publicClient.getTransaction({ hash });
  const common = {
    chainId: anvil.chainId,
    nonce: tx.nonce,
    gas: tx.gas,
    to: tx.to ?? undefined,
    value: tx.value,
    data: tx.input,
  };
  if (tx.type === 'legacy') return keccak256(serializeTransaction({ ...common, gasPrice: tx.gasPrice }));
  if (tx.type !== 'eip1559') throw new Error(`unexpected transaction type ${tx.type}`);
  return keccak256(
    serializeTransaction({
      ...common,
      maxFeePerGas: tx.maxFeePerGas,
      maxPriorityFeePerGas: tx.maxPriorityFeePerGas,
      accessList: tx.accessList,
    }),
  );
}

/** Asserts that the view's signature is r ‖ s ‖ (27 + yParity) and recovers to the sender. */
async function expectSignatureOfSender(view: TransactionView, hash: Hash): Promise<void> {
  expect(view.signature).toMatch(/^0x[0-9a-f]{128}1[bc]$/);
  const signature = view.signature as Hex;
  expect(await recoverAddress({ hash: await signingHash(hash), signature })).toBe(view.sender);
}

beforeAll(async () => {
  anvil = await startAnvil();
  clients = anvilClients(anvil);
  testClient = createTestClient({
    mode: 'anvil',
    chain: clients.chain,
    transport: httpTransport(anvil.rpcUrl),
  });
  proxy = await startRpcProxy(anvil.rpcUrl);
  const genesis = await clients.publicClient.getBlock({ blockNumber: 0n });
  genesisHash = genesis.hash;
  const { address, receipt } = await deploy(clients.publicClient, wallet(0), 'TestToken');
  token = { address, deployHash: receipt.transactionHash };
  await mined(
    clients.publicClient,
    wallet(0).writeContract({ address, abi: tokenAbi, functionName: 'mint', args: [account(0), 1_000_000n] }),
  );
});

afterEach(() => {
  proxy.intercept(() => undefined);
  seen.length = 0;
});

afterAll(async () => {
  await proxy?.close();
  await anvil?.stop();
});

describe('isEvmTxId', () => {
  test('accepts 0x and 64 hex digits in any case, and nothing else', () => {
    expect(isEvmTxId(`0x${'ab'.repeat(32)}`)).toBe(true);
    expect(isEvmTxId(`0x${'AbCdEf01'.repeat(8)}`)).toBe(true);
    expect(isEvmTxId(`0x${'a'.repeat(63)}`)).toBe(false);
    expect(isEvmTxId(`0x${'a'.repeat(65)}`)).toBe(false);
    expect(isEvmTxId('a'.repeat(64))).toBe(false);
    expect(isEvmTxId(`0x${'g'.repeat(64)}`)).toBe(false);
    expect(isEvmTxId(` 0x${'a'.repeat(64)}`)).toBe(false);
    expect(isEvmTxId('')).toBe(false);
  });
});

describe('createEvmLookup on a real anvil chain', () => {
  test('maps a plain transfer, every field', async () => {
    const hash = await wallet(0).sendTransaction({ to: account(1), value: parseEther('1.5') });
    const receipt = await mined(clients.publicClient, hash);
    const block = await clients.publicClient.getBlock({ blockNumber: receipt.blockNumber });
    expect(receipt.gasUsed).toBe(21_000n);

    const result = await lookupOrFail(hash);
    expect(Object.keys(result.view).sort()).toEqual([...TRANSACTION_FIELDS]);
    expect(result).toEqual({
      final: false,
      view: {
        closeRewards: null,
        closingAmount: null,
        confirmedRound: receipt.blockNumber,
        fee: 21_000n * receipt.effectiveGasPrice,
        firstValid: null,
        genesisHash,
        genesisId: 'eip155:31337',
        id: hash,
        intraRoundOffset: 0n,
        lastValid: null,
        note: null,
        receiverRewards: null,
        roundTime: block.timestamp,
        sender: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
        senderRewards: null,
        signature: expect.any(String),
        txType: 'transfer',
      },
    });
    expect(receipt.blockNumber).toBeGreaterThan(0n);
    expect(result.view.fee).toBeGreaterThan(0n);
    await expectSignatureOfSender(result.view, hash);
  });

  test('finds a transaction by its hash in upper case, and reports the id as the node writes it', async () => {
    const hash = await wallet(1).sendTransaction({ to: account(2), value: 1n });
    await mined(clients.publicClient, hash);
    const result = await lookupOrFail(`0x${hash.slice(2).toUpperCase()}` as Hash);
    expect(result.view.id).toBe(hash);
    expect(result.view.sender).toBe('0x70997970C51812dc3A010C7d01b50e0d17dc79C8');
  });

  test('maps a contract call: its calldata as the base64 note, txType call', async () => {
    const data = encodeFunctionData({ abi: tokenAbi, functionName: 'transfer', args: [account(2), 25n] });
    const hash = await wallet(0).sendTransaction({ to: token.address, data });
    const receipt = await mined(clients.publicClient, hash);
    expect(receipt.status).toBe('success');

    const { view } = await lookupOrFail(hash);
    expect(view.txType).toBe('call');
    expect(view.note).toBe(base64(data));
    expect(Buffer.from(view.note!, 'base64')).toHaveLength(4 + 32 + 32);
    expect(view.confirmedRound).toBe(receipt.blockNumber);
    expect(view.fee).toBe(receipt.gasUsed * receipt.effectiveGasPrice);
    expect(view.sender).toBe(account(0));
    await expectSignatureOfSender(view, hash);
  });

  test('maps a contract creation: the init code as the base64 note, txType create', async () => {
    const receipt = await clients.publicClient.getTransactionReceipt({ hash: token.deployHash });
    const block = await clients.publicClient.getBlock({ blockNumber: receipt.blockNumber });

    const { view } = await lookupOrFail(token.deployHash);
    expect(view.txType).toBe('create');
    // TestToken's constructor takes no arguments: the init code is its bytecode alone.
    expect(view.note).toBe(base64(tokenBytecode));
    expect(view.confirmedRound).toBe(receipt.blockNumber);
    expect(view.roundTime).toBe(block.timestamp);
    expect(view.intraRoundOffset).toBe(BigInt(receipt.transactionIndex));
    expect(view.fee).toBe(receipt.gasUsed * receipt.effectiveGasPrice);
    expect(view.sender).toBe(account(0));
    await expectSignatureOfSender(view, token.deployHash);
  });

  test('shows a reverted transaction as included and charged: fee and confirmedRound set', async () => {
    const hash = await wallet(0).writeContract({
      address: token.address,
      abi: tokenAbi,
      functionName: 'transferThenRevert',
      args: [account(3), 1n],
      gas: 100_000n, // a fixed limit: estimating gas would find the revert and refuse to send
    });
    const receipt = await mined(clients.publicClient, hash);
    expect(receipt.status).toBe('reverted');
    const block = await clients.publicClient.getBlock({ blockNumber: receipt.blockNumber });

    const { view } = await lookupOrFail(hash);
    expect(view).toMatchObject({
      confirmedRound: receipt.blockNumber,
      roundTime: block.timestamp,
      intraRoundOffset: 0n,
      fee: receipt.gasUsed * receipt.effectiveGasPrice,
      txType: 'call',
      note: base64(
        encodeFunctionData({ abi: tokenAbi, functionName: 'transferThenRevert', args: [account(3), 1n] }),
      ),
      sender: account(0),
    });
    expect(view.fee).toBeGreaterThan(0n);
  });

  test('shows a pending transaction with no block, time, index or fee, then the same one once mined', async () => {
    const lookup = createEvmLookup(clients.publicClient);
    await testClient.setAutomine(false);
    try {
      const hash = await wallet(4).sendTransaction({ to: account(5), value: 7n });
      const pending = await lookupOrFail(hash, lookup);
      expect(pending).toEqual({
        final: false,
        view: expect.objectContaining({
          id: hash,
          confirmedRound: null,
          roundTime: null,
          intraRoundOffset: null,
          fee: null,
          sender: account(4),
          txType: 'transfer',
          note: null,
          genesisHash,
          genesisId: 'eip155:31337',
          firstValid: null,
          lastValid: null,
        }),
      });
      await expectSignatureOfSender(pending.view, hash);

      await testClient.mine({ blocks: 1 });
      const receipt = await clients.publicClient.getTransactionReceipt({ hash });
      const included = await lookupOrFail(hash, lookup);
      expect(included.view).toEqual({
        ...pending.view,
        confirmedRound: receipt.blockNumber,
        roundTime: (await clients.publicClient.getBlock({ blockNumber: receipt.blockNumber })).timestamp,
        intraRoundOffset: 0n,
        fee: receipt.gasUsed * receipt.effectiveGasPrice,
      });
    } finally {
      await testClient.setAutomine(true);
    }
  });

  test('reports a fee above 2^53 wei digit-exact', async () => {
    const hash = await wallet(6).sendTransaction({
      to: account(7),
      value: 1n,
      maxFeePerGas: 10n ** 15n,
      maxPriorityFeePerGas: 10n ** 15n,
    });
    const receipt = await mined(clients.publicClient, hash);
    // min(maxFeePerGas, baseFee + tip) with a tip of maxFeePerGas: exactly 10^15 wei per gas.
    expect(receipt.effectiveGasPrice).toBe(10n ** 15n);

    const { view } = await lookupOrFail(hash);
    expect(view.fee).toBe(receipt.gasUsed * receipt.effectiveGasPrice);
    expect(view.fee).toBe(21_000_000_000_000_000_000n);
    expect(view.fee!).toBeGreaterThan(2n ** 53n);
    expect(String(view.fee)).toBe('21000000000000000000');
  });

  test('counts the blob gas a blob transaction (type 3) paid in its fee', async () => {
    const value = 5n;
    // anvil verifies the blob's KZG proof before answering, which takes seconds of CPU on a busy
    // machine: a client of its own waits for it longer than viem's 10 s.
    const blobWallet = createWalletClient({
      account: wallet(7).account!,
      chain: clients.chain,
      transport: httpTransport(anvil.rpcUrl, { timeout: 60_000, retryCount: 0 }),
    });
    const hash = await blobWallet.sendTransaction({
      to: account(8),
      value,
      blobs: [ZERO_BLOB],
      kzg: zeroBlobKzg,
      maxFeePerBlobGas: parseGwei('30'),
      // Set, not estimated: an earlier test's huge tip would make viem's estimate unaffordable.
      maxFeePerGas: parseGwei('20'),
      maxPriorityFeePerGas: parseGwei('1'),
    });
    const receipt = await mined(clients.publicClient, hash);
    expect(receipt.type).toBe('eip4844');
    expect(receipt.blobGasUsed).toBe(131_072n); // one blob: 2^17 blob gas
    expect(receipt.blobGasPrice).toBeGreaterThan(0n);

    // anvil has answered getTransactionByHash from its pool for a moment after a blob
    // transaction's receipt was there (once in CI, on Node 24): the lookup then rightly reports it
    // pending. What is under test is the fee once the node shows it in its block.
    const { view } = await waitFor(async () => {
      const found = await lookupOrFail(hash);
      return found.view.confirmedRound !== null ? found : undefined;
    }, 'the node to report the blob transaction in its block');
    expect(view.fee).toBe(
      receipt.gasUsed * receipt.effectiveGasPrice + receipt.blobGasUsed! * receipt.blobGasPrice!,
    );
    // What the sender paid, seen independently: its balance fell by the value and the fee alone.
    const sender = account(7);
    const [before, after] = await Promise.all([
      clients.publicClient.getBalance({ address: sender, blockNumber: receipt.blockNumber - 1n }),
      clients.publicClient.getBalance({ address: sender, blockNumber: receipt.blockNumber }),
    ]);
    expect(before - after).toBe(value + view.fee!);
  });

  test('encodes v as 27 + yParity for a legacy EIP-155 transaction too', async () => {
    const gasPrice = await clients.publicClient.getGasPrice();
    const hash = await wallet(8).sendTransaction({ to: account(9), value: 3n, type: 'legacy', gasPrice });
    await mined(clients.publicClient, hash);
    const raw = await clients.publicClient.getTransaction({ hash });
    expect(raw.type).toBe('legacy');
    expect(raw.v).toBeGreaterThanOrEqual(BigInt(anvil.chainId * 2 + 35)); // EIP-155 v as the node reports it

    const { view } = await lookupOrFail(hash);
    await expectSignatureOfSender(view, hash);
    expect(view.fee).toBe(21_000n * gasPrice);
  });

  test('answers undefined for a hash the node does not know, and for an id that is no hash', async () => {
    const lookup = createEvmLookup(clientAt(proxy.url));
    answerWith(() => undefined);
    expect(await lookup(`0x${'12'.repeat(32)}`)).toBeUndefined();
    expect(seen.map((r) => r.method)).toEqual(['eth_getTransactionByHash']);
    seen.length = 0;
    expect(await lookup('0x1234')).toBeUndefined();
    expect(seen).toEqual([]);
  });
});

describe('genesisHash and genesisId', () => {
  test('are read from the node once per client, however many lookups use it', async () => {
    const first = await wallet(0).sendTransaction({ to: account(1), value: 1n });
    const second = await wallet(0).sendTransaction({ to: account(1), value: 2n });
    await mined(clients.publicClient, second);
    answerWith(() => undefined);
    const client = clientAt(proxy.url);

    const views = [
      (await lookupOrFail(first, createEvmLookup(client))).view,
      (await lookupOrFail(second, createEvmLookup(client))).view,
      (await lookupOrFail(first, createEvmLookup(client))).view,
    ];
    for (const view of views) {
      expect(view.genesisHash).toBe(genesisHash);
      expect(view.genesisId).toBe('eip155:31337');
    }
    const genesisReads = seen.filter((r) => r.method === 'eth_getBlockByNumber' && r.params[0] === '0x0');
    expect(genesisReads).toHaveLength(1);
    expect(seen.filter((r) => r.method === 'eth_chainId')).toHaveLength(1);
    expect(seen.filter((r) => r.method === 'eth_getTransactionByHash')).toHaveLength(3);
  });

  test('are asked again after a failed read rather than remembering the failure', async () => {
    const hash = await wallet(0).sendTransaction({ to: account(1), value: 1n });
    await mined(clients.publicClient, hash);
    const lookup = createEvmLookup(clientAt(proxy.url));
    answerWith((method) => (method === 'eth_chainId' ? { httpStatus: 500 } : undefined));
    await expect(lookup(hash)).rejects.toBeInstanceOf(UpstreamUnavailableError);

    answerWith(() => undefined);
    expect((await lookupOrFail(hash, lookup)).view.genesisId).toBe('eip155:31337');
  });
});

describe('final', () => {
  test("follows the node's finalized block (anvil: 64 below the latest)", async () => {
    const lookup = createEvmLookup(clients.publicClient);
    const hash = await wallet(2).sendTransaction({ to: account(3), value: 1n });
    await mined(clients.publicClient, hash);
    expect((await lookupOrFail(hash, lookup)).final).toBe(false);
    await testClient.mine({ blocks: 63 });
    expect((await lookupOrFail(hash, lookup)).final).toBe(false);
    await testClient.mine({ blocks: 1 });
    expect((await lookupOrFail(hash, lookup)).final).toBe(true);
  });

  test('counts finalityDepth blocks on top when the node does not know the finalized tag', async () => {
    answerWith((method, params) =>
      method === 'eth_getBlockByNumber' && params[0] === 'finalized'
        ? { error: { code: -32602, message: 'invalid block tag finalized' } }
        : undefined,
    );
    const lookup = createEvmLookup(clientAt(proxy.url), { finalityDepth: 3 });
    const hash = await wallet(2).sendTransaction({ to: account(3), value: 1n });
    await mined(clients.publicClient, hash);
    expect((await lookupOrFail(hash, lookup)).final).toBe(false);
    await testClient.mine({ blocks: 2 });
    expect((await lookupOrFail(hash, lookup)).final).toBe(false);
    await testClient.mine({ blocks: 1 });
    expect((await lookupOrFail(hash, lookup)).final).toBe(true);
    expect(seen.some((r) => r.method === 'eth_blockNumber')).toBe(true);
  });

  test('counts depth as well when the node has no finalized block yet', async () => {
    answerWith((method, params) =>
      method === 'eth_getBlockByNumber' && params[0] === 'finalized' ? { result: null } : undefined,
    );
    const hash = await wallet(2).sendTransaction({ to: account(3), value: 1n });
    await mined(clients.publicClient, hash);
    const client = clientAt(proxy.url);
    expect((await lookupOrFail(hash, createEvmLookup(client))).final).toBe(false);
    expect((await lookupOrFail(hash, createEvmLookup(client, { finalityDepth: 0 }))).final).toBe(true);
  });

  test('is never true for a pending transaction, even with finalityDepth 0', async () => {
    await testClient.setAutomine(false);
    try {
      const hash = await wallet(2).sendTransaction({ to: account(3), value: 1n });
      expect(
        (await lookupOrFail(hash, createEvmLookup(clients.publicClient, { finalityDepth: 0 }))).final,
      ).toBe(false);
    } finally {
      await testClient.mine({ blocks: 1 });
      await testClient.setAutomine(true);
    }
  });

  test('rejects a finalityDepth that is not a non-negative integer', () => {
    expect(() => createEvmLookup(clients.publicClient, { finalityDepth: -1 })).toThrow(RangeError);
    expect(() => createEvmLookup(clients.publicClient, { finalityDepth: 1.5 })).toThrow(RangeError);
  });
});

describe('a node that cannot serve the lookup', () => {
  let minedHash: Hash;
  beforeAll(async () => {
    minedHash = await wallet(0).sendTransaction({ to: account(1), value: 1n });
    await mined(clients.publicClient, minedHash);
  });

  test('is UpstreamUnavailableError when nothing listens at its address', async () => {
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));

    const error = await createEvmLookup(clientAt(`http://127.0.0.1:${port}`))(minedHash).catch((e) => e);
    expect(error).toBeInstanceOf(UpstreamUnavailableError);
    expect(error.message).toBe(`The EVM node at 127.0.0.1:${port} could not be reached`);
  });

  test('is UpstreamUnavailableError when it answers HTTP 500', async () => {
    answerWith((method) => (method === 'eth_getTransactionByHash' ? { httpStatus: 500 } : undefined));
    const error = await createEvmLookup(clientAt(proxy.url))(minedHash).catch((e) => e);
    expect(error).toBeInstanceOf(UpstreamUnavailableError);
    expect(error.message).toBe(`The EVM node at ${new URL(proxy.url).host} answered HTTP 500`);
  });

  test('is UpstreamUnavailableError when only the receipt or the finalized block fails', async () => {
    for (const failing of ['eth_getTransactionReceipt', 'eth_getBlockByNumber']) {
      answerWith((method) => (method === failing ? { httpStatus: 503 } : undefined));
      await expect(createEvmLookup(clientAt(proxy.url))(minedHash)).rejects.toBeInstanceOf(
        UpstreamUnavailableError,
      );
    }
  });

  test('is UpstreamUnavailableError when it answers with a JSON-RPC error', async () => {
    answerWith((method) =>
      method === 'eth_getTransactionByHash'
        ? { error: { code: -32603, message: 'internal error' } }
        : undefined,
    );
    const error = await createEvmLookup(clientAt(proxy.url))(minedHash).catch((e) => e);
    expect(error).toBeInstanceOf(UpstreamUnavailableError);
    expect(error.message).toMatch(/answered with an error \(-32603: internal error\)$/);
  });

  test('is UpstreamUnavailableError when it does not answer in time', async () => {
    const silent = http.createServer(() => {
      // never answers
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as AddressInfo;
    try {
      const error = await createEvmLookup(clientAt(`http://127.0.0.1:${port}`, 200))(minedHash).catch(
        (e) => e,
      );
      expect(error).toBeInstanceOf(UpstreamUnavailableError);
      expect(error.message).toBe(`The EVM node at 127.0.0.1:${port} did not answer in time`);
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  test('asks again when the receipt lags the transaction, and gives up as unavailable if it stays away', async () => {
    let misses = 1;
    answerWith((method) =>
      method === 'eth_getTransactionReceipt' && misses-- > 0 ? { result: null } : undefined,
    );
    const lookup = createEvmLookup(clientAt(proxy.url));
    expect((await lookupOrFail(minedHash, lookup)).view.confirmedRound).not.toBeNull();
    expect(seen.filter((r) => r.method === 'eth_getTransactionByHash')).toHaveLength(2);

    answerWith((method) => (method === 'eth_getTransactionReceipt' ? { result: null } : undefined));
    await expect(lookup(minedHash)).rejects.toBeInstanceOf(UpstreamUnavailableError);
  });
});
