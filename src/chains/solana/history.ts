/**
 * History of watched addresses on a Solana network, for a backfill, read as docs/backfill.md says:
 * each address's signatures and those of the token accounts it owns now (a wallet is not among a
 * transaction's keys when only its token account moves), `getTransaction` in `jsonParsed` (the
 * follower's encoding, so the same balances), and per slot with matches its block's hash, which the
 * dedupe key needs. Above 1,000 watched addresses every slot is read as the follower reads it.
 */

import { UpstreamUnavailableError } from '../../errors.js';
import type { Throttle } from '../../shared/throttle.js';
import { scanBlocks } from '../history-scan.js';
import type { SolanaCommitment } from '../networks.js';
import type { ChainBlock, HistoryScan, HistorySource, WatchedAddresses } from '../source.js';
import {
  MalformedSolanaTransaction,
  type SolanaActivity,
  type SolanaTransaction,
  solanaChanges,
  solanaTransactionFromJson,
} from './activity.js';
import { createSolanaRpc, SolanaRpcError } from './rpc.js';
import {
  createSolanaSource,
  LONG_TERM_STORAGE_SLOT_SKIPPED,
  SLOT_SKIPPED,
  solanaBlockHeader,
} from './source.js';

/** getSignaturesForAddress's largest page. */
const SIGNATURE_PAGE = 1_000;
/** Above this many watched addresses, reading the range's slots costs less than their histories. */
const SIGNATURES_MAX = 1_000;
/** Requests in flight at once. */
const IN_FLIGHT = 4;
/** Skipped slots walked over to find a block's time. */
const SKIPPED_RUN_MAX = 4_096;
/** Watched addresses read from the database at a time. */
const ADDRESS_PAGE = 200;
const TOKEN_PROGRAMS = [
  'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA',
  'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb',
];

export interface SolanaHistoryOptions {
  url: string;
  commitment?: SolanaCommitment;
  throttle: Throttle;
  chunk: number;
  timeoutMs?: number;
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const asNumber = (value: unknown) => (typeof value === 'bigint' ? Number(value) : value);

/** Runs `task` over the items, `IN_FLIGHT` at a time, results in the items' order. */
async function eachBounded<T, R>(items: readonly T[], task: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await task(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, items.length) }, worker));
  return results;
}

const addressesOf = (tx: SolanaTransaction) => solanaChanges(tx).map((c) => c.address);

/** What the parts of a history read the node through. */
interface SolanaHistoryNode {
  /** A JSON-RPC call, once the throttle lets it through: its result. */
  call(method: string, params: unknown[]): Promise<unknown>;
  /** The error for a node that answered amiss: what it did. */
  fail(what: string): UpstreamUnavailableError;
  commitment: SolanaCommitment;
}

/** The token accounts the address owns now (none when it is not a wallet). */
async function tokenAccounts(
  { call, fail, commitment }: SolanaHistoryNode,
  owner: string,
): Promise<string[]> {
  const found: string[] = [];
  for (const programId of TOKEN_PROGRAMS) {
    // No account data: only the accounts' addresses are wanted.
    const result = await call('getTokenAccountsByOwner', [
      owner,
      { programId },
      { encoding: 'base64', dataSlice: { offset: 0, length: 0 }, commitment },
    ]);
    const value = isObject(result) ? result.value : undefined;
    if (!Array.isArray(value)) throw fail(`answered getTokenAccountsByOwner ${owner} without a list`);
    for (const entry of value)
      if (isObject(entry) && typeof entry.pubkey === 'string') found.push(entry.pubkey);
  }
  return found;
}

/** Signatures of the address's successful transactions in slots [from, to], with their slots. */
async function signatures(
  { call, fail, commitment }: SolanaHistoryNode,
  address: string,
  from: number,
  to: number,
): Promise<Map<string, number>> {
  const found = new Map<string, number>();
  let before: string | undefined;
  for (;;) {
    const config: Json = { limit: SIGNATURE_PAGE, commitment };
    if (before) config.before = before;
    const page = await call('getSignaturesForAddress', [address, config]);
    if (!Array.isArray(page)) throw fail(`answered getSignaturesForAddress ${address} without a list`);
    let older = false;
    for (const entry of page) {
      const slot = asNumber(isObject(entry) ? entry.slot : undefined);
      const signature = isObject(entry) ? entry.signature : undefined;
      if (typeof slot !== 'number' || typeof signature !== 'string')
        throw fail(`answered getSignaturesForAddress ${address} with an entry without slot or signature`);
      if (slot < from) {
        older = true;
        break;
      }
      // A failed transaction moves nothing but its fee, which notifies nothing: not fetched.
      const err = (entry as Json).err;
      if (slot <= to && (err === null || err === undefined)) found.set(signature, slot);
    }
    if (older || page.length < SIGNATURE_PAGE) return found;
    before = (page[page.length - 1] as Json).signature as string;
  }
}

