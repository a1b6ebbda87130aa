// The solana-stream pass of bench:ingest (issue 33): Solana at mainnet pace. A loopback Solana node
// (test/helpers/solana-node.ts, in a child process of its own, as a real node is another machine)
// produces a new confirmed slot every 400 ms and announces it on slotSubscribe; the product's
// follower (follower + Solana source + matcher + the database commit, on PGlite or PostgreSQL)
// follows it with 10,000,000 watched addresses. Per minute it prints the slots produced and
// followed, the lag in slots (max and at the minute's end), slot → commit milliseconds, CPU and RSS.
//
// The stream's blocks: the first is mainnet slot 110360000 as recorded; every later slot is an
// ASSEMBLED neighbour holding all the transactions of one of the two recorded blocks, alternately
// 110130000's (3,439) and 110360000's (4,435), unchanged, under its own slot, a made-up blockhash,
// and parentSlot and previousBlockhash naming the slot before, so the chain links. Every slot has
// a block (none skipped): the follower has the most to do.

import fs from 'node:fs';
import os from 'node:os';
import { monitorEventLoopDelay, PerformanceObserver, performance } from 'node:perf_hooks';
import { eq, sql } from 'drizzle-orm';
import pino from 'pino';
import { loadNetworks } from '../src/chains/networks.js';
import { solanaChanges } from '../src/chains/solana/activity.js';
import { createSolanaSource, solanaActivityFromBlock } from '../src/chains/solana/source.js';
import { notifications } from '../src/notify/schema.js';
import type { Db, Store } from '../src/store/db.js';
import { createFollower } from '../src/watch/follower/follower.js';
import type { AddressIndex } from '../src/watch/matching/address-index.js';
import { solanaMatcher } from '../src/watch/notifications/solana.js';
import { type RecordedSlot, recordedBlock } from '../test/helpers/solana-blocks.js';
import { assembleBlock, startSolanaNode } from '../test/helpers/solana-node.js';
import { restartBefore, subscribeWatched } from './followed-network.js';
import { buildIndex } from './ingest-solana.js';
import {
  type Backend,
  commCpuDelta,
  commCpuSeconds,
  fixed,
  formatTable,
  grouped,
  now,
  processCpuSeconds,
  profiled,
  quantile,
  type Server,
  sleep,
  startServer,
  stopServer,
  withFreshStore,
} from './lib.js';

/** Mainnet's slot time. */
const SLOT_MS = 400;
/** The stream starts at this recorded block; the other recorded one alternates with it. */
const FIRST: RecordedSlot = 110360000;
const OTHER: RecordedSlot = 110130000;
/** Every Nth distinct address whose balance a recorded block changes is watched, as in the solana pass. */
const WATCH_EVERY = 4;
/** How often the lag is sampled (the follower's committed height against the node's tip). */
const SAMPLE_MS = 20;
/** Set in the node's child process. */
const CHILD_ENV = 'LEDGERHOOK_BENCH_SOLANA_STREAM_NODE';
/** How long the follower may take to catch up once the stream stops. */
const DRAIN_MS = 60_000;
const MB = 1024 * 1024;

export interface SolanaStreamOptions {
  /** Random watched addresses in the index (besides the recorded blocks' ones). */
  watched: number;
  minutes: number;
  backends: Backend[];
  databaseUrl: string | undefined;
  logLevel: string;
  profileDir: string | undefined;
}

/** What the node's process tells the bench, over IPC. */
type FromNode =
  | {
      type: 'ready';
      url: string;
      wsUrl: string;
      parentHash: string;
      /** Addresses of the recorded blocks to subscribe, and per recorded block what they make. */
      watched: string[];
      expected: Record<string, number>;
      transactions: Record<string, number>;
    }
  | { type: 'slot'; slot: number; at: number };
type ToNode = { type: 'start' } | { type: 'stop' };

/** Which recorded block's transactions a slot of the stream holds. */
const recordedOf = (slot: number): RecordedSlot => ((slot - FIRST) % 2 === 1 ? OTHER : FIRST);

// ---------------------------------------------------------------------------------------------
// The node's process

