import { sql } from 'drizzle-orm';
import type { Family } from '../chains/networks.js';
import type { Db } from '../store/db.js';
import type { SubscriptionChange, WatchedSubscription } from '../subscriptions/events.js';
import { createKeyTable, grown, type KeyTable, nextCapacity } from './key-table.js';

/**
 * The watched addresses of every network, in memory, compact enough for ten million of them in one
 * process: per network a hash table of addresses as bytes, per address a list of "watches" (an
 * address watched by a subscription), and a table of subscriptions by id, all in typed arrays
 * indexed by small integers. A lookup builds `WatchedSubscription` objects only for the addresses
 * watched, which are rare among a block's.
 *
 * Keys: an EVM address `0x` + 40 hex digits is its 20 bytes, matched whatever its case (nodes give
 * lower case, the API stores EIP-55), and each watch keeps the case it was given in 40 bits so the
 * subscription reads back exactly as stored. Every other address (Bitcoin, Algorand, Solana, or
 * anything not in that form) is its UTF-8 bytes, matched exactly, as before; on EVM networks lower-
 * cased first. A subscription id that is a lower-case UUID is its 16 bytes, any other its UTF-8.
 */
export type { SubscriptionChange, WatchedSubscription };

/** First byte of a key: the bytes that follow are decoded (hex, UUID) or the string's UTF-8. */
const DECODED = 0;
const RAW = 1;
const NONE = -1;
/** Rows per keyset page of `load`: large enough for few round trips, small for little memory. */
const LOAD_PAGE = 10_000;

const EMPTY: readonly WatchedSubscription[] = Object.freeze([]);

interface NetworkTable {
  name: string;
  ref: number;
  evm: boolean;
  addresses: KeyTable;
  /** Per address entry, its first watch (NONE when being added). */
  firstWatch: Int32Array;
  mempoolSubscriptions: number;
}

const HEX_VALUE = new Int8Array(128).fill(-1);
for (let c = 0; c < 10; c++) HEX_VALUE[48 + c] = c;
for (let c = 0; c < 6; c++) HEX_VALUE[97 + c] = HEX_VALUE[65 + c] = 10 + c;
const HEX_DIGITS = '0123456789abcdef';

