/**
 * History of watched addresses on an EVM chain, for a backfill: token transfers through
 * `eth_getLogs` with the addresses in the topics, native transfers by scanning each block of the
 * range (no node indexes value transfers by address), every request through a throttle; and the
 * logs of a followed contract event (event-history.ts). `eth_getLogs` ranges the node refuses as
 * too large are halved until they pass (get-logs.ts).
 */
import { type Hex, type PublicClient, pad } from 'viem';
import type { Throttle } from '../../shared/throttle.js';
import type { ChainBlock, HistoryScan, HistorySource, UntracedBlock, WatchedAddresses } from '../source.js';
import {
  logTransfers,
  nativeTransfer,
  type RpcBlock,
  type RpcReceipt,
  type RpcTransaction,
  rpcTransfers,
  TRANSFER_BATCH_TOPIC,
  TRANSFER_SINGLE_TOPIC,
  TRANSFER_TOPIC,
} from './activity.js';
import { describeEventScan, type EventLogQuery, scanEventLogs } from './event-history.js';
import { getLogs, hex, type Request, type RpcHistoryLog, throttledRequest } from './get-logs.js';
import { isTraceGap, type TraceReader } from './trace-reader.js';
import type { InternalTransfer } from './traces.js';
import type { EvmBlockActivity, EvmTransfer } from './types.js';

/** Addresses per topic filter: nodes accept a few hundred alternatives per topic. */
const TOPIC_PAGE = 200;
/** Above this many watched addresses, a range's transfer logs are read whole and matched here. */
const FILTERED_LOGS_MAX = 1_000;
/** Blocks read at once while scanning for native transfers. */
const BLOCKS_IN_FLIGHT = 4;

const lower = (a: string) => a.toLowerCase();

export interface EvmHistoryOptions {
  client: PublicClient;
  throttle: Throttle;
  /** Blocks per scan. */
  chunk: number;
  /** Internal transfers from each block's traces, where the node has them. */
  traces?: TraceReader;
}

/** What a scan reads the node through. */
interface EvmHistoryNode {
  request: Request;
  throttle: Throttle;
  traces?: TraceReader;
}

/**
 * Transfer logs of the range touching watched addresses: the senders' and the recipients' topic
 * positions of Transfer and of TransferSingle/TransferBatch, a page of addresses at a time; for
 * very many addresses, every transfer log of the range (matched by the caller).
 */
async function transferLogs(
  request: Request,
  from: number,
  to: number,
  watched: WatchedAddresses,
): Promise<RpcHistoryLog[]> {
  const erc1155: Hex[] = [TRANSFER_SINGLE_TOPIC, TRANSFER_BATCH_TOPIC];
  const found: RpcHistoryLog[] = [];
  if (watched.count > FILTERED_LOGS_MAX) {
    found.push(...(await getLogs(request, from, to, { topics: [[TRANSFER_TOPIC, ...erc1155]] })));
  } else {
    for await (const page of watched.pages(TOPIC_PAGE)) {
      const topics = page.map((a) => pad(lower(a) as Hex, { size: 32 }));
      const answers = await Promise.all([
        getLogs(request, from, to, { topics: [TRANSFER_TOPIC, topics] }),
        getLogs(request, from, to, { topics: [TRANSFER_TOPIC, null, topics] }),
        getLogs(request, from, to, { topics: [erc1155, null, topics] }),
        getLogs(request, from, to, { topics: [erc1155, null, null, topics] }),
      ]);
      for (const logs of answers) found.push(...logs);
    }
  }
  // A transfer between two watched addresses is found by both queries: once is enough.
  const unique = new Map<string, RpcHistoryLog>();
  for (const log of found) if (!log.removed) unique.set(`${log.blockHash}:${log.logIndex}`, log);
  return [...unique.values()];
}

/** The range's blocks, and with traces each one's internal transfers per transaction. */
async function blocksOf(
  { request, throttle, traces }: EvmHistoryNode,
  from: number,
  to: number,
): Promise<{ blocks: RpcBlock[]; internal: (InternalTransfer[][] | undefined)[]; gaps: UntracedBlock[] }> {
  const blocks = new Array<RpcBlock>(to - from + 1);
  const internal = new Array<InternalTransfer[][] | undefined>(to - from + 1);
  const gaps: UntracedBlock[] = [];
  let next = from;
  const worker = async () => {
    while (next <= to) {
      const height = next++;
      if (traces) await throttle.take();
      const traced = traces?.read(BigInt(height));
      const block = await request<RpcBlock | null>('eth_getBlockByNumber', [hex(height), true]);
      if (!block || block.hash === null || block.number === null)
        throw new Error(`the node has no block ${height}`);
      blocks[height - from] = block;
      const outcome = await traced?.({
        hash: block.hash,
        number: BigInt(block.number),
        transactions: block.transactions,
      });
      if (isTraceGap(outcome)) gaps.push({ height, hash: block.hash, reason: outcome.gap });
      else internal[height - from] = outcome;
    }
  };
  await Promise.all(Array.from({ length: Math.min(BLOCKS_IN_FLIGHT, to - from + 1) }, worker));
  return { blocks, internal, gaps: gaps.sort((a, b) => a.height - b.height) };
}

