/**
 * What a block of an EVM chain moved: top-level native transfers and ERC-20/721/1155 token
 * transfers of its successful transactions, read from the block and its receipts, and the native
 * value its contracts moved (internal transfers), read from its traces where the node has them.
 */
import {
  BaseError,
  BlockNotFoundError,
  decodeAbiParameters,
  formatUnits,
  getAddress,
  type Hex,
  hexToString,
  type PublicClient,
  TransactionReceiptNotFoundError,
  toEventSelector,
  toFunctionSelector,
} from 'viem';
import { isMethodUnavailable } from '../node-errors.js';
import type { RpcReceiptFees } from './fees.js';
import { isTraceGap, type TraceReader } from './trace-reader.js';
import type { InternalTransfer } from './traces.js';
import type { EvmBlockActivity, EvmLog, EvmPayment, EvmTransfer, TokenInfo } from './types.js';

export const TRANSFER_TOPIC = toEventSelector('Transfer(address,address,uint256)');
export const TRANSFER_SINGLE_TOPIC = toEventSelector(
  'TransferSingle(address,address,address,uint256,uint256)',
);
export const TRANSFER_BATCH_TOPIC = toEventSelector(
  'TransferBatch(address,address,address,uint256[],uint256[])',
);

/** The parts of a transaction that extraction reads (a viem `Transaction` has them). */
export interface ActivityTransaction {
  hash: Hex;
  from: Hex;
  to: Hex | null;
  value: bigint;
}

export interface ActivityLog {
  address: Hex;
  topics: readonly Hex[];
  data: Hex;
  logIndex: number;
}

/** The parts of a receipt that extraction reads (a viem `TransactionReceipt` has them). */
export interface ActivityReceipt {
  transactionHash: Hex;
  transactionIndex: number;
  status: 'success' | 'reverted';
  contractAddress?: Hex | null | undefined;
  logs: readonly ActivityLog[];
}

/**
 * A block as `eth_getBlockByNumber(n, true)` answers it, JSON-parsed and not formatted: the fields
 * extraction reads, quantities still hex. Reading these directly spares viem's formatting of every
 * field of every transaction, receipt and log.
 */
export interface RpcBlock {
  number: Hex | null;
  hash: Hex | null;
  parentHash: Hex;
  timestamp: Hex;
  transactions: readonly RpcTransaction[];
}

export interface RpcTransaction {
  hash: Hex;
  from: Hex;
  to?: Hex | null;
  value: Hex;
  /** Legacy and access-list transactions; an EIP-1559 one has it too on most nodes. */
  gasPrice?: Hex | null;
  /** The sender's nonce (every node gives it); a pending announcement's claim. */
  nonce?: Hex;
}

export interface RpcLog {
  address: Hex;
  topics: readonly Hex[];
  data: Hex;
  logIndex: Hex;
}

/** A receipt as `eth_getBlockReceipts` or `eth_getTransactionReceipt` answers it. */
export interface RpcReceipt extends Partial<RpcReceiptFees> {
  transactionHash: Hex;
  transactionIndex: Hex;
  blockHash: Hex;
  /** 0x1 success, 0x0 reverted; absent before Byzantium (a state root instead): not known to succeed. */
  status?: Hex | null;
  contractAddress?: Hex | null;
  logs: readonly RpcLog[];
}

const WORD_HEX = 64;

/** The address in the low 20 bytes of an indexed topic, lower case; undefined if the topic is malformed. */
function topicAddress(topic: Hex | undefined): Hex | undefined {
  if (topic === undefined || topic.length !== 2 + WORD_HEX) return undefined;
  return `0x${topic.slice(26).toLowerCase()}`;
}

function word(data: Hex, index: number): bigint {
  return BigInt(`0x${data.slice(2 + index * WORD_HEX, 2 + (index + 1) * WORD_HEX)}`);
}

const lower = (address: Hex): Hex => address.toLowerCase() as Hex;

/**
 * The token transfers one log records (none for other events), appended to `out`: the follower
 * reads logs from receipts, a backfill from eth_getLogs, both through this.
 */
