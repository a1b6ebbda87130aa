import {
  type Abi,
  BlockNotFoundError,
  concat,
  createPublicClient,
  createTestClient,
  decodeEventLog,
  encodeAbiParameters,
  getAddress,
  type Hex,
  http,
  pad,
  parseAbi,
  parseEther,
  type TransactionReceipt,
  zeroAddress,
} from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  type AnvilClients,
  anvilClients,
  artifact,
  type ContractName,
  type DevWallet,
  deploy,
  mined,
  type RpcProxy,
  startRpcProxy,
} from '../../../test/helpers/anvil.js';
import {
  type ActivityReceipt,
  createTokenInfoCache,
  extractTransfers,
  fetchBlockActivity,
  formatAmount,
  type RpcLog,
  type RpcReceipt,
  rpcLogs,
  TRANSFER_BATCH_TOPIC,
  TRANSFER_SINGLE_TOPIC,
  TRANSFER_TOPIC,
} from './activity.js';
import { type Anvil, startAnvil } from './anvil.js';
import { transactionFee } from './fees.js';
import type { EvmTransfer } from './types.js';

let anvil: Anvil;
let clients: AnvilClients;
let proxy: RpcProxy;
const contracts = {} as Record<'token' | 'nft' | 'multi' | 'raw', Hex>;

const account = (i: number): Hex => anvil.accounts[i]!.address;
const wallet = (i: number): DevWallet => clients.wallets[i]!;

/** Calls a test contract's function from a dev account and waits for the receipt. */
function call(
  from: number,
  name: ContractName,
  address: Hex,
  functionName: string,
  args: readonly unknown[],
  options: { value?: bigint; gas?: bigint } = {},
): Promise<TransactionReceipt> {
  const abi: Abi = artifact(name).abi;
  return mined(
    clients.publicClient,
    wallet(from).writeContract({ address, abi, functionName, args, ...options }),
  );
}

const activityOf = (receipt: TransactionReceipt) =>
  fetchBlockActivity(clients.publicClient, receipt.blockNumber);

/** A transfer as expected from a receipt of a transaction alone in its block (or at its index). */
function expected(receipt: TransactionReceipt, transfer: Partial<EvmTransfer>): EvmTransfer {
  return {
    txHash: receipt.transactionHash,
    txIndex: receipt.transactionIndex,
    logIndex: null,
    batchIndex: 0,
    kind: 'native',
    token: null,
    from: zeroAddress,
    to: zeroAddress,
    value: 0n,
    tokenId: null,
    ...transfer,
  };
}

beforeAll(async () => {
  anvil = await startAnvil();
  clients = anvilClients(anvil);
  proxy = await startRpcProxy(anvil.rpcUrl);
  const { publicClient } = clients;
  contracts.token = getAddress((await deploy(publicClient, wallet(0), 'TestToken')).address);
  contracts.nft = getAddress((await deploy(publicClient, wallet(0), 'TestNFT')).address);
  contracts.multi = getAddress((await deploy(publicClient, wallet(0), 'TestMulti')).address);
  contracts.raw = getAddress((await deploy(publicClient, wallet(0), 'RawLogs')).address);
});

afterAll(async () => {
  await proxy?.close();
  await anvil?.stop();
});

describe('startAnvil', () => {
  test('funds the ten well-known dev accounts with 10,000 ether each', async () => {
    expect(anvil.chainId).toBe(31337);
    expect(anvil.accounts).toHaveLength(10);
    expect(anvil.accounts[0]).toEqual({
      address: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
      privateKey: '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
    });
    expect(anvil.accounts[9]!.address).toBe('0xa0Ee7A142d267C1f36714E4a8F75612F20a79720');
    const balances = await Promise.all(
      anvil.accounts.map((a) => clients.publicClient.getBalance({ address: a.address, blockNumber: 0n })),
    );
    expect(balances).toEqual(anvil.accounts.map(() => parseEther('10000')));
    // The keys sign for those addresses: the wallets built from them send from them.
    expect(clients.wallets.map((w) => w.account.address)).toEqual(anvil.accounts.map((a) => a.address));
  });
});

