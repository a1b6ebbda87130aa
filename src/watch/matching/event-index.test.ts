import crypto from 'node:crypto';
import { encodeAbiParameters, type Hex, pad, toEventSelector } from 'viem';
import { describe, expect, test } from 'vitest';
import { passesFilter } from '../../chains/evm/event-filter.js';
import type { FollowedEvent } from '../../chains/evm/followed-event.js';
import { parseFollowedEvent } from '../../chains/evm/parse-followed-event.js';
import type { ContractEventSpec, WatchedEndpoint } from '../../subscriptions/events.js';
import { createAddressIndex } from './address-index.js';
import { createEventIndex } from './event-index.js';

const familyOf = (network: string) => (network === 'BTC' ? 'bitcoin' : 'evm') as 'evm' | 'bitcoin';
const TRANSFER = 'event Transfer(address indexed from, address indexed to, uint256 value)';
const TRANSFER_TOPIC = toEventSelector('Transfer(address,address,uint256)');
const APPROVAL = 'event Approval(address indexed owner, address indexed spender, uint256 value)';
const ANONYMOUS = 'event Noted(uint256 indexed a, uint256 indexed b) anonymous';

const randomAddress = (): Hex => `0x${crypto.randomBytes(20).toString('hex')}`;
const topicOf = (address: string): Hex => pad(address.toLowerCase() as Hex, { size: 32 });

function followed(event: string, filter?: Record<string, unknown>): FollowedEvent {
  const parsed = parseFollowedEvent(event, filter);
  if ('errors' in parsed) throw new Error(JSON.stringify(parsed.errors));
  return parsed.event;
}

let n = 0;
function endpoint(event: FollowedEvent, anyContract: boolean, network = 'ETH'): WatchedEndpoint {
  const contractEvent: ContractEventSpec = { event, anyContract, filter: null };
  return { id: `sub-${n++}`, accountId: 'a', network, confirmations: 1, mempool: false, contractEvent };
}

const transferLog = (contract: string, from: string, to: string) => ({
  address: contract,
  topics: [TRANSFER_TOPIC, topicOf(from), topicOf(to)],
});

const ids = (found: readonly { endpoint: WatchedEndpoint }[]) => found.map((f) => f.endpoint.id).sort();

describe('the event index', () => {
  test('any contract, one contract, a list: each subscription hears only its contracts', () => {
    const index = createEventIndex(familyOf);
    const [a, b, c] = [randomAddress(), randomAddress(), randomAddress()];
    const any = endpoint(followed(TRANSFER), true);
    const one = endpoint(followed(TRANSFER), false);
    const list = endpoint(followed(TRANSFER), false);
    const approvals = endpoint(followed(APPROVAL), true);
    index.upsert(any, []);
    index.upsert(one, [a]);
    index.upsert(list, [b.toUpperCase().replace('0X', '0x'), c]);
    index.upsert(approvals, []);
    const log = (contract: string) => transferLog(contract, randomAddress(), randomAddress());
    expect(ids(index.match('ETH', log(a)))).toEqual(ids([{ endpoint: any }, { endpoint: one }]));
    expect(ids(index.match('ETH', log(b)))).toEqual(ids([{ endpoint: any }, { endpoint: list }]));
    expect(ids(index.match('ETH', log(c)))).toEqual(ids([{ endpoint: any }, { endpoint: list }]));
    expect(ids(index.match('ETH', log(randomAddress())))).toEqual([any.id]);
    expect(index.match('POL', log(a))).toEqual([]);
    // Contracts added and removed; a removal leaves the others.
    index.changeContracts(list.id, [a], [b]);
    expect(ids(index.match('ETH', log(b)))).toEqual([any.id]);
    expect(ids(index.match('ETH', log(a)))).toEqual(
      ids([{ endpoint: any }, { endpoint: one }, { endpoint: list }]),
    );
    index.remove(any.id);
    index.remove(one.id);
    expect(ids(index.match('ETH', log(a)))).toEqual([list.id]);
    expect(index.size()).toBe(2);
    index.remove(list.id);
    index.remove(approvals.id);
    expect(index.follows('ETH')).toBe(false);
  });

  test('an anonymous event is matched by its contract and its number of topics', () => {
    const index = createEventIndex(familyOf);
    const contract = randomAddress();
    const noted = endpoint(followed(ANONYMOUS), false);
    index.upsert(noted, [contract]);
    const word = (v: bigint) => encodeAbiParameters([{ type: 'uint256' }], [v]);
    expect(ids(index.match('ETH', { address: contract, topics: [word(1n), word(2n)] }))).toEqual([noted.id]);
    expect(index.match('ETH', { address: contract, topics: [word(1n), word(2n), word(3n)] })).toEqual([]);
    expect(index.match('ETH', { address: randomAddress(), topics: [word(1n), word(2n)] })).toEqual([]);
  });

  test('10,000 subscriptions of one event with different filters: each log finds its own, as a test of every one would', () => {
    const index = createEventIndex(familyOf);
    const token = randomAddress();
    const recipients = Array.from({ length: 10_000 }, randomAddress);
    const all: WatchedEndpoint[] = [];
    recipients.forEach((to, i) => {
      // Half on any contract, half on the token; some by sender and recipient, some by two recipients.
      const filter = i % 3 === 0 ? { to: [to, recipients[(i + 1) % recipients.length]!] } : { to };
      const e = endpoint(followed(TRANSFER, filter), i % 2 === 0);
      index.upsert(e, i % 2 === 0 ? [] : [token]);
      all.push(e);
    });
    const unfiltered = endpoint(followed(TRANSFER), false);
    index.upsert(unfiltered, [token]);
    all.push(unfiltered);
    const reference = (log: { address: string; topics: readonly Hex[] }) =>
      all
        .filter((e) => {
          const spec = e.contractEvent!;
          if (!spec.anyContract && log.address.toLowerCase() !== token.toLowerCase()) return false;
          return passesFilter(spec.event, log.topics);
        })
        .map((e) => e.id)
        .sort();
    for (let i = 0; i < 300; i++) {
      const to = i % 4 === 0 ? randomAddress() : recipients[(i * 37) % recipients.length]!;
      const log = transferLog(i % 2 === 0 ? token : randomAddress(), randomAddress(), to);
      expect(ids(index.match('ETH', log))).toEqual(reference(log));
    }
  });
});

