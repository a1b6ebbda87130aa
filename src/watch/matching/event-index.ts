/**
 * The contract events followed on every network, in memory beside the address index: which
 * CONTRACT_LOG_EVENT subscriptions a log may concern, found without looking at the others.
 *
 * A subscription is filed in the bucket of its event's topic key (topic0, or for an anonymous
 * event its topic count), then where a log finds it in a few lookups, whatever the number of
 * subscriptions of that event and of that log's contract:
 * - with a filter (on any contract or on a list): under the allowed values of its first filtered
 *   topic, so that 10,000 subscriptions of one event with different filters cost a lookup per
 *   filtered topic position of a log, not a test each. One on a contract list found so is then
 *   checked for the log's contract (its contracts and the contract's subscriptions walked in step:
 *   the shorter bounds it).
 * - without a filter, on any contract: in its bucket's `unfiltered` list (each one is a match).
 * - without a filter, on a contract list: found from the log's contract alone, in a contract table
 *   holding only these, so that a log of a contract followed by thousands of filtered subscriptions
 *   (a popular token's `Transfer` to this or that address) walks none of them.
 *
 * Contract lists are kept in watch tables (one for subscriptions with a filter, one for those
 * without) so that lists of 100,000 contracts cost what address lists cost.
 *
 * A log's topics and contract come from a node's answer: new strings, whose hashing as map keys
 * would read each of their 66 (or 42) characters, and lower-casing copy them once more. The maps
 * here are keyed by a few hex digits of each value read as a number (valueKey), and what shares a
 * key is told apart after, by comparing values whole. Before a large map or the contract table is
 * read, a bit per key (maySee) or a count per contract slot (ContractSlots), small enough to stay
 * in a cache, turns most logs away. A log then costs a few integer lookups: bench:ingest's
 * evm-events pass and bench/README.md, "Contract events: match cost with 10,000 subscriptions".
 */
import type { Hex } from 'viem';
import { passesFilter } from '../../chains/evm/event-filter.js';
import type { FollowedEvent } from '../../chains/evm/followed-event.js';
import type { Family } from '../../chains/networks.js';
import type { WatchedEndpoint, WatchedSubscription } from '../../subscriptions/events.js';
import { createWatchTables, NONE, type WatchTables } from './watch-tables.js';

/** A subscription following an event: its endpoint, and the event. */
export interface FollowedSubscription {
  endpoint: WatchedEndpoint;
  event: FollowedEvent;
  anyContract: boolean;
  /** The bucket it is filed in: topic0, or `anon:<topics>` for an anonymous event. */
  topicKey: string;
}

/** A followed subscription as filed here. */
interface Filed extends FollowedSubscription {
  /**
   * Its first filtered topic: the log topic it constrains, and the keys (valueKey) of the values
   * it allows there, without repeats.
   */
  first: { position: number; keys: number[] } | undefined;
  /** Its entry in the contract table it is in (`withFilter` when `first`, else `withoutFilter`). */
  entry: number;
  /** The bucket it is filed in. */
  bucket: Bucket;
}

/** The subscriptions of one topic key on one network. */
interface Bucket {
  /** Its topic key (see topicKeyOf). */
  key: string;
  /** On any contract, without a filter: each one matches every log of the key. */
  unfiltered: Filed[];
  /**
   * Per log topic position, a value's key (valueKey) → the subscriptions whose first filtered
   * topic allows a value of that key there (which value, passesFilter checks).
   */
  byTopic: (Map<number, Filed[]> | undefined)[];
  /**
   * Per position of `byTopic` with many keys, a bit per key (see maySee), rebuilt from the map
   * when `stale` (it must grow, or keys went).
   */
  seen: (Uint32Array | undefined)[];
  stale: boolean[];
  /** The positions of `byTopic` in use, ascending; `counts` has how many subscriptions file at each. */
  positions: number[];
  counts: number[];
  /** On a contract list, without a filter: found from the log's contract (only counted here). */
  unfilteredScoped: number;
  size: number;
}