export function createAddressIndex(familyOf: (network: string) => Family | undefined) {
  const networksByName = new Map<string, NetworkTable>();
  const networkList: NetworkTable[] = [];
  const accounts: string[] = [];
  const accountRefs = new Map<string, number>();

  // Subscriptions: an entry of `ids` each, their fields in arrays indexed by it.
  let subAccount = new Int32Array(0);
  let subNetwork = new Uint16Array(0);
  let subConfirmations = new Int32Array(0);
  let subMempool = new Uint8Array(0);
  let subFirstWatch = new Int32Array(0);
  const ids = createKeyTable((length) => {
    subAccount = grown(subAccount, length);
    subNetwork = grown(subNetwork, length);
    subConfirmations = grown(subConfirmations, length);
    subMempool = grown(subMempool, length);
    subFirstWatch = grown(subFirstWatch, length);
  });

  // Watches: an address entry of a network and a subscription, linked in both of their lists.
  let watchAddress = new Int32Array(0);
  let watchSubscription = new Int32Array(0);
  let watchNextOfAddress = new Int32Array(0);
  let watchNextOfSubscription = new Int32Array(0);
  /** Which of an EVM address's 40 hex digits were upper case: digits 0-31, then 32-39. */
  let watchCaseLow = new Uint32Array(0);
  let watchCaseHigh = new Uint8Array(0);
  let watchCount = 0;
  let freeWatch = NONE;

  /**
   * Per `load` called and not finished: the subscriptions it has read or `apply` has upserted since
   * it was called (both newer than what it replaces); the others are dropped at its end.
   */
  const pendingLoads = new Set<{ seen: Uint8Array }>();
  let loading: Promise<unknown> = Promise.resolve();

  let scratch = new Uint8Array(256);
  let caseLow = 0;
  let caseHigh = 0;

  /**
   * Writes the key of `address` into `scratch` and returns its length; an EVM address's case goes
   * to `caseLow`/`caseHigh`.
   */
  function addressKey(address: string, evm: boolean): number {
    if (
      evm &&
      address.length === 42 &&
      address.charCodeAt(0) === 48 &&
      (address.charCodeAt(1) | 32) === 120
    ) {
      let low = 0;
      let high = 0;
      let ok = true;
      for (let i = 0; i < 20; i++) {
        const a = address.charCodeAt(2 + 2 * i);
        const b = address.charCodeAt(3 + 2 * i);
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
    return rawKey(evm ? address.toLowerCase() : address);
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

  function allocateWatch(): number {
    if (freeWatch !== NONE) {
      const watch = freeWatch;
      freeWatch = watchNextOfAddress[watch]!;
      return watch;
    }
    if (watchCount === watchAddress.length) {
      const length = nextCapacity(watchCount + 1, watchCount);
      watchAddress = grown(watchAddress, length);
      watchSubscription = grown(watchSubscription, length);
      watchNextOfAddress = grown(watchNextOfAddress, length);
      watchNextOfSubscription = grown(watchNextOfSubscription, length);
      watchCaseLow = grown(watchCaseLow, length);
      watchCaseHigh = grown(watchCaseHigh, length);
    }
    return watchCount++;
  }

  /** Adds `address` (already in `scratch`, `length` bytes) to the subscription's watches. */
  function watch(subscription: number, table: NetworkTable, length: number): void {
    const entry = table.addresses.add(scratch, length);
    if (table.addresses.added) table.firstWatch[entry] = NONE;
    const w = allocateWatch();
    watchAddress[w] = entry;
    watchSubscription[w] = subscription;
    watchCaseLow[w] = caseLow;
    watchCaseHigh[w] = caseHigh;
    // Appended, so an address's subscriptions come out in the order they were added.
    watchNextOfAddress[w] = NONE;
    const first = table.firstWatch[entry]!;
    if (first === NONE) table.firstWatch[entry] = w;
    else {
      let last = first;
      while (watchNextOfAddress[last] !== NONE) last = watchNextOfAddress[last]!;
      watchNextOfAddress[last] = w;
    }
    watchNextOfSubscription[w] = subFirstWatch[subscription]!;
    subFirstWatch[subscription] = w;
  }

  /** Drops every watch of the subscription, and the addresses nobody watches any more. */
  function unwatchAll(subscription: number): void {
    const table = networkList[subNetwork[subscription]!]!;
    for (let w = subFirstWatch[subscription]!; w !== NONE; ) {
      const next = watchNextOfSubscription[w]!;
      const entry = watchAddress[w]!;
      if (table.firstWatch[entry] === w) table.firstWatch[entry] = watchNextOfAddress[w]!;
      else {
        let before = table.firstWatch[entry]!;
        while (watchNextOfAddress[before] !== w) before = watchNextOfAddress[before]!;
        watchNextOfAddress[before] = watchNextOfAddress[w]!;
      }
      if (table.firstWatch[entry] === NONE) table.addresses.remove(entry);
      watchNextOfAddress[w] = freeWatch;
      freeWatch = w;
      w = next;
    }
    subFirstWatch[subscription] = NONE;
  }

  function removeEntry(subscription: number): void {
    unwatchAll(subscription);
    if (subMempool[subscription]) networkList[subNetwork[subscription]!]!.mempoolSubscriptions--;
    for (const pending of pendingLoads)
      if (subscription < pending.seen.length) pending.seen[subscription] = 0;
    ids.remove(subscription);
  }

  function remove(id: string): void {
    const subscription = ids.find(scratch, idKey(id));
    if (subscription !== NONE) removeEntry(subscription);
  }

  function upsert(s: WatchedSubscription): void {
    const subscription = ids.add(scratch, idKey(s.id));
    const added = ids.added;
    const table = networkTable(s.network);
    const length = addressKey(s.address, table.evm);
    if (pendingLoads.size > 0)
      for (const pending of pendingLoads) {
        if (pending.seen.length <= subscription)
          pending.seen = grown(pending.seen, nextCapacity(subscription + 1, pending.seen.length));
        pending.seen[subscription] = 1;
      }
    if (added) subFirstWatch[subscription] = NONE;
    else {
      if (subMempool[subscription]) networkList[subNetwork[subscription]!]!.mempoolSubscriptions--;
      const w = subFirstWatch[subscription]!;
      // The same address as it was stored (a reload, or another field changed): kept in place.
      const same =
        subNetwork[subscription] === table.ref &&
        w !== NONE &&
        watchNextOfSubscription[w] === NONE &&
        watchCaseLow[w] === caseLow &&
        watchCaseHigh[w] === caseHigh &&
        table.addresses.find(scratch, length) === watchAddress[w];
      if (!same) unwatchAll(subscription);
    }
    subAccount[subscription] = accountRef(s.accountId);
    subNetwork[subscription] = table.ref;
    subConfirmations[subscription] = s.confirmations;
    subMempool[subscription] = s.mempool ? 1 : 0;
    if (s.mempool) table.mempoolSubscriptions++;
    if (subFirstWatch[subscription] === NONE) watch(subscription, table, length);
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
        mempool: subMempool[subscription] === 1,
      });
    }
    return found;
  }

  /** One keyset page of live address subscriptions after `after`, by id. */
  async function page(db: Db, after: string): Promise<LoadedRow[]> {
    const result = await db.execute(sql`
      SELECT id, account_id, network, address, confirmations, mempool FROM subscriptions
      WHERE type = 'ADDRESS_TRANSACTION' AND deleted_at IS NULL AND network IS NOT NULL
        AND address IS NOT NULL AND id > ${after}::uuid
      ORDER BY id LIMIT ${LOAD_PAGE}`);
    return (result as unknown as { rows: LoadedRow[] }).rows;
  }

  /** Reads every live address subscription in pages by id and upserts them; then drops the rest. */
  async function loadAll(db: Db, pending: { seen: Uint8Array }): Promise<number> {
    let count = 0;
    try {
      let next: Promise<LoadedRow[]> | undefined = page(db, '00000000-0000-0000-0000-000000000000');
      while (next) {
        const rows: LoadedRow[] = await next;
        // The next page is read while this one is indexed (PostgreSQL answers from its process).
        next = rows.length === LOAD_PAGE ? page(db, rows[rows.length - 1]!.id) : undefined;
        // Unhandled until awaited: a failure of the next page must not crash the process meanwhile.
        next?.catch(() => {});
        for (const row of rows)
          upsert({
            id: row.id,
            accountId: row.account_id,
            network: row.network,
            address: row.address,
            confirmations: row.confirmations,
            mempool: row.mempool,
          });
        count += rows.length;
      }
      // A reload (after missed notifications) also drops what was deleted meanwhile.
      pendingLoads.delete(pending);
      const gone: number[] = [];
      ids.forEach((subscription) => {
        if (pending.seen[subscription] !== 1) gone.push(subscription);
      });
      for (const subscription of gone) removeEntry(subscription);
      return count;
    } finally {
      pendingLoads.delete(pending);
    }
  }

  return {
    /**
     * Loads every live address subscription, and drops those no longer live: at start, and again
     * when notifications may have been missed. Loads run one at a time.
     */
    load(db: Db): Promise<number> {
      const pending = { seen: new Uint8Array(ids.entries) };
      pendingLoads.add(pending);
      const run = loading.then(() => loadAll(db, pending));
      loading = run.catch(() => {});
      return run;
    },
    apply(change: SubscriptionChange): void {
      if (change.type === 'upsert') upsert(change.subscription);
      else remove(change.id);
    },
    /** The subscriptions watching `address` on `network` (empty if none). */
    lookup(network: string, address: string): readonly WatchedSubscription[] {
      const table = networksByName.get(network);
      if (!table || table.addresses.size === 0) return EMPTY;
      const entry = table.addresses.find(scratch, addressKey(address, table.evm));
      return entry === NONE ? EMPTY : materialise(table, entry);
    },
    /** Networks with at least one watched address. */
    networks(): string[] {
      return networkList.filter((t) => t.addresses.size > 0).map((t) => t.name);
    },
    /** Whether at least one subscription on `network` wants mempool notifications. */
    watchesMempool: (network: string): boolean =>
      (networksByName.get(network)?.mempoolSubscriptions ?? 0) > 0,
    size: () => ids.size,
    /** Distinct watched addresses per network. */
    addressCounts(): Record<string, number> {
      return Object.fromEntries(networkList.map((t) => [t.name, t.addresses.size]));
    },
  };
}

interface LoadedRow {
  id: string;
  account_id: string;
  network: string;
  address: string;
  confirmations: number;
  mempool: boolean;
}

export type AddressIndex = ReturnType<typeof createAddressIndex>;
