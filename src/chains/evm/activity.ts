/**
 * What a block of an EVM chain moved: top-level native transfers and ERC-20/721/1155 token
 * transfers of its successful transactions, read from the block and its receipts.
 */
import {
  BaseError,
  decodeAbiParameters,
  formatUnits,
  getAddress,
  type Hex,
  hexToString,
  type PublicClient,
  type TransactionReceipt,
  toEventSelector,
  toFunctionSelector,
} from 'viem';
import type { EvmBlockActivity, EvmTransfer, TokenInfo } from './types.js';

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

const WORD_HEX = 64;

/** The address in the low 20 bytes of an indexed topic; undefined if the topic is malformed. */
function topicAddress(topic: Hex | undefined): Hex | undefined {
  if (topic === undefined || topic.length !== 2 + WORD_HEX) return undefined;
  return getAddress(`0x${topic.slice(26)}`);
}

function word(data: Hex, index: number): bigint {
  return BigInt(`0x${data.slice(2 + index * WORD_HEX, 2 + (index + 1) * WORD_HEX)}`);
}

function logTransfers(log: ActivityLog, txHash: Hex, txIndex: number): EvmTransfer[] {
  const [topic0, t1, t2, t3] = log.topics;
  const base = { txHash, txIndex, logIndex: log.logIndex, batchIndex: 0, token: getAddress(log.address) };
  const dataHex = log.data.length - 2;

  if (topic0 === TRANSFER_TOPIC) {
    const from = topicAddress(t1);
    const to = topicAddress(t2);
    if (!from || !to) return [];
    // ERC-20: Transfer(address indexed, address indexed, uint256): the amount is the data's first
    // word. Words after it are ignored, as ABI decoders (viem's decodeEventLog) do: some tokens
    // emit more.
    if (log.topics.length === 3 && dataHex >= WORD_HEX) {
      return [{ ...base, kind: 'erc20', from, to, value: word(log.data, 0), tokenId: null }];
    }
    // ERC-721: the token id is indexed too; any data is ignored.
    if (log.topics.length === 4 && t3?.length === 2 + WORD_HEX) {
      return [{ ...base, kind: 'erc721', from, to, value: 1n, tokenId: BigInt(t3) }];
    }
    return [];
  }

  if (topic0 === TRANSFER_SINGLE_TOPIC) {
    // TransferSingle(operator indexed, from indexed, to indexed, id, value): the data's first two
    // words; any after them are ignored, as for Transfer.
    const from = topicAddress(t2);
    const to = topicAddress(t3);
    if (!from || !to || log.topics.length !== 4 || dataHex < 2 * WORD_HEX) return [];
    return [{ ...base, kind: 'erc1155', from, to, value: word(log.data, 1), tokenId: word(log.data, 0) }];
  }

  if (topic0 === TRANSFER_BATCH_TOPIC) {
    // TransferBatch(operator indexed, from indexed, to indexed, ids[], values[]): one per id. The
    // arrays are found through their offsets, so trailing data is ignored here too.
    const from = topicAddress(t2);
    const to = topicAddress(t3);
    if (!from || !to || log.topics.length !== 4) return [];
    let ids: readonly bigint[];
    let values: readonly bigint[];
    try {
      [ids, values] = decodeAbiParameters([{ type: 'uint256[]' }, { type: 'uint256[]' }], log.data);
    } catch {
      return [];
    }
    if (ids.length !== values.length) return [];
    return ids.map((tokenId, batchIndex) => ({
      ...base,
      batchIndex,
      kind: 'erc1155' as const,
      from,
      to,
      value: values[batchIndex]!,
      tokenId,
    }));
  }

  return [];
}

/**
 * The transfers of a block, from its transactions and their receipts: native value of successful
 * transactions (the created contract as recipient of a creation), and the token transfer events
 * they emitted. Reverted transactions contribute nothing. Ordered by transaction, native first,
 * then by log and position in a batch. Addresses are EIP-55 checksummed.
 */