describe('fetchBlockActivity on a real chain', () => {
  test('reports a native transfer with exact sender, recipient and value, and the block it is in', async () => {
    const receipt = await mined(
      clients.publicClient,
      wallet(0).sendTransaction({ to: account(1), value: parseEther('1.5') }),
    );
    const block = await clients.publicClient.getBlock({ blockNumber: receipt.blockNumber });
    const activity = await activityOf(receipt);
    expect(activity).toEqual({
      number: receipt.blockNumber,
      hash: block.hash,
      parentHash: block.parentHash,
      timestamp: block.timestamp,
      transfers: [expected(receipt, { from: account(0), to: account(1), value: 1_500_000_000_000_000_000n })],
      payments: [
        expect.objectContaining({
          txHash: receipt.transactionHash,
          txIndex: receipt.transactionIndex,
          from: account(0).toLowerCase(),
          failed: false,
        }),
      ],
      // A plain transfer emits no log.
      logs: [],
    });
    // What the sender paid, as viem reads the receipt.
    expect(transactionFee(activity.payments[0]!.receipt)).toBe(receipt.gasUsed * receipt.effectiveGasPrice);
  });

  test('reports ERC-20 mints and transfers in raw units, with the token contract', async () => {
    const mint = await call(0, 'TestToken', contracts.token, 'mint', [account(0), 5_000_000n]);
    expect((await activityOf(mint)).transfers).toEqual([
      expected(mint, {
        kind: 'erc20',
        logIndex: 0,
        token: contracts.token,
        from: zeroAddress,
        to: account(0),
        value: 5_000_000n,
      }),
    ]);

    const transfer = await call(0, 'TestToken', contracts.token, 'transfer', [account(2), 1_234_567n]);
    expect((await activityOf(transfer)).transfers).toEqual([
      expected(transfer, {
        kind: 'erc20',
        logIndex: 0,
        token: contracts.token,
        from: account(0),
        to: account(2),
        value: 1_234_567n,
      }),
    ]);
  });

  test('reports ERC-721 transfers with the token id and a value of 1', async () => {
    await call(0, 'TestNFT', contracts.nft, 'mint', [account(0), 42n]);
    const transfer = await call(0, 'TestNFT', contracts.nft, 'transferFrom', [account(0), account(3), 42n]);
    expect((await activityOf(transfer)).transfers).toEqual([
      expected(transfer, {
        kind: 'erc721',
        logIndex: 0,
        token: contracts.nft,
        from: account(0),
        to: account(3),
        value: 1n,
        tokenId: 42n,
      }),
    ]);
    const safe = await call(3, 'TestNFT', contracts.nft, 'safeTransferFrom', [account(3), account(4), 42n]);
    expect((await activityOf(safe)).transfers).toEqual([
      expected(safe, {
        kind: 'erc721',
        logIndex: 0,
        token: contracts.nft,
        from: account(3),
        to: account(4),
        value: 1n,
        tokenId: 42n,
      }),
    ]);
  });

  test('reports an ERC-1155 TransferSingle with its id and amount', async () => {
    await call(0, 'TestMulti', contracts.multi, 'mint', [account(0), 7n, 100n]);
    const transfer = await call(0, 'TestMulti', contracts.multi, 'safeTransferFrom', [
      account(0),
      account(1),
      7n,
      30n,
      '0x',
    ]);
    expect((await activityOf(transfer)).transfers).toEqual([
      expected(transfer, {
        kind: 'erc1155',
        logIndex: 0,
        token: contracts.multi,
        from: account(0),
        to: account(1),
        value: 30n,
        tokenId: 7n,
      }),
    ]);
  });

  test('reports an ERC-1155 TransferBatch as one transfer per id, in batch order', async () => {
    await call(0, 'TestMulti', contracts.multi, 'mintBatch', [account(0), [1n, 2n, 3n], [10n, 20n, 30n]]);
    const batch = await call(0, 'TestMulti', contracts.multi, 'safeBatchTransferFrom', [
      account(0),
      account(2),
      [3n, 1n, 2n],
      [4n, 5n, 6n],
      '0x',
    ]);
    const common = { kind: 'erc1155', logIndex: 0, token: contracts.multi, from: account(0), to: account(2) };
    expect((await activityOf(batch)).transfers).toEqual([
      expected(batch, { ...common, kind: 'erc1155', batchIndex: 0, tokenId: 3n, value: 4n }),
      expected(batch, { ...common, kind: 'erc1155', batchIndex: 1, tokenId: 1n, value: 5n }),
      expected(batch, { ...common, kind: 'erc1155', batchIndex: 2, tokenId: 2n, value: 6n }),
    ]);
  });

  test('reports nothing for a reverted transaction, though it carried value and emitted a transfer before reverting', async () => {
    await call(0, 'TestToken', contracts.token, 'mint', [account(5), 1_000n]);
    // A fixed gas limit: viem would otherwise estimate gas, see the revert and refuse to send.
    const reverted = await call(5, 'TestToken', contracts.token, 'transferThenRevert', [account(6), 10n], {
      value: parseEther('1'),
      gas: 200_000n,
    });
    expect(reverted.status).toBe('reverted');
    const tx = await clients.publicClient.getTransaction({ hash: reverted.transactionHash });
    expect(tx.value).toBe(parseEther('1'));
    const activity = await activityOf(reverted);
    expect(activity.transfers).toEqual([]);
  });

  test('reports value sent with a contract creation to the created contract, and only top-level value', async () => {
    const { receipt } = await deploy(clients.publicClient, wallet(0), 'Sink', { value: parseEther('2') });
    const sink = getAddress(receipt.contractAddress!);
    expect((await activityOf(receipt)).transfers).toEqual([
      expected(receipt, { from: account(0), to: sink, value: parseEther('2') }),
    ]);
    // Sink passes the value on to account 7: an internal transfer, which is not reported (yet).
    const forwarded = await call(0, 'Sink', sink, 'forward', [account(7)], { value: 3n });
    expect((await activityOf(forwarded)).transfers).toEqual([
      expected(forwarded, { from: account(0), to: sink, value: 3n }),
    ]);
  });

  test('orders the transfers of a block with several transactions by transaction, native first, then by log', async () => {
    const testClient = createTestClient({
      mode: 'anvil',
      chain: clients.chain,
      transport: http(anvil.rpcUrl),
    });
    await call(0, 'TestMulti', contracts.multi, 'mintBatch', [account(8), [11n, 12n], [1n, 1n]]);
    await call(0, 'TestToken', contracts.token, 'mint', [account(8), 1_000n]);
    await call(0, 'TestToken', contracts.token, 'mint', [account(6), 1_000n]);
    // Uncached: viem would otherwise answer from its short block-number cache.
    const before = await clients.publicClient.getBlockNumber({ cacheTime: 0 });
    await testClient.setAutomine(false);
    let receipts: TransactionReceipt[];
    const token = artifact('TestToken').abi;
    const multi = artifact('TestMulti').abi;
    try {
      const gas = 300_000n;
      const hashes = [
        // Native only.
        await wallet(4).sendTransaction({ to: account(5), value: 7n, gas }),
        // Native value and a token transfer in one transaction.
        await wallet(5).writeContract({
          address: contracts.token,
          abi: token,
          functionName: 'mint',
          args: [account(9), 9n],
          value: 3n,
          gas,
        }),
        // Reverted: nothing.
        await wallet(6).writeContract({
          address: contracts.token,
          abi: token,
          functionName: 'transferThenRevert',
          args: [account(9), 1n],
          value: 5n,
          gas,
        }),
        // A batch, then a second transaction of the same sender.
        await wallet(8).writeContract({
          address: contracts.multi,
          abi: multi,
          functionName: 'safeBatchTransferFrom',
          args: [account(8), account(9), [11n, 12n], [1n, 1n], '0x'],
          gas,
        }),
        await wallet(8).writeContract({
          address: contracts.token,
          abi: token,
          functionName: 'transfer',
          args: [account(9), 100n],
          gas,
        }),
      ];
      // Nothing mined yet: all five wait in the pool for the one block.
      expect(await clients.publicClient.getBlockNumber({ cacheTime: 0 })).toBe(before);
      await testClient.mine({ blocks: 1 });
      receipts = await Promise.all(hashes.map((hash) => mined(clients.publicClient, hash)));
    } finally {
      await testClient.setAutomine(true);
    }
    const [native, mixed, reverted, batch, second] = receipts;
    expect(new Set(receipts.map((r) => r.blockNumber)).size).toBe(1);
    expect(reverted!.status).toBe('reverted');

    const byTx = [
      { receipt: native!, transfers: [expected(native!, { from: account(4), to: account(5), value: 7n })] },
      {
        receipt: mixed!,
        transfers: [
          expected(mixed!, { from: account(5), to: contracts.token, value: 3n }),
          expected(mixed!, {
            kind: 'erc20',
            logIndex: mixed!.logs[0]!.logIndex,
            token: contracts.token,
            from: zeroAddress,
            to: account(9),
            value: 9n,
          }),
        ],
      },
      {
        receipt: batch!,
        transfers: [11n, 12n].map((tokenId, batchIndex) =>
          expected(batch!, {
            kind: 'erc1155',
            logIndex: batch!.logs[0]!.logIndex,
            batchIndex,
            token: contracts.multi,
            from: account(8),
            to: account(9),
            value: 1n,
            tokenId,
          }),
        ),
      },
      {
        receipt: second!,
        transfers: [
          expected(second!, {
            kind: 'erc20',
            logIndex: second!.logs[0]!.logIndex,
            token: contracts.token,
            from: account(8),
            to: account(9),
            value: 100n,
          }),
        ],
      },
    ].sort((a, b) => a.receipt.transactionIndex - b.receipt.transactionIndex);

    const activity = await fetchBlockActivity(clients.publicClient, native!.blockNumber);
    expect(activity.transfers).toEqual(byTx.flatMap((t) => t.transfers));
    // The same sender's two transactions keep their order.
    expect(second!.transactionIndex).toBeGreaterThan(batch!.transactionIndex);
    const block = await clients.publicClient.getBlock({ blockNumber: native!.blockNumber });
    expect(block.transactions).toHaveLength(5);
  });

  test('reads receipts one by one from a node without eth_getBlockReceipts, with identical results', async () => {
    proxy.intercept((request) =>
      request.method === 'eth_getBlockReceipts'
        ? {
            error: {
              code: -32601,
              message: 'the method eth_getBlockReceipts does not exist/is not available',
            },
          }
        : undefined,
    );
    proxy.methods.length = 0;
    const viaProxy = createPublicClient({ chain: clients.chain, transport: http(proxy.url) });
    const latest = await clients.publicClient.getBlockNumber();
    let transactions = 0;
    for (let n = 0n; n <= latest; n++) {
      const direct = await fetchBlockActivity(clients.publicClient, n);
      expect(await fetchBlockActivity(viaProxy, n)).toEqual(direct);
      transactions += (await clients.publicClient.getBlockTransactionCount({ blockNumber: n })) ?? 0;
    }
    expect(latest).toBeGreaterThan(15n);
    // Asked once, then remembered for that client.
    expect(proxy.methods.filter((m) => m === 'eth_getBlockReceipts')).toHaveLength(1);
    expect(proxy.methods.filter((m) => m === 'eth_getTransactionReceipt')).toHaveLength(transactions);
    expect(proxy.methods.filter((m) => m === 'eth_getBlockByNumber')).toHaveLength(Number(latest) + 1);
  });

  test('fails for a block the node does not have', async () => {
    const latest = await clients.publicClient.getBlockNumber();
    await expect(fetchBlockActivity(clients.publicClient, latest + 100n)).rejects.toThrow(BlockNotFoundError);
  });

  test('fails, rather than falls back, when the node fails to answer eth_getBlockReceipts', async () => {
    proxy.intercept((request) =>
      request.method === 'eth_getBlockReceipts' ? { httpStatus: 503 } : undefined,
    );
    const viaProxy = createPublicClient({
      chain: clients.chain,
      transport: http(proxy.url, { retryCount: 0 }),
    });
    await expect(fetchBlockActivity(viaProxy, 1n)).rejects.toThrow(/503|HTTP request failed/);
    proxy.intercept(() => undefined);
    expect((await fetchBlockActivity(viaProxy, 1n)).number).toBe(1n);
  });
});