interface NetworkEvents {
  /** By their topic0's key (valueKey): the buckets of those topic0s (more than one only by chance). */
  byTopic0: Map<number, Bucket[]>;
  /** By topic count: the buckets of anonymous events. */
  anonymous: (Bucket | undefined)[];
  size: number;
}

const EMPTY: readonly FollowedSubscription[] = Object.freeze([]);

/** The bucket of an event: its topic0, or for an anonymous event the number of topics it has. */
export function topicKeyOf(event: FollowedEvent): string {
  return event.topic0 ?? `anon:${event.topicCount}`;
}

/** The hex digits `text[end - digits..end)` as a number, whatever their case. */
function hexDigits(text: string, end: number, digits: number): number {
  let value = 0;
  for (let i = end - digits; i < end; i++) {
    const c = text.charCodeAt(i) | 0x20;
    value = (value << 4) | ((c <= 0x39 ? c - 0x30 : c - 0x57) & 15);
  }
  return value;
}

/** A topic value's key in the maps: its last 7 hex digits (a small integer), whatever their case. */
const valueKey = (topic: string): number => hexDigits(topic, topic.length, 7);

/** The topic count of an anonymous event's topic key (`anon:<n>`); undefined for a topic0. */
const anonymousCount = (key: string): number | undefined =>
  key.startsWith('anon:') ? Number(key.slice('anon:'.length)) : undefined;

/** The log topic a filter entry constrains: topic0 comes first unless the event is anonymous. */
const topicPosition = (event: FollowedEvent, input: number): number => input + (event.topic0 ? 1 : 0);

/** Where a subscription is filed inside its bucket: its first filtered topic, if any. */
function firstFiltered(event: FollowedEvent): Filed['first'] {
  const at = event.filter.findIndex((values) => values !== null);
  if (at < 0) return undefined;
  return { position: topicPosition(event, at), keys: [...new Set(event.filter[at]!.map(valueKey))] };
}

function emptyBucket(key: string): Bucket {
  return {
    key,
    unfiltered: [],
    byTopic: [],
    seen: [],
    stale: [],
    positions: [],
    counts: [],
    unfilteredScoped: 0,
    size: 0,
  };
}

function without(list: Filed[], filed: Filed): void {
  const at = list.indexOf(filed);
  if (at >= 0) list.splice(at, 1);
}

/** Counts a subscription in or out of a topic position of the bucket (`positions` kept ascending). */
function countPosition(bucket: Bucket, position: number, delta: number): void {
  const count = (bucket.counts[position] ?? 0) + delta;
  bucket.counts[position] = count;
  if (count === 0) {
    bucket.byTopic[position] = undefined;
    bucket.seen[position] = undefined;
    bucket.stale[position] = false;
  }
  bucket.positions = bucket.counts.flatMap((n, p) => (n > 0 ? [p] : []));
}

function file(bucket: Bucket, filed: Filed): void {
  bucket.size++;
  const { first } = filed;
  if (!first) {
    if (filed.anyContract) bucket.unfiltered.push(filed);
    else bucket.unfilteredScoped++;
    return;
  }
  countPosition(bucket, first.position, 1);
  let byKey = bucket.byTopic[first.position];
  if (!byKey) {
    byKey = new Map();
    bucket.byTopic[first.position] = byKey;
  }
  for (const key of first.keys) {
    const list = byKey.get(key);
    if (list) list.push(filed);
    else byKey.set(key, [filed]);
  }
  const seen = bucket.seen[first.position];
  if (seen && byKey.size * BITS_PER_KEY <= seen.length * 32) for (const key of first.keys) setSeen(seen, key);
  else if (byKey.size > SEEN_FROM) bucket.stale[first.position] = true;
}

/** Keys of a position's map past which it has bits (below, its lookups are cheap enough). */
const SEEN_FROM = 64;
/** Bits per key at least, and the size of a position's bits: from 8 KB to 512 KB. */
const BITS_PER_KEY = 16;
const MIN_SEEN_BITS = 1 << 16;
const MAX_SEEN_BITS = 1 << 22;

