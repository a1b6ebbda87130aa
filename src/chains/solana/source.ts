/**
 * The Solana family's block source (chains/source.ts), over JSON-RPC: height = slot, hash =
 * blockhash, parentHash = previousBlockhash, read at one commitment (`confirmed` by default,
 * `finalized` configurable): `getSlot` for the tip, `getBlock` in `jsonParsed` with `accounts`
 * transaction details (`none` for a hash alone), versioned transactions included, no rewards.
 * `accounts` details are each transaction's signatures and accounts (lookup-table ones included)
 * with the balance part of its meta: all the activity reads, without instructions and logs. On a
 * mainnet block that is 60% of the bytes of full details, half the parse and less garbage, which
 * is most of a follower's work at 2.5 slots a second (bench/README.md, issue 33).
 *
 * Skipped slots. Many slots have no block (the node answers -32007 "Slot N was skipped, or
 * missing due to ledger jump to recent snapshot", or -32009 "… missing in long-term storage").
 * The follower wants consecutive heights that link by hash, so a skipped slot is presented as an
 * empty block whose hash AND parentHash are both the hash of the last real block below it: it
 * links to whatever the follower processed before (that block, or a skipped slot carrying its
 * hash), and the next real block's previousBlockhash names that same hash, so it links too.
 * `hashAt` answers the same for a skipped slot, so walking back after a reorganisation compares
 * like with like: if the fork that replaced a block skips its slot (or fills a skipped one), the
 * hash at that height changes, and the follower walks back past it.
 *
 * A slot the node has not got yet (-32004 "Block not available for slot", or a null result) is
 * not in the chain yet: `block` answers undefined and `tip` reports the highest slot it has.
 *
 * A block is read whole or not at all: a 5xx, a timeout, an unreachable node, another JSON-RPC
 * error or an answer that does not parse throws, and the follower retries. Balances can exceed
 * 2^53 lamports (the supply is about 5.8e17), so a block is parsed with JSON.parse, which is fast,
 * and parsed again exactly when a number it reads was beyond 2^53 (InexactNumberError).
 */
import WebSocket from 'ws';
import { UpstreamUnavailableError } from '../../errors.js';
import type { SolanaCommitment } from '../networks.js';
import type { BlockSource, ChainBlock, ChainTip } from '../source.js';
import {
  InexactNumberError,
  MalformedSolanaTransaction,
  type SolanaActivity,
  solanaTransactionFromJson,
} from './activity.js';
import { createSolanaRpc, exactResult, type SolanaRpcAnswer, SolanaRpcError } from './rpc.js';

export interface SolanaSourceOptions {
  /** The JSON-RPC endpoint. */
  url: string;
  /** Where `slotSubscribe` announces new slots; without it the follower polls. */
  wsUrl?: string;
  /** Default 'confirmed'. */
  commitment?: SolanaCommitment;
  /** Per request, default 10 s. */
  timeoutMs?: number;
  /** The longest run of skipped slots walked down to find the last real block; default 4,096. */
  maxSkippedRun?: number;
}

/** The JSON-RPC error codes of a slot that has no block, and of one the node does not have yet. */
export const SLOT_SKIPPED = -32007;
export const LONG_TERM_STORAGE_SLOT_SKIPPED = -32009;
export const BLOCK_NOT_AVAILABLE = -32004;

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** What the node has at a slot. */
type SlotAnswer =
  | { kind: 'block'; result: Json; answer: SolanaRpcAnswer }
  | { kind: 'skipped' }
  | { kind: 'unavailable' };

function checkSlot(slot: number): void {
  if (!Number.isSafeInteger(slot) || slot < 0) throw new RangeError(`Not a Solana slot: ${slot}`);
}

/** A parsed `getBlock` result: its hashes and, with transaction details, its transactions. */
export interface SolanaBlockHeader {
  blockhash: string;
  previousBlockhash: string;
  parentSlot: number;
}

/** The header fields of a `getBlock` result; throws MalformedSolanaTransaction when absent. */
export function solanaBlockHeader(result: Json): SolanaBlockHeader {
  const { blockhash, previousBlockhash, parentSlot } = result;
  const slotNumber = typeof parentSlot === 'bigint' ? Number(parentSlot) : parentSlot;
  if (
    typeof blockhash !== 'string' ||
    typeof previousBlockhash !== 'string' ||
    typeof slotNumber !== 'number'
  )
    throw new MalformedSolanaTransaction('a block without blockhash, previousBlockhash or parentSlot');
  return { blockhash, previousBlockhash, parentSlot: slotNumber };
}

/** A `getBlock` result's transactions as activity (every one: failed ones notify nothing later). */
export function solanaActivityFromBlock(result: Json): SolanaActivity {
  const transactions = result.transactions ?? [];
  if (!Array.isArray(transactions)) throw new MalformedSolanaTransaction('transactions is not a list');
  return transactions.map(solanaTransactionFromJson);
}