describe('transfer events whose data carries more than the standard words', () => {
  // The shapes as their standards declare them: decoding a log with these reads the standard words.
  const abis = {
    erc20: parseAbi(['event Transfer(address indexed from, address indexed to, uint256 value)']),
    erc721: parseAbi(['event Transfer(address indexed from, address indexed to, uint256 indexed tokenId)']),
    single: parseAbi([
      'event TransferSingle(address indexed operator, address indexed from, address indexed to, uint256 id, uint256 value)',
    ]),
    batch: parseAbi([
      'event TransferBatch(address indexed operator, address indexed from, address indexed to, uint256[] ids, uint256[] values)',
    ]),
  };
  const topicOf = (address: Hex) => pad(address, { size: 32 });
  const word = (n: bigint) => encodeAbiParameters([{ type: 'uint256' }], [n]);
  const extra = [word(0xdeadn), word(2n ** 255n), '0x0badc0de' as Hex];

  /** Emits one raw log from the RawLogs contract, in a transaction of its own. */
  async function emitted(topics: Hex[], data: Hex) {
    const receipt = await call(0, 'RawLogs', contracts.raw, 'emitLog', [topics, data]);
    expect(receipt.logs).toHaveLength(1);
    expect(receipt.logs[0]!.data).toBe(data);
    return receipt;
  }

  test('reads ERC-20 Transfer and TransferSingle as viem decodeEventLog does: the standard words, the rest ignored', async () => {
    const [from, to] = [account(1), account(2)];
    const erc20 = await emitted(
      [TRANSFER_TOPIC, topicOf(from), topicOf(to)],
      concat([word(1_234_567n), ...extra]),
    );
    const decoded20 = decodeEventLog({ abi: abis.erc20, ...erc20.logs[0]! });
    expect((await activityOf(erc20)).transfers).toEqual([
      expected(erc20, {
        kind: 'erc20',
        logIndex: 0,
        token: contracts.raw,
        from: decoded20.args.from,
        to: decoded20.args.to,
        value: decoded20.args.value,
      }),
    ]);
    expect(decoded20.args.value).toBe(1_234_567n);

    const single = await emitted(
      [TRANSFER_SINGLE_TOPIC, topicOf(account(0)), topicOf(from), topicOf(to)],
      concat([word(7n), word(30n), ...extra]),
    );
    const decodedSingle = decodeEventLog({ abi: abis.single, ...single.logs[0]! });
    expect((await activityOf(single)).transfers).toEqual([
      expected(single, {
        kind: 'erc1155',
        logIndex: 0,
        token: contracts.raw,
        from: decodedSingle.args.from,
        to: decodedSingle.args.to,
        value: decodedSingle.args.value,
        tokenId: decodedSingle.args.id,
      }),
    ]);
    expect([decodedSingle.args.id, decodedSingle.args.value]).toEqual([7n, 30n]);
  });

  test('reads ERC-721 Transfer and TransferBatch with trailing data the same way', async () => {
    const [from, to] = [account(3), account(4)];
    const nft = await emitted([TRANSFER_TOPIC, topicOf(from), topicOf(to), word(42n)], concat(extra));
    const decodedNft = decodeEventLog({ abi: abis.erc721, ...nft.logs[0]! });
    expect((await activityOf(nft)).transfers).toEqual([
      expected(nft, {
        kind: 'erc721',
        logIndex: 0,
        token: contracts.raw,
        from: decodedNft.args.from,
        to: decodedNft.args.to,
        value: 1n,
        tokenId: decodedNft.args.tokenId,
      }),
    ]);

    const batch = await emitted(
      [TRANSFER_BATCH_TOPIC, topicOf(account(0)), topicOf(from), topicOf(to)],
      concat([
        encodeAbiParameters(
          [{ type: 'uint256[]' }, { type: 'uint256[]' }],
          [
            [5n, 6n],
            [50n, 60n],
          ],
        ),
        ...extra,
      ]),
    );
    const decodedBatch = decodeEventLog({ abi: abis.batch, ...batch.logs[0]! });
    expect((await activityOf(batch)).transfers).toEqual(
      decodedBatch.args.ids.map((tokenId, batchIndex) =>
        expected(batch, {
          kind: 'erc1155',
          logIndex: 0,
          batchIndex,
          token: contracts.raw,
          from: decodedBatch.args.from,
          to: decodedBatch.args.to,
          value: decodedBatch.args.values[batchIndex]!,
          tokenId,
        }),
      ),
    );
    expect(decodedBatch.args.ids).toEqual([5n, 6n]);
  });

  test('drops a Transfer or TransferSingle shorter than the standard words, which viem refuses too', async () => {
    const [from, to] = [account(1), account(2)];
    const shortLogs = [
      [[TRANSFER_TOPIC, topicOf(from), topicOf(to)], '0x0badc0de', abis.erc20],
      [[TRANSFER_SINGLE_TOPIC, topicOf(from), topicOf(from), topicOf(to)], word(7n), abis.single],
    ] as const;
    for (const [topics, data, abi] of shortLogs) {
      const receipt = await emitted([...topics], data);
      expect(() => decodeEventLog({ abi, ...receipt.logs[0]! })).toThrow();
      expect((await activityOf(receipt)).transfers).toEqual([]);
    }
  });
});

