/**
 * The contract events followed on every network, in memory beside the address index: which
 * CONTRACT_LOG_EVENT subscriptions a log may concern, found without looking at the others.
 *
 * A subscription is filed under its event's topic key (topic0, or for an anonymous event its
 * topic count), in the network's `any` buckets (any contract) or its `scoped` ones (a contract
 * list, kept in watch tables of their own so that lists of 100,000 contracts cost what address
 * lists cost). Inside a bucket, a subscription with a filter is filed under the allowed values of
 * its first filtered topic, so that 10,000 subscriptions of one event with different filters cost
 * a lookup per topic of a log, not a test each. A scoped bucket is crossed with the subscriptions
 * of the log's contract, whichever of the two is shorter.
 */
import type { Hex } from 'viem';
import { type FollowedEvent, passesFilter } from '../chains/evm/events.js';
import type { Family } from '../chains/networks.js';
import type { WatchedEndpoint, WatchedSubscription } from '../subscriptions/events.js';
import { createWatchTables, NONE } from './watch-tables.js';

/** A subscription following an event: its endpoint, and the event. */
export interface FollowedSubscription {
  endpoint: WatchedEndpoint;
  event: FollowedEvent;
  anyContract: boolean;
  /** The bucket it is filed in: topic0, or `anon:<topics>` for an anonymous event. */
  topicKey: string;
}

/** The subscriptions of a bucket, by the allowed values of their first filtered topic. */
interface FilterBucket {
  /** Its topic key (see topicKeyOf). */
  key: string;
  unfiltered: FollowedSubscription[];
  /** `<topic position>:<topic>` → subscriptions allowing that value there. */
  byTopic: Map<string, FollowedSubscription[]>;
  /** Topic positions some subscription of the bucket filters on first, with how many do. */
  positions: Map<number, number>;
  size: number;
}

interface NetworkEvents {
  any: Map<string, FilterBucket>;
  scoped: Map<string, FilterBucket>;
  size: number;
}

const EMPTY: readonly FollowedSubscription[] = Object.freeze([]);

/** The bucket of an event: its topic0, or for an anonymous event the number of topics it has. */
export function topicKeyOf(event: FollowedEvent): string {
  return event.topic0 ?? `anon:${event.topicCount}`;
}

/** The log topic a filter entry constrains: topic0 comes first unless the event is anonymous. */
const topicPosition = (event: FollowedEvent, input: number): number => input + (event.topic0 ? 1 : 0);

/** Where a subscription is filed inside its bucket: its first filtered topic, if any. */
function firstFiltered(event: FollowedEvent): { position: number; values: Hex[] } | undefined {
  const at = event.filter.findIndex((values) => values !== null);
  if (at < 0) return undefined;
  return { position: topicPosition(event, at), values: [...new Set(event.filter[at]!)] };
}

function emptyBucket(key: string): FilterBucket {
  return { key, unfiltered: [], byTopic: new Map(), positions: new Map(), size: 0 };
}

function without(list: FollowedSubscription[], followed: FollowedSubscription): void {
  const at = list.indexOf(followed);
  if (at >= 0) list.splice(at, 1);
}

function file(bucket: FilterBucket, followed: FollowedSubscription): void {
  bucket.size++;
  const first = firstFiltered(followed.event);
  if (!first) {
    bucket.unfiltered.push(followed);
    return;
  }
  bucket.positions.set(first.position, (bucket.positions.get(first.position) ?? 0) + 1);
  for (const value of first.values) {
    const key = `${first.position}:${value.toLowerCase()}`;
    const list = bucket.byTopic.get(key);
    if (list) list.push(followed);
    else bucket.byTopic.set(key, [followed]);
  }
}

function unfile(bucket: FilterBucket, followed: FollowedSubscription): void {
  bucket.size--;
  const first = firstFiltered(followed.event);
  if (!first) {
    without(bucket.unfiltered, followed);
    return;
  }
  const left = (bucket.positions.get(first.position) ?? 1) - 1;
  if (left === 0) bucket.positions.delete(first.position);
  else bucket.positions.set(first.position, left);
  for (const value of first.values) {
    const key = `${first.position}:${value.toLowerCase()}`;
    const list = bucket.byTopic.get(key);
    if (!list) continue;
    without(list, followed);
    if (list.length === 0) bucket.byTopic.delete(key);
  }
}

/** The bucket's subscriptions whose first filtered topic allows the log's (not yet checked further). */
function candidates(bucket: FilterBucket, topics: readonly Hex[]): FollowedSubscription[] {
  if (bucket.positions.size === 0) return bucket.unfiltered;
  const found = [...bucket.unfiltered];
  for (const position of bucket.positions.keys()) {
    const topic = topics[position];
    if (topic === undefined) continue;
    const list = bucket.byTopic.get(`${position}:${topic.toLowerCase()}`);
    if (list) for (const followed of list) found.push(followed);
  }
  return found;
}

/** A log as the matcher sees it: its contract (any case) and topics. */
export interface LogAddressAndTopics {
  address: string;
  topics: readonly Hex[];
}