function setSeen(seen: Uint32Array, key: number): void {
  const bit = key & (seen.length * 32 - 1);
  seen[bit >>> 5]! |= 1 << (bit & 31);
}

/**
 * Whether a key may be in the bucket's map at a position. Most of a log's topics are no filter's
 * value: one bit read, in a table small enough to stay in a cache, turns them away without the
 * map's own lookup, which reads two or three places of a large table (in bench:ingest the bulk
 * of a log's match once the index is out of the caches).
 */
function maySee(bucket: Bucket, position: number, key: number): boolean {
  if (bucket.stale[position]) {
    bucket.stale[position] = false;
    const byKey = bucket.byTopic[position]!;
    if (byKey.size <= SEEN_FROM) bucket.seen[position] = undefined;
    else {
      let bits = MIN_SEEN_BITS;
      while (bits < byKey.size * BITS_PER_KEY && bits < MAX_SEEN_BITS) bits *= 2;
      const seen = new Uint32Array(bits / 32);
      for (const k of byKey.keys()) setSeen(seen, k);
      bucket.seen[position] = seen;
    }
  }
  const seen = bucket.seen[position];
  if (seen === undefined) return true;
  const bit = key & (seen.length * 32 - 1);
  return (seen[bit >>> 5]! & (1 << (bit & 31))) !== 0;
}

function unfile(bucket: Bucket, filed: Filed): void {
  bucket.size--;
  const { first } = filed;
  if (!first) {
    if (filed.anyContract) without(bucket.unfiltered, filed);
    else bucket.unfilteredScoped--;
    return;
  }
  const byKey = bucket.byTopic[first.position];
  for (const key of first.keys) {
    const list = byKey?.get(key);
    if (!list) continue;
    without(list, filed);
    if (list.length === 0) byKey!.delete(key);
  }
  bucket.stale[first.position] = true;
  countPosition(bucket, first.position, -1);
}

/**
 * The keys of the topics of the log being matched, each read once however many lookups use it:
 * bit p of `known` is set once `keys[p]` holds topic p's. Matching is synchronous, so one scratch
 * serves every call.
 */
const logKeys = { keys: [0, 0, 0, 0, 0], known: 0 };

function keyAt(topics: readonly Hex[], position: number): number {
  const bit = 1 << position;
  if ((logKeys.known & bit) === 0) {
    logKeys.keys[position] = valueKey(topics[position]!);
    logKeys.known |= bit;
  }
  return logKeys.keys[position]!;
}

/** The bucket of a topic key on a network, if any subscription follows it there. */
function bucketOf(events: NetworkEvents, key: string): Bucket | undefined {
  const count = anonymousCount(key);
  if (count !== undefined) return events.anonymous[count];
  return events.byTopic0.get(valueKey(key))?.find((bucket) => bucket.key === key);
}

/** The bucket of a topic key on a network, made if new. */
function bucketFor(events: NetworkEvents, key: string): Bucket {
  const known = bucketOf(events, key);
  if (known) return known;
  const bucket = emptyBucket(key);
  const count = anonymousCount(key);
  if (count !== undefined) events.anonymous[count] = bucket;
  else {
    const list = events.byTopic0.get(valueKey(key));
    if (list) list.push(bucket);
    else events.byTopic0.set(valueKey(key), [bucket]);
  }
  return bucket;
}

/** Forgets a topic key's bucket, emptied. */
function dropBucket(events: NetworkEvents, bucket: Bucket): void {
  const count = anonymousCount(bucket.key);
  if (count !== undefined) {
    events.anonymous[count] = undefined;
    return;
  }
  const list = events.byTopic0.get(valueKey(bucket.key))!;
  list.splice(list.indexOf(bucket), 1);
  if (list.length === 0) events.byTopic0.delete(valueKey(bucket.key));
}

