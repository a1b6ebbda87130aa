// The Algorand pass of bench:ingest: rounds served by the tests' loopback algod and indexer,
// followed and matched against 1,000,000 watched addresses, beside reading and decoding the same
// rounds alone (8 in flight, as far as the follower reads ahead).
// - algod: 200 rounds assembled from the recorded testnet round 24099447 (its 5 transactions,
//   msgpack), so per round costs dominate;
// - indexer: 100 rounds each carrying the 185 real recorded transactions of the fixtures (147 of
//   one testnet account: payments, asset transfers, application calls, an asset configuration; 38
//   mainnet asset transfers), so per transaction costs dominate.
// What is assembled and what is real: test/fixtures/chains/algorand/README.md.
import crypto from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { movedChanges } from '../src/chains/algorand/activity.js';
import { blockFromIndexer } from '../src/chains/algorand/blocks.js';
import {
  type AlgorandBlockSource,
  createAlgorandSource,
  createAssetInfoCache,
} from '../src/chains/algorand/source.js';
import { loadNetworks } from '../src/chains/networks.js';
import type { Store } from '../src/store/db.js';
import { type AddressIndex, createAddressIndex } from '../src/watch/matching/address-index.js';
import { algorandMatcher } from '../src/watch/notifications/algorand.js';
import {
  type AlgorandRound,
  assembleRound,
  readIndexerJson,
  startAlgorandNode,
  TESTNET,
} from '../test/helpers/algorand-node.js';
import { measureFollowing, subscribeWatched } from './followed-network.js';
import {
  type Backend,
  fixed,
  formatTable,
  grouped,
  medianSeconds,
  onCleanup,
  withFreshStore,
} from './lib.js';

type Api = 'algod' | 'indexer';

const FIRST = 30_000_000;
/** Rounds read at once by the reference, as far as the follower reads ahead. */
const IN_FLIGHT = 8;
const RUNS = 3;
/** Every Nth distinct address whose value moves in the rounds is watched (one subscription each). */
const WATCH_EVERY = 2;

export interface AlgorandPassOptions {
  watched: number;
  backends: Backend[];
  databaseUrl: string | undefined;
  logLevel: string;
}

/** `count` linked rounds from FIRST, carrying `transactions` (indexer JSON) or the recorded round's. */
function buildRounds(count: number, transactions?: Record<string, unknown>[]): AlgorandRound[] {
  const rounds: AlgorandRound[] = [];
  let parentHash = 'A'.repeat(52);
  for (let round = FIRST; round < FIRST + count; round++) {
    const assembled = assembleRound({
      round,
      parentHash,
      ...(transactions ? { indexerTransactions: transactions } : {}),
    });
    rounds.push(assembled);
    parentHash = blockFromIndexer(assembled.indexer).hash;
  }
  return rounds;
}

function randomAlgorandAddresses(count: number): string[] {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  const random = crypto.randomBytes(count * 58);
  const out = new Array<string>(count);
  for (let i = 0; i < count; i++) {
    let s = '';
    for (let c = 0; c < 58; c++) s += alphabet[random[i * 58 + c]! & 31];
    out[i] = s;
  }
  return out;
}

/** Every WATCH_EVERY-th address whose value moves, and the notifications they make in all rounds. */
function watchedOf(rounds: AlgorandRound[]): { watched: string[]; expected: number; transactions: number } {
  const activities = rounds.map((r) => blockFromIndexer(r.indexer).activity);
  const distinct = new Set<string>();
  for (const tx of activities[0]!) for (const change of movedChanges(tx)) distinct.add(change.address);
  const watched = [...distinct].filter((_, i) => i % WATCH_EVERY === 0);
  const set = new Set(watched);
  let expected = 0;
  for (const activity of activities)
    for (const tx of activity) expected += movedChanges(tx).filter((c) => set.has(c.address)).length;
  return { watched, expected, transactions: activities.reduce((n, a) => n + a.length, 0) };
}