/** The recorded blocks' addresses watched (every WATCH_EVERY-th that changes) and what each block makes. */
function plan(): Pick<Extract<FromNode, { type: 'ready' }>, 'watched' | 'expected' | 'transactions'> {
  const changes = new Map<RecordedSlot, { address: string }[]>();
  const watched: string[] = [];
  const transactions: Record<string, number> = {};
  for (const slot of [FIRST, OTHER]) {
    const activity = solanaActivityFromBlock(recordedBlock(slot));
    transactions[slot] = activity.length;
    const found = activity.flatMap(solanaChanges);
    changes.set(slot, found);
    const distinct = [...new Set(found.map((c) => c.address))];
    watched.push(...distinct.filter((_, i) => i % WATCH_EVERY === 0));
  }
  const set = new Set(watched);
  const expected: Record<string, number> = {};
  for (const [slot, found] of changes) expected[slot] = found.filter((c) => set.has(c.address)).length;
  return { watched: [...set], expected, transactions };
}

async function serveStream(): Promise<void> {
  const send = (message: FromNode) => process.send!(message);
  const first = recordedBlock(FIRST);
  // One list per recorded block, shared by every slot holding it: the node serialises it once.
  const lists: Record<number, unknown[]> = {
    [FIRST]: first.transactions as unknown[],
    [OTHER]: recordedBlock(OTHER).transactions as unknown[],
  };
  const node = await startSolanaNode();
  node.setSlots([{ slot: FIRST, block: first }]);
  let tip = { slot: FIRST as number, hash: first.blockhash as string };
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const stop = async () => {
    stopped = true;
    if (timer) clearTimeout(timer);
    await node.close();
    process.exit(0);
  };
  process.on('disconnect', () => void stop());
  process.on('SIGTERM', () => void stop());
  process.on('message', (message: ToNode) => {
    if (message.type === 'stop') {
      stopped = true;
      if (timer) clearTimeout(timer);
      return;
    }
    // Slot k at start + k × 400 ms, whatever the delays of the timers before it.
    const start = now();
    send({ type: 'slot', slot: FIRST, at: start });
    const produce = (k: number) => {
      timer = setTimeout(
        () => {
          if (stopped) return;
          const slot = FIRST + k;
          const assembled = assembleBlock({
            slot,
            parentSlot: tip.slot,
            previousBlockhash: tip.hash,
            transactions: lists[recordedOf(slot)] as Record<string, unknown>[],
          });
          node.addSlots(assembled);
          tip = { slot, hash: assembled.block.blockhash as string };
          send({ type: 'slot', slot, at: now() });
          produce(k + 1);
        },
        Math.max(0, start + k * SLOT_MS - now()),
      );
    };
    produce(1);
  });
  send({
    type: 'ready',
    url: node.url,
    wsUrl: node.wsUrl,
    parentHash: first.previousBlockhash as string,
    ...plan(),
  });
}

// ---------------------------------------------------------------------------------------------
// The bench's process

interface NodeProcess {
  server: Server;
  ready: Extract<FromNode, { type: 'ready' }>;
  /** When each slot was produced. */
  producedAt: Map<number, number>;
  /** The highest slot produced. */
  tip(): number;
}

async function startNodeProcess(): Promise<NodeProcess> {
  const server = startServer(
    'solana-node',
    ['bench/ingest-solana-stream.ts'],
    { ...process.env, [CHILD_ENV]: '1' },
    {
      ipc: true,
    },
  );
  const producedAt = new Map<number, number>();
  let tip: number = FIRST;
  const ready = await new Promise<Extract<FromNode, { type: 'ready' }>>((resolve, reject) => {
    server.exited.then(() => reject(new Error(`the Solana node exited:\n${server.tail()}`)));
    server.proc.on('message', (message: FromNode) => {
      if (message.type === 'ready') resolve(message);
      else {
        producedAt.set(message.slot, message.at);
        tip = Math.max(tip, message.slot);
      }
    });
  });
  return { server, ready, producedAt, tip: () => tip };
}