export function logTransfers(log: RpcLog, txHash: Hex, txIndex: number, out: EvmTransfer[]): void {
  const [topic0, t1, t2, t3] = log.topics;
  if (topic0 !== TRANSFER_TOPIC && topic0 !== TRANSFER_SINGLE_TOPIC && topic0 !== TRANSFER_BATCH_TOPIC)
    return;
  const logIndex = Number(log.logIndex);
  const token = lower(log.address);
  const dataHex = log.data.length - 2;

  if (topic0 === TRANSFER_TOPIC) {
    const from = topicAddress(t1);
    const to = topicAddress(t2);
    if (!from || !to) return;
    // ERC-20: Transfer(address indexed, address indexed, uint256): the amount is the data's first
    // word. Words after it are ignored, as ABI decoders (viem's decodeEventLog) do: some tokens
    // emit more.
    if (log.topics.length === 3 && dataHex >= WORD_HEX) {
      out.push({
        txHash,
        txIndex,
        logIndex,
        batchIndex: 0,
        kind: 'erc20',
        token,
        from,
        to,
        value: word(log.data, 0),
        tokenId: null,
      });
      return;
    }
    // ERC-721: the token id is indexed too; any data is ignored.
    if (log.topics.length === 4 && t3?.length === 2 + WORD_HEX) {
      out.push({
        txHash,
        txIndex,
        logIndex,
        batchIndex: 0,
        kind: 'erc721',
        token,
        from,
        to,
        value: 1n,
        tokenId: BigInt(t3),
      });
    }
    return;
  }

  // TransferSingle and TransferBatch(operator indexed, from indexed, to indexed, ...).
  const from = topicAddress(t2);
  const to = topicAddress(t3);
  if (!from || !to || log.topics.length !== 4) return;
  if (topic0 === TRANSFER_SINGLE_TOPIC) {
    // TransferSingle(..., id, value): the data's first two words; any after them are ignored, as
    // for Transfer.
    if (dataHex < 2 * WORD_HEX) return;
    out.push({
      txHash,
      txIndex,
      logIndex,
      batchIndex: 0,
      kind: 'erc1155',
      token,
      from,
      to,
      value: word(log.data, 1),
      tokenId: word(log.data, 0),
    });
    return;
  }
  // TransferBatch(..., ids[], values[]): one per id. The arrays are found through their offsets,
  // so trailing data is ignored here too.
  let ids: readonly bigint[];
  let values: readonly bigint[];
  try {
    [ids, values] = decodeAbiParameters([{ type: 'uint256[]' }, { type: 'uint256[]' }], log.data);
  } catch {
    return;
  }
  if (ids.length !== values.length) return;
  ids.forEach((tokenId, batchIndex) => {
    out.push({
      txHash,
      txIndex,
      logIndex,
      batchIndex,
      kind: 'erc1155',
      token,
      from,
      to,
      value: values[batchIndex]!,
      tokenId,
    });
  });
}

const byIndex = (a: { index: number }, b: { index: number }) => a.index - b.index;

/** A native transfer: the transaction's own value, or with a traceAddress an internal one. */
export function nativeTransfer(
  txHash: Hex,
  txIndex: number,
  moved: { from: Hex; to: Hex; value: bigint; traceAddress?: string },
): EvmTransfer {
  return {
    txHash,
    txIndex,
    logIndex: null,
    batchIndex: 0,
    kind: 'native',
    token: null,
    from: moved.from,
    to: moved.to,
    value: moved.value,
    tokenId: null,
    ...(moved.traceAddress === undefined ? {} : { traceAddress: moved.traceAddress }),
  };
}

/**
 * The transfers of a block from its JSON-RPC answers, addresses in lower case: native value of
 * successful transactions (the created contract as recipient of a creation), and the token transfer
 * events they emitted. Reverted transactions contribute nothing. Ordered by transaction, native
 * first, then by log and position in a batch. Only the fields needed are decoded, and no address
 * is checksummed: the follower checksums the few transfers that match (see checksummedTransfer).
 */