/** The bucket of a log's topic0, if any subscription follows it (compared whole: keys may be shared). */
function bucketOfTopic0(events: NetworkEvents, topics: readonly Hex[]): Bucket | undefined {
  if (topics.length === 0) return undefined;
  const list = events.byTopic0.get(keyAt(topics, 0));
  if (!list) return undefined;
  const topic0 = topics[0]!;
  for (const bucket of list) if (bucket.key === topic0) return bucket;
  const lower = topic0.toLowerCase();
  for (const bucket of list) if (bucket.key === lower) return bucket;
  return undefined;
}

/** Slots of ContractSlots: at first, and at most (2^16 and 2^22 bytes). */
const MIN_SLOTS = 1 << 16;
const MAX_SLOTS = 1 << 22;

/**
 * How many contracts of a watch table fall in each slot (the last 6 hex digits of a contract, as
 * many of their bits as the table has slots): a log whose contract's slot is 0 is followed on its
 * contract by no subscription of the table, which is then not asked (encoding the contract and
 * hashing it there costs more than a whole match here). The slots are kept at 16 per contract or
 * more (rebuilt from `contracts` as they grow), so that a slot rarely says "maybe" for another
 * contract, and the table stays small enough to be in a cache. A count stops at 255 and is then
 * never decremented: it only ever says "maybe".
 */
function createContractSlots(contracts: (visit: (contract: string) => void) => void) {
  let counts: Uint8Array | undefined;
  let mask = 0;
  let live = 0;
  const slotOf = (text: string, end: number): number => hexDigits(text, end, 6) & mask;

  function rebuild(size: number): void {
    counts = new Uint8Array(size);
    mask = size - 1;
    contracts((contract) => {
      const slot = slotOf(contract, contract.length);
      if (counts![slot]! < 255) counts![slot]!++;
    });
  }

  return {
    /** Counts a contract just watched (`text[..end)`). */
    add(text: string, end = text.length): void {
      live++;
      if (counts === undefined || (live * 16 > counts.length && counts.length < MAX_SLOTS)) {
        let size = counts?.length ?? MIN_SLOTS;
        while (live * 16 > size && size < MAX_SLOTS) size *= 2;
        rebuild(size); // the contract just watched included
        return;
      }
      const slot = slotOf(text, end);
      if (counts[slot]! < 255) counts[slot]!++;
    },
    remove(text: string): void {
      if (!counts) return;
      live--;
      const slot = slotOf(text, text.length);
      if (counts[slot]! > 0 && counts[slot]! < 255) counts[slot]!--;
    },
    mayHold: (address: string): boolean =>
      counts !== undefined && counts[slotOf(address, address.length)] !== 0,
  };
}

type ContractSlots = ReturnType<typeof createContractSlots>;

/**
 * A watch table whose contracts are counted in `slots` as they come and go (a subscription moved
 * to another network drops its contracts inside the table, uncounted: a slot then says "maybe"
 * for nothing, which costs a lookup, never a match).
 */
function slotted(tables: WatchTables, slots: ContractSlots): WatchTables {
  return {
    ...tables,
    watch(subscription: number, text: string, start = 0, end = text.length): boolean {
      const added = tables.watch(subscription, text, start, end);
      if (added) slots.add(text, end);
      return added;
    },
    unwatch(subscription: number, address: string): boolean {
      const removed = tables.unwatch(subscription, address);
      if (removed) slots.remove(address);
      return removed;
    },
    unwatchAll(subscription: number): void {
      for (const address of tables.addressesOf(subscription)) slots.remove(address);
      tables.unwatchAll(subscription);
    },
    remove(subscription: number): void {
      for (const address of tables.addressesOf(subscription)) slots.remove(address);
      tables.remove(subscription);
    },
  };
}

/** A log as the matcher sees it: its contract (any case) and topics. */
export interface LogAddressAndTopics {
  address: string;
  topics: readonly Hex[];
}

/** The contract tables as a load fills them: a subscription's entry (`find`), room, and its contracts. */
export type ContractTables = Pick<WatchTables, 'find' | 'reserve' | 'watch'>;

