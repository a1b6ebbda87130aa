import type { Family } from '../../chains/networks.js';
import type { WatchedEndpoint, WatchedSubscription } from '../../subscriptions/events.js';
import { createKeyTable, grown } from './key-table.js';
import { addressKey, createKeyScratch, idKey, idText } from './watch-keys.js';
import { createWatchLists, type NetworkTable, NONE } from './watch-lists.js';

export { NONE };

/**
 * The compact tables behind the address index, compact enough for ten million watched addresses in
 * one process: per network a hash table of addresses as bytes (watch-keys.ts: an EVM address matched
 * whatever its case, since nodes give lower case and the API stores EIP-55, and read back as
 * stored), a table of subscriptions by id, and "watches" (an address watched by a subscription)
 * linking the two, in typed arrays indexed by small integers. A subscription's watches form a doubly
 * linked list (watch-lists.ts), so one of a million is removed without walking the others. The
 * subscription table is `createWatchTables` itself; the networks' tables `createNetworkTables`.
 */

/** A subscription's flags: it wants pending transactions, and (EVM) the fees its address pays. */
const MEMPOOL = 1;
const FEES = 2;

const EMPTY: readonly WatchedSubscription[] = Object.freeze([]);

export function createWatchTables(familyOf: (network: string) => Family | undefined) {
  const { networksByName, networkList, networkTable } = createNetworkTables(familyOf);
  const accounts: string[] = [];
  const accountRefs = new Map<string, number>();
  /** Every key is encoded here, then read where it is used (see KeyScratch). */
  const key = createKeyScratch();
  const lists = createWatchLists(key, watched);
  const { watchKey, unwatchKey, reserveWatches, materialise } = lists;

  // Subscriptions: an entry of `ids` each, their fields in arrays indexed by it.
  let subAccount = new Int32Array(0);
  let subNetwork = new Uint16Array(0);
  let subConfirmations = new Int32Array(0);
  /** Per subscription: MEMPOOL and FEES bits. */
  let subFlags = new Uint8Array(0);
  const ids = createKeyTable((length) => {
    subAccount = grown(subAccount, length);
    subNetwork = grown(subNetwork, length);
    subConfirmations = grown(subConfirmations, length);
    subFlags = grown(subFlags, length);
    lists.growSubscriptions(length);
  });

  /** What a lookup returns for a watch of `subscription`, `address` spelt as the watch keeps it. */
  function watched(subscription: number, table: NetworkTable, address: string): WatchedSubscription {
    return {
      id: idText(ids.keyOf(subscription)),
      accountId: accounts[subAccount[subscription]!]!,
      network: table.name,
      address,
      confirmations: subConfirmations[subscription]!,
      mempool: (subFlags[subscription]! & MEMPOOL) !== 0,
      ...((subFlags[subscription]! & FEES) !== 0 ? { fees: true } : {}),
    };
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

  /** Drops every watch of the subscription, and the addresses nobody watches any more. */
  function unwatchAll(subscription: number): void {
    lists.unwatchAll(subscription, networkList[subNetwork[subscription]!]!);
  }

  /** Takes a subscription's flags out of its network's counts (before they change, or it goes). */
  function forgetFlags(subscription: number): void {
    const table = networkList[subNetwork[subscription]!]!;
    if (subFlags[subscription]! & MEMPOOL) table.mempoolSubscriptions--;
    if (subFlags[subscription]! & FEES) table.feesSubscriptions--;
  }

  function find(id: string): number {
    // Encoded first: a long key replaces `key.bytes`, which must be read after.
    const length = idKey(key, id);
    return ids.find(key.bytes, length);
  }

  return {
    /** The subscription's entry, or NONE. */
    find,
    /**
     * Sets a subscription's fields, adding it if new; returns its entry. Moved to another network,
     * it watches nothing until addresses are added (an address is an address of one network).
     */
    upsert(s: WatchedEndpoint): number {
      const length = idKey(key, s.id);
      const subscription = ids.add(key.bytes, length);
      const table = networkTable(s.network);
      if (ids.added) lists.emptyList(subscription);
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
      return watchKey(subscription, table, addressKey(key, text, start, end, table.evm));
    },
    /** Stops watching `address`; whether it was watched. */
    unwatch(subscription: number, address: string): boolean {
      const table = networkList[subNetwork[subscription]!]!;
      return unwatchKey(subscription, table, addressKey(key, address, 0, address.length, table.evm));
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
      const length = addressKey(key, address, 0, address.length, table.evm);
      const entry = table.addresses.find(key.bytes, length);
      return entry === NONE ? EMPTY : materialise(table, entry);
    },
    /** Calls `visit` with each subscription (its entry) watching `address` on `network`; builds nothing. */
    forEachWatcher(network: string, address: string, visit: (subscription: number) => void): void {
      const table = networksByName.get(network);
      if (!table || table.addresses.size === 0) return;
      const length = addressKey(key, address, 0, address.length, table.evm);
      const entry = table.addresses.find(key.bytes, length);
      if (entry !== NONE) lists.forEachWatch(table, entry, visit);
    },
    /** Whether the subscription watches `address` (on its network). */
    watchesAddress(subscription: number, address: string): boolean {
      const table = networkList[subNetwork[subscription]!]!;
      const length = addressKey(key, address, 0, address.length, table.evm);
      const entry = table.addresses.find(key.bytes, length);
      return entry !== NONE && lists.watchesEntry(subscription, table, entry);
    },
    /** The addresses the subscription watches, each spelt as given. */
    addressesOf: (subscription: number): string[] =>
      lists.addressesOf(subscription, networkList[subNetwork[subscription]!]!),
    networks(): string[] {
      return networkList.filter((t) => t.addresses.size > 0).map((t) => t.name);
    },
    watchesFees: (network: string): boolean => (networksByName.get(network)?.feesSubscriptions ?? 0) > 0,
    watchesMempool: (network: string): boolean =>
      (networksByName.get(network)?.mempoolSubscriptions ?? 0) > 0,
    size: () => ids.size,
    /** Watches in all: an address watched by two subscriptions counts twice. */
    watches: () => lists.live(),
    addressCounts(): Record<string, number> {
      return Object.fromEntries(networkList.map((t) => [t.name, t.addresses.size]));
    },
  };
}

/** The networks' address tables, by name and in the order they came (a subscription's `ref`). */
function createNetworkTables(familyOf: (network: string) => Family | undefined) {
  const networksByName = new Map<string, NetworkTable>();
  const networkList: NetworkTable[] = [];

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

  return { networksByName, networkList, networkTable };
}

export type WatchTables = ReturnType<typeof createWatchTables>;
