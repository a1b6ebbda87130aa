import type { Family } from '../chains/networks.js';
import type { WatchedEndpoint, WatchedSubscription } from '../subscriptions/events.js';
import { createKeyTable, grown, type KeyTable, nextCapacity } from './key-table.js';

/**
 * The compact tables behind the address index, compact enough for ten million watched addresses
 * in one process: per network a hash table of addresses as bytes, a table of subscriptions by id,
 * and "watches" (an address watched by a subscription) linking the two, all in typed arrays
 * indexed by small integers. A subscription may watch any number of addresses of its network; its
 * watches form a doubly linked list, so one of a million is removed without walking the others.
 *
 * Keys: an EVM address `0x` + 40 hex digits is its 20 bytes, matched whatever its case (nodes give
 * lower case, the API stores EIP-55), and each watch keeps the case it was given in 40 bits so it
 * reads back exactly as stored. Every other address (Bitcoin, Algorand, Solana, or anything not in
 * that form) is its UTF-8 bytes, matched exactly; on EVM networks lower-cased first. A subscription
 * id that is a lower-case UUID is its 16 bytes, any other its UTF-8.
 */

/** First byte of a key: the bytes that follow are decoded (hex, UUID) or the string's UTF-8. */
const DECODED = 0;
const RAW = 1;
export const NONE = -1;
/** A subscription's flags: it wants pending transactions, and (EVM) the fees its address pays. */
const MEMPOOL = 1;
const FEES = 2;

const EMPTY: readonly WatchedSubscription[] = Object.freeze([]);

