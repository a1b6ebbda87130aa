import { sql } from 'drizzle-orm';
import type { Family } from '../../chains/networks.js';
import type { Db } from '../../store/db.js';
import type {
  ContractEventSpec,
  SubscriptionChange,
  WatchedEndpoint,
  WatchedSubscription,
} from '../../subscriptions/events.js';
import {
  type ContractTables,
  createEventIndex,
  type EventIndex,
  type LogAddressAndTopics,
} from './event-index.js';
import { createWatchTables, NONE, type WatchTables } from './watch-tables.js';

/**
 * The watched addresses of every network, in memory (the layout: watch-tables.ts), kept in step
 * with the API by `apply` and built from the database by `load`, which builds new tables beside
 * those in use and swaps them in when done: changes applied meanwhile go to the tables in use at
 * once and are replayed, in order, on the new ones before the swap. Every change is idempotent (an
 * upsert sets; adding a watched address or removing an unwatched one changes nothing), so replaying
 * one the load already read is harmless and one committed after it is not lost. A reload after
 * missed notifications thereby also drops what was deleted or removed meanwhile.
 */
export type { SubscriptionChange, WatchedSubscription };

/** Subscriptions per page of `load`. */
const DEFAULT_SUBSCRIPTION_PAGE = 50_000;
/** Address rows per page of `load`: a few MB of text each. */
const DEFAULT_ADDRESS_PAGE = 100_000;
const FIRST_UUID = '00000000-0000-0000-0000-000000000000';

export function createAddressIndex(
  familyOf: (network: string) => Family | undefined,
  /** Page sizes of `load` (smaller in tests, to cross pages with few rows). */
  pages: { subscriptions?: number; addresses?: number } = {},
) {
  const sizes: PageSizes = {
    subscriptions: pages.subscriptions ?? DEFAULT_SUBSCRIPTION_PAGE,
    addresses: pages.addresses ?? DEFAULT_ADDRESS_PAGE,
  };
  let tables = createWatchTables(familyOf);
  /** The contract events followed (CONTRACT_LOG_EVENT), loaded and changed with the addresses. */
  let events = createEventIndex(familyOf);
  /**
   * Per load called and not finished: the changes applied since it was called, replayed on its
   * tables before they replace these.
   */
  const replays = new Set<SubscriptionChange[]>();
  let loading: Promise<unknown> = Promise.resolve();

  async function loadAll(db: Db, replay: SubscriptionChange[]): Promise<number> {
    try {
      const fresh: Indexes = { tables: createWatchTables(familyOf), events: createEventIndex(familyOf) };
      const count = await loadInto(db, fresh, sizes);
      for (const change of replay) applyTo(fresh, change);
      tables = fresh.tables;
      events = fresh.events;
      return count;
    } finally {
      replays.delete(replay);
    }
  }

  return {
    /**
     * Loads every live address subscription and its addresses, replacing what was known: at
     * start, and again when notifications may have been missed. Loads run one at a time.
     */
    load(db: Db): Promise<number> {
      const replay: SubscriptionChange[] = [];
      replays.add(replay);
      const run = loading.then(() => loadAll(db, replay));
      loading = run.catch(() => {});
      return run;
    },
    apply(change: SubscriptionChange): void {
      applyTo({ tables, events }, change);
      for (const replay of replays) replay.push(change);
    },
    /** The subscriptions watching `address` on `network` (empty if none), each with its spelling. */
    lookup: (network: string, address: string): readonly WatchedSubscription[] =>
      tables.lookup(network, address),
    /** Networks with at least one watched address or followed event. */
    networks: (): string[] => [...new Set([...tables.networks(), ...events.networks()])],
    /** Whether a subscription follows a contract event on `network`. */
    followsEvents: (network: string): boolean => events.follows(network),
    /** The event subscriptions a log may be for (see EventIndex.match). */
    matchLog: (network: string, log: LogAddressAndTopics) => events.match(network, log),
    /** Subscriptions following contract events. */
    eventSubscriptions: (): number => events.size(),
    /** Whether at least one subscription on `network` wants mempool notifications. */
    watchesMempool: (network: string): boolean => tables.watchesMempool(network),
    /** Whether at least one subscription on `network` wants the fees its addresses pay. */
    watchesFees: (network: string): boolean => tables.watchesFees(network),
    /** Subscriptions known. */
    size: () => tables.size(),
    /** Addresses watched, counted once per subscription watching them. */
    watches: () => tables.watches(),
    /** Distinct watched addresses per network. */
    addressCounts: (): Record<string, number> => tables.addressCounts(),
  };
}