describe('token info', () => {
  test('reads decimals and symbol once per token, shared by concurrent callers', async () => {
    proxy.intercept(() => undefined);
    proxy.methods.length = 0;
    const cache = createTokenInfoCache(
      createPublicClient({ chain: clients.chain, transport: http(proxy.url) }),
    );
    const infos = await Promise.all([
      cache.get(contracts.token),
      cache.get(contracts.token.toLowerCase() as Hex),
      cache.get(contracts.token),
    ]);
    expect(infos).toEqual([1, 2, 3].map(() => ({ decimals: 6, symbol: 'TST' })));
    expect(await cache.get(contracts.token)).toEqual({ decimals: 6, symbol: 'TST' });
    expect(proxy.methods.filter((m) => m === 'eth_call')).toHaveLength(2);
  });

  test('gives NFTs and contracts without decimals() null (unknown) decimals, and a null symbol to those without symbol()', async () => {
    const cache = createTokenInfoCache(clients.publicClient);
    expect(await cache.get(contracts.nft)).toEqual({ decimals: null, symbol: 'TNFT' });
    expect(await cache.get(contracts.multi)).toEqual({ decimals: null, symbol: null });
    // No code at all.
    expect(await cache.get(account(9))).toEqual({ decimals: null, symbol: null });
  });

  test('answers null decimals when decimals() reverts, answers nothing, more than a uint8 or garbage', async () => {
    const cache = createTokenInfoCache(clients.publicClient);
    for (const mode of [0n, 1n, 2n, 3n]) {
      const { address } = await deploy(clients.publicClient, wallet(0), 'OddToken', { args: [mode] });
      expect(await cache.get(address)).toEqual({ decimals: null, symbol: 'ODD' });
    }
    // A well-behaved token beside them.
    expect(await cache.get(contracts.token)).toEqual({ decimals: 6, symbol: 'TST' });
  });

  test('does not remember a failure of the node: the next call reads again', async () => {
    const cache = createTokenInfoCache(
      createPublicClient({ chain: clients.chain, transport: http(proxy.url, { retryCount: 0 }) }),
    );
    proxy.intercept((request) => (request.method === 'eth_call' ? { httpStatus: 503 } : undefined));
    await expect(cache.get(contracts.token)).rejects.toThrow();
    proxy.intercept((request) =>
      request.method === 'eth_call' ? { error: { code: -32603, message: 'internal error' } } : undefined,
    );
    await expect(cache.get(contracts.token)).rejects.toThrow();
    proxy.intercept(() => undefined);
    expect(await cache.get(contracts.token)).toEqual({ decimals: 6, symbol: 'TST' });
  });

  test('takes a revert without data, as geth words it, for a missing function', async () => {
    const cache = createTokenInfoCache(
      createPublicClient({ chain: clients.chain, transport: http(proxy.url, { retryCount: 0 }) }),
    );
    proxy.intercept((request) =>
      request.method === 'eth_call' ? { error: { code: -32000, message: 'execution reverted' } } : undefined,
    );
    try {
      expect(await cache.get(contracts.token)).toEqual({ decimals: null, symbol: null });
    } finally {
      proxy.intercept(() => undefined);
    }
  });

  test('formats raw amounts exactly in display units', () => {
    expect(formatAmount(1_234_567n, 6)).toBe('1.234567');
    expect(formatAmount(-1_234_567n, 6)).toBe('-1.234567');
    expect(formatAmount(1_500_000n, 6)).toBe('1.5');
    expect(formatAmount(1n, 18)).toBe('0.000000000000000001');
    expect(formatAmount(123_456_789_012_345_678_901_234_567_890n, 18)).toBe('123456789012.34567890123456789');
    expect(formatAmount(3n, 0)).toBe('3');
    expect(formatAmount(0n, 6)).toBe('0');
  });
});

