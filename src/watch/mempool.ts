/**
 * The mempool of one EVM network: pending transactions that move value from or to a watched
 * address are notified with `mempool: true` and no `blockNumber`; the follower notifies them again
 * once they are in a block.
 *
 * Where pending transactions come from. Nodes offer two ways over HTTP, and neither works
 * everywhere:
 * - `eth_newPendingTransactionFilter` + `eth_getFilterChanges` (then `eth_getTransactionByHash`
 *   per hash): every transaction that enters the node's pool, whatever its fee. Geth, Nethermind,
 *   Erigon, Reth and anvil serve it. The filter lives in one node, so behind a load balancer (most
 *   public endpoints) it is soon "not found".
 * - `eth_getBlockByNumber("pending", true)`: one call, full transactions, but only those the node
 *   would put in its next block; anvil and Geth build one, while many providers answer the latest
 *   block instead (recognised here by its number, and never taken for pending transactions).
 * So the filter is used first; a node without it, or one that keeps losing it, is polled for its
 * pending block instead. Each new filter also takes in the pending block once, so a transaction
 * that entered the pool before the filter existed (at start, after a lost filter) is not missed.
 *
 * Only top-level value is visible before execution: native value (a contract creation's to the
 * address the contract will have), and ERC-20 `transfer` / `transferFrom` calldata sent straight
 * to the token. Whether the transaction will succeed is not
 * known yet; a pending transaction that is dropped or replaced stays notified once (its
 * replacement, another hash, is notified as well) and is never withdrawn.
 */
import type { Logger } from 'pino';
import {
  decodeFunctionData,
  encodeFunctionData,
  getAddress,
  getContractAddress,
  type Hex,
  type PublicClient,
  parseAbi,
  TransactionNotFoundError,
} from 'viem';
import { view } from '../chains/evm/activity.js';
import type { EvmTransfer, TokenInfo } from '../chains/evm/types.js';
import type { Network } from '../chains/networks.js';
import { isMethodUnavailable } from '../chains/node-errors.js';
import { enqueueNotifications, type NewNotification, newNotificationId } from '../notify/outbox.js';
import { createSleeper } from '../shared/sleeper.js';
import type { Db } from '../store/db.js';
import type { AddressIndex } from './address-index.js';
import { buildEvmNotification } from './evm-notifications.js';
import { describeWatchError, runPolling } from './polling.js';

/** The parts of a pending transaction that are read (a viem `Transaction` has them). */
export interface PendingTransaction {
  hash: Hex;
  from: Hex;
  to: Hex | null;
  value: bigint;
  input: Hex;
  /** The sender's nonce: with the sender, it fixes the address a contract creation will have. */
  nonce: number;
}

/** A transfer a pending transaction would make, and its place in the transaction. */
export interface PendingTransfer {
  /** 0: the native value; 1: the ERC-20 transfer its calldata asks for. Part of the dedupe key. */
  index: 0 | 1;
  transfer: EvmTransfer;
}

const ERC20_CALLS = parseAbi([
  'function transfer(address to, uint256 value) returns (bool)',
  'function transferFrom(address from, address to, uint256 value) returns (bool)',
]);
const TRANSFER_SELECTOR = '0xa9059cbb';
const TRANSFER_FROM_SELECTOR = '0x23b872dd';

const ERC165 = parseAbi(['function supportsInterface(bytes4 id) view returns (bool)']);
/** ERC-721's interface id: its `transferFrom(address,address,uint256)` has ERC-20's selector. */
const SUPPORTS_ERC721 = encodeFunctionData({
  abi: ERC165,
  functionName: 'supportsInterface',
  args: ['0x80ac58cd'],
});

/** The ERC-20 transfer `input` asks for, if it is `transfer` or `transferFrom` calldata. */
function tokenCall(sender: Hex, input: Hex): { from: Hex; to: Hex; value: bigint } | undefined {
  const selector = input.slice(0, 10).toLowerCase();
  if (selector !== TRANSFER_SELECTOR && selector !== TRANSFER_FROM_SELECTOR) return undefined;
  try {
    const call = decodeFunctionData({ abi: ERC20_CALLS, data: input });
    if (call.functionName === 'transfer') {
      const [to, value] = call.args;
      return { from: sender, to: getAddress(to), value };
    }
    const [from, to, value] = call.args;
    return { from: getAddress(from), to: getAddress(to), value };
  } catch {
    return undefined; // truncated or malformed calldata: the call would revert
  }
}