export function extractTransfers(
  block: { transactions: readonly ActivityTransaction[] },
  receipts: readonly ActivityReceipt[],
): EvmTransfer[] {
  const byHash = new Map<Hex, ActivityTransaction>();
  for (const tx of block.transactions) byHash.set(tx.hash, tx);
  const ordered = [...receipts].sort((a, b) => a.transactionIndex - b.transactionIndex);

  const transfers: EvmTransfer[] = [];
  for (const receipt of ordered) {
    if (receipt.status !== 'success') continue;
    const tx = byHash.get(receipt.transactionHash);
    if (!tx) throw new Error(`receipt of ${receipt.transactionHash} has no transaction in the block`);
    const txHash = receipt.transactionHash;
    const txIndex = receipt.transactionIndex;
    const recipient = tx.to ?? receipt.contractAddress ?? null;
    if (tx.value > 0n && recipient) {
      transfers.push({
        txHash,
        txIndex,
        logIndex: null,
        batchIndex: 0,
        kind: 'native',
        token: null,
        from: getAddress(tx.from),
        to: getAddress(recipient),
        value: tx.value,
        tokenId: null,
      });
    }
    const logs = [...receipt.logs].sort((a, b) => a.logIndex - b.logIndex);
    for (const log of logs) transfers.push(...logTransfers(log, txHash, txIndex));
  }
  return transfers;
}

// Clients (nodes) known not to serve eth_getBlockReceipts: asked once, then receipts one by one.
const withoutBlockReceipts = new WeakSet<object>();
const RECEIPT_CONCURRENCY = 8;

const METHOD_UNAVAILABLE =
  /method.{0,40}(not found|not supported|unsupported|does not exist|not available|not allowed)|unsupported method|unknown method/i;

/** Whether an error says the node does not offer the method (rather than failing to answer). */
export function isMethodUnavailable(err: unknown): boolean {
  const errors: unknown[] = [];
  if (err instanceof BaseError) {
    err.walk((e) => {
      errors.push(e);
      return false;
    });
  } else errors.push(err);
  return errors.some((e) => {
    if (typeof e !== 'object' || e === null) return false;
    const { code, details, message } = e as { code?: unknown; details?: unknown; message?: unknown };
    if (code === -32601 || code === -32004) return true;
    return [details, message].some((text) => typeof text === 'string' && METHOD_UNAVAILABLE.test(text));
  });
}

async function receiptsOneByOne(
  client: PublicClient,
  hashes: readonly Hex[],
  blockHash: Hex,
): Promise<TransactionReceipt[]> {
  const receipts = new Array<TransactionReceipt>(hashes.length);
  let next = 0;
  const worker = async () => {
    while (next < hashes.length) {
      const i = next++;
      const receipt = await client.getTransactionReceipt({ hash: hashes[i]! });
      if (receipt.blockHash !== blockHash) {
        throw new Error(
          `receipt of ${hashes[i]} is in block ${receipt.blockHash}, not ${blockHash}: the chain reorganised while reading`,
        );
      }
      receipts[i] = receipt;
    }
  };
  await Promise.all(Array.from({ length: Math.min(RECEIPT_CONCURRENCY, hashes.length) }, worker));
  return receipts;
}

async function blockReceipts(
  client: PublicClient,
  blockHash: Hex,
  hashes: readonly Hex[],
): Promise<TransactionReceipt[]> {
  if (hashes.length === 0) return [];
  if (!withoutBlockReceipts.has(client)) {
    try {
      const receipts = await client.getBlockReceipts({ blockHash });
      for (const receipt of receipts) {
        if (receipt.blockHash !== blockHash) {
          throw new Error(`eth_getBlockReceipts(${blockHash}) answered receipts of ${receipt.blockHash}`);
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
 * Reads one block with its transactions and receipts (`eth_getBlockReceipts` by block hash, or
 * one `eth_getTransactionReceipt` per transaction on nodes without it) and extracts its transfers.
 * Throws if the chain changes under the reads (receipts of another block).
 */
export async function fetchBlockActivity(client: PublicClient, number: bigint): Promise<EvmBlockActivity> {
  const block = await client.getBlock({ blockNumber: number, includeTransactions: true });
  if (block.hash === null || block.number === null) throw new Error(`block ${number} is still pending`);
  const receipts = await blockReceipts(
    client,
    block.hash,
    block.transactions.map((tx) => tx.hash),
  );
  return {
    number: block.number,
    hash: block.hash,
    parentHash: block.parentHash,
    timestamp: block.timestamp,
    transfers: extractTransfers(block, receipts),
  };
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