export function createEventIndex(familyOf: (network: string) => Family | undefined) {
  /** The contract lists of subscriptions with a filter (only asked whether one holds a contract). */
  const withFilter = createWatchTables(familyOf);
  const unfilteredTables = createWatchTables(familyOf);
  /** The contracts of `withoutFilter` by slot: most logs' contracts are not looked up there. */
  const unfilteredSlots = createContractSlots((visit) =>
    unfilteredTables.forEachSubscription((entry) => {
      for (const contract of unfilteredTables.addressesOf(entry)) visit(contract);
    }),
  );
  /** The contract lists of subscriptions without one (asked who follows a contract). */
  const withoutFilter = slotted(unfilteredTables, unfilteredSlots);
  /** The subscriptions of `withoutFilter`, by their entry there. */
  const unfilteredByEntry: (Filed | undefined)[] = [];
  const followed = new Map<string, Filed>();
  const networks = new Map<string, NetworkEvents>();
  /** What `match` finds, gathered here and copied out when there is something. */
  const found: FollowedSubscription[] = [];

  const tableOf = (first: Filed['first']): WatchTables => (first ? withFilter : withoutFilter);
  /** A subscription's entry as `contracts` gives it: its entry in its table, and which table. */
  const handle = (first: Filed['first'], entry: number): number => entry * 2 + (first ? 1 : 0);
  const tableOfHandle = (h: number): WatchTables => (h % 2 === 1 ? withFilter : withoutFilter);

  /** Takes the subscription out of its bucket (its contracts stay, for upsert to move or keep). */
  function unfileKnown(known: Filed): void {
    followed.delete(known.endpoint.id);
    const network = known.endpoint.network;
    const events = networks.get(network)!;
    unfile(known.bucket, known);
    if (known.bucket.size === 0) dropBucket(events, known.bucket);
    if (--events.size === 0) networks.delete(network);
    if (!known.first) unfilteredByEntry[known.entry] = undefined;
  }

  /**
   * The subscriptions of a bucket found from the log's topics: those on any contract without a
   * filter, and those with a filter (on any contract, or on a list holding the log's contract)
   * whose filter the log passes.
   */
  function matchBucket(bucket: Bucket, log: LogAddressAndTopics): void {
    const { topics } = log;
    for (const filed of bucket.unfiltered) found.push(filed);
    for (const position of bucket.positions) {
      if (position >= topics.length) continue;
      const key = keyAt(topics, position);
      if (!maySee(bucket, position, key)) continue;
      const candidates = bucket.byTopic[position]!.get(key);
      if (candidates === undefined) continue;
      for (const filed of candidates)
        if (
          passesFilter(filed.event, topics) &&
          (filed.anyContract || withFilter.watchesAddress(filed.entry, log.address))
        )
          found.push(filed);
    }
  }

  /** Moves a known subscription's contracts to the table its filter now puts it in; its entry there. */
  function movedContracts(known: Filed, to: WatchTables, endpoint: WatchedEndpoint): number {
    const from = tableOf(known.first);
    const contracts = from.addressesOf(known.entry);
    from.remove(known.entry);
    const entry = to.upsert(endpoint);
    to.reserve(entry, contracts.length);
    for (const contract of contracts) to.watch(entry, contract);
    return entry;
  }

  /** Files a subscription in its bucket (made if new) on its network. */
  function fileNew(endpoint: WatchedEndpoint, first: Filed['first'], entry: number): Filed {
    const spec = endpoint.contractEvent!;
    const topicKey = topicKeyOf(spec.event);
    let events = networks.get(endpoint.network);
    if (!events) {
      events = { byTopic0: new Map(), anonymous: [], size: 0 };
      networks.set(endpoint.network, events);
    }
    const filed: Filed = {
      endpoint,
      event: spec.event,
      anyContract: spec.anyContract,
      topicKey,
      first,
      entry,
      bucket: bucketFor(events, topicKey),
    };
    followed.set(endpoint.id, filed);
    events.size++;
    file(filed.bucket, filed);
    if (!first) unfilteredByEntry[entry] = filed;
    return filed;
  }

  return {
    /**
     * Follows (or updates) a subscription's event; with `contracts` it then follows it on exactly
     * those, without it keeps the contracts it had. Returns its entry in the contract tables.
     */
    upsert(endpoint: WatchedEndpoint, contractsOf?: readonly string[]): number {
      const first = firstFiltered(endpoint.contractEvent!.event);
      const table = tableOf(first);
      const known = followed.get(endpoint.id);
      if (known) unfileKnown(known);
      let entry: number;
      if (known && tableOf(known.first) !== table) {
        // Its filter came or went: its contracts go to the other table, unless replaced below.
        if (contractsOf === undefined) entry = movedContracts(known, table, endpoint);
        else {
          tableOf(known.first).remove(known.entry);
          entry = table.upsert(endpoint);
        }
      } else entry = table.upsert(endpoint);
      fileNew(endpoint, first, entry);
      if (contractsOf !== undefined) {
        table.unwatchAll(entry);
        table.reserve(entry, contractsOf.length);
        for (const contract of contractsOf) table.watch(entry, contract);
      }
      return handle(first, entry);
    },
    /** Adds and removes contracts of a subscription known here (others are ignored). */
    changeContracts(id: string, add: readonly string[], remove: readonly string[]): void {
      const known = followed.get(id);
      if (!known) return;
      const table = tableOf(known.first);
      for (const contract of remove) table.unwatch(known.entry, contract);
      table.reserve(known.entry, add.length);
      for (const contract of add) table.watch(known.entry, contract);
    },
    remove(id: string): void {
      const known = followed.get(id);
      if (!known) return;
      unfileKnown(known);
      tableOf(known.first).remove(known.entry);
    },
    has: (id: string): boolean => followed.has(id),
    /** The contract tables, for a load to fill a page of contracts (entries as `upsert` returns them). */
    contracts: {
      find(id: string): number {
        const known = followed.get(id);
        return known ? handle(known.first, known.entry) : NONE;
      },
      reserve: (h: number, more: number): void => tableOfHandle(h).reserve(Math.floor(h / 2), more),
      watch: (h: number, text: string, start?: number, end?: number): boolean =>
        tableOfHandle(h).watch(Math.floor(h / 2), text, start, end),
    } satisfies ContractTables,
    /** Whether any subscription follows an event on `network`. */
    follows: (network: string): boolean => networks.has(network),
    networks: (): string[] => [...networks.keys()],
    /** Subscriptions following events. */
    size: (): number => followed.size,
    /**
     * The subscriptions a log may be for: its topic0 (or, for anonymous events, its topic count)
     * followed on its contract or on any, its filter passed. Whether its topics and data fit the
     * event's ABI is the caller's to check (decodeFollowedLog). In order: those of its topic0, then
     * those of its topic count (each: on any contract without a filter, then with a filter), then
     * those on a contract list without a filter.
     */
    match(network: string, log: LogAddressAndTopics): readonly FollowedSubscription[] {
      const events = networks.get(network);
      if (!events) return EMPTY;
      const { topics } = log;
      logKeys.known = 0;
      if (found.length > 0) found.length = 0; // left by a match that threw
      const byTopic0 = bucketOfTopic0(events, topics);
      const byCount = events.anonymous[topics.length];
      if (byTopic0) matchBucket(byTopic0, log);
      if (byCount) matchBucket(byCount, log);
      const unfiltered = (byTopic0?.unfilteredScoped ?? 0) + (byCount?.unfilteredScoped ?? 0);
      if (unfiltered > 0 && unfilteredSlots.mayHold(log.address))
        withoutFilter.forEachWatcher(network, log.address, (entry) => {
          const filed = unfilteredByEntry[entry];
          if (filed && (filed.bucket === byTopic0 || filed.bucket === byCount) && !filed.anyContract)
            found.push(filed);
        });
      if (found.length === 0) return EMPTY;
      const out = found.slice();
      found.length = 0;
      return out;
    },
  };
}

export type EventIndex = ReturnType<typeof createEventIndex>;
export type { WatchedSubscription };
