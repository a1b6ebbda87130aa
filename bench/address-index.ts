/**
 * The matcher's address index (`src/watch/matching/address-index.ts`) beside the Map-based one it replaced,
 * kept here as the reference: memory per watched address after a full GC, time to index them,
 * lookups per second, ten million watched addresses in one process, and `load` from a database
 * holding a million subscriptions. Every measurement runs in a fresh child process of its own, so
 * one structure's garbage does not count against the next. See bench/README.md.
 */
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { and, eq, isNotNull, isNull, sql } from 'drizzle-orm';
import { v7 as uuidv7 } from 'uuid';
import { type Db, openStore, type Store } from '../src/store/db.js';
import { subscriptionAddresses, subscriptions } from '../src/subscriptions/schema.js';
import {
  createAddressIndex,
  type SubscriptionChange,
  type WatchedSubscription,
} from '../src/watch/matching/address-index.js';
import {
  createScratchDatabase,
  databaseUrlOption,
  defaultBackends,
  fixed,
  formatTable,
  gc,
  grouped,
  machineLine,
  makeTempDir,
  now,
  numberOption,
  redact,
  runMain,
} from './lib.js';

const NETWORK = 'ETH';
const ACCOUNT_ID = '0190f5e8-7c4a-7000-8000-000000000001';
const SELF = fileURLToPath(import.meta.url);

// ---------------------------------------------------------------------------------------------
// The reference: the index as it was before issue 13, a Map per network of address strings to
// arrays of subscription objects, and a Map of those objects by id.

function createMapAddressIndex() {
  const byNetwork = new Map<string, Map<string, WatchedSubscription[]>>();
  const byId = new Map<string, WatchedSubscription>();
  const keyOf = (address: string) => address.toLowerCase();
  function remove(id: string): void {
    const existing = byId.get(id);
    if (!existing) return;
    byId.delete(id);
    const addresses = byNetwork.get(existing.network);
    const key = keyOf(existing.address);
    const list = addresses?.get(key)?.filter((s) => s.id !== id) ?? [];
    if (list.length > 0) addresses?.set(key, list);
    else addresses?.delete(key);
  }
  function upsert(subscription: WatchedSubscription): void {
    remove(subscription.id);
    byId.set(subscription.id, subscription);
    let addresses = byNetwork.get(subscription.network);
    if (!addresses) {
      addresses = new Map();
      byNetwork.set(subscription.network, addresses);
    }
    const key = keyOf(subscription.address);
    const existing = addresses.get(key);
    addresses.set(key, existing ? [...existing, subscription] : [subscription]);
  }
  return {
    async load(db: Db): Promise<number> {
      // Every watched address as a row, in one select: how the index read them before issue 14.
      const rows = await db
        .select({
          id: subscriptions.id,
          accountId: subscriptions.accountId,
          network: subscriptions.network,
          address: subscriptionAddresses.address,
          confirmations: subscriptions.confirmations,
          mempool: subscriptions.mempool,
        })
        .from(subscriptionAddresses)
        .innerJoin(subscriptions, eq(subscriptions.id, subscriptionAddresses.subscriptionId))
        .where(
          and(
            eq(subscriptions.type, 'ADDRESS_TRANSACTION'),
            isNull(subscriptions.deletedAt),
            isNotNull(subscriptions.network),
          ),
        );
      for (const r of rows) upsert({ ...r, id: `${r.id}:${r.address}`, network: r.network! });
      return rows.length;
    },
    apply(change: SubscriptionChange): void {
      // The reference knows one address per subscription, as the index before issue 14 did.
      if (change.type === 'upsert') upsert(change.subscription as WatchedSubscription);
      else if (change.type === 'remove') remove(change.id);
    },
    lookup: (network: string, address: string): readonly WatchedSubscription[] =>
      byNetwork.get(network)?.get(keyOf(address)) ?? [],
    size: () => byId.size,
  };
}

/** `lists`: the compact index, its addresses in subscriptions of LIST_SIZE each (issue 14). */
type Kind = 'reference' | 'compact' | 'lists';
const LIST_SIZE = 100_000;
type Index = Pick<ReturnType<typeof createMapAddressIndex>, 'load' | 'apply' | 'lookup' | 'size'>;
const indexOf = (kind: Kind): Index =>
  kind === 'reference' ? createMapAddressIndex() : createAddressIndex(() => 'evm');