interface NetworkTable {
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

const HEX_VALUE = new Int8Array(128).fill(-1);
for (let c = 0; c < 10; c++) HEX_VALUE[48 + c] = c;
for (let c = 0; c < 6; c++) HEX_VALUE[97 + c] = HEX_VALUE[65 + c] = 10 + c;
const HEX_DIGITS = '0123456789abcdef';

export function createWatchTables(familyOf: (network: string) => Family | undefined) {
  const networksByName = new Map<string, NetworkTable>();
  const networkList: NetworkTable[] = [];
  const accounts: string[] = [];
  const accountRefs = new Map<string, number>();

  // Subscriptions: an entry of `ids` each, their fields in arrays indexed by it.
  let subAccount = new Int32Array(0);
  let subNetwork = new Uint16Array(0);
  let subConfirmations = new Int32Array(0);
  /** Per subscription: MEMPOOL and FEES bits. */
  let subFlags = new Uint8Array(0);
  let subFirstWatch = new Int32Array(0);
  const ids = createKeyTable((length) => {
    subAccount = grown(subAccount, length);
    subNetwork = grown(subNetwork, length);
    subConfirmations = grown(subConfirmations, length);
    subFlags = grown(subFlags, length);
    subFirstWatch = grown(subFirstWatch, length);
  });

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

  let scratch = new Uint8Array(256);
  let caseLow = 0;
  let caseHigh = 0;

  /**
   * Writes the key of `text[start..end)` into `scratch` and returns its length; an EVM address's
   * case goes to `caseLow`/`caseHigh`. Taking a range lets `load` parse addresses out of one long
   * string without a string per address.
   */
  function addressKey(text: string, start: number, end: number, evm: boolean): number {
    if (
      evm &&
      end - start === 42 &&
      text.charCodeAt(start) === 48 &&
      (text.charCodeAt(start + 1) | 32) === 120
    ) {
      let low = 0;
      let high = 0;
      let ok = true;
      for (let i = 0; i < 20; i++) {
        const a = text.charCodeAt(start + 2 + 2 * i);
        const b = text.charCodeAt(start + 3 + 2 * i);
        const hi = a < 128 ? HEX_VALUE[a]! : -1;
        const lo = b < 128 ? HEX_VALUE[b]! : -1;
        if (hi < 0 || lo < 0) {
          ok = false;
          break;
        }
        scratch[1 + i] = (hi << 4) | lo;
        // Upper-case letters are 65-70; digits and lower case have bit 32 set.
        const upperA = (a & 32) === 0 ? 1 : 0;
        const upperB = (b & 32) === 0 ? 1 : 0;
        if (i < 16) low |= (upperA | (upperB << 1)) << (2 * i);
        else high |= (upperA | (upperB << 1)) << (2 * (i - 16));
      }
      if (ok) {
        scratch[0] = DECODED;
        caseLow = low >>> 0;
        caseHigh = high;
        return 21;
      }
    }
    caseLow = 0;
    caseHigh = 0;
    const value = start === 0 && end === text.length ? text : text.slice(start, end);
    return rawKey(evm ? value.toLowerCase() : value);
  }

  function rawKey(value: string): number {
    if (scratch.length < 1 + value.length * 3) scratch = new Uint8Array(1 + value.length * 3);
    scratch[0] = RAW;
    let length = 1;
    for (let i = 0; i < value.length; i++) {
      const c = value.charCodeAt(i);
      if (c >= 128) return 1 + new TextEncoder().encodeInto(value, scratch.subarray(1)).written;
      scratch[length++] = c;
    }
    return length;
  }

  function addressOf(table: NetworkTable, entry: number, watch: number): string {
    const key = table.addresses.keyOf(entry);
    if (key[0] === RAW) return Buffer.from(key.buffer, key.byteOffset + 1, key.length - 1).toString('utf8');
    const low = watchCaseLow[watch]!;
    const high = watchCaseHigh[watch]!;
    let out = '0x';
    for (let d = 0; d < 40; d++) {
      const byte = key[1 + (d >> 1)]!;
      const digit = HEX_DIGITS[(d & 1) === 0 ? byte >> 4 : byte & 15]!;
      const upper = d < 32 ? (low >>> d) & 1 : (high >>> (d - 32)) & 1;
      out += upper ? digit.toUpperCase() : digit;
    }
    return out;
  }

  /** A canonical (lower-case) UUID is its 16 bytes; any other id its UTF-8. */
  function idKey(id: string): number {
    if (id.length === 36 && id.charCodeAt(8) === 45 && id.charCodeAt(13) === 45) {
      let length = 1;
      for (let i = 0; i < 36 && length <= 16; ) {
        if (i === 8 || i === 13 || i === 18 || i === 23) {
          if (id.charCodeAt(i) !== 45) break;
          i++;
          continue;
        }
        const a = id.charCodeAt(i);
        const b = id.charCodeAt(i + 1);
        const hi = a < 128 && (a < 65 || a > 70) ? HEX_VALUE[a]! : -1;
        const lo = b < 128 && (b < 65 || b > 70) ? HEX_VALUE[b]! : -1;
        if (hi < 0 || lo < 0) break;
        scratch[length++] = (hi << 4) | lo;
        i += 2;
      }
      if (length === 17) {
        scratch[0] = DECODED;
        return 17;
      }
    }
    return rawKey(id);
  }

  function idOf(entry: number): string {
    const key = ids.keyOf(entry);
    if (key[0] === RAW) return Buffer.from(key.buffer, key.byteOffset + 1, key.length - 1).toString('utf8');
    const hex = Buffer.from(key.buffer, key.byteOffset + 1, 16).toString('hex');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  function networkTable(name: string): NetworkTable {
    let table = networksByName.get(name);
    if (table) return table;
    const created: NetworkTable = {
      name,
      ref: networkList.length,
      evm: familyOf(name) === 'evm',
      addresses: createKeyTable((length) => {
        created.firstWatch = grown(created.firstWatch, length);
      }),
      firstWatch: new Int32Array(0),
      mempoolSubscriptions: 0,
      feesSubscriptions: 0,
    };
    table = created;
    networksByName.set(name, table);
    networkList.push(table);
    return table;
  }

  function accountRef(accountId: string): number {
    let ref = accountRefs.get(accountId);
    if (ref === undefined) {
      ref = accounts.length;
      accounts.push(accountId);
      accountRefs.set(accountId, ref);
    }
    return ref;
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

  /**
   * Adds the address in `scratch` (`length` bytes) to the subscription's watches, unless it
   * watches it already; returns whether it was added.
   */
  function watchKey(subscription: number, table: NetworkTable, length: number): boolean {
    const entry = table.addresses.add(scratch, length);
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
    watchCaseLow[w] = caseLow;
    watchCaseHigh[w] = caseHigh;
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

  /** Unlinks a watch from its address's list (dropping the address if nobody else watches it). */
  function unlinkFromAddress(table: NetworkTable, w: number, before: number): void {
    const entry = watchAddress[w]!;
    if (before === NONE) table.firstWatch[entry] = watchNextOfAddress[w]!;
    else watchNextOfAddress[before] = watchNextOfAddress[w]!;
    if (table.firstWatch[entry] === NONE) table.addresses.remove(entry);
  }

  /** Removes the address in `scratch` from the subscription's watches; whether it watched it. */
  function unwatchKey(subscription: number, table: NetworkTable, length: number): boolean {
    const entry = table.addresses.find(scratch, length);
    if (entry === NONE) return false;
    let before = NONE;
    let w = table.firstWatch[entry]!;
    while (w !== NONE && watchSubscription[w] !== subscription) {
      before = w;
      w = watchNextOfAddress[w]!;
    }
    if (w === NONE) return false;
    unlinkFromAddress(table, w, before);
    const prev = watchPrevOfSubscription[w]!;
    const next = watchNextOfSubscription[w]!;
    if (prev === NONE) subFirstWatch[subscription] = next;
    else watchNextOfSubscription[prev] = next;
    if (next !== NONE) watchPrevOfSubscription[next] = prev;
    freeWatchSlot(w);
    return true;
  }

  /** Drops every watch of the subscription, and the addresses nobody watches any more. */
  function unwatchAll(subscription: number): void {
    const table = networkList[subNetwork[subscription]!]!;
    for (let w = subFirstWatch[subscription]!; w !== NONE; ) {
      const next = watchNextOfSubscription[w]!;
      const entry = watchAddress[w]!;
      let before = NONE;
      for (let v = table.firstWatch[entry]!; v !== w; v = watchNextOfAddress[v]!) before = v;
      unlinkFromAddress(table, w, before);
      freeWatchSlot(w);
      w = next;
    }
    subFirstWatch[subscription] = NONE;
  }

  /** Takes a subscription's flags out of its network's counts (before they change, or it goes). */
  function forgetFlags(subscription: number): void {
    const table = networkList[subNetwork[subscription]!]!;
    if (subFlags[subscription]! & MEMPOOL) table.mempoolSubscriptions--;
    if (subFlags[subscription]! & FEES) table.feesSubscriptions--;
  }

  function find(id: string): number {
    return ids.find(scratch, idKey(id));
  }

  function materialise(table: NetworkTable, entry: number): WatchedSubscription[] {
    const found: WatchedSubscription[] = [];
    for (let w = table.firstWatch[entry]!; w !== NONE; w = watchNextOfAddress[w]!) {
      const subscription = watchSubscription[w]!;
      found.push({
        id: idOf(subscription),
        accountId: accounts[subAccount[subscription]!]!,
        network: table.name,
        address: addressOf(table, entry, w),
        confirmations: subConfirmations[subscription]!,
        mempool: (subFlags[subscription]! & MEMPOOL) !== 0,
        ...((subFlags[subscription]! & FEES) !== 0 ? { fees: true } : {}),
      });
    }
    return found;
  }

  return {
    /** The subscription's entry, or NONE. */
    find,
    /**
     * Sets a subscription's fields, adding it if new; returns its entry. Moved to another network,
     * it watches nothing until addresses are added (an address is an address of one network).
     */
    upsert(s: WatchedEndpoint): number {
      const subscription = ids.add(scratch, idKey(s.id));
      const table = networkTable(s.network);
      if (ids.added) subFirstWatch[subscription] = NONE;
      else {
        forgetFlags(subscription);
        if (subNetwork[subscription] !== table.ref) unwatchAll(subscription);
      }
      subAccount[subscription] = accountRef(s.accountId);
      subNetwork[subscription] = table.ref;
      subConfirmations[subscription] = s.confirmations;
      subFlags[subscription] = (s.mempool ? MEMPOOL : 0) | (s.fees ? FEES : 0);
      if (s.mempool) table.mempoolSubscriptions++;
      if (s.fees) table.feesSubscriptions++;
      return subscription;
    },
    /** Room for `more` addresses more on the subscription's network: the tables grow once. */
    reserve(subscription: number, more: number): void {
      if (more <= 0) return;
      networkList[subNetwork[subscription]!]!.addresses.reserve(more);
      reserveWatches(more);
    },
    /** Watches `text[start..end)` (all of `text` by default); whether it was not watched yet. */
    watch(subscription: number, text: string, start = 0, end = text.length): boolean {
      const table = networkList[subNetwork[subscription]!]!;
      return watchKey(subscription, table, addressKey(text, start, end, table.evm));
    },
    /** Stops watching `address`; whether it was watched. */
    unwatch(subscription: number, address: string): boolean {
      const table = networkList[subNetwork[subscription]!]!;
      return unwatchKey(subscription, table, addressKey(address, 0, address.length, table.evm));
    },
    unwatchAll,
    /** Forgets the subscription and its watches. */
    remove(subscription: number): void {
      unwatchAll(subscription);
      forgetFlags(subscription);
      ids.remove(subscription);
    },
    forEachSubscription: (visit: (subscription: number) => void) => ids.forEach(visit),
    /** The subscriptions watching `address` on `network`, each with its spelling of it. */
    lookup(network: string, address: string): readonly WatchedSubscription[] {
      const table = networksByName.get(network);
      if (!table || table.addresses.size === 0) return EMPTY;
      const entry = table.addresses.find(scratch, addressKey(address, 0, address.length, table.evm));
      return entry === NONE ? EMPTY : materialise(table, entry);
    },
    networks(): string[] {
      return networkList.filter((t) => t.addresses.size > 0).map((t) => t.name);
    },
    watchesFees: (network: string): boolean => (networksByName.get(network)?.feesSubscriptions ?? 0) > 0,
    watchesMempool: (network: string): boolean =>
      (networksByName.get(network)?.mempoolSubscriptions ?? 0) > 0,
    size: () => ids.size,
    /** Watches in all: an address watched by two subscriptions counts twice. */
    watches: () => watchesLive,
    addressCounts(): Record<string, number> {
      return Object.fromEntries(networkList.map((t) => [t.name, t.addresses.size]));
    },
  };
}

export type WatchTables = ReturnType<typeof createWatchTables>;