/** The reference: every round read and decoded by the source alone, 8 at a time. */
async function readAll(source: AlgorandBlockSource, count: number): Promise<void> {
  let next = FIRST;
  const worker = async () => {
    for (let round = next++; round < FIRST + count; round = next++) {
      if (!(await source.block(round))) throw new Error(`round ${round} missing`);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
}

async function followerPass(
  label: string,
  store: Store,
  nodeUrl: string,
  api: Api,
  rounds: AlgorandRound[],
  index: AddressIndex,
  plan: { watched: string[]; expected: number },
  logLevel: string,
): Promise<number> {
  const networks = loadNetworks({ LEDGERHOOK_RPC_ALGO: nodeUrl });
  const network = { ...networks.find('ALGO')!, ...TESTNET };
  const unsubscribe = await subscribeWatched(store, networks, 'ALGO', index, plan.watched);
  try {
    const options = { url: nodeUrl, api, ...TESTNET };
    const source = createAlgorandSource(options);
    const assets = createAssetInfoCache(options);
    const last = FIRST + rounds.length - 1;
    const parentHash = blockFromIndexer(rounds[0]!.indexer).parentHash;
    return await measureFollowing({
      store,
      network,
      source,
      match: algorandMatcher({ network, index, assets }),
      from: { height: FIRST - 1, hash: parentHash },
      to: last,
      expected: plan.expected,
      runs: RUNS,
      label,
      logLevel,
    });
  } finally {
    unsubscribe();
  }
}

/** Runs the Algorand pass and returns its table and notes. */
export async function algorandPass(options: AlgorandPassOptions): Promise<string[]> {
  const node = await startAlgorandNode();
  onCleanup(() => node.close());
  process.stdout.write(`  algorand: indexing ${grouped(options.watched)} watched addresses... `);
  const index = createAddressIndex(() => 'algorand');
  for (const address of randomAlgorandAddresses(options.watched)) {
    index.apply({
      type: 'upsert',
      subscription: {
        id: uuidv7(),
        accountId: 'bench',
        network: 'ALGO',
        address,
        confirmations: 1,
        mempool: false,
      },
    });
  }
  process.stdout.write('done\n');
  const real = [
    ...(readIndexerJson('indexer-account-transactions-testnet.json').transactions as Record<
      string,
      unknown
    >[]),
    ...(readIndexerJson('indexer-asset-transactions-mainnet.json').transactions as Record<string, unknown>[]),
  ];
  const passes: { api: Api; rounds: AlgorandRound[]; what: string }[] = [
    {
      api: 'algod',
      rounds: buildRounds(200),
      what: "200 rounds of round 24099447's 5 transactions (msgpack)",
    },
    {
      api: 'indexer',
      rounds: buildRounds(100, real),
      what: `100 rounds of the ${real.length} recorded transactions (JSON)`,
    },
  ];
  const rows: string[][] = [];
  const notes: string[] = [];
  for (const pass of passes) {
    node.setRounds(pass.rounds);
    const plan = watchedOf(pass.rounds);
    const source = createAlgorandSource({ url: node.url, api: pass.api, ...TESTNET });
    process.stdout.write(`  algorand ${pass.api}: reading ${pass.rounds.length} rounds alone... `);
    await readAll(source, pass.rounds.length); // warm-up
    const reference = await medianSeconds(RUNS, () => readAll(source, pass.rounds.length));
    process.stdout.write(`${fixed(reference, 3)} s\n`);
    const row = (label: string, seconds: number, notified?: number) => [
      `${pass.api}: ${label}`,
      String(pass.rounds.length),
      String(plan.transactions),
      fixed(seconds, 3),
      grouped(plan.transactions / seconds),
      fixed(reference / seconds, 3),
      notified === undefined ? '-' : String(notified),
    ];
    rows.push(row(`read + decode, ${IN_FLIGHT} in flight (reference)`, reference));
    for (const backend of options.backends) {
      process.stdout.write(`  algorand ${pass.api}: ${backend}: following... `);
      const seconds = await withFreshStore(backend, options.databaseUrl, 'ingest_algo', (store) =>
        followerPass(
          `${pass.api}/${backend}`,
          store,
          node.url,
          pass.api,
          pass.rounds,
          index,
          plan,
          options.logLevel,
        ),
      );
      process.stdout.write(`${fixed(seconds, 3)} s\n`);
      rows.push(row(`follower + matcher, ${backend}`, seconds, plan.expected));
    }
    notes.push(
      `${pass.api}: ${pass.what}; ${plan.watched.length} of their addresses watched (one in ${WATCH_EVERY} of those that move value), ${plan.expected} notifications per run`,
    );
  }
  return [
    '',
    `algorand: served by the loopback node; ${grouped(options.watched)} random watched addresses plus those below; each figure the median of ${RUNS} runs`,
    formatTable(
      [
        'pass',
        'rounds',
        'transactions',
        'seconds',
        'transactions/s',
        'ratio to read + decode',
        'notifications',
      ],
      rows,
    ),
    ...notes,
  ];
}
