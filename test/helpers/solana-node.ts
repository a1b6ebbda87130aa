/**
 * A loopback Solana node of our own: a real HTTP server on 127.0.0.1 answering the JSON-RPC
 * methods the block source uses (`getSlot`, `getBlock` with `transactionDetails` full, accounts or
 * none and `rewards`, at `confirmed` or `finalized`), and a WebSocket endpoint on the same port for
 * `slotSubscribe`, over the slots it is given.
 *
 * `accounts` details are DERIVED from the held (full, jsonParsed) transactions as agave builds
 * them (UiAccountsList and its simple meta): `transaction` is `{signatures, accountKeys}`, each key
 * `{pubkey, writable, signer, source}` (`transaction` unless the held key says `lookupTable`);
 * `meta` keeps err, status, fee, the balances and token balances (and `rewards` when asked), and
 * drops instructions, logs, loaded addresses, return data and compute units; `version` is kept.
 * The shape is that of the solana.com example answer quoted in src/chains/solana/activity.test.ts.
 *
 * Slots are the recorded mainnet blocks (test/fixtures/chains/solana/blocks) or ASSEMBLED ones
 * (see that folder's README): real transactions of the recorded blocks in blocks of our own,
 * with made-up blockhashes; and skipped slots, answered as a real node does (-32007). A slot
 * above the tip is not available yet (-32004); one below the first held was cleaned up (-32001).
 *
 * For history (a backfill), derived from the held blocks' transactions, at `confirmed`:
 * - `getSignaturesForAddress`: the transactions naming the address among their accounts
 *   (lookup-table ones included), newest slot first and, within a slot, last transaction first
 *   (our choice), `before`/`until` exclusive, `limit` (default 1,000); `memo` is always null.
 * - `getTransaction` (`jsonParsed`): the block's entry with `slot`, `blockTime` and its
 *   `transactionIndex` in the block. Assembled
 *   blocks reuse recorded transactions, so one signature may be held in several slots: it is
 *   answered from the highest (a real node holds each once).
 * - `getTokenAccountsByOwner`: CONSTRUCTED from the token balances of the held transactions (the
 *   accounts whose recorded `owner` is the address), for the `programId` asked; a balance without
 *   `programId` (2021 answers) counts as the classic Token program's. `account` carries only
 *   what a zero-length `dataSlice` shows, with lamports and rentEpoch made up as 0.
 * - `getBlockTime`: the block's `blockTime`.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import { getBase58Decoder } from '@solana/kit';
import { stringify } from 'lossless-json';
import { type WebSocket, WebSocketServer } from 'ws';
import { solanaTransactionFromJson } from '../../src/chains/solana/activity.js';
import { listenOnLoopback, type RestartableNode } from './loopback-server.js';
import { type RecordedSlot, recordedBlock } from './solana-blocks.js';

type Json = Record<string, unknown>;

/** A slot as the node holds it: a block (a `getBlock` result with full details) or skipped. */
export type SolanaSlot = { slot: number; block: Json } | { slot: number; skipped: true };

/** The recorded block at its own slot. */
export const recordedSlot = (slot: RecordedSlot): SolanaSlot => ({ slot, block: recordedBlock(slot) });

export const skippedSlot = (slot: number): SolanaSlot => ({ slot, skipped: true });

/** The recorded transactions of a slot with these first signatures, in the order given. */
export function recordedTransactions(slot: RecordedSlot, signatures: string[]): Json[] {
  const all = recordedBlock(slot).transactions as Json[];
  return signatures.map((signature) => {
    const tx = all.find((t) => ((t.transaction as Json).signatures as string[])[0] === signature);
    if (!tx) throw new Error(`slot ${slot} has no transaction ${signature}`);
    return tx;
  });
}

/** A made-up blockhash (base58 of 32 bytes), the same for the same label. */
export function assembledHash(label: string): string {
  return getBase58Decoder().decode(createHash('sha256').update(`ledgerhook assembled ${label}`).digest());
}

export interface AssembleOptions {
  slot: number;
  parentSlot: number;
  previousBlockhash: string;
  transactions: Json[];
  /** Tells apart two blocks at one slot (a replaced block); default ''. */
  fork?: string;
}

