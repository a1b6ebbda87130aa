import crypto from 'node:crypto';
import { sql } from 'drizzle-orm';
import { v7 as uuidv7 } from 'uuid';
import { getAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { backends, createTestEnvironment, type TestEnvironment } from '../../../test/helpers/env.js';
import { parseFollowedEvent } from '../../chains/evm/parse-followed-event.js';
import type { Family } from '../../chains/networks.js';
import { openStore, type Store } from '../../store/db.js';
import type { ContractEventSpec } from '../../subscriptions/events.js';
import { createAddressIndex, type WatchedSubscription } from './address-index.js';
import { createKeyTable } from './key-table.js';

const FAMILIES: Record<string, Family> = {
  ETH: 'evm',
  POL: 'evm',
  BTC: 'bitcoin',
  ALGO: 'algorand',
  SOL: 'solana',
};
const familyOf = (network: string) => FAMILIES[network];

const EVM = '0xd8dA6BF26964aF9D7eEd9e03E53415D37aA96045';
const randomEvm = () => `0x${crypto.randomBytes(20).toString('hex')}`;

let counter = 0;
function watched(
  network: string,
  address: string,
  fields: Partial<WatchedSubscription> = {},
): WatchedSubscription {
  return {
    id: uuidv7(),
    accountId: `account-${counter++ % 3}`,
    network,
    address,
    confirmations: 1,
    mempool: false,
    ...fields,
  };
}

function indexOf(...subscriptions: WatchedSubscription[]) {
  const index = createAddressIndex(familyOf);
  for (const subscription of subscriptions) index.apply({ type: 'upsert', subscription });
  return index;
}

describe('the key table', () => {
  const key = (text: string) => new TextEncoder().encode(text);

  test('keys that all hash alike are told apart, removed and found again', () => {
    // Every key in one probe run: finding one compares against the others.
    const table = createKeyTable(undefined, () => 7);
    const keys = Array.from({ length: 500 }, (_, i) => key(`key-${i}`));
    const entries = keys.map((k) => table.add(k, k.length));
    expect(new Set(entries).size).toBe(500);
    for (const [i, k] of keys.entries()) expect(table.find(k, k.length)).toBe(entries[i]);
    // Removing from the middle of the run must leave the later keys reachable.
    for (let i = 0; i < 500; i += 2) table.remove(entries[i]!);
    for (const [i, k] of keys.entries()) expect(table.find(k, k.length)).toBe(i % 2 === 0 ? -1 : entries[i]);
    expect(table.size).toBe(250);
    for (let i = 0; i < 500; i += 2) {
      table.add(keys[i]!, keys[i]!.length);
      expect(table.added).toBe(true);
    }
    table.add(keys[1]!, keys[1]!.length);
    expect(table.added).toBe(false);
    for (const k of keys)
      expect(new TextDecoder().decode(table.keyOf(table.find(k, k.length)))).toBe(
        new TextDecoder().decode(k),
      );
  });

  test('keys sharing a long prefix, through growth, removal and the arena compacted', () => {
    const table = createKeyTable();
    const prefix = 'x'.repeat(60);
    const keys = Array.from({ length: 20_000 }, (_, i) => key(`${prefix}${i}`));
    const entries = keys.map((k) => table.add(k, k.length));
    // Remove most of them several times over, so the arena fills with dead keys and is compacted.
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < keys.length; i++)
        if (i % 10 !== 0) table.remove(table.find(keys[i]!, keys[i]!.length));
      for (let i = 0; i < keys.length; i++) if (i % 10 !== 0) table.add(keys[i]!, keys[i]!.length);
    }
    expect(table.size).toBe(20_000);
    for (const [i, k] of keys.entries()) {
      const entry = table.find(k, k.length);
      expect(entry).toBeGreaterThanOrEqual(0);
      if (i % 10 === 0) expect(entry).toBe(entries[i]);
      expect(new TextDecoder().decode(table.keyOf(entry))).toBe(`${prefix}${i}`);
    }
    expect(table.entries).toBe(20_000);
  });
});