/** List subscriptions of LIST_SIZE addresses: an upsert (no addresses) and one change adding them. */
function listChanges(addresses: string[]): SubscriptionChange[] {
  const changes: SubscriptionChange[] = [];
  for (let start = 0; start < addresses.length; start += LIST_SIZE) {
    const id = uuidv7();
    changes.push(
      {
        type: 'upsert',
        subscription: { id, accountId: ACCOUNT_ID, network: NETWORK, confirmations: 1, mempool: false },
      },
      { type: 'addresses', id, add: addresses.slice(start, start + LIST_SIZE), remove: [] },
    );
  }
  return changes;
}

// ---------------------------------------------------------------------------------------------
// Addresses

const HEX = Buffer.from('0123456789abcdef0123456789ABCDEF');

/**
 * `count` random EVM addresses in batches of 10,000, in mixed case as the API stores EIP-55 forms
 * (the case here is random, which costs the index the same).
 */
function* randomAddressBatches(count: number): Generator<string[]> {
  const line = Buffer.alloc(42);
  line.write('0x', 0, 'latin1');
  for (let start = 0; start < count; start += 10_000) {
    const n = Math.min(10_000, count - start);
    const random = crypto.randomBytes(n * 40);
    const batch = new Array<string>(n);
    for (let i = 0; i < n; i++) {
      for (let c = 0; c < 40; c++) {
        const r = random[i * 40 + c]!;
        const nibble = r & 15;
        line[2 + c] = HEX[nibble + (nibble > 9 && r & 16 ? 16 : 0)]!;
      }
      batch[i] = line.toString('latin1');
    }
    yield batch;
  }
}

/** A subscription change as the subscription service makes one (see bench/ingest.ts). */
const upsertOf = (address: string): SubscriptionChange => ({
  type: 'upsert',
  subscription: {
    id: uuidv7(),
    // A string of its own per subscription, as rows loaded from the database give them.
    accountId: Buffer.from(ACCOUNT_ID, 'latin1').toString('latin1'),
    network: NETWORK,
    address,
    confirmations: 1,
    mempool: false,
  },
});

// ---------------------------------------------------------------------------------------------
// Child processes: one measurement each, its result as JSON on stdout

interface BuildResult {
  addresses: number;
  seconds: number;
  /** CPU of this process (all its threads, the garbage collector's too) while indexing. */
  cpuSeconds: number;
  heapBytes: number;
  arrayBufferBytes: number;
  rssBytes: number;
  rssAfter: number;
  peakRss: number;
  lookupsPerSecond: number;
  lookupsPerCpuSecond: number;
  matched: number;
}

/**
 * Fills an index with `count` watched addresses through `apply`. With `all`, every change is made
 * first and applying them is timed alone (as bench:ingest does); otherwise changes are made and
 * applied 10,000 at a time (ten million changes at once would not fit), timed together.
 */
function build(kind: Kind, count: number, all: boolean): BuildResult {
  gc();
  const before = process.memoryUsage();
  const index = indexOf(kind);
  const sample: string[] = [];
  let seconds = 0;
  let cpuSeconds = 0;
  const cpu = () => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1e6;
  };
  if (all) {
    let addresses = [...randomAddressBatches(count)].flat();
    for (let i = 0; i < addresses.length; i += 1000) sample.push(addresses[i]!.toLowerCase());
    let changes = kind === 'lists' ? listChanges(addresses) : addresses.map(upsertOf);
    // Only the changes hold them now, and those are dropped before memory is measured.
    addresses = [];
    const t0 = now();
    const c0 = cpu();
    for (const change of changes) index.apply(change);
    seconds = (now() - t0) / 1000;
    cpuSeconds = cpu() - c0;
    changes = [];
  } else {
    const t0 = now();
    const c0 = cpu();
    for (const batch of randomAddressBatches(count)) {
      for (const address of batch) index.apply(upsertOf(address));
      if (sample.length * 1000 < count) sample.push(batch[0]!.toLowerCase());
    }
    seconds = (now() - t0) / 1000;
    cpuSeconds = cpu() - c0;
  }
  gc();
  const after = process.memoryUsage();
  // Lookups as a block's transfers make them: lower case from the node, 1 in 100 watched, each a
  // fresh string as JSON.parse gives it (a string looked up again would have its hash cached).
  const probes = [...randomAddressBatches(100_000)]
    .flat()
    .map((a, i) => (i % 100 === 0 ? sample[(i / 100) % sample.length]! : a.toLowerCase()));
  const probeBytes = Buffer.from(probes.join(''), 'latin1');
  let lookups = 0;
  let matched = 0;
  const t0 = now();
  const c0 = cpu();
  do {
    matched = 0;
    for (let i = 0; i < probes.length; i++)
      matched += index.lookup(NETWORK, probeBytes.toString('latin1', i * 42, i * 42 + 42)).length;
    lookups += probes.length;
  } while (now() - t0 < 1000);
  const lookupsPerSecond = lookups / ((now() - t0) / 1000);
  const lookupsPerCpuSecond = lookups / (cpu() - c0);
  const expected = kind === 'lists' ? Math.ceil(count / LIST_SIZE) : count;
  if (index.size() !== expected) throw new Error(`${kind}: ${index.size()} subscriptions, not ${expected}`);
  return {
    addresses: count,
    seconds,
    cpuSeconds,
    heapBytes: after.heapUsed - before.heapUsed,
    arrayBufferBytes: after.arrayBuffers - before.arrayBuffers,
    rssBytes: after.rss - before.rss,
    rssAfter: after.rss,
    peakRss: process.resourceUsage().maxRSS * 1024,
    lookupsPerSecond,
    lookupsPerCpuSecond,
    matched,
  };
}