/** An ASSEMBLED block: the given real transactions at a slot of our choosing, linked by hash. */
export function assembleBlock(options: AssembleOptions): SolanaSlot & { block: Json } {
  return {
    slot: options.slot,
    block: {
      blockHeight: options.slot - 11_000_000,
      blockTime: 1_638_825_228 + Math.floor((options.slot - 110_360_000) * 0.4),
      blockhash: assembledHash(`${options.slot} ${options.fork ?? ''}`),
      parentSlot: options.parentSlot,
      previousBlockhash: options.previousBlockhash,
      rewards: [],
      transactions: options.transactions,
    },
  };
}

export const blockhashOf = (slot: SolanaSlot): string =>
  'block' in slot ? (slot.block.blockhash as string) : '';

export interface SolanaNodeRequest {
  method: string;
  params: unknown[];
}

export interface SolanaNode extends RestartableNode {
  /** The JSON-RPC endpoint. */
  readonly url: string;
  /** `ws://` on the same port: slotSubscribe. */
  readonly wsUrl: string;
  readonly requests: SolanaNodeRequest[];
  /** Present these slots at `confirmed` (the last is the tip), replacing the ones held. */
  setSlots(slots: SolanaSlot[]): void;
  /** Adds slots after the tip and announces each to slot subscribers. */
  addSlots(...slots: SolanaSlot[]): void;
  /** Another block (or a skip) at a slot already held: the node switched forks at `confirmed`. */
  replace(slot: SolanaSlot): void;
  /** The highest slot served at `finalized` (default: none, so -1). */
  setFinalized(slot: number): void;
  /** The next `count` HTTP requests answer `status` (default 500). */
  failNext(count: number, status?: number): void;
  /** Open slotSubscribe subscriptions. */
  subscribers(): number;
}

/** A held transaction as `transactionDetails: "accounts"` shows it (see the top of this file). */
function accountsEntry(entry: Json, rewards: boolean): Json {
  const transaction = entry.transaction as Json;
  const keys = (transaction.message as Json).accountKeys as Json[];
  const meta = entry.meta as Json | null;
  return {
    transaction: {
      signatures: transaction.signatures,
      accountKeys: keys.map((key) => ({
        pubkey: key.pubkey,
        writable: key.writable,
        signer: key.signer,
        source: key.source ?? 'transaction',
      })),
    },
    meta: meta && {
      err: meta.err ?? null,
      status: meta.status,
      fee: meta.fee,
      preBalances: meta.preBalances,
      postBalances: meta.postBalances,
      preTokenBalances: meta.preTokenBalances ?? null,
      postTokenBalances: meta.postTokenBalances ?? null,
      ...(rewards ? { rewards: meta.rewards ?? null } : {}),
    },
    ...(entry.version === undefined ? {} : { version: entry.version }),
  };
}

interface RpcError {
  code: number;
  message: string;
}

const rpcError = (code: number, message: string): RpcError => ({ code, message });