describe('extractTransfers', () => {
  const tx = (hash: Hex, value = 0n, to: Hex | null = `0x${'22'.repeat(20)}`) => ({
    hash,
    from: `0x${'11'.repeat(20)}` as Hex,
    to,
    value,
  });
  const topicOf = (address: Hex) => pad(address, { size: 32 });
  const a = `0x${'aa'.repeat(20)}` as Hex;
  const b = `0x${'bb'.repeat(20)}` as Hex;
  const tokenAddress = `0x${'cc'.repeat(20)}` as Hex;
  const word = (n: bigint) => encodeAbiParameters([{ type: 'uint256' }], [n]);

  test('skips malformed and unrelated logs, and logs of failed receipts', () => {
    const h1 = `0x${'01'.repeat(32)}` as Hex;
    const h2 = `0x${'02'.repeat(32)}` as Hex;
    const receipts: ActivityReceipt[] = [
      {
        transactionHash: h1,
        transactionIndex: 0,
        status: 'success',
        logs: [
          // Transfer with two topics only, an ERC-20 amount shorter than a word, an unrelated event.
          { address: tokenAddress, topics: [TRANSFER_TOPIC, topicOf(a)], data: word(1n), logIndex: 0 },
          {
            address: tokenAddress,
            topics: [TRANSFER_TOPIC, topicOf(a), topicOf(b)],
            data: word(1n).slice(0, 64) as Hex,
            logIndex: 1,
          },
          { address: tokenAddress, topics: [`0x${'ee'.repeat(32)}`], data: '0x', logIndex: 2 },
          // A TransferSingle without its amount, a TransferBatch whose lists differ in length.
          {
            address: tokenAddress,
            topics: [TRANSFER_SINGLE_TOPIC, topicOf(a), topicOf(a), topicOf(b)],
            data: word(1n),
            logIndex: 3,
          },
          {
            address: tokenAddress,
            topics: [TRANSFER_BATCH_TOPIC, topicOf(a), topicOf(a), topicOf(b)],
            data: encodeAbiParameters([{ type: 'uint256[]' }, { type: 'uint256[]' }], [[1n, 2n], [1n]]),
            logIndex: 4,
          },
          {
            address: tokenAddress,
            topics: [TRANSFER_BATCH_TOPIC, topicOf(a), topicOf(a), topicOf(b)],
            data: '0x1234',
            logIndex: 5,
          },
        ],
      },
      {
        transactionHash: h2,
        transactionIndex: 1,
        status: 'reverted',
        logs: [
          {
            address: tokenAddress,
            topics: [TRANSFER_TOPIC, topicOf(a), topicOf(b)],
            data: word(5n),
            logIndex: 6,
          },
        ],
      },
    ];
    expect(extractTransfers({ transactions: [tx(h1), tx(h2, 10n)] }, receipts)).toEqual([]);
  });

  test('orders by transaction index and log index whatever the order given', () => {
    const h1 = `0x${'01'.repeat(32)}` as Hex;
    const h2 = `0x${'02'.repeat(32)}` as Hex;
    const erc20 = (logIndex: number, value: bigint) => ({
      address: tokenAddress,
      topics: [TRANSFER_TOPIC, topicOf(a), topicOf(b)],
      data: word(value),
      logIndex,
    });
    const transfers = extractTransfers({ transactions: [tx(h2, 5n), tx(h1, 4n)] }, [
      { transactionHash: h2, transactionIndex: 1, status: 'success', logs: [erc20(3, 30n), erc20(2, 20n)] },
      { transactionHash: h1, transactionIndex: 0, status: 'success', logs: [erc20(1, 10n), erc20(0, 0n)] },
    ]);
    expect(transfers.map((t) => [t.txIndex, t.logIndex, t.kind, t.value])).toEqual([
      [0, null, 'native', 4n],
      [0, 0, 'erc20', 0n],
      [0, 1, 'erc20', 10n],
      [1, null, 'native', 5n],
      [1, 2, 'erc20', 20n],
      [1, 3, 'erc20', 30n],
    ]);
    expect(transfers[1]).toMatchObject({
      token: getAddress(tokenAddress),
      from: getAddress(a),
      to: getAddress(b),
    });
  });
});