async function receipt(request: Request, tx: RpcTransaction, blockHash: Hex): Promise<RpcReceipt> {
  const r = await request<RpcReceipt | null>('eth_getTransactionReceipt', [tx.hash]);
  if (!r || r.blockHash !== blockHash)
    throw new Error(
      `the receipt of ${tx.hash} is not in block ${blockHash}: the chain changed while reading`,
    );
  return r;
}

interface TokenTransfer {
  height: number;
  transfer: EvmTransfer;
}

/** Token transfers of the logs, each in the block the scan read at its height (else the chain moved). */
function tokenTransfersOf(logs: RpcHistoryLog[], blocks: RpcBlock[], from: number): TokenTransfer[] {
  const tokenTransfers: TokenTransfer[] = [];
  for (const log of logs) {
    const height = Number(log.blockNumber);
    if (blocks[height - from]?.hash !== log.blockHash)
      throw new Error(`log of block ${log.blockHash} at ${height}: the chain changed while reading`);
    const out: EvmTransfer[] = [];
    logTransfers(log, log.transactionHash, Number(log.transactionIndex), out);
    for (const transfer of out) tokenTransfers.push({ height, transfer });
  }
  return tokenTransfers;
}

interface ValuedTransaction {
  block: RpcBlock;
  tx: RpcTransaction;
  index: number;
}

/**
 * Native value: the transactions carrying some, whose sender or recipient may be watched, and the
 * receipts of the contract creations among them: a creation's recipient is known only from its
 * receipt.
 */
async function valuedTransactions(
  request: Request,
  blocks: RpcBlock[],
): Promise<{ valued: ValuedTransaction[]; creationReceipts: Map<Hex, RpcReceipt> }> {
  const valued: ValuedTransaction[] = [];
  for (const block of blocks) {
    block.transactions.forEach((tx, index) => {
      if (BigInt(tx.value) > 0n) valued.push({ block, tx, index });
    });
  }
  const creations = valued.filter((v) => !v.tx.to);
  const creationReceipts = new Map<Hex, RpcReceipt>();
  for (const c of creations) creationReceipts.set(c.tx.hash, await receipt(request, c.tx, c.block.hash!));
  return { valued, creationReceipts };
}

/** Every address the range's transfers move value from or to, to be asked whether it is watched. */
function candidatesOf(
  tokenTransfers: TokenTransfer[],
  valued: ValuedTransaction[],
  creationReceipts: Map<Hex, RpcReceipt>,
  internal: (InternalTransfer[][] | undefined)[],
): Set<string> {
  const candidates = new Set<string>();
  for (const { transfer } of tokenTransfers) candidates.add(transfer.from).add(transfer.to);
  for (const { tx } of valued) {
    candidates.add(lower(tx.from));
    const to = tx.to ?? creationReceipts.get(tx.hash)?.contractAddress;
    if (to) candidates.add(lower(to));
  }
  for (const perTx of internal) {
    for (const moved of perTx?.flat() ?? []) candidates.add(moved.from).add(moved.to);
  }
  return candidates;
}

/** Files a block's transfers under its height. */
type AddTransfers = (height: number, transfers: EvmTransfer[]) => void;

/** The native transfers of the range from or to a watched address. */
async function addNativeTransfers(
  request: Request,
  valued: ValuedTransaction[],
  creationReceipts: Map<Hex, RpcReceipt>,
  isWatched: Set<string>,
  add: AddTransfers,
): Promise<void> {
  for (const { block, tx, index } of valued) {
    const to = tx.to ?? creationReceipts.get(tx.hash)?.contractAddress;
    if (!isWatched.has(lower(tx.from)) && !(to && isWatched.has(lower(to)))) continue;
    // Only a successful transaction moves value: its receipt says so, as the follower's does.
    const r = creationReceipts.get(tx.hash) ?? (await receipt(request, tx, block.hash!));
    add(
      Number(block.number),
      rpcTransfers({ transactions: [tx] }, [{ ...r, transactionIndex: hex(index), logs: [] }]),
    );
  }
}