/** CPU seconds of this process's main thread (the follower's JavaScript), from /proc. */
function mainThreadCpuSeconds(): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${process.pid}/task/${process.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

interface Mark {
  at: number;
  process: number;
  main: number | undefined;
  node: number | undefined;
  postgres: Map<number, number> | undefined;
}

function mark(nodePid: number | undefined, postgres: boolean): Mark {
  const usage = process.cpuUsage();
  return {
    at: now(),
    process: (usage.user + usage.system) / 1e6,
    main: mainThreadCpuSeconds(),
    node: processCpuSeconds(nodePid),
    postgres: postgres ? commCpuSeconds('postgres') : undefined,
  };
}

/**
 * Where a minute's time went, to tell a stall's cause: each block's read (getBlock, parse,
 * activity), match and write transaction, the event loop's longest block, and garbage collection.
 */
interface Probe {
  reads: number[];
  matches: number[];
  /** Write transactions (a block's notifications and cursor, or the round's release). */
  commits: number[];
  loopMaxMs: number;
  gcMaxMs: number;
  gcTotalMs: number;
}

const emptyProbe = (): Probe => ({
  reads: [],
  matches: [],
  commits: [],
  loopMaxMs: 0,
  gcMaxMs: 0,
  gcTotalMs: 0,
});

/** Times `run` into `into` (the array of the minute when it ends). */
async function timed<T>(into: () => number[], run: () => Promise<T>): Promise<T> {
  const started = now();
  const result = await run();
  into().push(now() - started);
  return result;
}

interface Minute {
  probe: Probe;
  produced: number;
  followed: number;
  lagMax: number;
  lagEnd: number;
  latencies: number[];
  cpu: number;
  main: number | undefined;
  node: number | undefined;
  postgres: number | undefined;
  rssMb: number;
  heapMb: number;
  load: number;
}

interface StreamResult {
  minutes: Minute[];
  produced: number;
  followed: number;
  drainMs: number;
  notified: number;
  expected: number;
}

async function streamOn(
  backend: Backend,
  store: Store,
  node: NodeProcess,
  index: AddressIndex,
  options: SolanaStreamOptions,
): Promise<StreamResult> {
  const { ready } = node;
  const networks = loadNetworks({ LEDGERHOOK_RPC_SOL: ready.url, LEDGERHOOK_WS_SOL: ready.wsUrl });
  const network = networks.find('SOL')!;
  const unsubscribe = await subscribeWatched(store, networks, 'SOL', index, ready.watched);
  try {
    await restartBefore(store.db, network.name, FIRST - 1, ready.parentHash);
    let probe = emptyProbe();
    const source = createSolanaSource({ url: ready.url, wsUrl: ready.wsUrl, commitment: network.commitment });
    const match = solanaMatcher({ network, index });
    // As the service's watcher starts it (watcher.ts), without the lock and risk scores it adds.
    const db = new Proxy(store.db, {
      get(target, name, receiver) {
        if (name !== 'transaction') return Reflect.get(target, name, receiver);
        return (run: Parameters<Db['transaction']>[0]) =>
          timed(
            () => probe.commits,
            () => target.transaction(run),
          );
      },
    });
    const follower = createFollower({
      db,
      network,
      source: {
        ...source,
        block: (slot) =>
          timed(
            () => probe.reads,
            () => source.block(slot),
          ),
      },
      match: (block) =>
        timed(
          () => probe.matches,
          () => match(block),
        ),
      logger: pino({ level: options.logLevel }),
      pollIntervalMs: 1_000,
    });
    const send = (message: ToNode) => node.server.proc.send(message);
    const followed = () => follower.status().height ?? FIRST - 1;
    const minutes: Minute[] = [];
    const postgres = backend === 'postgres';
    const loop = monitorEventLoopDelay({ resolution: 10 });
    const gcs = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        probe.gcMaxMs = Math.max(probe.gcMaxMs, entry.duration);
        probe.gcTotalMs += entry.duration;
      }
    });
    return await profiled(options.profileDir, `solana-stream-${backend}`, async () => {
      loop.enable();
      gcs.observe({ entryTypes: ['gc'] });
      follower.start();
      send({ type: 'start' });
      const started = now();
      let before = mark(node.server.proc.pid, postgres);
      let minute = { produced: FIRST - 1, followed: FIRST - 1, lagMax: 0, latencies: [] as number[] };
      let seen = FIRST - 1;
      const sample = () => {
        const height = followed();
        const lag = node.tip() - height;
        minute.lagMax = Math.max(minute.lagMax, lag);
        for (; seen < height; seen++) {
          const at = node.producedAt.get(seen + 1);
          if (at !== undefined) minute.latencies.push(now() - at);
          node.producedAt.delete(seen + 1);
        }
        const error = follower.status().lastError;
        if (error) process.stdout.write(`\n  solana-stream: ${backend}: follower error: ${error}\n`);
      };
      for (let m = 1; m <= options.minutes; m++) {
        const end = started + m * 60_000;
        while (now() < end) {
          await sleep(Math.min(SAMPLE_MS, Math.max(0, end - now())));
          sample();
        }
        const after = mark(node.server.proc.pid, postgres);
        const seconds = (after.at - before.at) / 1000;
        const pct = (a: number | undefined, b: number | undefined) =>
          a === undefined || b === undefined ? undefined : ((b - a) / seconds) * 100;
        const pg = commCpuDelta(before.postgres, after.postgres);
        const memory = process.memoryUsage();
        const tip = node.tip();
        const height = followed();
        probe.loopMaxMs = loop.max / 1e6;
        loop.reset();
        const row: Minute = {
          probe,
          produced: tip - minute.produced,
          followed: height - minute.followed,
          lagMax: minute.lagMax,
          lagEnd: tip - height,
          latencies: minute.latencies.sort((a, b) => a - b),
          cpu: pct(before.process, after.process)!,
          main: pct(before.main, after.main),
          node: pct(before.node, after.node),
          postgres: pg === undefined ? undefined : (pg / seconds) * 100,
          rssMb: memory.rss / MB,
          heapMb: memory.heapUsed / MB,
          load: os.loadavg()[0]!,
        };
        minutes.push(row);
        process.stdout.write(`  ${minuteLine(backend, m, row)}\n`);
        minute = { produced: tip, followed: height, lagMax: tip - height, latencies: [] };
        probe = emptyProbe();
        before = after;
      }
      loop.disable();
      gcs.disconnect();
      send({ type: 'stop' });
      // The stop crosses a slot being produced at most: wait for the tip to settle, then drain.
      await sleep(SLOT_MS);
      const last = node.tip();
      const stoppedAt = now();
      while (followed() < last) {
        if (now() - stoppedAt > DRAIN_MS) throw new Error(`solana-stream: ${backend}: ${last} not reached`);
        await sleep(5);
      }
      const drainMs = now() - stoppedAt;
      await follower.stop();
      let expected = 0;
      for (let slot = FIRST; slot <= last; slot++) expected += ready.expected[recordedOf(slot)]!;
      const [row] = await store.db
        .select({ n: sql<number>`count(*)::int` })
        .from(notifications)
        .where(eq(notifications.chain, network.name));
      return {
        minutes,
        produced: last - FIRST + 1,
        followed: followed() - FIRST + 1,
        drainMs,
        notified: row?.n ?? 0,
        expected,
      };
    });
  } finally {
    unsubscribe();
  }
}