export function rpcTransfers(
  block: { transactions: readonly RpcTransaction[] },
  receipts: readonly RpcReceipt[],
  /** Each transaction's internal transfers (from its traces), by hash. */
  internal?: ReadonlyMap<Hex, readonly InternalTransfer[]>,
): EvmTransfer[] {
  const byHash = new Map<Hex, RpcTransaction>();
  for (const tx of block.transactions) byHash.set(tx.hash, tx);
  // Nodes answer in order; sorted anyway, as the one-by-one reads and any node may not.
  const ordered = receipts
    .map((receipt) => ({ receipt, index: Number(receipt.transactionIndex) }))
    .sort(byIndex);

  const transfers: EvmTransfer[] = [];
  for (const { receipt, index: txIndex } of ordered) {
    if (receipt.status !== '0x1') continue;
    const tx = byHash.get(receipt.transactionHash);
    if (!tx) throw new Error(`receipt of ${receipt.transactionHash} has no transaction in the block`);
    const txHash = receipt.transactionHash;
    const recipient = tx.to || receipt.contractAddress || null;
    const value = BigInt(tx.value);
    if (value > 0n && recipient) {
      transfers.push(nativeTransfer(txHash, txIndex, { from: lower(tx.from), to: lower(recipient), value }));
    }
    for (const moved of internal?.get(txHash) ?? []) transfers.push(nativeTransfer(txHash, txIndex, moved));
    const logs =
      receipt.logs.length < 2
        ? receipt.logs.map((log) => ({ log, index: 0 }))
        : receipt.logs.map((log) => ({ log, index: Number(log.logIndex) })).sort(byIndex);
    for (const { log } of logs) logTransfers(log, txHash, txIndex, transfers);
  }
  return transfers;
}

/**
 * Every transaction of the block as its sender paid for it (reverted ones too), for `attr.fees`;
 * in block order. The fee is left in the receipt, computed only for watched senders.
 */
export function rpcPayments(
  block: { transactions: readonly RpcTransaction[] },
  receipts: readonly RpcReceipt[],
): EvmPayment[] {
  const byHash = new Map<Hex, RpcTransaction>();
  for (const tx of block.transactions) byHash.set(tx.hash, tx);
  const payments: EvmPayment[] = [];
  for (const receipt of receipts) {
    const tx = byHash.get(receipt.transactionHash);
    if (!tx || receipt.gasUsed === undefined) continue;
    payments.push({
      txHash: receipt.transactionHash,
      txIndex: Number(receipt.transactionIndex),
      from: lower(tx.from),
      receipt: receipt as RpcReceiptFees,
      gasPrice: tx.gasPrice ?? null,
      nonce: tx.nonce === undefined ? null : Number(tx.nonce),
      // Before Byzantium a receipt has no status: not known to have failed.
      failed: receipt.status === '0x0',
    });
  }
  return payments.sort((a, b) => a.txIndex - b.txIndex);
}

/**
 * The logs of a block's successful transactions in block order, for contract events. A failed
 * transaction leaves no log, so a receipt without a status (before Byzantium) is read as well:
 * what eth_getLogs (a backfill) answers for that block.
 */
export function rpcLogs(receipts: readonly RpcReceipt[]): EvmLog[] {
  const logs: EvmLog[] = [];
  for (const receipt of receipts) {
    if (receipt.status === '0x0' || receipt.logs.length === 0) continue;
    const txIndex = Number(receipt.transactionIndex);
    for (const log of receipt.logs) {
      logs.push({
        txHash: receipt.transactionHash,
        txIndex,
        logIndex: Number(log.logIndex),
        address: log.address,
        topics: log.topics,
        data: log.data,
      });
    }
  }
  return logs.sort((a, b) => a.logIndex - b.logIndex);
}

/** A transfer with its addresses EIP-55 checksummed, as notifications show them. */
export function checksummedTransfer(transfer: EvmTransfer): EvmTransfer {
  return {
    ...transfer,
    token: transfer.token === null ? null : getAddress(transfer.token),
    from: getAddress(transfer.from),
    to: getAddress(transfer.to),
  };
}

const hex = (n: number | bigint): Hex => `0x${n.toString(16)}`;

/**
 * The transfers of a block from viem's formatted transactions and receipts (see rpcTransfers),
 * addresses EIP-55 checksummed.
 */
export function extractTransfers(
  block: { transactions: readonly ActivityTransaction[] },
  receipts: readonly ActivityReceipt[],
): EvmTransfer[] {
  const transactions = block.transactions.map((tx) => ({ ...tx, value: hex(tx.value) }));
  const raw = receipts.map((r) => ({
    transactionHash: r.transactionHash,
    transactionIndex: hex(r.transactionIndex),
    blockHash: '0x' as Hex,
    status: r.status === 'success' ? ('0x1' as const) : ('0x0' as const),
    contractAddress: r.contractAddress ?? null,
    logs: r.logs.map((log) => ({ ...log, logIndex: hex(log.logIndex) })),
  }));
  return rpcTransfers({ transactions }, raw).map(checksummedTransfer);
}