export async function startSolanaNode(): Promise<SolanaNode> {
  const requests: SolanaNodeRequest[] = [];
  let slots = new Map<number, SolanaSlot>();
  let tip = 0;
  let first = 0;
  let finalized = -1;
  let failures = { count: 0, status: 500 };
  /** Per block and options, its answer without `transactions`. */
  const serialized = new WeakMap<Json, Map<string, string>>();
  /**
   * Per list of transactions, its text. Assembled blocks may share one list (a stream of blocks
   * reusing recorded transactions): it is serialised once, and an answer holds no text of its own
   * once sent, so a node serving thousands of such blocks keeps a few megabytes, not gigabytes.
   */
  const transactionTexts = new WeakMap<object, Map<string, string>>();
  const subscriptions = new Set<WebSocket>();
  let nextSubscription = 1;

  /**
   * A block as `getBlock` answers it for these options: the rest serialised once per block and
   * options, the transactions once per list, joined (as the last key) for each answer.
   */
  function blockText(block: Json, details: string, rewards: boolean): string {
    const key = String(rewards);
    let forBlock = serialized.get(block);
    if (!forBlock) {
      forBlock = new Map();
      serialized.set(block, forBlock);
    }
    let text = forBlock.get(key);
    if (text === undefined) {
      const { transactions: _, rewards: blockRewards, ...header } = block;
      const shown: Json = { ...header };
      if (rewards) shown.rewards = blockRewards;
      text = stringify(shown) ?? 'null';
      forBlock.set(key, text);
    }
    const transactions = block.transactions as Json[] | undefined;
    if ((details !== 'full' && details !== 'accounts') || transactions === undefined) return text;
    let forList = transactionTexts.get(transactions);
    if (!forList) {
      forList = new Map();
      transactionTexts.set(transactions, forList);
    }
    const listKey = `${details} ${rewards}`;
    let list = forList.get(listKey);
    if (list === undefined) {
      const shown = details === 'full' ? transactions : transactions.map((t) => accountsEntry(t, rewards));
      list = stringify(shown) ?? 'null';
      forList.set(listKey, list);
    }
    return `${text === '{}' ? '{' : `${text.slice(0, -1)},`}"transactions":${list}}`;
  }

  function getBlock(params: unknown[]): { result?: string; error?: RpcError } {
    const slot = Number(params[0]);
    const config = (params[1] ?? {}) as Json;
    const highest = config.commitment === 'finalized' ? Math.min(finalized, tip) : tip;
    if (!Number.isSafeInteger(slot)) return { error: rpcError(-32602, 'Invalid params: invalid type') };
    if (slot < first)
      return {
        error: rpcError(
          -32001,
          `Block ${slot} cleaned up, does not exist on node. First available block: ${first}`,
        ),
      };
    const held = slots.get(slot);
    if (slot > highest || !held) return { error: rpcError(-32004, `Block not available for slot ${slot}`) };
    if (!('block' in held))
      return {
        error: rpcError(-32007, `Slot ${slot} was skipped, or missing due to ledger jump to recent snapshot`),
      };
    const details = typeof config.transactionDetails === 'string' ? config.transactionDetails : 'full';
    return { result: blockText(held.block, details, config.rewards !== false) };
  }

  const CLASSIC_TOKEN = 'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA';
  /** Each held transaction's accounts, parsed once. */
  const accountsCache = new WeakMap<Json, string[]>();
  const accountsOf = (entry: Json): string[] => {
    let accounts = accountsCache.get(entry);
    if (!accounts) {
      accounts = solanaTransactionFromJson(entry).accounts;
      accountsCache.set(entry, accounts);
    }
    return accounts;
  };
  const signatureOf = (entry: Json) => ((entry.transaction as Json).signatures as string[])[0]!;

  /** Held blocks at `confirmed`, newest first, with their transactions last first. */
  function* newestFirst(): Generator<{ slot: number; block: Json; entry: Json; index: number }> {
    for (const slot of [...slots.keys()].sort((a, b) => b - a)) {
      const held = slots.get(slot)!;
      if (slot > tip || !('block' in held)) continue;
      const entries = (held.block.transactions as Json[]) ?? [];
      for (let i = entries.length - 1; i >= 0; i--)
        yield { slot, block: held.block, entry: entries[i]!, index: i };
    }
  }

  function getSignaturesForAddress(params: unknown[]): { result?: string; error?: RpcError } {
    const address = String(params[0]);
    const config = (params[1] ?? {}) as Json;
    const limit = Math.min(Number(config.limit ?? 1000), 1000);
    const found: Json[] = [];
    let started = config.before === undefined;
    for (const { slot, block, entry } of newestFirst()) {
      const signature = signatureOf(entry);
      if (!started) {
        started = signature === config.before;
        continue;
      }
      if (signature === config.until || found.length >= limit) break;
      if (!accountsOf(entry).includes(address)) continue;
      const err = (entry.meta as Json).err ?? null;
      found.push({
        signature,
        slot,
        err,
        memo: null,
        blockTime: block.blockTime,
        confirmationStatus: 'confirmed',
      });
    }
    return { result: stringify(found) ?? '[]' };
  }

  function getTransaction(params: unknown[]): { result?: string; error?: RpcError } {
    for (const { slot, block, entry, index } of newestFirst()) {
      if (signatureOf(entry) === params[0])
        return {
          result:
            stringify({ slot, blockTime: block.blockTime, transactionIndex: index, ...entry }) ?? 'null',
        };
    }
    return { result: 'null' };
  }

  function getTokenAccountsByOwner(params: unknown[]): { result?: string; error?: RpcError } {
    const owner = String(params[0]);
    const programId = String(((params[1] ?? {}) as Json).programId);
    const accounts = new Set<string>();
    for (const { entry } of newestFirst()) {
      const meta = entry.meta as Json;
      const keys = accountsOf(entry);
      for (const balance of [
        ...((meta.preTokenBalances as Json[]) ?? []),
        ...((meta.postTokenBalances as Json[]) ?? []),
      ]) {
        if (balance.owner === owner && (balance.programId ?? CLASSIC_TOKEN) === programId)
          accounts.add(keys[Number(balance.accountIndex)]!);
      }
    }
    const value = [...accounts].map((pubkey) => ({
      pubkey,
      account: {
        data: ['', 'base64'],
        executable: false,
        lamports: 0,
        owner: programId,
        rentEpoch: 0,
        space: 0,
      },
    }));
    return { result: stringify({ context: { apiVersion: '2.0.0', slot: tip }, value }) ?? 'null' };
  }

  function answer(method: string, params: unknown[]): { result?: string; error?: RpcError } {
    if (method === 'getSignaturesForAddress') return getSignaturesForAddress(params);
    if (method === 'getTransaction') return getTransaction(params);
    if (method === 'getTokenAccountsByOwner') return getTokenAccountsByOwner(params);
    if (method === 'getBlockTime') {
      const found = getBlock([params[0], { transactionDetails: 'none', rewards: false }]);
      if (found.error) return found;
      return { result: String((JSON.parse(found.result!) as Json).blockTime) };
    }
    if (method === 'getSlot') {
      const config = (params[0] ?? {}) as Json;
      // A real node answers getSlot at `finalized` when no commitment is given.
      return { result: String(config.commitment === 'confirmed' ? tip : Math.max(finalized, 0)) };
    }
    if (method === 'getBlock') return getBlock(params);
    return { error: rpcError(-32601, 'Method not found') };
  }

  function reply(res: http.ServerResponse, body: string): void {
    let parsed: Json;
    try {
      parsed = JSON.parse(body) as Json;
    } catch {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"},"id":null}');
      return;
    }
    const method = String(parsed.method);
    const params = Array.isArray(parsed.params) ? parsed.params : [];
    requests.push({ method, params });
    if (failures.count > 0) {
      failures = { ...failures, count: failures.count - 1 };
      res.writeHead(failures.status, { 'content-type': 'text/plain' });
      res.end('injected failure');
      return;
    }
    const { result, error } = answer(method, params);
    const id = JSON.stringify(parsed.id ?? null);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      error
        ? `{"jsonrpc":"2.0","error":${JSON.stringify(error)},"id":${id}}`
        : `{"jsonrpc":"2.0","result":${result},"id":${id}}`,
    );
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => reply(res, Buffer.concat(chunks).toString('utf8')));
  });
  server.keepAliveTimeout = 1000;

  const sockets = new WebSocketServer({ server });
  sockets.on('connection', (ws) => {
    ws.on('message', (data) => {
      const message = JSON.parse(data.toString()) as Json;
      if (message.method !== 'slotSubscribe') return;
      const id = nextSubscription++;
      subscriptions.add(ws);
      ws.send(JSON.stringify({ jsonrpc: '2.0', result: id, id: message.id }));
      ws.on('close', () => subscriptions.delete(ws));
    });
  });

  /** A slotNotification to every subscriber, as a node sends one per slot it processes. */
  function announce(slot: number): void {
    for (const ws of subscriptions) {
      const result = { parent: slot - 1, root: Math.max(finalized, 0), slot };
      ws.send(
        JSON.stringify({ jsonrpc: '2.0', method: 'slotNotification', params: { result, subscription: 1 } }),
      );
    }
  }

  const { port, start, stop } = await listenOnLoopback(server, () => {
    for (const ws of sockets.clients) ws.terminate();
    subscriptions.clear();
  });

  return {
    url: `http://127.0.0.1:${port}`,
    wsUrl: `ws://127.0.0.1:${port}`,
    requests,
    setSlots(next) {
      slots = new Map(next.map((s) => [s.slot, s]));
      tip = next.length > 0 ? next[next.length - 1]!.slot : 0;
      first = next.length > 0 ? next[0]!.slot : 0;
    },
    addSlots(...added) {
      for (const s of added) {
        slots.set(s.slot, s);
        tip = Math.max(tip, s.slot);
        announce(s.slot);
      }
    },
    replace(slot) {
      slots.set(slot.slot, slot);
      announce(tip);
    },
    setFinalized(slot) {
      finalized = slot;
    },
    failNext(count, status = 500) {
      failures = { count, status };
    },
    subscribers: () => subscriptions.size,
    stop,
    start,
    async close() {
      await stop();
      await new Promise<void>((resolve) => sockets.close(() => resolve()));
    },
  };
}