/**
 * What a pending transaction would move: its native value (if any) to its recipient, and the
 * ERC-20 transfer its calldata asks of the token it calls (`transfer`: from the sender;
 * `transferFrom`: from the first argument, whoever the spender). A contract creation's recipient
 * is the address the contract will have (CREATE: from the sender and its nonce), the one its
 * receipt names once mined; its input is init code, never a token call. Addresses are EIP-55
 * checksummed.
 */
export function pendingTransfers(tx: PendingTransaction): PendingTransfer[] {
  const sender = getAddress(tx.from);
  const recipient =
    tx.to === null ? getContractAddress({ from: sender, nonce: BigInt(tx.nonce) }) : getAddress(tx.to);
  const base = { txHash: tx.hash, txIndex: 0, logIndex: null, batchIndex: 0, tokenId: null };
  const transfers: PendingTransfer[] = [];
  if (tx.value > 0n) {
    transfers.push({
      index: 0,
      transfer: { ...base, kind: 'native', token: null, from: sender, to: recipient, value: tx.value },
    });
  }
  if (tx.to === null) return transfers;
  const call = tokenCall(sender, tx.input);
  if (call) transfers.push({ index: 1, transfer: { ...base, kind: 'erc20', token: recipient, ...call } });
  return transfers;
}

export interface MempoolStatus {
  network: string;
  /** Where pending transactions come from; null until the first poll. */
  source: 'filter' | 'pending-block' | null;
  /** False while no subscription of the network wants mempool notifications (nothing is polled). */
  active: boolean;
  healthy: boolean;
  lastError: string | null;
  /** Polls that failed since the process started. */
  errors: number;
}

export interface EvmMempoolWatcherDeps {
  db: Db;
  network: Network;
  client: PublicClient;
  index: AddressIndex;
  tokens: { get(token: Hex): Promise<TokenInfo> };
  logger: Logger;
  pollIntervalMs: number;
  /** False while another process follows this network (a standby): it watches the mempool too. */
  isFollowing?: () => boolean;
  /** Longest wait between retries while the node is unreachable. */
  maxBackoffMs?: number;
}

/** Transaction hashes remembered as handled, so a transaction still pending is not read again. */
const SEEN_LIMIT = 50_000;
/** Pending transactions waiting to be read or notified (a node failing mid-way leaves some). */
const BACKLOG_LIMIT = 20_000;
/** Token contracts remembered as ERC-20 or not. */
const TOKEN_KINDS_LIMIT = 10_000;
/** A filter lost this many times in a row: the endpoint balances over several nodes. */
const LOST_FILTER_LIMIT = 3;
const FETCH_CONCURRENCY = 8;