// Clients (nodes) known not to serve eth_getBlockReceipts: asked once, then receipts one by one.
const withoutBlockReceipts = new WeakSet<object>();
const RECEIPT_CONCURRENCY = 8;

async function receiptsOneByOne(
  client: PublicClient,
  hashes: readonly Hex[],
  blockHash: Hex,
): Promise<RpcReceipt[]> {
  const receipts = new Array<RpcReceipt>(hashes.length);
  let next = 0;
  const worker = async () => {
    while (next < hashes.length) {
      const i = next++;
      const hash = hashes[i]!;
      const receipt = (await client.request({
        method: 'eth_getTransactionReceipt',
        params: [hash],
      })) as RpcReceipt | null;
      if (!receipt) throw new TransactionReceiptNotFoundError({ hash });
      if (receipt.blockHash !== blockHash) {
        throw new Error(
          `receipt of ${hash} is in block ${receipt.blockHash}, not ${blockHash}: the chain reorganised while reading`,
        );
      }
      receipts[i] = receipt;
    }
  };
  await Promise.all(Array.from({ length: Math.min(RECEIPT_CONCURRENCY, hashes.length) }, worker));
  return receipts;
}

/**
 * The block's receipts: `asked` is eth_getBlockReceipts already sent by the block's number (its
 * answer is checked to be this block's, by hash), else it is asked by hash; on nodes without the
 * method, one eth_getTransactionReceipt per transaction.
 */
async function blockReceipts(
  client: PublicClient,
  blockHash: Hex,
  hashes: readonly Hex[],
  asked?: Promise<unknown>,
): Promise<RpcReceipt[]> {
  if (hashes.length === 0) {
    // Not needed, but it says whether the node has the method, so that it is asked only once.
    await asked?.catch((err: unknown) => {
      if (isMethodUnavailable(err)) withoutBlockReceipts.add(client);
    });
    return [];
  }
  if (!withoutBlockReceipts.has(client)) {
    try {
      const receipts = ((await (asked ??
        client.request({ method: 'eth_getBlockReceipts', params: [blockHash] }))) ?? []) as RpcReceipt[];
      for (const receipt of receipts) {
        if (receipt.blockHash !== blockHash) {
          throw new Error(
            `eth_getBlockReceipts answered receipts of ${receipt.blockHash} for block ${blockHash}: the chain changed while reading`,
          );
        }
      }
      if (receipts.length !== hashes.length) {
        throw new Error(
          `eth_getBlockReceipts(${blockHash}) answered ${receipts.length} receipts for ${hashes.length} transactions`,
        );
      }
      return receipts;
    } catch (err) {
      if (!isMethodUnavailable(err)) throw err;
      withoutBlockReceipts.add(client);
    }
  }
  return receiptsOneByOne(client, hashes, blockHash);
}

/**
 * Reads one block with its transactions and receipts (`eth_getBlockReceipts`, or one
 * `eth_getTransactionReceipt` per transaction on nodes without it) as raw JSON-RPC answers and
 * extracts its transfers, addresses in lower case (rpcTransfers): what the follower reads. Throws
 * BlockNotFoundError for a block the node does not have, and if the chain changes under the reads
 * (receipts of another block).
 */
export async function readBlockActivity(
  client: PublicClient,
  number: bigint,
  traces?: TraceReader,
): Promise<EvmBlockActivity> {
  // The block, its receipts and its traces asked at once, all by number: one round trip per
  // block. The receipts carry their block's hash, and the traces are checked against the block's
  // transactions: a block replaced between the answers fails the read, as a reorganisation while
  // reading always did, and never mixes with another block's receipts or traces.
  const asked = withoutBlockReceipts.has(client)
    ? undefined
    : client.request({ method: 'eth_getBlockReceipts', params: [hex(number)] });
  asked?.catch(() => {}); // awaited below, unless the block is missing
  const traced = traces?.read(number);
  const block = (await client.request({
    method: 'eth_getBlockByNumber',
    params: [hex(number), true],
  })) as RpcBlock | null;
  if (!block) throw new BlockNotFoundError({ blockNumber: number });
  if (block.hash === null || block.number === null) throw new Error(`block ${number} is still pending`);
  const [receipts, internal] = await Promise.all([
    blockReceipts(
      client,
      block.hash,
      block.transactions.map((tx) => tx.hash),
      asked,
    ),
    traced?.({ hash: block.hash, number: BigInt(block.number), transactions: block.transactions }),
  ]);
  let byHash: Map<Hex, InternalTransfer[]> | undefined;
  const gap = isTraceGap(internal) ? internal.gap : undefined;
  if (internal && !isTraceGap(internal)) {
    byHash = new Map();
    internal.forEach((moved, i) => {
      if (moved.length > 0) byHash!.set(block.transactions[i]!.hash, moved);
    });
  }
  return {
    number: BigInt(block.number),
    hash: block.hash,
    parentHash: block.parentHash,
    timestamp: BigInt(block.timestamp),
    transfers: rpcTransfers(block, receipts, byHash),
    payments: rpcPayments(block, receipts),
    logs: rpcLogs(receipts),
    ...(gap === undefined ? {} : { traceGap: gap }),
  };
}

