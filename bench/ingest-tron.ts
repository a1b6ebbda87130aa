// The Tron pass of bench:ingest: the recorded mainnet block 69351239 (297 transactions) and copies
// of it renumbered and re-linked by the tests' loopback java-tron node, followed and matched with
// 10,000,000 watched addresses, beside fetching the same blocks and their infos 8 in flight
// (getblockbynum and gettransactioninfobyblocknum, JSON.parse) in the same run.
import crypto from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import { loadNetworks } from '../src/chains/networks.js';
import { tronAddressesOf } from '../src/chains/tron/activity.js';
import { tronActivity, tronHeader } from '../src/chains/tron/blocks.js';
import { createTronSource } from '../src/chains/tron/source.js';
import { createTronTokenDecimals } from '../src/chains/tron/token-info.js';
import type { Store } from '../src/store/db.js';
import { type AddressIndex, createAddressIndex } from '../src/watch/matching/address-index.js';
import { tronMatcher } from '../src/watch/notifications/tron.js';
import {
  assembleBlock,
  recordedBlock69351239,
  startTronNode,
  type TronBlockFixture,
} from '../test/helpers/tron-node.js';
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

const RUNS = 3;
/** Copies of the recorded block after it: a minute of mainnet at 3 s a block. */
const COPIES = 20;
const IN_FLIGHT = 8;
/** Every Nth distinct address a block touches is watched (one subscription each). */
const WATCH_EVERY = 40;
const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

export interface TronPassOptions {
  watched: number;
  backends: Backend[];
  databaseUrl: string | undefined;
  logLevel: string;
}

/** The recorded block, then COPIES blocks of its transactions and infos, each linked to the last. */
function chainOfCopies(): TronBlockFixture[] {
  const recorded = recordedBlock69351239();
  const entries = recorded.block.transactions!.map((tx, i) => ({ tx, info: recorded.infos[i]! }));
  const chain = [recorded];
  for (let i = 1; i <= COPIES; i++) {
    const parent = chain.at(-1)!.block;
    chain.push(
      assembleBlock({ number: parent.block_header.raw_data.number + 1, parentHash: parent.blockID, entries }),
    );
  }
  return chain;
}

/** `count` random base58 strings shaped like Tron addresses, one subscription each. */
function buildIndex(count: number): AddressIndex {
  const index = createAddressIndex(() => 'tron');
  const chunk = 1_000_000;
  for (let done = 0; done < count; done += chunk) {
    const n = Math.min(chunk, count - done);
    const random = crypto.randomBytes(n * 33);
    for (let i = 0; i < n; i++) {
      let address = 'T';
      for (let j = 0; j < 33; j++) address += BASE58[random[i * 33 + j]! % 58];
      index.apply({
        type: 'upsert',
        subscription: {
          id: uuidv7(),
          accountId: 'bench',
          network: 'TRON',
          address,
          confirmations: 1,
          mempool: false,
        },
      });
    }
  }
  return index;
}

/** Every WATCH_EVERY-th distinct address the copies touch, and the notifications they make. */
function watchedOf(copies: TronBlockFixture[]): {
  watched: string[];
  expected: number;
  transactions: number;
} {
  const activity = copies.flatMap(({ block, infos }) => tronActivity(block, infos, tronHeader(block)!));
  const distinct = [...new Set(activity.flatMap(tronAddressesOf))];
  const watched = new Set(distinct.filter((_, i) => i % WATCH_EVERY === 0));
  let expected = 0;
  for (const tx of activity)
    for (const t of tx.transfers) expected += new Set([t.from, t.to].filter((a) => watched.has(a))).size;
  return { watched: [...watched], expected, transactions: activity.length };
}

/** The reference: the two calls the source makes per block, 8 blocks in flight, JSON.parse only. */
async function fetchAll(url: string, heights: number[]): Promise<void> {
  const call = async (path: string, num: number) => {
    const res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ num }),
    });
    return JSON.parse(await res.text()) as unknown;
  };
  let next = 0;
  const worker = async () => {
    while (next < heights.length) {
      const num = heights[next++]!;
      await Promise.all([
        call('/wallet/getblockbynum', num),
        call('/wallet/gettransactioninfobyblocknum', num),
      ]);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
}

async function followerPass(
  backend: Backend,
  store: Store,
  chain: TronBlockFixture[],
  nodeUrl: string,
  index: AddressIndex,
  plan: { watched: string[]; expected: number },
  logLevel: string,
): Promise<number> {
  const networks = loadNetworks({ LEDGERHOOK_RPC_TRON: nodeUrl });
  const network = networks.find('TRON')!;
  const unsubscribe = await subscribeWatched(store, networks, 'TRON', index, plan.watched);
  const first = chain[0]!.block;
  try {
    return await measureFollowing({
      store,
      network,
      source: createTronSource({ url: nodeUrl }),
      match: tronMatcher({ network, index, tokens: createTronTokenDecimals({ url: nodeUrl }) }),
      from: { height: first.block_header.raw_data.number, hash: first.blockID },
      to: chain.at(-1)!.block.block_header.raw_data.number,
      expected: plan.expected,
      runs: RUNS,
      label: `tron/${backend}`,
      logLevel,
    });
  } finally {
    unsubscribe();
  }
}

/** Runs the Tron pass and returns its table and notes. */
export async function tronPass(options: TronPassOptions): Promise<string[]> {
  const chain = chainOfCopies();
  const copies = chain.slice(1);
  const heights = copies.map((c) => c.block.block_header.raw_data.number);
  const node = await startTronNode({ blocks: chain });
  onCleanup(() => node.close());
  process.stdout.write(`  tron: indexing ${grouped(options.watched)} watched addresses... `);
  const index = buildIndex(options.watched);
  const plan = watchedOf(copies);
  process.stdout.write(
    `done\n  tron: fetch ${copies.length} blocks and their infos, ${IN_FLIGHT} in flight... `,
  );
  await fetchAll(node.url, heights); // warm-up: the node serialises each answer once
  const reference = await medianSeconds(RUNS, () => fetchAll(node.url, heights));
  process.stdout.write(`${fixed(reference, 3)} s\n`);
  const rows: [string, number, number | undefined][] = [
    [`fetch ${IN_FLIGHT} in flight (reference)`, reference, undefined],
  ];
  for (const backend of options.backends) {
    process.stdout.write(`  tron: ${backend}: following ${copies.length} blocks... `);
    const seconds = await withFreshStore(backend, options.databaseUrl, 'ingest_tron', (store) =>
      followerPass(backend, store, chain, node.url, index, plan, options.logLevel),
    );
    process.stdout.write(`${fixed(seconds, 3)} s\n`);
    rows.push([`follower + matcher, ${backend}`, seconds, plan.expected]);
  }
  return [
    '',
    `tron: ${copies.length} copies of mainnet block 69351239 (${plan.transactions} transactions), renumbered and ` +
      `re-linked by the loopback node; ${grouped(options.watched)} random watched addresses plus ` +
      `${plan.watched.length} of the blocks' (every ${WATCH_EVERY}th address they touch), ${plan.expected} ` +
      `notifications expected per run; each figure the median of ${RUNS} runs; target: follower ≥ 0.8 of the reference`,
    formatTable(
      ['pass', 'blocks', 'seconds', 'blocks/s', 'ratio to fetch', 'notifications'],
      rows.map(([label, seconds, notified]) => [
        label,
        String(copies.length),
        fixed(seconds, 3),
        fixed(copies.length / seconds, 1),
        fixed(reference / seconds, 3),
        notified === undefined ? '-' : String(notified),
      ]),
    ),
  ];
}
