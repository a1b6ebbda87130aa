// The follower decodes blocks and receipts from their raw JSON-RPC answers (rpcTransfers), reading
// only the fields it needs. These tests hold it to what viem's own formatters and event decoding
// read from the same answers: a recorded mainnet transaction, and every block of an anvil chain
// with native, ERC-20, ERC-721 and ERC-1155 (single and batch) transfers, a contract creation
// carrying value and a reverted transaction.
import fs from 'node:fs';
import path from 'node:path';
import {
  type Abi,
  decodeEventLog,
  formatTransaction,
  formatTransactionReceipt,
  getAddress,
  type Hex,
  parseAbi,
  parseEther,
  type RpcTransactionReceipt as ViemRpcReceipt,
  type RpcTransaction as ViemRpcTransaction,
} from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { anvilClients, artifact, type ContractName, deploy, mined } from '../../../test/helpers/anvil.js';
import {
  checksummedTransfer,
  type RpcReceipt,
  type RpcTransaction,
  rpcTransfers,
  TRANSFER_BATCH_TOPIC,
  TRANSFER_SINGLE_TOPIC,
  TRANSFER_TOPIC,
} from './activity.js';
import { type Anvil, startAnvil } from './anvil.js';
import type { EvmTransfer } from './types.js';

const ERC20 = parseAbi(['event Transfer(address indexed from, address indexed to, uint256 value)']);
const ERC721 = parseAbi([
  'event Transfer(address indexed from, address indexed to, uint256 indexed tokenId)',
]);
const ERC1155 = parseAbi([
  'event TransferSingle(address indexed operator, address indexed from, address indexed to, uint256 id, uint256 value)',
  'event TransferBatch(address indexed operator, address indexed from, address indexed to, uint256[] ids, uint256[] values)',
]);

/** The transfers of a block as read through viem: its formatters, then decodeEventLog per log. */
function viemTransfers(rawTransactions: unknown[], rawReceipts: unknown[]): EvmTransfer[] {
  const transactions = rawTransactions.map((t) => formatTransaction(t as ViemRpcTransaction));
  const receipts = rawReceipts
    .map((r) => formatTransactionReceipt(r as ViemRpcReceipt))
    .sort((a, b) => a.transactionIndex - b.transactionIndex);
  const out: EvmTransfer[] = [];
  for (const receipt of receipts) {
    if (receipt.status !== 'success') continue;
    const tx = transactions.find((t) => t.hash === receipt.transactionHash)!;
    const base = { txHash: tx.hash, txIndex: receipt.transactionIndex, batchIndex: 0 };
    const recipient = tx.to ?? receipt.contractAddress;
    if (tx.value > 0n && recipient) {
      out.push({
        ...base,
        logIndex: null,
        kind: 'native',
        token: null,
        from: getAddress(tx.from),
        to: getAddress(recipient),
        value: tx.value,
        tokenId: null,
      });
    }
    for (const log of [...receipt.logs].sort((a, b) => a.logIndex - b.logIndex)) {
      const topic = log.topics[0];
      const abi: Abi | undefined =
        topic === TRANSFER_TOPIC
          ? log.topics.length === 3
            ? ERC20
            : ERC721
          : topic === TRANSFER_SINGLE_TOPIC || topic === TRANSFER_BATCH_TOPIC
            ? ERC1155
            : undefined;
      if (!abi) continue;
      const { eventName, args } = decodeEventLog({ abi, topics: log.topics, data: log.data }) as unknown as {
        eventName: string;
        args: Record<string, unknown>;
      };
      const at = { ...base, logIndex: log.logIndex, token: getAddress(log.address) };
      const from = getAddress(args.from as Hex);
      const to = getAddress(args.to as Hex);
      if (eventName === 'TransferBatch') {
        const ids = args.ids as bigint[];
        const values = args.values as bigint[];
        ids.forEach((tokenId, batchIndex) => {
          out.push({ ...at, batchIndex, kind: 'erc1155', from, to, value: values[batchIndex]!, tokenId });
        });
      } else if (eventName === 'TransferSingle') {
        out.push({
          ...at,
          kind: 'erc1155',
          from,
          to,
          value: args.value as bigint,
          tokenId: args.id as bigint,
        });
      } else if (abi === ERC20) {
        out.push({ ...at, kind: 'erc20', from, to, value: args.value as bigint, tokenId: null });
      } else {
        out.push({ ...at, kind: 'erc721', from, to, value: 1n, tokenId: args.tokenId as bigint });
      }
    }
  }
  return out;
}

const checksummed = (transactions: unknown[], receipts: unknown[]) =>
  rpcTransfers({ transactions: transactions as RpcTransaction[] }, receipts as RpcReceipt[]).map(
    checksummedTransfer,
  );