export function createEventIndex(familyOf: (network: string) => Family | undefined) {
  /** The contract lists of scoped subscriptions, as address lists are kept. */
  const contracts = createWatchTables(familyOf);
  const followed = new Map<string, FollowedSubscription>();
  const networks = new Map<string, NetworkEvents>();

  function bucketsOf(network: string): NetworkEvents {
    let events = networks.get(network);
    if (!events) {
      events = { any: new Map(), scoped: new Map(), size: 0 };
      networks.set(network, events);
    }
    return events;
  }

  function forget(id: string): void {
    const known = followed.get(id);
    if (!known) return;
    followed.delete(id);
    const events = networks.get(known.endpoint.network)!;
    const buckets = known.anyContract ? events.any : events.scoped;
    const bucket = buckets.get(known.topicKey)!;
    unfile(bucket, known);
    if (bucket.size === 0) buckets.delete(known.topicKey);
    if (--events.size === 0) networks.delete(known.endpoint.network);
  }

  /** The scoped subscriptions of a bucket following the event on the log's contract. */
  function scopedMatches(
    network: string,
    bucket: FilterBucket,
    log: LogAddressAndTopics,
    out: FollowedSubscription[],
  ): void {
    const onContract = contracts.lookup(network, log.address);
    if (onContract.length === 0) return;
    const found = candidates(bucket, log.topics);
    if (onContract.length <= found.length) {
      for (const s of onContract) {
        const f = followed.get(s.id);
        if (f && f.topicKey === bucket.key && passesFilter(f.event, log.topics)) out.push(f);
      }
      return;
    }
    const ids = new Set(onContract.map((s) => s.id));
    for (const f of found) if (ids.has(f.endpoint.id) && passesFilter(f.event, log.topics)) out.push(f);
  }

  function bucketIn(buckets: Map<string, FilterBucket>, key: string): FilterBucket {
    let bucket = buckets.get(key);
    if (!bucket) {
      bucket = emptyBucket(key);
      buckets.set(key, bucket);
    }
    return bucket;
  }

  return {
    /**
     * Follows (or updates) a subscription's event; with `contracts` it then follows it on exactly
     * those, without it keeps the contracts it had. Returns its entry in the contract tables.
     */
    upsert(endpoint: WatchedEndpoint, contractsOf?: readonly string[]): number {
      const spec = endpoint.contractEvent!;
      forget(endpoint.id);
      const entry: FollowedSubscription = {
        endpoint,
        event: spec.event,
        anyContract: spec.anyContract,
        topicKey: topicKeyOf(spec.event),
      };
      followed.set(endpoint.id, entry);
      const events = bucketsOf(endpoint.network);
      events.size++;
      file(bucketIn(spec.anyContract ? events.any : events.scoped, entry.topicKey), entry);
      const subscription = contracts.upsert(endpoint);
      if (contractsOf !== undefined) {
        contracts.unwatchAll(subscription);
        contracts.reserve(subscription, contractsOf.length);
        for (const contract of contractsOf) contracts.watch(subscription, contract);
      }
      return subscription;
    },
    /** Adds and removes contracts of a subscription known here (others are ignored). */
    changeContracts(id: string, add: readonly string[], remove: readonly string[]): void {
      const subscription = contracts.find(id);
      if (subscription === NONE) return;
      for (const contract of remove) contracts.unwatch(subscription, contract);
      contracts.reserve(subscription, add.length);
      for (const contract of add) contracts.watch(subscription, contract);
    },
    remove(id: string): void {
      if (!followed.has(id)) return;
      forget(id);
      const subscription = contracts.find(id);
      if (subscription !== NONE) contracts.remove(subscription);
    },
    has: (id: string): boolean => followed.has(id),
    /** The contract tables, for a load to fill a page of contracts. */
    contracts,
    /** Whether any subscription follows an event on `network`. */
    follows: (network: string): boolean => networks.has(network),
    networks: (): string[] => [...networks.keys()],
    /** Subscriptions following events. */
    size: (): number => followed.size,
    /**
     * The subscriptions a log may be for: its topic0 (or, for anonymous events, its topic count)
     * followed on its contract or on any, its filter passed. Whether its topics and data fit the
     * event's ABI is the caller's to check (decodeFollowedLog).
     */
    match(network: string, log: LogAddressAndTopics): readonly FollowedSubscription[] {
      const events = networks.get(network);
      if (!events) return EMPTY;
      const out: FollowedSubscription[] = [];
      const keys =
        log.topics.length > 0 ? [log.topics[0]!.toLowerCase(), `anon:${log.topics.length}`] : ['anon:0'];
      for (const key of keys) {
        const any = events.any.get(key);
        if (any)
          for (const f of candidates(any, log.topics)) if (passesFilter(f.event, log.topics)) out.push(f);
        const scoped = events.scoped.get(key);
        if (scoped) scopedMatches(network, scoped, log, out);
      }
      return out;
    },
  };
}

export type EventIndex = ReturnType<typeof createEventIndex>;
export type { WatchedSubscription };