describe('rpcLogs', () => {
  const log = (logIndex: number, data: Hex): RpcLog => ({
    address: '0x00000000000000000000000000000000000000aa',
    topics: [`0x${'11'.repeat(32)}`],
    data,
    logIndex: `0x${logIndex.toString(16)}`,
  });
  const receipt = (index: number, status: Hex | undefined, logs: RpcLog[]): RpcReceipt => ({
    transactionHash: `0x${String(index).repeat(64).slice(0, 64)}`,
    transactionIndex: `0x${index.toString(16)}`,
    blockHash: `0x${'bb'.repeat(32)}`,
    ...(status === undefined ? {} : { status }),
    logs,
  });

  test('lists the logs of successful and pre-Byzantium receipts in block order; a failed one has none', () => {
    const logs = rpcLogs([
      receipt(2, undefined, [log(3, '0x03')]),
      receipt(1, '0x1', [log(1, '0x01'), log(2, '0x02')]),
      // A node that answered logs for a failed transaction: they never happened.
      receipt(3, '0x0', [log(4, '0x04')]),
    ]);
    expect(logs.map((l) => [l.logIndex, l.txIndex, l.data])).toEqual([
      [1, 1, '0x01'],
      [2, 1, '0x02'],
      [3, 2, '0x03'],
    ]);
  });
});