describe('rpcTransfers on a recorded mainnet transaction', () => {
  const fixture = (name: string) =>
    JSON.parse(
      fs.readFileSync(path.join(import.meta.dirname, '../../../test/fixtures/chains/ethereum', name), 'utf8'),
    ).result;
  const tx = fixture('eth_getTransactionByHash-mainnet-0xcd718a69.json');
  const receipt = fixture('eth_getTransactionReceipt-mainnet-0xcd718a69.json');

  test('reads the two ERC-20 transfers of a Uniswap swap as viem does, and nothing from Approval or Swap', () => {
    const transfers = checksummed([tx], [receipt]);
    expect(transfers).toEqual(viemTransfers([tx], [receipt]));
    expect(transfers.map((t) => [t.kind, t.token, t.logIndex, t.value])).toEqual([
      ['erc20', '0xdAC17F958D2ee523a2206206994597C13D831ec7', 590, 4361142255n],
      ['erc20', getAddress('0xb7135877cd5d40aa3b086ac6f21c51bbafbbb41f'), 592, transfers[1]!.value],
    ]);
    // Lower case before checksumming: what the matcher's index is keyed on.
    const raw = rpcTransfers({ transactions: [tx] }, [receipt]);
    expect(raw.map((t) => [t.from, t.to, t.token])).toEqual(
      transfers.map((t) => [t.from.toLowerCase(), t.to.toLowerCase(), t.token!.toLowerCase()]),
    );
  });
});

describe('rpcTransfers on an anvil chain', () => {
  let anvil: Anvil;
  beforeAll(async () => {
    anvil = await startAnvil();
  });
  afterAll(async () => {
    await anvil?.stop();
  });

  const rpc = async (method: string, params: unknown[]) => {
    const response = await fetch(anvil.rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return ((await response.json()) as { result: unknown }).result;
  };

  test('reads from every block what viem reads', async () => {
    const { publicClient, wallets } = anvilClients(anvil);
    const account = (i: number) => anvil.accounts[i]!.address;
    const call = (
      from: number,
      name: ContractName,
      address: Hex,
      fn: string,
      args: unknown[],
      gas?: bigint,
    ) =>
      mined(
        publicClient,
        wallets[from]!.writeContract({ address, abi: artifact(name).abi, functionName: fn, args, gas }),
      );
    const token = (await deploy(publicClient, wallets[0]!, 'TestToken')).address;
    const nft = (await deploy(publicClient, wallets[0]!, 'TestNFT')).address;
    const multi = (await deploy(publicClient, wallets[0]!, 'TestMulti')).address;
    // A creation carrying value: the created contract is the recipient.
    await deploy(publicClient, wallets[1]!, 'Sink', { value: parseEther('0.5') });
    await mined(publicClient, wallets[2]!.sendTransaction({ to: account(3), value: parseEther('1.25') }));
    await call(0, 'TestToken', token, 'mint', [account(4), 1_000_000n]);
    await call(4, 'TestToken', token, 'transfer', [account(5), 123_456n]);
    await call(0, 'TestNFT', nft, 'mint', [account(6), 42n]);
    await call(6, 'TestNFT', nft, 'transferFrom', [account(6), account(7), 42n]);
    await call(0, 'TestMulti', multi, 'mint', [account(8), 7n, 100n]);
    await call(0, 'TestMulti', multi, 'mintBatch', [account(8), [1n, 2n, 3n], [10n, 20n, 30n]]);
    await call(8, 'TestMulti', multi, 'safeBatchTransferFrom', [
      account(8),
      account(9),
      [1n, 3n],
      [4n, 5n],
      '0x',
    ]);
    const reverted = await call(4, 'TestToken', token, 'transferThenRevert', [account(5), 1n], 200_000n);
    expect(reverted.status).toBe('reverted');

    // From the node itself: viem's getBlockNumber may answer from its cache, before the last blocks.
    const latest = Number(await rpc('eth_blockNumber', []));
    const kinds = new Set<string>();
    let count = 0;
    for (let n = 0; n <= latest; n++) {
      const block = (await rpc('eth_getBlockByNumber', [`0x${n.toString(16)}`, true])) as {
        hash: Hex;
        transactions: unknown[];
      };
      const receipts = (await rpc('eth_getBlockReceipts', [block.hash])) as unknown[];
      const transfers = checksummed(block.transactions, receipts);
      expect(transfers).toEqual(viemTransfers(block.transactions, receipts));
      count += transfers.length;
      for (const t of transfers) kinds.add(`${t.kind}${t.batchIndex > 0 ? ' batch' : ''}`);
    }
    expect([...kinds].sort()).toEqual(['erc1155', 'erc1155 batch', 'erc20', 'erc721', 'native']);
    expect(count).toBe(12);
  });
});