describe('the address index with events', () => {
  test('an event subscription is not an address subscription: its contract is not a watched address', () => {
    const index = createAddressIndex(familyOf);
    const contract = randomAddress();
    const e = endpoint(followed(TRANSFER), false);
    index.apply({ type: 'upsert', subscription: { ...e, address: contract } });
    expect(index.lookup('ETH', contract)).toEqual([]);
    expect(index.networks()).toEqual(['ETH']);
    expect(index.followsEvents('ETH')).toBe(true);
    expect(ids(index.matchLog('ETH', transferLog(contract, randomAddress(), randomAddress())))).toEqual([
      e.id,
    ]);
    const other = randomAddress();
    index.apply({ type: 'addresses', id: e.id, add: [other], remove: [contract] });
    expect(index.matchLog('ETH', transferLog(contract, randomAddress(), randomAddress()))).toEqual([]);
    expect(ids(index.matchLog('ETH', transferLog(other, randomAddress(), randomAddress())))).toEqual([e.id]);
    index.apply({ type: 'remove', id: e.id });
    expect(index.followsEvents('ETH')).toBe(false);
    expect(index.networks()).toEqual([]);
  });
});

describe('the event index under changes', () => {
  test('a filter position with many values: values added once it keeps their bits are found, removed ones are not', () => {
    const index = createEventIndex(familyOf);
    const many = Array.from({ length: 200 }, randomAddress);
    const crowd = endpoint(followed(TRANSFER, { to: many }), true);
    index.upsert(crowd, []);
    const from = randomAddress();
    // The first match builds the position's bits; what comes after is added to them.
    expect(ids(index.match('ETH', transferLog(randomAddress(), from, many[7]!)))).toEqual([crowd.id]);
    const late = Array.from({ length: 50 }, () => {
      const to = randomAddress();
      const e = endpoint(followed(TRANSFER, { to }), true);
      index.upsert(e, []);
      return { to, id: e.id };
    });
    for (const { to, id } of late)
      expect(ids(index.match('ETH', transferLog(randomAddress(), from, to)))).toEqual([id]);
    index.remove(crowd.id);
    expect(index.match('ETH', transferLog(randomAddress(), from, many[7]!))).toEqual([]);
    for (const { to, id } of late)
      expect(ids(index.match('ETH', transferLog(randomAddress(), from, to)))).toEqual([id]);
  });

  test('filters of many values, values and contracts that share the digits the index keys them by, lists with and without a filter, moves between them: each log finds what a test of every subscription would', () => {
    let seed = 30;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
    // Addresses alike in their last 7 hex digits (the key of a topic value) and in their last 6
    // (a contract's slot), so that lookups by key find others to tell apart.
    const alike = (base: string, count: number) =>
      Array.from({ length: count }, () => `0x${randomAddress().slice(2, 30)}${base.slice(-12)}` as Hex);
    const people = [...alike(randomAddress(), 40), ...Array.from({ length: 160 }, randomAddress)];
    const contracts = [...alike(randomAddress(), 8), ...Array.from({ length: 22 }, randomAddress)];
    const mixedCase = (address: string) => `0x${address.slice(2, 12).toUpperCase()}${address.slice(12)}`;
    const word = (v: number) => encodeAbiParameters([{ type: 'uint256' }], [BigInt(v)]);

    const index = createEventIndex(familyOf);
    const live = new Map<string, { spec: ContractEventSpec; contracts: Set<string> }>();
    const randomEvent = (): { event: FollowedEvent; anonymous: boolean } => {
      const r = random();
      if (r < 0.1)
        return {
          event: followed(ANONYMOUS, random() < 0.5 ? { a: String(Math.floor(random() * 5)) } : undefined),
          anonymous: true,
        };
      if (r < 0.25)
        return {
          event: followed(APPROVAL, random() < 0.5 ? { owner: pick(people) } : undefined),
          anonymous: false,
        };
      const filters: (Record<string, unknown> | undefined)[] = [
        undefined,
        { to: pick(people) },
        { from: pick(people) },
        { from: pick(people), to: [pick(people), pick(people)] },
        // Past the size from which the index keeps bits of a position's keys.
        { to: Array.from({ length: 100 }, () => pick(people)).filter((p, i, all) => all.indexOf(p) === i) },
      ];
      return { event: followed(TRANSFER, pick(filters)), anonymous: false };
    };
    const someContracts = () =>
      Array.from({ length: 1 + Math.floor(random() * 4) }, () => mixedCase(pick(contracts)));
    const upsert = (id: string) => {
      const { event, anonymous } = randomEvent();
      const anyContract = !anonymous && random() < 0.4;
      const known = live.get(id);
      // A known subscription may keep its contracts (an upsert without them).
      const keep = known !== undefined && !anyContract && !known.spec.anyContract && random() < 0.5;
      const list = anyContract ? [] : keep ? undefined : someContracts();
      const spec: ContractEventSpec = { event, anyContract, filter: null };
      index.upsert(
        { id, accountId: 'a', network: 'ETH', confirmations: 1, mempool: false, contractEvent: spec },
        list,
      );
      live.set(id, {
        spec,
        contracts: list === undefined ? known!.contracts : new Set(list.map((c) => c.toLowerCase())),
      });
    };
    const reference = (log: { address: string; topics: readonly Hex[] }) =>
      [...live.entries()]
        .filter(([, { spec, contracts: on }]) => {
          const { event } = spec;
          const keyed = event.topic0
            ? log.topics[0] === event.topic0
            : log.topics.length === event.topicCount;
          if (!keyed || !(spec.anyContract || on.has(log.address.toLowerCase()))) return false;
          return passesFilter(event, log.topics);
        })
        .map(([id]) => id)
        .sort();
    const randomLog = () => {
      const address = random() < 0.8 ? pick(contracts) : randomAddress();
      const r = random();
      if (r < 0.15)
        return { address, topics: [word(Math.floor(random() * 5)), word(Math.floor(random() * 5))] };
      const topic0 = r < 0.3 ? toEventSelector('Approval(address,address,uint256)') : TRANSFER_TOPIC;
      return { address, topics: [topic0, topicOf(pick(people)), topicOf(pick(people))] };
    };

    let next = 0;
    for (let round = 0; round < 60; round++) {
      for (let change = 0; change < 10; change++) {
        const ids = [...live.keys()];
        const r = random();
        if (r < 0.45 || ids.length < 5) upsert(`sub-${next++}`);
        else if (r < 0.65) upsert(pick(ids));
        else if (r < 0.85) {
          const id = pick(ids);
          const entry = live.get(id)!;
          if (entry.spec.anyContract) continue;
          const add = someContracts();
          const remove = [...entry.contracts].filter(() => random() < 0.5);
          index.changeContracts(id, add, remove);
          for (const c of remove) entry.contracts.delete(c);
          for (const c of add) entry.contracts.add(c.toLowerCase());
        } else {
          const id = pick(ids);
          index.remove(id);
          live.delete(id);
        }
      }
      for (let i = 0; i < 40; i++) {
        const log = randomLog();
        expect(ids(index.match('ETH', log))).toEqual(reference(log));
      }
    }
    expect(index.size()).toBe(live.size);
  });
});
