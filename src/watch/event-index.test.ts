import crypto from 'node:crypto';
import { encodeAbiParameters, type Hex, pad, toEventSelector } from 'viem';
import { describe, expect, test } from 'vitest';
import { type FollowedEvent, parseFollowedEvent, passesFilter } from '../chains/evm/events.js';
import type { ContractEventSpec, WatchedEndpoint } from '../subscriptions/events.js';
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