async function transaction(
  { call, fail, commitment }: SolanaHistoryNode,
  signature: string,
  slot: number,
): Promise<SolanaTransaction> {
  const result = await call('getTransaction', [
    signature,
    { encoding: 'jsonParsed', maxSupportedTransactionVersion: 0, commitment },
  ]);
  if (!isObject(result) || asNumber(result.slot) !== slot)
    throw fail(
      `answered getTransaction ${signature} with no transaction of slot ${slot}: the chain changed while reading`,
    );
  try {
    return solanaTransactionFromJson(result);
  } catch (err) {
    if (!(err instanceof MalformedSolanaTransaction)) throw err;
    throw fail(`answered getTransaction ${signature} with a transaction that does not parse: ${err.message}`);
  }
}

/** The hash of the block at a slot a transaction named (so it is not skipped). */
async function blockhash({ call, fail, commitment }: SolanaHistoryNode, slot: number): Promise<string> {
  let result: unknown;
  try {
    result = await call('getBlock', [
      slot,
      {
        encoding: 'jsonParsed',
        transactionDetails: 'none',
        rewards: false,
        maxSupportedTransactionVersion: 0,
        commitment,
      },
    ]);
  } catch (err) {
    if (
      err instanceof SolanaRpcError &&
      (err.code === SLOT_SKIPPED || err.code === LONG_TERM_STORAGE_SLOT_SKIPPED)
    )
      throw fail(`skips slot ${slot}, which holds a transaction it named: the chain changed while reading`);
    throw err;
  }
  if (!isObject(result)) throw fail(`answered getBlock ${slot} without a block`);
  try {
    return solanaBlockHeader(result).blockhash;
  } catch (err) {
    if (!(err instanceof MalformedSolanaTransaction)) throw err;
    throw fail(`answered getBlock ${slot} with a block that does not parse: ${err.message}`);
  }
}

/**
 * The range's transactions of the watched addresses and of the token accounts they own, found
 * through their signatures, in blocks by slot.
 */
async function bySignatures(
  node: SolanaHistoryNode,
  from: number,
  to: number,
  watched: WatchedAddresses,
): Promise<HistoryScan<SolanaActivity>> {
  const slotOf = new Map<string, number>();
  for await (const page of watched.pages(ADDRESS_PAGE)) {
    const owned = await eachBounded(page, (owner) => tokenAccounts(node, owner));
    const asked = [...new Set([...page, ...owned.flat()])];
    for (const found of await eachBounded(asked, (a) => signatures(node, a, from, to)))
      for (const [signature, slot] of found) slotOf.set(signature, slot);
  }
  const entries = [...slotOf.entries()];
  const txs = await eachBounded(entries, ([signature, slot]) => transaction(node, signature, slot));
  const bySlot = new Map<number, SolanaTransaction[]>();
  entries.forEach(([, slot], i) => {
    bySlot.set(slot, [...(bySlot.get(slot) ?? []), txs[i]!]);
  });
  const slots = [...bySlot.keys()].sort((a, b) => a - b);
  const hashes = await eachBounded(slots, (slot) => blockhash(node, slot));
  const found = await watched.among([...new Set(txs.flatMap(addressesOf))]);
  const blocks: ChainBlock<SolanaActivity>[] = slots.map((slot, i) => ({
    height: slot,
    hash: hashes[i]!,
    // Unlinked: a signature names its slot, not the parent, and nothing here needs it.
    parentHash: '',
    activity: bySlot.get(slot)!,
  }));
  return { blocks, watched: found };
}

export function solanaHistory(options: SolanaHistoryOptions): HistorySource<SolanaActivity> {
  const { throttle } = options;
  const commitment = options.commitment ?? 'confirmed';
  const rpc = createSolanaRpc(options);
  const source = createSolanaSource({ url: options.url, commitment, timeoutMs: options.timeoutMs });
  const fail = (what: string) => new UpstreamUnavailableError(`The Solana node at ${rpc.host} ${what}`);

  async function call(method: string, params: unknown[]): Promise<unknown> {
    await throttle.take();
    return (await rpc.call(method, params)).result;
  }
  const node: SolanaHistoryNode = { call, fail, commitment };

  const rate = `at most ${throttle.perSecond || 'unlimited'} requests/s`;
  return {
    chunk: options.chunk,
    describe:
      `each watched address's signatures (getSignaturesForAddress, 1,000 a page from the newest back to the range, ` +
      `and those of the token accounts it owns now: one it closed is not found), getTransaction for each ` +
      `successful one and getBlock (no transactions) per slot with matches for its hash; above ${SIGNATURES_MAX} ` +
      `addresses every slot of the range instead; ${rate}`,
    async tip() {
      await throttle.take();
      return (await source.tip()).height;
    },
    async timeOf(slot) {
      // A skipped slot has no time: the next real slot's is when it passed.
      for (let at = slot; at < slot + SKIPPED_RUN_MAX; at++) {
        try {
          const time = asNumber(await call('getBlockTime', [at]));
          return typeof time === 'number' ? time : undefined;
        } catch (err) {
          if (!(err instanceof SolanaRpcError)) throw err;
          if (err.code !== SLOT_SKIPPED && err.code !== LONG_TERM_STORAGE_SLOT_SKIPPED) return undefined;
        }
      }
      throw fail(`skipped every slot from ${slot} up ${SKIPPED_RUN_MAX} slots`);
    },
    scan(from, to, watched) {
      return watched.count > SIGNATURES_MAX
        ? scanBlocks({ source, throttle, addressesOf, where: rpc.host }, from, to, watched)
        : bySignatures(node, from, to, watched);
    },
  };
}