/** Page sizes of `load`: subscriptions, and address rows, per statement. */
interface PageSizes {
  subscriptions: number;
  addresses: number;
}

/** The address tables and the events, in use or being loaded. */
interface Indexes {
  tables: WatchTables;
  events: EventIndex;
}

/** One change applied to a set of tables: the ones in use, or a load's before they replace them. */
function applyTo({ tables: target, events }: Indexes, change: SubscriptionChange): void {
  // Removals and contract changes go to both: each ignores the subscriptions it does not know.
  if (change.type === 'remove') events.remove(change.id);
  if (change.type === 'addresses') events.changeContracts(change.id, change.add, change.remove);
  if (change.type === 'upsert' && change.subscription.contractEvent) {
    const { subscription: s, addresses } = change;
    events.upsert(endpointOf(s), addresses ?? (s.address === undefined ? undefined : [s.address]));
    return;
  }
  if (change.type === 'remove') {
    const subscription = target.find(change.id);
    if (subscription !== NONE) target.remove(subscription);
    return;
  }
  if (change.type === 'addresses') {
    const subscription = target.find(change.id);
    // Unknown here: deleted (its removal came first) or not loaded yet (the load reads it).
    if (subscription === NONE) return;
    for (const address of change.remove) target.unwatch(subscription, address);
    target.reserve(subscription, change.add.length);
    for (const address of change.add) target.watch(subscription, address);
    return;
  }
  const { subscription: s, addresses } = change;
  const subscription = target.upsert(endpointOf(s));
  const exactly = addresses ?? (s.address === undefined ? undefined : [s.address]);
  if (exactly === undefined) return;
  target.unwatchAll(subscription);
  target.reserve(subscription, exactly.length);
  for (const address of exactly) target.watch(subscription, address);
}

/** A change's subscription as the tables keep it. */
function endpointOf(s: WatchedEndpoint): WatchedEndpoint {
  return {
    id: s.id,
    accountId: s.accountId,
    network: s.network,
    confirmations: s.confirmations,
    mempool: s.mempool,
    fees: s.fees === true,
    ...(s.contractEvent ? { contractEvent: s.contractEvent } : {}),
  };
}

async function loadInto(db: Db, target: Indexes, pages: PageSizes): Promise<number> {
  const fresh = target.tables;
  const { subscriptions: SUBSCRIPTION_PAGE, addresses: ADDRESS_PAGE } = pages;
  // Subscriptions first, with how many addresses each has, so the address tables are sized once.
  let after = FIRST_UUID;
  let subscriptions = 0;
  /** Per network, one of its subscriptions and the addresses of them all. */
  const expected = new Map<string, { subscription: number; count: number }>();
  for (;;) {
    const text = await aggregate(
      db,
      sql`SELECT string_agg(id::text || ' ' || account_id::text || ' ' || network || ' ' ||
            confirmations || ' ' || (CASE WHEN mempool THEN 1 ELSE 0 END) || ' ' || address_count || ' ' ||
            (CASE WHEN fees THEN 1 ELSE 0 END),
            E'\n' ORDER BY id)
          FROM (SELECT id, account_id, network, confirmations, mempool, address_count, fees FROM subscriptions
            WHERE type = 'ADDRESS_TRANSACTION' AND deleted_at IS NULL AND network IS NOT NULL
              AND id > ${after}::uuid
            ORDER BY id LIMIT ${SUBSCRIPTION_PAGE}) page`,
    );
    if (text === null) break;
    let lines = 0;
    for (const line of text.split('\n')) {
      const [id, accountId, network, confirmations, mempool, count, fees] = line.split(' ');
      const subscription = fresh.upsert({
        id: id!,
        accountId: accountId!,
        network: network!,
        confirmations: Number(confirmations),
        mempool: mempool === '1',
        fees: fees === '1',
      });
      const sum = expected.get(network!) ?? { subscription, count: 0 };
      sum.count += Number(count);
      expected.set(network!, sum);
      after = id!;
      lines++;
    }
    subscriptions += lines;
    if (lines < SUBSCRIPTION_PAGE) break;
  }
  for (const { subscription, count } of expected.values()) fresh.reserve(subscription, count);
  subscriptions += await loadEvents(db, target.events, SUBSCRIPTION_PAGE);

  // Then the addresses (and event subscriptions' contracts), a page of rows as one text: "id address address …" per subscription.
  // Reading them as rows costs a JavaScript object per row and field (PGlite: most of a load).
  // The next page is asked for before this one is parsed: PostgreSQL (or PGlite's worker
  // thread) builds it on another core meanwhile.
  let next: Promise<AddressPage> | undefined = addressPage(db, FIRST_UUID, '', ADDRESS_PAGE);
  while (next) {
    const page: AddressPage = await next;
    next = undefined;
    if (page.n === ADDRESS_PAGE && page.last !== null) {
      const space = page.last.indexOf(' ');
      next = addressPage(db, page.last.slice(0, space), page.last.slice(space + 1), ADDRESS_PAGE);
      // Unhandled until awaited: a failure of the next page must not crash the process meanwhile.
      next.catch(() => {});
    }
    if (page.body !== null) parsePage(target, page.body);
  }
  return subscriptions;
}