export function createSolanaSource(options: SolanaSourceOptions): BlockSource<SolanaActivity> {
  const commitment = options.commitment ?? 'confirmed';
  const maxSkippedRun = options.maxSkippedRun ?? 4_096;
  const rpc = createSolanaRpc(options);
  const unexpected = (detail: string) =>
    new UpstreamUnavailableError(`The Solana node at ${rpc.host} ${detail}`);

  /** The slot's block (only its hashes unless `transactions`), or why there is none. */
  async function read(slot: number, transactions: boolean): Promise<SlotAnswer> {
    checkSlot(slot);
    const config = {
      encoding: 'jsonParsed',
      transactionDetails: transactions ? 'accounts' : 'none',
      maxSupportedTransactionVersion: 0,
      rewards: false,
      commitment,
    };
    let answer: SolanaRpcAnswer;
    try {
      answer = await rpc.call('getBlock', [slot, config], { plainJson: transactions });
    } catch (err) {
      if (!(err instanceof SolanaRpcError)) throw err;
      if (err.code === SLOT_SKIPPED || err.code === LONG_TERM_STORAGE_SLOT_SKIPPED)
        return { kind: 'skipped' };
      if (err.code === BLOCK_NOT_AVAILABLE) return { kind: 'unavailable' };
      throw err;
    }
    if (answer.result === null) return { kind: 'unavailable' };
    if (!isObject(answer.result)) throw unexpected(`answered getBlock ${slot} with something not a block`);
    return { kind: 'block', result: answer.result, answer };
  }

  /** The hash of the last real block at or below the slot; undefined when the node has not got the slot. */
  async function lastHashAtOrBelow(slot: number): Promise<string | undefined> {
    for (let at = slot; at >= 0 && at > slot - maxSkippedRun; at--) {
      const found = await read(at, false);
      if (found.kind === 'unavailable') {
        if (at === slot) return undefined;
        throw unexpected(`has no block at slot ${at}, below slot ${slot} it skipped`);
      }
      if (found.kind === 'block') return headerOf(found.result, at).blockhash;
    }
    throw unexpected(`skipped every slot from ${slot} down ${maxSkippedRun} slots`);
  }

  function headerOf(result: Json, slot: number): SolanaBlockHeader {
    try {
      const header = solanaBlockHeader(result);
      if (header.parentSlot >= slot) throw new MalformedSolanaTransaction(`parent slot ${header.parentSlot}`);
      return header;
    } catch (err) {
      if (!(err instanceof MalformedSolanaTransaction)) throw err;
      throw unexpected(`answered getBlock ${slot} with a block that does not parse: ${err.message}`);
    }
  }

  function parseBlock(slot: number, result: Json, answer: SolanaRpcAnswer): ChainBlock<SolanaActivity> {
    const header = headerOf(result, slot);
    let activity: SolanaActivity;
    try {
      try {
        activity = solanaActivityFromBlock(result);
      } catch (err) {
        if (!(err instanceof InexactNumberError)) throw err;
        // A balance beyond 2^53: read the same answer again, every integer exact.
        activity = solanaActivityFromBlock(exactResult(answer) as Json);
      }
    } catch (err) {
      if (!(err instanceof MalformedSolanaTransaction)) throw err;
      throw unexpected(`answered getBlock ${slot} with a block that does not parse: ${err.message}`);
    }
    return { height: slot, hash: header.blockhash, parentHash: header.previousBlockhash, activity };
  }

  async function block(slot: number): Promise<ChainBlock<SolanaActivity> | undefined> {
    const found = await read(slot, true);
    if (found.kind === 'unavailable') return undefined;
    if (found.kind === 'block') return parseBlock(slot, found.result, found.answer);
    const hash = await lastHashAtOrBelow(slot - 1);
    if (hash === undefined) throw unexpected(`has no block below slot ${slot}, which it skipped`);
    // Skipped: links to the last real block and is linked to by the next (see above).
    return { height: slot, hash, parentHash: hash, activity: [] };
  }

  async function currentSlot(): Promise<number> {
    const { result } = await rpc.call('getSlot', [{ commitment }]);
    const slot = typeof result === 'bigint' ? Number(result) : result;
    if (typeof slot !== 'number' || !Number.isSafeInteger(slot) || slot < 0)
      throw unexpected('answered getSlot with something not a slot');
    return slot;
  }

  async function tip(): Promise<ChainTip> {
    const slot = await currentSlot();
    // The slot the node reports may not be readable yet: the tip is the highest one that is.
    for (let height = slot; height >= 0 && height > slot - maxSkippedRun; height--) {
      const hash = await lastHashAtOrBelow(height);
      if (hash !== undefined) return { height, hash };
    }
    throw unexpected(`has no block at or below its slot ${slot}`);
  }

  return {
    tip,
    block,
    hashAt: lastHashAtOrBelow,
    ...(options.wsUrl ? { watchHeads: (onHead: () => void) => watchSlots(options.wsUrl!, onHead) } : {}),
  };
}

/** Between failed or closed subscriptions, doubling up to the longest: polling is the floor. */
const RESUBSCRIBE_MS = 1_000;
const RESUBSCRIBE_MAX_MS = 30_000;

/**
 * `slotSubscribe` as announcements: each slot notification calls `onHead` (the follower then
 * asks for the slot at its commitment, so a processed-only slot costs one getSlot). A closed or
 * failed socket calls `onHead` too, so the follower looks at once, and reconnects, waiting longer
 * each time. The returned function terminates the socket without waiting on the node.
 */
export function watchSlots(wsUrl: string, onHead: () => void): () => void {
  let stopped = false;
  let socket: WebSocket | undefined;
  let timer: NodeJS.Timeout | undefined;
  let retryMs = RESUBSCRIBE_MS;

  function connect(): void {
    if (stopped) return;
    const ws = new WebSocket(wsUrl);
    socket = ws;
    ws.on('open', () => {
      ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'slotSubscribe' }));
    });
    ws.on('message', (data) => {
      const message = parseMessage(data.toString());
      if (message?.method !== 'slotNotification') return;
      retryMs = RESUBSCRIBE_MS;
      onHead();
    });
    ws.on('error', () => {
      // 'close' follows and reconnects.
    });
    ws.on('close', () => {
      if (stopped || socket !== ws) return;
      onHead();
      timer = setTimeout(connect, retryMs);
      timer.unref();
      retryMs = Math.min(RESUBSCRIBE_MAX_MS, retryMs * 2);
    });
  }

  connect();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
    socket?.terminate();
  };
}

function parseMessage(text: string): Json | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}