/** Internal transfers: a failed transaction's trace moved nothing (blockInternalTransfers). */
function addInternalTransfers(
  blocks: RpcBlock[],
  internal: (InternalTransfer[][] | undefined)[],
  isWatched: Set<string>,
  add: AddTransfers,
): void {
  internal.forEach((perTx, i) => {
    const block = blocks[i]!;
    perTx?.forEach((moved, txIndex) => {
      const txHash = block.transactions[txIndex]!.hash;
      add(
        Number(block.number),
        moved
          .filter((m) => isWatched.has(m.from) || isWatched.has(m.to))
          .map((m) => nativeTransfer(txHash, txIndex, m)),
      );
    });
  });
}

/** The blocks holding transfers, in height order, each as the follower would have read it. */
function assembleBlocks(
  blocks: RpcBlock[],
  byHeight: Map<number, EvmTransfer[]>,
): ChainBlock<EvmBlockActivity>[] {
  const result: ChainBlock<EvmBlockActivity>[] = [];
  for (const block of blocks) {
    const height = Number(block.number);
    const transfers = byHeight.get(height);
    if (!transfers) continue;
    // The follower's order: by transaction, its native transfer first, then by log and batch.
    transfers.sort(
      (a, b) =>
        a.txIndex - b.txIndex || (a.logIndex ?? -1) - (b.logIndex ?? -1) || a.batchIndex - b.batchIndex,
    );
    result.push({
      height,
      hash: block.hash!,
      parentHash: block.parentHash,
      activity: {
        number: BigInt(height),
        hash: block.hash!,
        parentHash: block.parentHash,
        timestamp: BigInt(block.timestamp),
        transfers,
        // Fees are notified by the follower only: a backfill replays what moved.
        payments: [],
        logs: [],
      },
    });
  }
  return result;
}

/** A range's transfers of watched addresses: token logs, native value and internal transfers. */
async function scanRange(
  node: EvmHistoryNode,
  from: number,
  to: number,
  watched: WatchedAddresses,
): Promise<HistoryScan<EvmBlockActivity>> {
  const [logs, { blocks, internal, gaps }] = await Promise.all([
    transferLogs(node.request, from, to, watched),
    blocksOf(node, from, to),
  ]);
  const byHeight = new Map<number, EvmTransfer[]>();
  const add: AddTransfers = (height, transfers) => {
    if (transfers.length === 0) return;
    const list = byHeight.get(height) ?? [];
    list.push(...transfers);
    byHeight.set(height, list);
  };

  const tokenTransfers = tokenTransfersOf(logs, blocks, from);
  const { valued, creationReceipts } = await valuedTransactions(node.request, blocks);

  const candidates = candidatesOf(tokenTransfers, valued, creationReceipts, internal);
  const found = await watched.among([...candidates]);
  const isWatched = new Set(found.map(lower));

  for (const { height, transfer } of tokenTransfers) {
    if (isWatched.has(transfer.from) || isWatched.has(transfer.to)) add(height, [transfer]);
  }
  await addNativeTransfers(node.request, valued, creationReceipts, isWatched, add);
  addInternalTransfers(blocks, internal, isWatched, add);

  return {
    blocks: assembleBlocks(blocks, byHeight),
    watched: found,
    ...(gaps.length > 0 ? { traceGaps: gaps } : {}),
  };
}

/** The history of an EVM network: its watched addresses' transfers, and followed contract events. */
export interface EvmHistorySource extends HistorySource<EvmBlockActivity> {
  /** A CONTRACT_LOG_EVENT subscription's logs (event-history.ts). */
  events: {
    describe: string;
    scan(from: number, to: number, query: EventLogQuery): Promise<HistoryScan<EvmBlockActivity>>;
  };
}

export function evmHistory({ client, throttle, chunk, traces }: EvmHistoryOptions): EvmHistorySource {
  const request = throttledRequest(client, throttle);
  const node: EvmHistoryNode = { request, throttle, traces };

  return {
    chunk,
    events: {
      describe: describeEventScan(throttle.perSecond),
      scan: (from, to, query) => scanEventLogs(request, from, to, query),
    },
    describe:
      `token transfers through eth_getLogs with the watched addresses in the topics; native transfers ` +
      `by reading every block of the range (one request per block)` +
      (traces
        ? ', and internal transfers from each block’s traces where the node has them (one more request per block)'
        : '') +
      `, at most ${throttle.perSecond || 'unlimited'} requests/s`,
    async tip() {
      return Number(await request<Hex>('eth_blockNumber', []));
    },
    async timeOf(height) {
      const block = await request<RpcBlock | null>('eth_getBlockByNumber', [hex(height), false]);
      return block ? Number(block.timestamp) : undefined;
    },
    scan(from, to, watched) {
      return scanRange(node, from, to, watched);
    },
  };
}