describe('the address index', () => {
  test('an EVM address matches in any case and reads back as it was stored', () => {
    const lower = EVM.toLowerCase();
    const s = watched('ETH', EVM);
    const index = indexOf(s);
    for (const form of [EVM, lower, `0x${lower.slice(2).toUpperCase()}`, `0X${lower.slice(2)}`])
      expect(index.lookup('ETH', form)).toEqual([s]);
    expect(index.lookup('ETH', `${lower.slice(0, -1)}7`)).toEqual([]);
    expect(index.lookup('POL', lower)).toEqual([]);
    expect(index.lookup('BSC', lower)).toEqual([]);
    // Any case, not only EIP-55, as given.
    const mixed = '0xAbCdEf0123456789aBcDeF0123456789ABCDEFab';
    const other = watched('ETH', mixed);
    index.apply({ type: 'upsert', subscription: other });
    expect(index.lookup('ETH', mixed.toLowerCase())).toEqual([other]);
  });

  test('strings that are not hex addresses are watched as strings (lower case on EVM networks)', () => {
    const s = watched('ETH', 'not-an-address');
    const t = watched('ETH', `0x${'g'.repeat(40)}`);
    const index = indexOf(s, t);
    expect(index.lookup('ETH', 'NOT-an-address')).toEqual([s]);
    expect(index.lookup('ETH', `0x${'G'.repeat(40)}`)).toEqual([t]);
    expect(index.lookup('ETH', `0x${'0'.repeat(40)}`)).toEqual([]);
  });

  test("every other family's addresses match exactly as stored", () => {
    const addresses: [string, string][] = [
      ['BTC', '1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa'],
      ['BTC', '3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy'],
      ['BTC', 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq'],
      ['BTC', 'bc1p5d7rjq7g6rdk2yhzks9smlaqtedr4dekq08ge8ztwac72sfr9rusxg3297'],
      ['ALGO', '25M5BT2DMMED3V6CWDEYKSNEFGPXX4QBIINCOICLXXRU3UGTSGRMF3MTOE'],
      ['SOL', 'So11111111111111111111111111111111111111112'],
      ['SOL', '11111111111111111111111111111111'],
    ];
    const subscriptions = addresses.map(([network, address]) => watched(network, address));
    const index = indexOf(...subscriptions);
    for (const [i, [network, address]] of addresses.entries()) {
      expect(index.lookup(network, address)).toEqual([subscriptions[i]]);
      // Base58, base32 and bech32 spellings are matched as stored: another case is another address.
      const recased = address.toLowerCase() === address ? address.toUpperCase() : address.toLowerCase();
      if (recased !== address) expect(index.lookup(network, recased)).toEqual([]);
    }
    expect(index.lookup('BTC', 'So11111111111111111111111111111111111111112')).toEqual([]);
    expect(index.addressCounts()).toEqual({ BTC: 4, ALGO: 1, SOL: 2 });
    expect(index.networks()).toEqual(['BTC', 'ALGO', 'SOL']);
  });

  test('several subscriptions on one address, in the order they came; each removed alone', () => {
    const a = watched('ETH', EVM, { confirmations: 12 });
    const b = watched('ETH', EVM.toLowerCase(), { mempool: true, accountId: 'other' });
    const c = watched('ETH', EVM);
    const index = indexOf(a, b, c);
    expect(index.lookup('ETH', EVM)).toEqual([a, b, c]);
    expect(index.addressCounts()).toEqual({ ETH: 1 });
    expect(index.size()).toBe(3);
    expect(index.watchesMempool('ETH')).toBe(true);
    index.apply({ type: 'remove', id: b.id });
    expect(index.lookup('ETH', EVM)).toEqual([a, c]);
    expect(index.watchesMempool('ETH')).toBe(false);
    index.apply({ type: 'remove', id: a.id });
    index.apply({ type: 'remove', id: a.id });
    expect(index.lookup('ETH', EVM)).toEqual([c]);
    index.apply({ type: 'remove', id: c.id });
    expect(index.lookup('ETH', EVM)).toEqual([]);
    expect(index.size()).toBe(0);
    expect(index.networks()).toEqual([]);
    expect(index.addressCounts()).toEqual({ ETH: 0 });
    // Removed and added again.
    index.apply({ type: 'upsert', subscription: b });
    expect(index.lookup('ETH', EVM)).toEqual([b]);
    expect(index.watchesMempool('ETH')).toBe(true);
  });

  test("an upsert changes a subscription's address, network or fields in place", () => {
    const s = watched('ETH', EVM, { mempool: true });
    const index = indexOf(s);
    const moved = { ...s, address: randomEvm() };
    index.apply({ type: 'upsert', subscription: moved });
    expect(index.lookup('ETH', EVM)).toEqual([]);
    expect(index.lookup('ETH', moved.address)).toEqual([moved]);
    expect(index.addressCounts()).toEqual({ ETH: 1 });
    const recased = { ...moved, address: getAddress(moved.address), confirmations: 30, mempool: false };
    index.apply({ type: 'upsert', subscription: recased });
    expect(index.lookup('ETH', moved.address)).toEqual([recased]);
    expect(index.watchesMempool('ETH')).toBe(false);
    const elsewhere = { ...recased, network: 'BTC', address: 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq' };
    index.apply({ type: 'upsert', subscription: elsewhere });
    expect(index.lookup('ETH', moved.address)).toEqual([]);
    expect(index.lookup('BTC', elsewhere.address)).toEqual([elsewhere]);
    expect(index.networks()).toEqual(['BTC']);
    expect(index.size()).toBe(1);
  });

  test('ids that are not UUIDs, and UUIDs in upper case, read back as given', () => {
    const subscriptions = ['sub-1', 'ünïcode', uuidv7().toUpperCase(), uuidv7()].map((id) =>
      watched('ETH', randomEvm(), { id }),
    );
    const index = indexOf(...subscriptions);
    for (const s of subscriptions) expect(index.lookup('ETH', s.address)).toEqual([s]);
    index.apply({ type: 'remove', id: subscriptions[2]!.id.toLowerCase() });
    expect(index.size()).toBe(4);
    index.apply({ type: 'remove', id: subscriptions[2]!.id });
    expect(index.size()).toBe(3);
  });

  test('keys longer than the scratch buffer (100-character ids and addresses) are found as they were added', () => {
    // The first key past 85 characters replaces the encoder's buffer: a lookup that read the old
    // buffer before encoding into the new one would find nothing.
    const long = (c: string) => c.repeat(100);
    const subscription = watched('ALGO', long('A'), { id: long('i') });
    const index = createAddressIndex(familyOf);
    index.apply({ type: 'upsert', subscription });
    expect(index.lookup('ALGO', long('A'))).toEqual([subscription]);
    index.apply({ type: 'addresses', id: long('i'), add: [long('B')], remove: [] });
    expect(index.lookup('ALGO', long('B'))).toEqual([{ ...subscription, address: long('B') }]);
    index.apply({ type: 'remove', id: long('i') });
    expect(index.size()).toBe(0);
    expect(index.lookup('ALGO', long('A'))).toEqual([]);
  });

  test('many addresses through growth, half removed and added back, against a Map of them', () => {
    const index = createAddressIndex(familyOf);
    const reference = new Map<string, WatchedSubscription>();
    for (let i = 0; i < 12_000; i++) {
      const s = watched(i % 3 === 0 ? 'POL' : 'ETH', randomEvm(), { confirmations: i });
      reference.set(s.id, s);
      index.apply({ type: 'upsert', subscription: s });
    }
    const all = [...reference.values()];
    for (const [i, s] of all.entries()) if (i % 2 === 0) index.apply({ type: 'remove', id: s.id });
    for (const [i, s] of all.entries()) {
      const found = index.lookup(s.network, s.address);
      expect(found).toEqual(i % 2 === 0 ? [] : [s]);
    }
    for (const [i, s] of all.entries()) if (i % 2 === 0) index.apply({ type: 'upsert', subscription: s });
    for (const s of all) expect(index.lookup(s.network, s.address)).toEqual([s]);
    expect(index.size()).toBe(12_000);
    expect(index.addressCounts()).toEqual({ POL: 4_000, ETH: 8_000 });
  });
});

describe('subscriptions of many addresses', () => {
  const endpoint = (fields: Partial<WatchedSubscription> = {}) => {
    const { address: _address, ...rest } = watched('ETH', EVM, fields);
    return rest;
  };
  const as = (s: ReturnType<typeof endpoint>, address: string): WatchedSubscription => ({ ...s, address });

  test('each match names the address of the list that matched; removal from the middle of a long list', () => {
    const index = createAddressIndex(familyOf);
    const list = endpoint();
    const addresses = Array.from({ length: 10_000 }, () => getAddress(randomEvm()));
    index.apply({ type: 'upsert', subscription: list, addresses });
    expect(index.size()).toBe(1);
    expect(index.watches()).toBe(10_000);
    for (const address of addresses.filter((_, i) => i % 97 === 0))
      expect(index.lookup('ETH', address.toLowerCase())).toEqual([as(list, address)]);
    // Every other one removed, in an order unlike the one they were added in.
    const removed = addresses.filter((_, i) => i % 2 === 1).reverse();
    index.apply({ type: 'addresses', id: list.id, add: [], remove: removed });
    expect(index.watches()).toBe(5_000);
    for (const [i, address] of addresses.entries())
      expect(index.lookup('ETH', address)).toEqual(i % 2 === 1 ? [] : [as(list, address)]);
    expect(index.addressCounts()).toEqual({ ETH: 5_000 });
  });

  test('adding a watched address or removing an unwatched one changes nothing; repeats count once', () => {
    const index = createAddressIndex(familyOf);
    const list = endpoint();
    const [a, b, c] = [randomEvm(), randomEvm(), randomEvm()].map((x) => getAddress(x));
    index.apply({ type: 'upsert', subscription: list, addresses: [a!, a!] });
    index.apply({ type: 'addresses', id: list.id, add: [a!, b!, b!.toLowerCase()], remove: [c!] });
    expect(index.watches()).toBe(2);
    expect(index.lookup('ETH', b!)).toEqual([as(list, b!)]);
    index.apply({ type: 'addresses', id: list.id, add: [], remove: [a!, a!] });
    expect(index.lookup('ETH', a!)).toEqual([]);
    expect(index.watches()).toBe(1);
    // Changes of a subscription the index does not know are ignored (deleted before it came).
    index.apply({ type: 'addresses', id: uuidv7(), add: [c!], remove: [] });
    expect(index.lookup('ETH', c!)).toEqual([]);
  });

  test('two lists sharing addresses: one match each, removing from one leaves the other', () => {
    const index = createAddressIndex(familyOf);
    const first = endpoint({ confirmations: 3 });
    const second = endpoint({ mempool: true });
    const shared = getAddress(randomEvm());
    const own = getAddress(randomEvm());
    index.apply({ type: 'upsert', subscription: first, addresses: [shared, own] });
    index.apply({ type: 'upsert', subscription: second, addresses: [shared] });
    expect(index.lookup('ETH', shared)).toEqual([as(first, shared), as(second, shared)]);
    expect(index.watchesMempool('ETH')).toBe(true);
    index.apply({ type: 'addresses', id: first.id, add: [], remove: [shared] });
    expect(index.lookup('ETH', shared)).toEqual([as(second, shared)]);
    expect(index.lookup('ETH', own)).toEqual([as(first, own)]);
    index.apply({ type: 'remove', id: second.id });
    expect(index.lookup('ETH', shared)).toEqual([]);
    expect(index.watchesMempool('ETH')).toBe(false);
    expect(index.addressCounts()).toEqual({ ETH: 1 });
  });

  test('an upsert without addresses keeps them; with addresses, it watches exactly those', () => {
    const index = createAddressIndex(familyOf);
    const list = endpoint();
    const [a, b, c] = [randomEvm(), randomEvm(), randomEvm()].map((x) => getAddress(x));
    index.apply({ type: 'upsert', subscription: list, addresses: [a!, b!] });
    const slower = { ...list, confirmations: 12 };
    index.apply({ type: 'upsert', subscription: slower });
    expect(index.lookup('ETH', a!)).toEqual([as(slower, a!)]);
    index.apply({ type: 'upsert', subscription: slower, addresses: [b!, c!] });
    expect(index.lookup('ETH', a!)).toEqual([]);
    expect(index.lookup('ETH', c!)).toEqual([as(slower, c!)]);
    expect(index.watches()).toBe(2);
    // A subscription's freed watches are reused by the next one's.
    index.apply({ type: 'remove', id: list.id });
    expect(index.watches()).toBe(0);
    const next = endpoint();
    index.apply({ type: 'upsert', subscription: next, addresses: [a!, b!, c!] });
    for (const address of [a!, b!, c!]) expect(index.lookup('ETH', address)).toEqual([as(next, address)]);
  });
});

describe.each(backends)('load on %s', (backend) => {
  let environment: TestEnvironment;
  let store: Store;
  const account = uuidv7();

  beforeAll(async () => {
    environment = await createTestEnvironment(backend);
    store = await openStore(
      environment.databaseUrl ? { databaseUrl: environment.databaseUrl } : { pgliteDir: environment.dataDir },
    );
    await store.migrate();
    await store.db.execute(
      sql`INSERT INTO accounts (id, name, created_at) VALUES (${account}, 'index', now())`,
    );
  });
  afterAll(async () => {
    await store?.close();
    await environment?.cleanup();
  });

  async function insert(s: WatchedSubscription, type = 'ADDRESS_TRANSACTION'): Promise<void> {
    await store.db.execute(sql`
      INSERT INTO subscriptions (id, account_id, type, network, address, url, mempool, confirmations,
        secret, callback_token, created_at, address_count)
      VALUES (${s.id}, ${s.accountId}, ${type}, ${s.network}, ${s.address}, 'http://127.0.0.1/', ${s.mempool},
        ${s.confirmations}, '{}', '{}', now(), 1)`);
    await store.db.execute(sql`
      INSERT INTO subscription_addresses (subscription_id, network, address, created_at)
      VALUES (${s.id}, ${s.network}, ${s.address}, now())`);
  }

  test('reads every live address subscription over several pages, and a reload drops what was deleted', async () => {
    const rows = Array.from({ length: 25_001 }, (_, i) =>
      watched(i % 2 ? 'ETH' : 'BTC', i % 2 ? getAddress(randomEvm()) : `bc1q${i}`, {
        accountId: account,
        confirmations: i % 7,
        mempool: i % 5 === 0,
      }),
    );
    // In bulk: one statement per 5,000 rows.
    for (let start = 0; start < rows.length; start += 5_000) {
      const chunk = rows.slice(start, start + 5_000);
      await store.db.execute(sql`
        INSERT INTO subscriptions (id, account_id, type, network, address, url, mempool, confirmations,
          secret, callback_token, created_at, address_count)
        SELECT id::uuid, ${account}::uuid, 'ADDRESS_TRANSACTION', network, address, 'http://127.0.0.1/',
          mempool, confirmations, '{}', '{}', now(), 1
        FROM json_to_recordset(${JSON.stringify(chunk)}::json)
          AS r(id text, network text, address text, mempool boolean, confirmations int)`);
      await store.db.execute(sql`
        INSERT INTO subscription_addresses (subscription_id, network, address, created_at)
        SELECT id::uuid, network, address, now()
        FROM json_to_recordset(${JSON.stringify(chunk)}::json) AS r(id text, network text, address text)`);
    }
    const deleted = watched('ETH', randomEvm(), { accountId: account });
    await insert(deleted);
    await store.db.execute(sql`UPDATE subscriptions SET deleted_at = now() WHERE id = ${deleted.id}`);
    await insert(watched('ETH', randomEvm(), { accountId: account }), 'REGISTRY_EVENTS');

    const index = createAddressIndex(familyOf);
    // Known before the load, gone from the database: dropped by it.
    const stale = watched('ETH', randomEvm(), { accountId: account });
    index.apply({ type: 'upsert', subscription: stale });
    expect(await index.load(store.db)).toBe(rows.length);
    expect(index.size()).toBe(rows.length);
    expect(index.lookup('ETH', stale.address)).toEqual([]);
    expect(index.lookup('ETH', deleted.address)).toEqual([]);
    for (const s of rows.filter((_, i) => i % 997 === 0))
      expect(index.lookup(s.network, s.address)).toEqual([s]);
    expect(index.watchesMempool('ETH')).toBe(true);

    // Deleted meanwhile, and a change applied while a reload runs: the reload keeps the change.
    const gone = rows[1]!;
    await store.db.execute(sql`UPDATE subscriptions SET deleted_at = now() WHERE id = ${gone.id}`);
    const arriving = watched('POL', randomEvm(), { accountId: account });
    const reload = index.load(store.db);
    index.apply({ type: 'upsert', subscription: arriving });
    expect(await reload).toBe(rows.length - 1);
    expect(index.lookup('ETH', gone.address)).toEqual([]);
    expect(index.lookup('POL', arriving.address)).toEqual([arriving]);
    expect(index.size()).toBe(rows.length);
    expect(index.lookup(rows[3]!.network, rows[3]!.address)).toEqual([rows[3]]);
  });

  test('lists over several pages of addresses; a deleted list and removed addresses are not watched', async () => {
    const list = watched('ETH', EVM, { accountId: account, confirmations: 4 });
    const dead = watched('ETH', EVM, { accountId: account });
    const addresses = Array.from({ length: 2_500 }, () => getAddress(randomEvm()));
    for (const [s, deleted] of [
      [list, false],
      [dead, true],
    ] as const) {
      await store.db.execute(sql`
        INSERT INTO subscriptions (id, account_id, type, network, url, mempool, confirmations,
          secret, callback_token, created_at, address_count, deleted_at)
        VALUES (${s.id}, ${account}, 'ADDRESS_TRANSACTION', 'ETH', 'http://127.0.0.1/', false, ${s.confirmations},
          '{}', '{}', now(), ${addresses.length}, ${deleted ? sql`now()` : null})`);
      await store.db.execute(sql`
        INSERT INTO subscription_addresses (subscription_id, network, address, created_at)
        SELECT ${s.id}::uuid, 'ETH', a, now() FROM json_array_elements_text(${JSON.stringify(addresses)}::json) a`);
    }
    const index = createAddressIndex(familyOf, { subscriptions: 10_000, addresses: 1_000 });
    await index.load(store.db);
    const { address: _address, ...fields } = list;
    for (const address of addresses.filter((_, i) => i % 13 === 0))
      expect(index.lookup('ETH', address.toLowerCase())).toEqual([{ ...fields, address }]);
    const ids = await index.lookup('ETH', addresses[0]!).map((s) => s.id);
    expect(ids).toEqual([list.id]);

    // Removed in the database while the index was not listening: a reload drops it.
    await store.db.execute(
      sql`DELETE FROM subscription_addresses WHERE subscription_id = ${list.id} AND address = ${addresses[1]!}`,
    );
    await index.load(store.db);
    expect(index.lookup('ETH', addresses[1]!)).toEqual([]);
    expect(index.lookup('ETH', addresses[2]!)).toEqual([{ ...fields, address: addresses[2] }]);
  });

  test('event subscriptions and their contracts over several pages of contracts: with and without a filter, on any contract, one deleted', async () => {
    const TRANSFER = 'event Transfer(address indexed from, address indexed to, uint256 value)';
    const topic = (address: string) => `0x${address.slice(2).toLowerCase().padStart(64, '0')}` as const;
    const spec = (filter: Record<string, unknown> | undefined, anyContract: boolean): ContractEventSpec => {
      const parsed = parseFollowedEvent(TRANSFER, filter);
      if ('errors' in parsed) throw new Error(JSON.stringify(parsed.errors));
      return { event: parsed.event, anyContract, filter: filter ?? null };
    };
    const to = getAddress(randomEvm());
    const contracts = Array.from({ length: 1_500 }, () => getAddress(randomEvm()));
    const subscriptions = [
      { id: uuidv7(), spec: spec({ to }, false), contracts, deleted: false },
      { id: uuidv7(), spec: spec(undefined, false), contracts: contracts.slice(0, 1_200), deleted: false },
      { id: uuidv7(), spec: spec({ to }, true), contracts: [], deleted: false },
      { id: uuidv7(), spec: spec(undefined, false), contracts, deleted: true },
    ];
    for (const s of subscriptions) {
      await store.db.execute(sql`
        INSERT INTO subscriptions (id, account_id, type, network, url, mempool, confirmations, secret,
          callback_token, created_at, address_count, contract_event, deleted_at)
        VALUES (${s.id}, ${account}, 'CONTRACT_LOG_EVENT', 'POL', 'http://127.0.0.1/', false, 1, '{}', '{}', now(),
          ${s.contracts.length}, ${JSON.stringify(s.spec)}::jsonb, ${s.deleted ? sql`now()` : null})`);
      await store.db.execute(sql`
        INSERT INTO subscription_addresses (subscription_id, network, address, created_at)
        SELECT ${s.id}::uuid, 'POL', a, now() FROM json_array_elements_text(${JSON.stringify(s.contracts)}::json) a`);
    }
    // Pages of 1,000 contracts (the database holds the other tests' 25,000 subscriptions too).
    const index = createAddressIndex(familyOf, { subscriptions: 10_000, addresses: 1_000 });
    await index.load(store.db);
    expect(index.eventSubscriptions()).toBe(3);
    const [filtered, unfiltered, any] = subscriptions.map((s) => s.id);
    const log = (contract: string, recipient: string) => ({
      address: contract.toLowerCase(),
      topics: [
        '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef',
        topic(randomEvm()),
        topic(recipient),
      ] as `0x${string}`[],
    });
    const found = (l: ReturnType<typeof log>) =>
      index
        .matchLog('POL', l)
        .map((f) => f.endpoint.id)
        .sort();
    expect(found(log(contracts[10]!, to))).toEqual([filtered, unfiltered, any].sort());
    expect(found(log(contracts[1_300]!, to))).toEqual([filtered, any].sort());
    expect(found(log(contracts[1_300]!, randomEvm()))).toEqual([]);
    expect(found(log(contracts[5]!, randomEvm()))).toEqual([unfiltered]);
    expect(found(log(randomEvm(), to))).toEqual([any]);
    // Contracts removed and added as the API does.
    index.apply({ type: 'addresses', id: unfiltered!, add: [contracts[1_300]!], remove: [contracts[5]!] });
    expect(found(log(contracts[5]!, randomEvm()))).toEqual([]);
    expect(found(log(contracts[1_300]!, randomEvm()))).toEqual([unfiltered]);
  });
});