/**
 * A keyset page of address rows after (afterId, afterAddress), as one text: "id address address
 * …" per subscription, a line each (`limit` rows at most); and its row count and last key, to ask
 * for the next.
 */
async function addressPage(
  db: Db,
  afterId: string,
  afterAddress: string,
  limit: number,
): Promise<AddressPage> {
  const result = await db.execute(sql`
    WITH page AS (
      SELECT subscription_id, address FROM subscription_addresses
      WHERE (subscription_id, address) > (${afterId}::uuid, ${afterAddress})
      ORDER BY subscription_id, address LIMIT ${limit})
    SELECT
      (SELECT count(*)::int FROM page) AS n,
      (SELECT subscription_id::text || ' ' || address FROM page
        ORDER BY subscription_id DESC, address DESC LIMIT 1) AS last,
      (SELECT string_agg(g.subscription_id::text || ' ' || g.list, E'\n')
        FROM (SELECT subscription_id, string_agg(address, ' ') AS list FROM page
          GROUP BY subscription_id) g) AS body`);
  return (result as unknown as { rows: AddressPage[] }).rows[0]!;
}

/**
 * The live event subscriptions (their contracts come with the addresses), a page at a time; how
 * many there were.
 */
async function loadEvents(db: Db, events: EventIndex, pageSize: number): Promise<number> {
  let after = FIRST_UUID;
  let count = 0;
  for (;;) {
    const result = (await db.execute(sql`
      SELECT id::text, account_id::text, network, confirmations, address_count, contract_event::text AS spec
      FROM subscriptions
      WHERE type = 'CONTRACT_LOG_EVENT' AND deleted_at IS NULL AND network IS NOT NULL
        AND contract_event IS NOT NULL AND id > ${after}::uuid
      ORDER BY id LIMIT ${pageSize}`)) as unknown as { rows: EventRow[] };
    for (const row of result.rows) {
      const subscription = events.upsert({
        id: row.id,
        accountId: row.account_id,
        network: row.network,
        confirmations: row.confirmations,
        mempool: false,
        contractEvent: JSON.parse(row.spec) as ContractEventSpec,
      });
      events.contracts.reserve(subscription, row.address_count);
      after = row.id;
    }
    count += result.rows.length;
    if (result.rows.length < pageSize) return count;
  }
}

interface EventRow {
  id: string;
  account_id: string;
  network: string;
  confirmations: number;
  address_count: number;
  spec: string;
}

/**
 * Indexes a page's text: addresses of address subscriptions, contracts of event subscriptions;
 * those of subscriptions not loaded (deleted, registry) are skipped.
 */
function parsePage({ tables, events }: Indexes, body: string): void {
  let at = 0;
  while (at < body.length) {
    let lineEnd = body.indexOf('\n', at);
    if (lineEnd < 0) lineEnd = body.length;
    const idEnd = body.indexOf(' ', at);
    const id = body.slice(at, idEnd);
    let target: ContractTables = tables;
    let subscription = tables.find(id);
    if (subscription === NONE) {
      target = events.contracts;
      subscription = target.find(id);
    }
    if (subscription !== NONE) {
      let start = idEnd + 1;
      while (start < lineEnd) {
        let end = body.indexOf(' ', start);
        if (end < 0 || end > lineEnd) end = lineEnd;
        target.watch(subscription, body, start, end);
        start = end + 1;
      }
    }
    at = lineEnd + 1;
  }
}

interface AddressPage {
  n: number;
  last: string | null;
  body: string | null;
}

/** The single text value a statement returns (null when it aggregated no rows). */
async function aggregate(db: Db, query: ReturnType<typeof sql>): Promise<string | null> {
  const result = (await db.execute(query)) as unknown as { rows: Record<string, string | null>[] };
  const row = result.rows[0];
  return row ? (Object.values(row)[0] ?? null) : null;
}

export type AddressIndex = ReturnType<typeof createAddressIndex>;