const FILTER_LOST = /filter.{0,80}(not found|does not exist|doesn't exist|expired|unknown)|unknown filter/i;

function isFilterLost(err: unknown): boolean {
  return FILTER_LOST.test(err instanceof Error ? err.message : String(err));
}

/** A bounded set: the oldest entries go first once it is full. */
function boundedSet<T>(limit: number) {
  const entries = new Set<T>();
  return {
    has: (value: T) => entries.has(value),
    add(value: T): void {
      entries.delete(value);
      entries.add(value);
      if (entries.size > limit) entries.delete(entries.values().next().value as T);
    },
  };
}

/** Polls one EVM network's mempool while at least one of its subscriptions asks for mempool notifications. */
export function createEvmMempoolWatcher(deps: EvmMempoolWatcherDeps) {
  const { db, network, client, index } = deps;
  const log = deps.logger.child({ component: 'mempool', network: network.name });
  const maxBackoffMs = deps.maxBackoffMs ?? 30_000;
  const status: MempoolStatus = {
    network: network.name,
    source: null,
    active: false,
    healthy: false,
    lastError: null,
    errors: 0,
  };
  let source: 'filter' | 'pending-block' = 'filter';
  let filterId: Hex | undefined;
  let lostInARow = 0;
  const seen = boundedSet<Hex>(SEEN_LIMIT);
  /** Hash → the transaction when already known (pending block), null when it is still to be read. */
  const backlog = new Map<Hex, PendingTransaction | null>();
  const tokenKinds = new Map<string, Promise<boolean>>();
  let running = false;
  let loopDone: Promise<void> | undefined;

  const sleeper = createSleeper();
  const { wake } = sleeper;

  function enqueue(hash: Hex, tx: PendingTransaction | null): void {
    // Known already, or waiting with its transaction: nothing to add.
    if (seen.has(hash) || backlog.get(hash)) return;
    backlog.set(hash, tx);
    if (backlog.size > BACKLOG_LIMIT) {
      backlog.delete(backlog.keys().next().value as Hex);
      log.warn('mempool backlog full; the oldest pending transaction is skipped');
    }
  }

  /**
   * The pending block's transactions, or undefined when the node answers a mined block instead
   * (many providers alias "pending" to "latest"): those are not pending, the follower has them.
   */
  async function pendingBlock(): Promise<PendingTransaction[] | undefined> {
    const latest = await client.getBlockNumber();
    const block = await client.getBlock({ blockTag: 'pending', includeTransactions: true });
    if (block.number !== null && block.number <= latest) return undefined;
    return block.transactions;
  }

  /** Takes in what entered the pool before a new filter existed; best effort (the filter works without). */
  async function sweepPendingBlock(): Promise<void> {
    try {
      for (const tx of (await pendingBlock()) ?? []) enqueue(tx.hash, tx);
    } catch (err) {
      log.debug({ err: (err as Error).message.split('\n')[0] }, 'no pending block to sweep');
    }
  }

  function usePendingBlock(reason: string): void {
    source = 'pending-block';
    filterId = undefined;
    log.info({ reason }, 'polling the pending block for pending transactions');
  }

  async function pollFilter(): Promise<void> {
    let id: Hex;
    if (filterId !== undefined) id = filterId;
    else {
      try {
        id = await client.request({ method: 'eth_newPendingTransactionFilter' });
      } catch (err) {
        if (!isMethodUnavailable(err)) throw err;
        usePendingBlock('the node has no pending-transaction filters');
        return pollPendingBlock();
      }
      filterId = id;
      await sweepPendingBlock();
    }
    let hashes: Hex[];
    try {
      hashes = (await client.request({ method: 'eth_getFilterChanges', params: [id] })) as Hex[];
    } catch (err) {
      if (!isFilterLost(err)) throw err;
      filterId = undefined;
      if (++lostInARow >= LOST_FILTER_LIMIT) usePendingBlock('the node keeps losing the filter');
      return;
    }
    lostInARow = 0;
    for (const hash of hashes) if (typeof hash === 'string') enqueue(hash, null);
  }

  async function pollPendingBlock(): Promise<void> {
    const txs = await pendingBlock();
    if (txs === undefined) {
      throw new Error(
        'the node shows no pending transactions: no lasting pending-transaction filter, and its "pending" block is a mined one',
      );
    }
    for (const tx of txs) enqueue(tx.hash, tx);
  }

  /** A transaction the filter reported, if it is still pending (a mined one is the follower's). */
  async function readPending(hash: Hex): Promise<PendingTransaction | undefined> {
    try {
      const tx = await client.getTransaction({ hash });
      return tx.blockNumber === null ? tx : undefined;
    } catch (err) {
      if (err instanceof TransactionNotFoundError) return undefined; // dropped, or not on this node
      throw err;
    }
  }

  /**
   * Whether `token` is a fungible token: a contract that does not claim ERC-721 (whose
   * `transferFrom` calldata looks like ERC-20's). Remembered; a node failure is not.
   */
  function isFungible(token: Hex): Promise<boolean> {
    const key = token.toLowerCase();
    let kind = tokenKinds.get(key);
    if (!kind) {
      kind = Promise.all([client.getCode({ address: token }), view(client, token, SUPPORTS_ERC721)]).then(
        ([code, erc721]) =>
          code !== undefined && code !== '0x' && !(erc721.length >= 66 && BigInt(erc721.slice(0, 66)) === 1n),
      );
      tokenKinds.set(key, kind);
      if (tokenKinds.size > TOKEN_KINDS_LIMIT) tokenKinds.delete(tokenKinds.keys().next().value as string);
      kind.catch(() => {
        if (tokenKinds.get(key) === kind) tokenKinds.delete(key);
      });
    }
    return kind;
  }

  async function notificationsOf(tx: PendingTransaction): Promise<NewNotification[]> {
    const items: NewNotification[] = [];
    for (const { index: position, transfer } of pendingTransfers(tx)) {
      const watchers = [
        ...index.lookup(network.name, transfer.from),
        ...index.lookup(network.name, transfer.to),
      ].filter((s) => s.mempool);
      if (watchers.length === 0) continue;
      let decimals: number | null = 0;
      if (transfer.kind === 'erc20' && transfer.token) {
        if (!(await isFungible(transfer.token))) continue;
        decimals = (await deps.tokens.get(transfer.token)).decimals;
      }
      const notified = new Set<string>();
      for (const subscription of watchers) {
        if (notified.has(subscription.id)) continue; // a transfer to oneself is one notification
        notified.add(subscription.id);
        const id = newNotificationId();
        const body = buildEvmNotification({
          id,
          network,
          transfer,
          subscription,
          blockNumber: undefined,
          decimals,
          confirmations: 0,
          mempool: true,
        });
        items.push({
          id,
          accountId: subscription.accountId,
          subscriptionId: subscription.id,
          eventType: 'address.transaction.pending',
          body: JSON.stringify(body),
          // The same pending transaction seen again (another poll, a restart) inserts nothing.
          dedupeKey: `mempool:${tx.hash}:${position}`,
          chain: network.name,
        });
      }
    }
    return items;
  }

  /** Reads and matches the backlog; what fails stays in it for the next poll. */
  async function drain(): Promise<void> {
    const work = [...backlog];
    const items: NewNotification[] = [];
    const handled: Hex[] = [];
    let failure: unknown;
    let next = 0;
    const worker = async () => {
      while (next < work.length && running) {
        const [hash, known] = work[next++]!;
        try {
          const tx = known ?? (await readPending(hash));
          if (tx) items.push(...(await notificationsOf(tx)));
          handled.push(hash);
        } catch (err) {
          failure ??= err;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(FETCH_CONCURRENCY, work.length) }, worker));
    if (items.length > 0) {
      await db.transaction((tx) => enqueueNotifications(tx, items));
      log.debug({ notifications: items.length }, 'pending transactions notified');
    }
    for (const hash of handled) {
      backlog.delete(hash);
      seen.add(hash);
    }
    if (failure !== undefined) throw failure;
  }

  async function forgetFilter(): Promise<void> {
    const id = filterId;
    filterId = undefined;
    if (id === undefined) return;
    try {
      await client.request({ method: 'eth_uninstallFilter', params: [id] });
    } catch {
      // it expires on its own
    }
  }

  async function poll(): Promise<void> {
    status.active = index.watchesMempool(network.name) && (deps.isFollowing?.() ?? true);
    if (!status.active) {
      backlog.clear();
      await forgetFilter();
      return;
    }
    if (source === 'filter') await pollFilter();
    else await pollPendingBlock();
    status.source = source;
    await drain();
  }

  function loop(): Promise<void> {
    return runPolling({
      intervalMs: deps.pollIntervalMs,
      maxBackoffMs,
      sleeper,
      isRunning: () => running,
      status,
      round: async () => {
        await poll();
        return undefined;
      },
      describe: (err) => describeWatchError(network, err),
      onError: (reason, retryInMs, err) =>
        log.warn({ reason, err, retryInMs }, 'mempool unavailable; retrying'),
    });
  }

  return {
    network: network.name,
    status: (): MempoolStatus => ({ ...status }),
    start(): void {
      if (running) return;
      running = true;
      loopDone = loop();
    },
    async stop(): Promise<void> {
      running = false;
      wake();
      await loopDone;
      await forgetFilter();
    },
  };
}

export type EvmMempoolWatcher = ReturnType<typeof createEvmMempoolWatcher>;
