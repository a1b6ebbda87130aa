import type { WatchedSubscription } from '../../subscriptions/events.js';
import { grown, type KeyTable, nextCapacity } from './key-table.js';
import { addressText, type KeyScratch } from './watch-keys.js';

/**
 * The watches of the watch tables (watch-tables.ts): an address entry of a network's table and a
 * subscription, linked in both of their lists, all in typed arrays indexed by watch. A
 * subscription's list is doubly linked, so one watch of a million is removed without walking the
 * others; an address's list keeps its subscriptions in the order they came.
 */

export const NONE = -1;

export interface NetworkTable {
  name: string;
  ref: number;
  evm: boolean;
  addresses: KeyTable;
  /** Per address entry, its first watch (NONE when being added). */
  firstWatch: Int32Array;
  mempoolSubscriptions: number;
  /** Subscriptions that want the fees their addresses pay (EVM `attr.fees`). */
  feesSubscriptions: number;
}

/**
 * @param key the tables' key scratch: `watchKey` and `unwatchKey` take the address its bytes hold.
 * @param watched what a lookup returns for a watch of `subscription`, its address as kept.
 */
export function createWatchLists(
  key: KeyScratch,
  watched: (subscription: number, table: NetworkTable, address: string) => WatchedSubscription,
) {
  /** Per subscription entry, its first watch; grown with the subscriptions (`growSubscriptions`). */
  let subFirstWatch = new Int32Array(0);

  // Watches: an address entry of a network and a subscription, linked in both of their lists.
  let watchAddress = new Int32Array(0);
  let watchSubscription = new Int32Array(0);
  let watchNextOfAddress = new Int32Array(0);
  let watchNextOfSubscription = new Int32Array(0);
  let watchPrevOfSubscription = new Int32Array(0);
  /** Which of an EVM address's 40 hex digits were upper case: digits 0-31, then 32-39. */
  let watchCaseLow = new Uint32Array(0);
  let watchCaseHigh = new Uint8Array(0);
  let watchCount = 0;
  let watchesLive = 0;
  let freeWatch = NONE;

  function growSubscriptions(length: number): void {
    subFirstWatch = grown(subFirstWatch, length);
  }

  /** A new subscription: it watches nothing yet. */
  function emptyList(subscription: number): void {
    subFirstWatch[subscription] = NONE;
  }

  /** Room for `more` watches beyond those live, so a bulk add grows the arrays once. */
  function reserveWatches(more: number): void {
    const needed = watchesLive + more;
    if (needed <= watchAddress.length) return;
    const length = nextCapacity(needed, watchAddress.length);
    watchAddress = grown(watchAddress, length);
    watchSubscription = grown(watchSubscription, length);
    watchNextOfAddress = grown(watchNextOfAddress, length);
    watchNextOfSubscription = grown(watchNextOfSubscription, length);
    watchPrevOfSubscription = grown(watchPrevOfSubscription, length);
    watchCaseLow = grown(watchCaseLow, length);
    watchCaseHigh = grown(watchCaseHigh, length);
  }

  function allocateWatch(): number {
    if (freeWatch !== NONE) {
      const watch = freeWatch;
      freeWatch = watchNextOfAddress[watch]!;
      watchesLive++;
      return watch;
    }
    if (watchCount === watchAddress.length) reserveWatches(1);
    watchesLive++;
    return watchCount++;
  }

  function freeWatchSlot(watch: number): void {
    watchNextOfAddress[watch] = freeWatch;
    freeWatch = watch;
    watchesLive--;
  }

  function addressOf(table: NetworkTable, entry: number, watch: number): string {
    return addressText(table.addresses.keyOf(entry), watchCaseLow[watch]!, watchCaseHigh[watch]!);
  }

  /**
   * Adds the address in `key.bytes` (`length` bytes) to the subscription's watches, unless it
   * watches it already; returns whether it was added.
   */
  function watchKey(subscription: number, table: NetworkTable, length: number): boolean {
    const entry = table.addresses.add(key.bytes, length);
    let last = NONE;
    if (table.addresses.added) table.firstWatch[entry] = NONE;
    else
      for (let w = table.firstWatch[entry]!; w !== NONE; w = watchNextOfAddress[w]!) {
        if (watchSubscription[w] === subscription) return false;
        last = w;
      }
    const w = allocateWatch();
    watchAddress[w] = entry;
    watchSubscription[w] = subscription;
    watchCaseLow[w] = key.caseLow;
    watchCaseHigh[w] = key.caseHigh;
    // Appended, so an address's subscriptions come out in the order they were added.
    watchNextOfAddress[w] = NONE;
    if (last === NONE) table.firstWatch[entry] = w;
    else watchNextOfAddress[last] = w;
    const first = subFirstWatch[subscription]!;
    watchNextOfSubscription[w] = first;
    watchPrevOfSubscription[w] = NONE;
    if (first !== NONE) watchPrevOfSubscription[first] = w;
    subFirstWatch[subscription] = w;
    return true;
  }

  /** Removes the address in `key.bytes` from the subscription's watches; whether it watched it. */
  function unwatchKey(subscription: number, table: NetworkTable, length: number): boolean {
    const entry = table.addresses.find(key.bytes, length);
    if (entry === NONE) return false;
    let before = NONE;
    let w = table.firstWatch[entry]!;
    while (w !== NONE && watchSubscription[w] !== subscription) {
      before = w;
      w = watchNextOfAddress[w]!;
    }
    if (w === NONE) return false;
    unlinkFromAddress(table, w, before, watchAddress, watchNextOfAddress);
    unlinkFromSubscription(subscription, w, subFirstWatch, watchNextOfSubscription, watchPrevOfSubscription);
    freeWatchSlot(w);
    return true;
  }

  /** Drops every watch of the subscription (of `table`'s network), and addresses nobody watches. */
  function unwatchAll(subscription: number, table: NetworkTable): void {
    for (let w = subFirstWatch[subscription]!; w !== NONE; ) {
      const next = watchNextOfSubscription[w]!;
      const entry = watchAddress[w]!;
      let before = NONE;
      for (let v = table.firstWatch[entry]!; v !== w; v = watchNextOfAddress[v]!) before = v;
      unlinkFromAddress(table, w, before, watchAddress, watchNextOfAddress);
      freeWatchSlot(w);
      w = next;
    }
    subFirstWatch[subscription] = NONE;
  }

  /** The watches of an address entry, as `watched` describes them. */
  function materialise(table: NetworkTable, entry: number): WatchedSubscription[] {
    const found: WatchedSubscription[] = [];
    for (let w = table.firstWatch[entry]!; w !== NONE; w = watchNextOfAddress[w]!) {
      found.push(watched(watchSubscription[w]!, table, addressOf(table, entry, w)));
    }
    return found;
  }

  /** Calls `visit` with each subscription watching an address entry, in the order they came; builds nothing. */
  function forEachWatch(table: NetworkTable, entry: number, visit: (subscription: number) => void): void {
    for (let w = table.firstWatch[entry]!; w !== NONE; w = watchNextOfAddress[w]!)
      visit(watchSubscription[w]!);
  }

  /**
   * Whether the subscription (of `table`'s network) watches the address entry: its watches and the
   * address's are walked in step, so the shorter of the two lists bounds the walk.
   */
  function watchesEntry(subscription: number, table: NetworkTable, entry: number): boolean {
    let byAddress = table.firstWatch[entry]!;
    let bySubscription = subFirstWatch[subscription]!;
    while (byAddress !== NONE && bySubscription !== NONE) {
      if (watchSubscription[byAddress] === subscription || watchAddress[bySubscription] === entry)
        return true;
      byAddress = watchNextOfAddress[byAddress]!;
      bySubscription = watchNextOfSubscription[bySubscription]!;
    }
    return false;
  }

  /** The addresses the subscription (of `table`'s network) watches, as kept. */
  function addressesOf(subscription: number, table: NetworkTable): string[] {
    const found: string[] = [];
    for (let w = subFirstWatch[subscription]!; w !== NONE; w = watchNextOfSubscription[w]!)
      found.push(addressOf(table, watchAddress[w]!, w));
    return found;
  }

  return {
    growSubscriptions,
    forEachWatch,
    watchesEntry,
    addressesOf,
    emptyList,
    reserveWatches,
    watchKey,
    unwatchKey,
    unwatchAll,
    materialise,
    /** Watches in all: an address watched by two subscriptions counts twice. */
    live: () => watchesLive,
  };
}