interface LoadResult {
  rows: number;
  seconds: number;
  /** CPU of the whole process (its database worker thread's too, on PGlite). */
  cpuSeconds: number;
  rssBefore: number;
  peakRss: number;
  heapBytes: number;
  arrayBufferBytes: number;
}

/** The index's `load` (or, as `pages`, the same keyset pages read alone) from the database. */
async function load(kind: 'reference' | 'compact' | 'pages', target: string): Promise<LoadResult> {
  const store = await openStore(
    target.startsWith('postgres') ? { databaseUrl: target } : { pgliteDir: target },
  );
  try {
    await store.ping();
    gc();
    const before = process.memoryUsage();
    const t0 = now();
    const c0 = process.cpuUsage();
    let rows: number;
    if (kind === 'pages') rows = await readPages(store.db);
    else if (kind === 'reference') rows = await createMapAddressIndex().load(store.db);
    else {
      const compact = createAddressIndex(() => 'evm');
      await compact.load(store.db);
      rows = compact.watches();
    }
    const seconds = (now() - t0) / 1000;
    const cpu = process.cpuUsage(c0);
    gc();
    const after = process.memoryUsage();
    return {
      rows,
      seconds,
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
      rssBefore: before.rss,
      peakRss: process.resourceUsage().maxRSS * 1024,
      heapBytes: after.heapUsed - before.heapUsed,
      arrayBufferBytes: after.arrayBuffers - before.arrayBuffers,
    };
  } finally {
    await store.close();
  }
}

/**
 * The address pages `load` reads (the same statement, one text per 100,000 rows), one after the
 * other and kept nowhere: the floor of its time.
 */
async function readPages(db: Db): Promise<number> {
  let afterId = '00000000-0000-0000-0000-000000000000';
  let afterAddress = '';
  let count = 0;
  for (;;) {
    const result = await db.execute(sql`
      WITH page AS (
        SELECT subscription_id, address FROM subscription_addresses
        WHERE (subscription_id, address) > (${afterId}::uuid, ${afterAddress})
        ORDER BY subscription_id, address LIMIT 100000)
      SELECT
        (SELECT count(*)::int FROM page) AS n,
        (SELECT subscription_id::text || ' ' || address FROM page
          ORDER BY subscription_id DESC, address DESC LIMIT 1) AS last,
        (SELECT string_agg(g.subscription_id::text || ' ' || g.list, E'\n')
          FROM (SELECT subscription_id, string_agg(address, ' ') AS list FROM page
            GROUP BY subscription_id) g) AS body`);
    const row = (result as unknown as { rows: { n: number; last: string | null }[] }).rows[0]!;
    count += row.n;
    if (row.n < 100_000 || row.last === null) return count;
    const space = row.last.indexOf(' ');
    afterId = row.last.slice(0, space);
    afterAddress = row.last.slice(space + 1);
  }
}

function inChild<T>(args: string[]): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, SELF, '--child', ...args], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0) resolve(JSON.parse(out) as T);
      else reject(new Error(`child ${args.join(' ')} exited with ${code}`));
    });
  });
}