const pct = (value: number | undefined) => (value === undefined ? '-' : `${Math.round(value)}%`);

/** p50/max of unsorted durations. */
function spread(values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  return `p50 ${Math.round(quantile(sorted, 0.5))} max ${Math.round(sorted[sorted.length - 1] ?? Number.NaN)}`;
}

function minuteLine(backend: Backend, m: number, row: Minute): string {
  const p50 = quantile(row.latencies, 0.5);
  const max = row.latencies[row.latencies.length - 1] ?? Number.NaN;
  return (
    `solana-stream ${backend} minute ${m}: produced ${row.produced}, followed ${row.followed}, ` +
    `lag max ${row.lagMax} end ${row.lagEnd} slots, slot→commit p50 ${Math.round(p50)} max ${Math.round(max)} ms, ` +
    `CPU ${pct(row.cpu)} (main thread ${pct(row.main)}), node ${pct(row.node)}` +
    `${row.postgres === undefined ? '' : `, postgres ${pct(row.postgres)}`}, ` +
    `rss ${fixed(row.rssMb, 0)} MB, heap ${fixed(row.heapMb, 0)} MB, load ${fixed(row.load, 2)}; ` +
    `read ${spread(row.probe.reads)} ms, match ${spread(row.probe.matches)} ms, ` +
    `write ${spread(row.probe.commits)} ms, ` +
    `event loop blocked max ${Math.round(row.probe.loopMaxMs)} ms, gc max ${Math.round(row.probe.gcMaxMs)} ` +
    `total ${Math.round(row.probe.gcTotalMs)} ms`
  );
}