/** readBlockActivity with every address EIP-55 checksummed. */
export async function fetchBlockActivity(
  client: PublicClient,
  number: bigint,
  traces?: TraceReader,
): Promise<EvmBlockActivity> {
  const activity = await readBlockActivity(client, number, traces);
  return { ...activity, transfers: activity.transfers.map(checksummedTransfer) };
}

export interface TokenInfoCache {
  /** Symbol and decimals of a token contract, read from the chain once per token. */
  get(token: Hex): Promise<TokenInfo>;
}

const DECIMALS_CALL = toFunctionSelector('decimals()');
const SYMBOL_CALL = toFunctionSelector('symbol()');

/** Whether an eth_call failed because the contract reverted (no such function), not the node. */
function isRevert(err: unknown): boolean {
  if (!(err instanceof BaseError)) return false;
  return Boolean(
    err.walk((e) => {
      const { code, details, shortMessage } = e as {
        code?: unknown;
        details?: unknown;
        shortMessage?: unknown;
      };
      if (code === 3) return true;
      return [details, shortMessage].some((text) => typeof text === 'string' && /revert/i.test(text));
    }),
  );
}

/** The raw answer of a view call; '0x' when the contract reverts or has no code. */
export async function view(client: PublicClient, to: Hex, data: Hex): Promise<Hex> {
  try {
    return await client.request({ method: 'eth_call', params: [{ to, data }, 'latest'] });
  } catch (err) {
    if (isRevert(err)) return '0x';
    throw err;
  }
}

/** A uint8 in the answer's first word, as an ABI decoder reads it; null for anything else. */
function decodeDecimals(raw: Hex): number | null {
  if (raw.length < 2 + WORD_HEX) return null;
  const value = word(raw, 0);
  return value <= 255n ? Number(value) : null;
}

function decodeSymbol(raw: Hex): string | null {
  let text: string | undefined;
  try {
    [text] = decodeAbiParameters([{ type: 'string' }], raw);
  } catch {
    // Some early tokens (MKR, SAI) answer a bytes32.
    if (raw.length === 2 + WORD_HEX) text = hexToString(raw);
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: stripping NUL padding and control bytes
  const clean = text?.replace(/[\u0000-\u001f\u007f]/g, '').trim();
  return clean ? clean : null;
}

/**
 * Token symbols and decimals, read with `decimals()` and `symbol()` once per token and kept in
 * memory; concurrent callers share one read. A token whose `decimals()` reverts or answers
 * nonsense has null decimals (unknown) and one without `symbol()` a null symbol; a failure of the
 * node is not remembered (the next call retries).
 */
export function createTokenInfoCache(client: PublicClient): TokenInfoCache {
  const known = new Map<string, Promise<TokenInfo>>();
  return {
    get(token) {
      const key = token.toLowerCase();
      let info = known.get(key);
      if (!info) {
        const address = getAddress(token);
        info = Promise.all([view(client, address, DECIMALS_CALL), view(client, address, SYMBOL_CALL)]).then(
          ([decimals, symbol]) => ({ decimals: decodeDecimals(decimals), symbol: decodeSymbol(symbol) }),
        );
        known.set(key, info);
        info.catch(() => {
          if (known.get(key) === info) known.delete(key);
        });
      }
      return info;
    },
  };
}

/** An amount in raw units as an exact decimal string in display units ("1.5", "-0.000001", "42"). */
export function formatAmount(value: bigint, decimals: number): string {
  return formatUnits(value, decimals);
}