// ---------------------------------------------------------------------------------------------
// The database: a million subscriptions inserted by one statement per 100,000

async function fillDatabase(store: Store, rows: number, listSize: number): Promise<void> {
  await store.migrate();
  await store.db.execute(
    sql`INSERT INTO accounts (id, name, created_at) VALUES (${ACCOUNT_ID}, 'bench', now())`,
  );
  const lists = Math.ceil(rows / listSize);
  // Subscriptions numbered 1..lists; address i belongs to subscription ceil(i / listSize).
  await store.db.execute(sql`
    INSERT INTO subscriptions (id, account_id, type, network, url, mempool, confirmations,
      secret, callback_token, created_at, address_count)
    SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(s), 12, '0'))::uuid, ${ACCOUNT_ID}, 'ADDRESS_TRANSACTION',
      ${NETWORK}, 'http://127.0.0.1/hook', false, 1, '{}', '{}', now(),
      least(${listSize}::int, ${rows}::int - (s - 1) * ${listSize}::int)
    FROM generate_series(1, ${lists}::int) AS s`);
  for (let start = 0; start < rows; start += 100_000) {
    // EIP-55 would need keccak in SQL; md5 hex in lower case costs load the same.
    await store.db.execute(sql`
      INSERT INTO subscription_addresses (subscription_id, network, address, created_at)
      SELECT ('00000000-0000-7000-8000-' || lpad(to_hex((i - 1) / ${listSize}::int + 1), 12, '0'))::uuid,
        ${NETWORK}, '0x' || md5(i::text) || left(md5((-i)::text), 8), now()
      FROM generate_series(${start + 1}::int, ${Math.min(rows, start + 100_000)}::int) AS i`);
  }
  await store.db.execute(sql`ANALYZE subscriptions`);
  await store.db.execute(sql`ANALYZE subscription_addresses`);
}

// ---------------------------------------------------------------------------------------------

