// The Bitcoin pass of bench:ingest: mainnet block 702861 (2,500 transactions, 6,518 inputs, 6,015
// outputs) served by the tests' loopback Esplora node from its raw bytes, followed and matched
// against 1,000,000 watched addresses, beside merely fetching and parsing the same block's pages.
import crypto from 'node:crypto';
import { Block, address as btcAddress, networks as btcNetworks } from 'bitcoinjs-lib';
import { v7 as uuidv7 } from 'uuid';
import { createEsploraSource } from '../src/chains/bitcoin/source.js';
import { loadNetworks } from '../src/chains/networks.js';
import type { Store } from '../src/store/db.js';
import { type AddressIndex, createAddressIndex } from '../src/watch/matching/address-index.js';
import { bitcoinMatcher } from '../src/watch/notifications/bitcoin.js';
import { block702861 } from '../test/helpers/bitcoin-blocks.js';
import { startBitcoinNode } from '../test/helpers/bitcoin-node.js';
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

const HEIGHT = 702861;
/** Esplora's page of transactions, and the pages the source reads at once. */
const PAGE = 25;
const PAGES_IN_FLIGHT = 4;
/** Each measurement is the median of this many runs over the block. */
const RUNS = 5;
/** Every Nth distinct address paid in the block is watched (one subscription each). */
const WATCH_EVERY = 10;

export interface BitcoinPassOptions {
  watched: number;
  backends: ('pglite' | 'postgres')[];
  databaseUrl: string | undefined;
  logLevel: string;
}

/** The reference: the block's header and every page of its transactions, 4 at once, parsed from JSON. */
async function fetchAndParse(url: string, hash: string, count: number): Promise<void> {
  const header = (await (await fetch(`${url}/block/${hash}`)).json()) as { tx_count: number };
  if (header.tx_count !== count) throw new Error(`the node says ${header.tx_count} transactions`);
  let next = 0;
  let read = 0;
  const worker = async () => {
    for (let start = next; start < count; start = next) {
      next += PAGE;
      const page = JSON.parse(await (await fetch(`${url}/block/${hash}/txs/${start}`)).text()) as unknown[];
      read += page.length;
    }
  };
  await Promise.all(Array.from({ length: PAGES_IN_FLIGHT }, worker));
  if (read !== count) throw new Error(`read ${read} of ${count} transactions`);
}

/** Random strings shaped like P2WPKH addresses: the index only compares them. */
function randomBitcoinAddresses(count: number): string[] {
  const alphabet = 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';
  const out = new Array<string>(count);
  const random = crypto.randomBytes(count * 38);
  for (let i = 0; i < count; i++) {
    let s = 'bc1q';
    for (let c = 0; c < 38; c++) s += alphabet[random[i * 38 + c]! & 31];
    out[i] = s;
  }
  return out;
}

function buildIndex(count: number): AddressIndex {
  const index = createAddressIndex(() => 'bitcoin');
  for (const address of randomBitcoinAddresses(count)) {
    index.apply({
      type: 'upsert',
      subscription: {
        id: uuidv7(),
        accountId: 'bench',
        network: 'BTC',
        address,
        confirmations: 1,
        mempool: false,
      },
    });
  }
  return index;
}

/** Every WATCH_EVERY-th distinct address the block pays, and how many notifications they make. */
function watchedOf(block: Block): { watched: string[]; expected: number } {
  const distinct = new Set<string>();
  for (const tx of block.transactions!) {
    for (const o of tx.outs) {
      try {
        distinct.add(btcAddress.fromOutputScript(o.script, btcNetworks.bitcoin));
      } catch {}
    }
  }
  const watched = [...distinct].filter((_, i) => i % WATCH_EVERY === 0);
  const set = new Set(watched);
  // The loopback node knows no earlier block: inputs spending one pay no known address, so each
  // (transaction, watched address) pair comes from the outputs, and from spends inside the block.
  const outputsOf = new Map(block.transactions!.map((tx) => [tx.getId(), tx.outs]));
  let expected = 0;
  for (const tx of block.transactions!) {
    const touched = new Set<string>();
    const note = (script: Uint8Array | undefined) => {
      if (!script) return;
      try {
        const a = btcAddress.fromOutputScript(script, btcNetworks.bitcoin);
        if (set.has(a)) touched.add(a);
      } catch {}
    };
    for (const o of tx.outs) note(o.script);
    for (const input of tx.ins) {
      note(outputsOf.get(Buffer.from(input.hash).reverse().toString('hex'))?.[input.index]?.script);
    }
    expected += touched.size;
  }
  return { watched, expected };
}