/** Runs the solana-stream pass and returns its table and notes. */
export async function solanaStreamPass(options: SolanaStreamOptions): Promise<string[]> {
  process.stdout.write(`  solana-stream: indexing ${grouped(options.watched)} watched addresses... `);
  const indexStarted = performance.now();
  const index = buildIndex(options.watched);
  process.stdout.write(
    `${fixed((performance.now() - indexStarted) / 1000, 1)} s, rss ${fixed(process.memoryUsage().rss / MB, 0)} MB\n`,
  );
  const lines: string[] = [];
  for (const backend of options.backends) {
    // A node of its own per backend: each stream starts at the first slot.
    const node = await startNodeProcess();
    try {
      const { ready } = node;
      process.stdout.write(
        `  solana-stream: ${backend}: ${options.minutes} minutes at ${SLOT_MS} ms a slot; ` +
          `${ready.watched.length} of the recorded blocks' addresses watched, notifying ` +
          `${ready.expected[FIRST]} (slot ${FIRST}, ${ready.transactions[FIRST]} transactions) and ` +
          `${ready.expected[OTHER]} (slot ${OTHER}, ${ready.transactions[OTHER]} transactions) a block\n`,
      );
      const result = await withFreshStore(backend, options.databaseUrl, 'ingest_sol_stream', (store) =>
        streamOn(backend, store, node, index, options),
      );
      if (result.notified !== result.expected)
        throw new Error(
          `solana-stream: ${backend}: ${result.notified} notifications, ${result.expected} expected`,
        );
      lines.push(summary(backend, result), table(result));
    } finally {
      await stopServer(node.server);
    }
  }
  return ['', ...lines];
}

function summary(backend: Backend, r: StreamResult): string {
  const all = r.minutes.flatMap((m) => m.latencies).sort((a, b) => a - b);
  const first = r.minutes[0]!;
  const last = r.minutes[r.minutes.length - 1]!;
  return (
    `solana-stream ${backend}: ${r.produced} slots produced, ${r.followed} followed, lag max ` +
    `${Math.max(...r.minutes.map((m) => m.lagMax))} slots; slot→commit p50 ${Math.round(quantile(all, 0.5))} ` +
    `p99 ${Math.round(quantile(all, 0.99))} ms; CPU ${pct(r.minutes.reduce((s, m) => s + m.cpu, 0) / r.minutes.length)} ` +
    `of a core; rss ${fixed(first.rssMb, 0)} → ${fixed(last.rssMb, 0)} MB from minute 1 to ${r.minutes.length}; ` +
    `caught up ${Math.round(r.drainMs)} ms after the stream stopped; ${grouped(r.notified)} notifications, as expected`
  );
}

function table(r: StreamResult): string {
  return formatTable(
    [
      'minute',
      'produced',
      'followed',
      'lag max',
      'lag end',
      'commit p50 ms',
      'max ms',
      'CPU',
      'main',
      'node',
      'rss MB',
      'load',
    ],
    r.minutes.map((m, i) => [
      String(i + 1),
      String(m.produced),
      String(m.followed),
      String(m.lagMax),
      String(m.lagEnd),
      String(Math.round(quantile(m.latencies, 0.5))),
      String(Math.round(m.latencies[m.latencies.length - 1] ?? Number.NaN)),
      pct(m.cpu),
      pct(m.main),
      pct(m.node),
      fixed(m.rssMb, 0),
      fixed(m.load, 2),
    ]),
  );
}

if (process.env[CHILD_ENV] === '1' && process.argv[1]?.endsWith('ingest-solana-stream.ts')) {
  serveStream().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}