const mb = (bytes: number) => fixed(bytes / 2 ** 20, 0);
const perAddress = (bytes: number, n: number) => fixed(bytes / n, 0);

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      child: { type: 'boolean' },
      watched: { type: 'string' },
      big: { type: 'string' },
      rows: { type: 'string' },
      backends: { type: 'string' },
      'list-size': { type: 'string' },
    },
    allowPositionals: true,
    strict: false,
  });
  if (values.child) {
    const [what, kind, arg] = process.argv.slice(process.argv.indexOf('--child') + 1);
    const result =
      what === 'build'
        ? build(kind as Kind, Number(arg), kind !== 'compact' || Number(arg) <= 1_000_000)
        : await load(kind as 'reference' | 'compact' | 'pages', arg!);
    process.stdout.write(JSON.stringify(result));
    return;
  }
  const watched = numberOption(values.watched as string | undefined, 'BENCH_WATCHED', 1_000_000, 1000);
  const big = numberOption(values.big as string | undefined, 'BENCH_BIG', 10_000_000, 0);
  const rows = numberOption(values.rows as string | undefined, 'BENCH_ROWS', 1_000_000, 0);
  const listSize = numberOption(values['list-size'] as string | undefined, 'BENCH_LIST_SIZE', LIST_SIZE, 1);
  const databaseUrl = databaseUrlOption();
  // Unknown names, and postgres without a database URL, are left out rather than refused.
  const raw = (values.backends as string | undefined) ?? process.env.BENCH_BACKENDS;
  const backends = (raw?.split(',') ?? defaultBackends(databaseUrl)).filter(
    (b) => b === 'pglite' || (b === 'postgres' && databaseUrl),
  );
  console.log(`bench:index: ${machineLine()}, node ${process.version}`);

  // 1. Memory, time to index and lookups, each structure in a process of its own.
  const table: string[][] = [];
  const results: Record<string, BuildResult> = {};
  for (const kind of ['reference', 'compact', 'lists'] as const) {
    const r = await inChild<BuildResult>(['build', kind, String(watched)]);
    results[kind] = r;
    table.push([
      kind === 'reference'
        ? 'Map index (reference)'
        : kind === 'compact'
          ? 'compact, a subscription per address'
          : `compact, lists of ${grouped(LIST_SIZE)}`,
      grouped(r.addresses),
      fixed(r.seconds, 2),
      fixed(r.cpuSeconds, 2),
      perAddress(r.heapBytes, r.addresses),
      perAddress(r.arrayBufferBytes, r.addresses),
      perAddress(r.heapBytes + r.arrayBufferBytes, r.addresses),
      mb(r.rssBytes),
      grouped(r.lookupsPerSecond),
      grouped(r.lookupsPerCpuSecond),
    ]);
  }
  const ref = results.reference!;
  const compact = results.compact!;
  const lists = results.lists!;
  console.log(
    formatTable(
      [
        'index',
        'addresses',
        'apply s',
        'apply cpu s',
        'heap B/addr',
        'typed arrays B/addr',
        'total B/addr',
        'rss +MB',
        'lookups/s',
        'lookups/cpu s',
      ],
      table,
    ),
  );
  const total = (r: BuildResult) => r.heapBytes + r.arrayBufferBytes;
  console.log(
    `compact / reference: memory ${fixed(total(compact) / total(ref), 3)}; time to index ${fixed(
      compact.seconds / ref.seconds,
      3,
    )} (cpu ${fixed(compact.cpuSeconds / ref.cpuSeconds, 3)}); lookups/s ${fixed(
      compact.lookupsPerSecond / ref.lookupsPerSecond,
      2,
    )} (per cpu second ${fixed(compact.lookupsPerCpuSecond / ref.lookupsPerCpuSecond, 2)}). After a full GC; 1 in 100 lookups watched (${compact.matched} matched per pass).`,
  );
  console.log(
    `lists / reference: memory ${fixed(total(lists) / total(ref), 3)}; time to index ${fixed(
      lists.seconds / ref.seconds,
      3,
    )} (cpu ${fixed(lists.cpuSeconds / ref.cpuSeconds, 3)}). Target: ${grouped(watched)} indexed in <= 1 s: ${fixed(lists.seconds, 2)} s (cpu ${fixed(lists.cpuSeconds, 2)} s).`,
  );

  // 2. Ten million in one process: changes made and applied 10,000 at a time.
  if (big > 0) {
    const r = await inChild<BuildResult>(['build', 'compact', String(big)]);
    console.log(
      `compact index, ${grouped(big)} watched addresses: made and applied in ${fixed(r.seconds, 1)} s (cpu ${fixed(r.cpuSeconds, 1)} s); ${perAddress(
        total(r),
        big,
      )} B/address; process RSS ${mb(r.rssAfter)} MB after a full GC, peak ${mb(r.peakRss)} MB; ${grouped(
        r.lookupsPerSecond,
      )} lookups/s`,
    );
  }

  // 3. load from a database with `rows` subscriptions, per backend.
  for (const backend of rows > 0 ? backends : []) {
    let target: string;
    let store: Store;
    if (backend === 'postgres') {
      const scratch = await createScratchDatabase(databaseUrl!, 'index');
      target = scratch.url;
      store = await openStore({ databaseUrl: target });
    } else {
      target = makeTempDir('lh-bench-index-');
      store = await openStore({ pgliteDir: target });
    }
    const t0 = now();
    try {
      await fillDatabase(store, rows, listSize);
    } finally {
      await store.close();
    }
    console.log(
      `${backend}${backend === 'postgres' ? ` (${redact(databaseUrl!)})` : ''}: ${grouped(rows)} addresses in lists of ${grouped(listSize)} inserted in ${fixed((now() - t0) / 1000, 1)} s`,
    );
    const loads: string[][] = [];
    for (const kind of ['pages', 'compact', 'reference'] as const) {
      const r = await inChild<LoadResult>(['load', kind, target]);
      if (r.rows !== rows) throw new Error(`${kind} loaded ${r.rows} rows, not ${rows}`);
      loads.push([
        kind === 'pages'
          ? 'address pages read alone'
          : kind === 'compact'
            ? 'compact index load'
            : 'Map index load (reference)',
        fixed(r.seconds, 2),
        fixed(r.cpuSeconds, 2),
        mb(r.peakRss - r.rssBefore),
        perAddress(r.heapBytes + r.arrayBufferBytes, rows),
      ]);
    }
    console.log(
      formatTable(
        [`${backend}: load ${grouped(rows)}`, 'seconds', 'cpu s', 'peak rss +MB', 'kept B/addr'],
        loads,
      ),
    );
  }
}

runMain('bench:index', main);