export type WatchLists = ReturnType<typeof createWatchLists>;

/*
 * Unlinking a watch, given the arrays as they are at the call (they are replaced when they grow,
 * so these keep none): its slot is freed by the caller.
 */

/** Unlinks a watch from its address's list (dropping the address if nobody else watches it). */
function unlinkFromAddress(
  table: NetworkTable,
  w: number,
  before: number,
  watchAddress: Int32Array,
  watchNextOfAddress: Int32Array,
): void {
  const entry = watchAddress[w]!;
  if (before === NONE) table.firstWatch[entry] = watchNextOfAddress[w]!;
  else watchNextOfAddress[before] = watchNextOfAddress[w]!;
  if (table.firstWatch[entry] === NONE) table.addresses.remove(entry);
}

/** Unlinks a watch from its subscription's list. */
function unlinkFromSubscription(
  subscription: number,
  w: number,
  subFirstWatch: Int32Array,
  watchNextOfSubscription: Int32Array,
  watchPrevOfSubscription: Int32Array,
): void {
  const prev = watchPrevOfSubscription[w]!;
  const next = watchNextOfSubscription[w]!;
  if (prev === NONE) subFirstWatch[subscription] = next;
  else watchNextOfSubscription[prev] = next;
  if (next !== NONE) watchPrevOfSubscription[next] = prev;
}