async function followerPass(
  backend: Backend,
  store: Store,
  nodeUrl: string,
  parentHash: string,
  index: AddressIndex,
  watched: { watched: string[]; expected: number },
  logLevel: string,
): Promise<number> {
  const networks = loadNetworks({ LEDGERHOOK_RPC_BTC: nodeUrl });
  const network = networks.find('BTC')!;
  const unsubscribe = await subscribeWatched(store, networks, 'BTC', index, watched.watched);
  try {
    const source = createEsploraSource({ url: nodeUrl, network: btcNetworks.bitcoin });
    // From the block before, every run: the same block followed anew.
    return await measureFollowing({
      store,
      network,
      source,
      match: bitcoinMatcher({ network, index }),
      from: { height: HEIGHT - 1, hash: parentHash },
      to: HEIGHT,
      expected: watched.expected,
      runs: RUNS,
      label: backend,
      logLevel,
    });
  } finally {
    unsubscribe();
  }
}

/** Runs the Bitcoin pass and returns its table and notes. */
export async function bitcoinPass(options: BitcoinPassOptions): Promise<string[]> {
  const raw = block702861();
  const block = Block.fromBuffer(raw);
  const count = block.transactions!.length;
  const hash = block.getId();
  const parentHash = Buffer.from(block.prevHash!).reverse().toString('hex');
  const node = await startBitcoinNode({ unheldPrevouts: 'placeholder' });
  onCleanup(() => node.close());
  node.setChain([raw], HEIGHT);

  process.stdout.write(`  bitcoin: indexing ${grouped(options.watched)} watched addresses... `);
  const index = buildIndex(options.watched);
  const watched = watchedOf(block);
  process.stdout.write(`done\n  bitcoin: fetch and parse block ${HEIGHT}... `);
  await fetchAndParse(node.url, hash, count); // warm-up: the node renders each page once
  const source = createEsploraSource({ url: node.url, network: btcNetworks.bitcoin });
  await source.block(HEIGHT);
  const before = await medianSeconds(RUNS, () => fetchAndParse(node.url, hash, count));
  const sourceSeconds = await medianSeconds(RUNS, async () => void (await source.block(HEIGHT)));
  process.stdout.write(`${fixed(before, 3)} s\n`);

  const rows: [string, number, number | undefined][] = [];
  for (const backend of options.backends) {
    process.stdout.write(`  bitcoin: ${backend}: following block ${HEIGHT}... `);
    const seconds = await withFreshStore(backend, options.databaseUrl, 'ingest_btc', (store) =>
      followerPass(backend, store, node.url, parentHash, index, watched, options.logLevel),
    );
    process.stdout.write(`${fixed(seconds, 3)} s\n`);
    rows.push([`follower + matcher, ${backend}`, seconds, watched.expected]);
  }
  const after = await medianSeconds(RUNS, () => fetchAndParse(node.url, hash, count));
  const reference = (before + after) / 2;
  const table = formatTable(
    ['pass', 'transactions', 'seconds', 'transactions/s', 'ratio to fetch + parse', 'notifications'],
    [
      ['fetch + parse: header and 100 pages, 4 in flight (reference)', reference, undefined] as const,
      ['Esplora source alone: fetch, parse, addresses, amounts', sourceSeconds, undefined] as const,
      ...rows,
    ].map(([label, seconds, notified]) => [
      label,
      String(count),
      fixed(seconds, 3),
      grouped(count / seconds),
      fixed(reference / seconds, 3),
      notified === undefined ? '-' : String(notified),
    ]),
  );
  return [
    '',
    `bitcoin: block ${HEIGHT}, ${count} transactions, served by the loopback Esplora node; ` +
      `${grouped(options.watched)} random watched addresses plus ${watched.watched.length} of the block's ` +
      `(every ${WATCH_EVERY}th address it pays), ${watched.expected} notifications expected per run; ` +
      `each figure the median of ${RUNS} runs`,
    table,
    `reference: mean of the fetch + parse before (${fixed(before, 3)} s) and after (${fixed(after, 3)} s) the followers run`,
  ];
}
