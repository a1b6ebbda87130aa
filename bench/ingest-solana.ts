// The Solana pass of bench:ingest: mainnet slot 110360000 (4,435 transactions, 3,272 of them
// votes) served by the tests' loopback Solana node, followed and matched against 1,000,000 watched
// addresses, beside fetching and parsing the same block alone (getBlock and JSON.parse) and the
// block source alone (also the activity: accounts, balances, token balances).
import crypto from 'node:crypto';
import { getBase58Decoder } from '@solana/kit';
import { v7 as uuidv7 } from 'uuid';
import { loadNetworks } from '../src/chains/networks.js';
import { solanaChanges } from '../src/chains/solana/activity.js';
import { createSolanaSource, solanaActivityFromBlock } from '../src/chains/solana/source.js';
import type { Store } from '../src/store/db.js';
import { type AddressIndex, createAddressIndex } from '../src/watch/matching/address-index.js';
import { solanaMatcher } from '../src/watch/notifications/solana.js';
import { recordedBlock } from '../test/helpers/solana-blocks.js';
import { recordedSlot, startSolanaNode } from '../test/helpers/solana-node.js';
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

const SLOT = 110360000;
const RUNS = 5;
/** Every Nth distinct address whose balance the block changes is watched (one subscription each). */
const WATCH_EVERY = 4;

export interface SolanaPassOptions {
  watched: number;
  backends: Backend[];
  databaseUrl: string | undefined;
  logLevel: string;
}

/** The reference: the getBlock the source makes, its body parsed with JSON.parse, nothing else. */
async function fetchAndParse(url: string): Promise<number> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'getBlock',
      params: [
        SLOT,
        {
          encoding: 'jsonParsed',
          transactionDetails: 'accounts',
          maxSupportedTransactionVersion: 0,
          rewards: false,
          commitment: 'confirmed',
        },
      ],
    }),
  });
  const body = JSON.parse(await res.text()) as { result: { transactions: unknown[] } };
  return body.result.transactions.length;
}

/** `count` random Solana addresses, one subscription each (random bytes drawn a million at a time). */
export function buildIndex(count: number): AddressIndex {
  const index = createAddressIndex(() => 'solana');
  const base58 = getBase58Decoder();
  const chunk = 1_000_000;
  for (let done = 0; done < count; done += chunk) {
    const n = Math.min(chunk, count - done);
    const random = crypto.randomBytes(n * 32);
    for (let i = 0; i < n; i++) {
      index.apply({
        type: 'upsert',
        subscription: {
          id: uuidv7(),
          accountId: 'bench',
          network: 'SOL',
          address: base58.decode(random.subarray(i * 32, i * 32 + 32)),
          confirmations: 1,
          mempool: false,
        },
      });
    }
  }
  return index;
}

/** Every WATCH_EVERY-th distinct address whose balance changes, and the notifications they make. */
function watchedOf(): { watched: string[]; expected: number; transactions: number } {
  const activity = solanaActivityFromBlock(recordedBlock(SLOT));
  const changes = activity.flatMap(solanaChanges);
  const distinct = [...new Set(changes.map((c) => c.address))];
  const watched = distinct.filter((_, i) => i % WATCH_EVERY === 0);
  const set = new Set(watched);
  return {
    watched,
    expected: changes.filter((c) => set.has(c.address)).length,
    transactions: activity.length,
  };
}

async function followerPass(
  backend: Backend,
  store: Store,
  nodeUrl: string,
  index: AddressIndex,
  plan: { watched: string[]; expected: number },
  logLevel: string,
): Promise<number> {
  const networks = loadNetworks({ LEDGERHOOK_RPC_SOL: nodeUrl });
  const network = networks.find('SOL')!;
  const unsubscribe = await subscribeWatched(store, networks, 'SOL', index, plan.watched);
  try {
    return await measureFollowing({
      store,
      network,
      source: createSolanaSource({ url: nodeUrl }),
      match: solanaMatcher({ network, index }),
      from: { height: SLOT - 1, hash: recordedBlock(SLOT).previousBlockhash as string },
      to: SLOT,
      expected: plan.expected,
      runs: RUNS,
      label: `solana/${backend}`,
      logLevel,
    });
  } finally {
    unsubscribe();
  }
}

/** Runs the Solana pass and returns its table and notes. */
export async function solanaPass(options: SolanaPassOptions): Promise<string[]> {
  const node = await startSolanaNode();
  onCleanup(() => node.close());
  // The slot before is skipped as far as the node knows (it holds no earlier block): the follower
  // starts from a cursor on the recorded parent and never asks for it.
  node.setSlots([recordedSlot(SLOT)]);
  process.stdout.write(`  solana: indexing ${grouped(options.watched)} watched addresses... `);
  const index = buildIndex(options.watched);
  const plan = watchedOf();
  process.stdout.write(`done\n  solana: fetch and parse slot ${SLOT}... `);
  await fetchAndParse(node.url); // warm-up: the node serialises the block once
  const reference = await medianSeconds(RUNS, async () => void (await fetchAndParse(node.url)));
  const source = createSolanaSource({ url: node.url });
  const sourceSeconds = await medianSeconds(RUNS, async () => void (await source.block(SLOT)));
  process.stdout.write(`${fixed(reference, 3)} s\n`);
  const rows: [string, number, number | undefined][] = [
    ['fetch + JSON.parse (reference)', reference, undefined],
    ['source alone: fetch, parse, activity', sourceSeconds, undefined],
  ];
  for (const backend of options.backends) {
    process.stdout.write(`  solana: ${backend}: following slot ${SLOT}... `);
    const seconds = await withFreshStore(backend, options.databaseUrl, 'ingest_sol', (store) =>
      followerPass(backend, store, node.url, index, plan, options.logLevel),
    );
    process.stdout.write(`${fixed(seconds, 3)} s\n`);
    rows.push([`follower + matcher, ${backend}`, seconds, plan.expected]);
  }
  return [
    '',
    `solana: slot ${SLOT}, ${plan.transactions} transactions, served by the loopback node; ` +
      `${grouped(options.watched)} random watched addresses plus ${plan.watched.length} of the block's ` +
      `(every ${WATCH_EVERY}th address whose balance it changes), ${plan.expected} notifications expected per run; ` +
      `each figure the median of ${RUNS} runs`,
    formatTable(
      ['pass', 'transactions', 'seconds', 'transactions/s', 'ratio to fetch + parse', 'notifications'],
      rows.map(([label, seconds, notified]) => [
        label,
        String(plan.transactions),
        fixed(seconds, 3),
        grouped(plan.transactions / seconds),
        fixed(reference / seconds, 3),
        notified === undefined ? '-' : String(notified),
      ]),
    ),
  ];
}
