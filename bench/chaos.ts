// npm run chaos [-- --short]: a whole Ledgerhook deployment on this machine, run through faults and
// checked from outside (docs/scaling-out.md). PostgreSQL as a primary and an asynchronous streaming
// replica (throwaway clusters, never the shared server) behind a TCP proxy that plays the virtual
// IP; two processes of each role (api, dispatcher, watcher); two anvil chains; receivers on loopback
// that fail at random, hang now and then and go down for a while. Under load (chain transfers,
// registry callbacks, test notifications) it kills processes, fails PostgreSQL over to the replica
// (having cut replication first, so the replica lacks the last commits), restarts PostgreSQL and
// takes a receiver down; then waits for the outbox to drain and checks that everything the
// surviving database holds was delivered, that every transfer on the chains was notified (read
// independently with viem), that no chain event reached a receiver under two ids, and that no
// process is left. Exit code 1 if a check fails. See bench/README.md, "npm run chaos".
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ChaosChain } from './chaos/chains.js';
import { check, waitSettled } from './chaos/checks.js';
import { type Child, startChild, startProxy } from './chaos/child.js';
import { alive, Clusters, connect } from './chaos/cluster.js';
import { type Fault, type FaultResult, Probes, runFaults } from './chaos/faults.js';
import { Api, Load, type LoadPlan, subscribe } from './chaos/load.js';
import { type Role, Services, snapshotBuild } from './chaos/processes.js';
import { report, verdicts } from './chaos/report.js';
import { machineLine, makeTempDir, numberOption, runMain, sleep, stopServer } from './lib.js';

interface Mode {
  name: string;
  notifications: number;
  durationS: number;
  faults: Fault[];
  drainTimeoutS: number;
}

const SUBSCRIPTIONS_PER_CHAIN = 4;
const RECIPIENTS_PER_CHAIN = 100;
/** Receiver 0 is the probe; 1-3 take the load, answer 500 at random and hang now and then. */
const RECEIVERS = 4;
const DELIVERY_TIMEOUT_S = 2;

function modes(): Record<'short' | 'full', Mode> {
  const kill = (role: Role, index: number, at: number): Fault => ({ kind: 'kill', role, index, at });
  return {
    short: {
      name: 'short',
      notifications: 10_000,
      durationS: 90,
      drainTimeoutS: 240,
      faults: [
        kill('watcher', 0, 12),
        { kind: 'receiver-down', receiver: 1, at: 20, ms: 30_000 },
        kill('dispatcher', 0, 30),
        { kind: 'failover', at: 50, lagMs: 3_000 },
        kill('api', 1, 75),
      ],
    },
    full: {
      name: 'full',
      notifications: 100_000,
      durationS: 420,
      drainTimeoutS: 600,
      faults: [
        kill('watcher', 0, 20),
        kill('dispatcher', 0, 40),
        kill('api', 0, 60),
        kill('watcher', 1, 85),
        { kind: 'receiver-down', receiver: 1, at: 100, ms: 120_000 },
        kill('dispatcher', 1, 110),
        kill('api', 1, 135),
        kill('watcher', 0, 160),
        { kind: 'failover', at: 190, lagMs: 3_000 },
        kill('dispatcher', 0, 240),
        kill('api', 0, 265),
        kill('watcher', 1, 290),
        { kind: 'pg-restart', at: 320 },
      ],
    },
  };
}

function readMode(): { mode: Mode; keepLogs: boolean; ledgerhook: string | undefined } {
  const { values } = parseArgs({
    options: {
      short: { type: 'boolean' },
      notifications: { type: 'string' },
      duration: { type: 'string' },
      'keep-logs': { type: 'boolean' },
      ledgerhook: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(
      [
        'Usage: npm run chaos [-- options]',
        '  --short            the CI run: 10,000 notifications, 3 kills, one failover, a 30 s receiver outage',
        '                     (default: the full run, 100,000 notifications, 10 kills, failover, PostgreSQL',
        '                     restart, a 2-minute receiver outage)',
        '  --notifications N  notifications to cause in all (the faults keep their times)',
        '  --duration S       seconds over which the load is spread',
        "  --keep-logs        keep the processes', PostgreSQL's and receivers' logs in .scratch/ (kept anyway",
        '                     when a check fails)',
        '  --ledgerhook DIR   run the build of another checkout (its dist/, drizzle/), e.g. an older commit',
        '',
      ].join('\n'),
    );
    process.exit(0);
  }
  const mode = modes()[values.short ? 'short' : 'full'];
  mode.notifications = Math.floor(
    numberOption(values.notifications, 'CHAOS_NOTIFICATIONS', mode.notifications, 100),
  );
  mode.durationS = numberOption(values.duration, 'CHAOS_DURATION', mode.durationS, 10);
  const ledgerhook = values.ledgerhook ? path.resolve(values.ledgerhook) : undefined;
  return { mode, keepLogs: values['keep-logs'] === true, ledgerhook };
}

/** How the load is split: 70% chain notifications (each transfer notifies every list), 15% registries, 15% tests. */
function plan(mode: Mode): LoadPlan {
  return {
    transfersPerChain: Math.ceil((mode.notifications * 0.7) / SUBSCRIPTIONS_PER_CHAIN / 2),
    registries: Math.ceil(mode.notifications * 0.15),
    tests: Math.ceil(mode.notifications * 0.15),
    durationMs: mode.durationS * 1000,
  };
}

function serviceEnv(databaseUrl: string, configFile: string): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    LEDGERHOOK_MASTER_KEY: 'c4a05e0b1d9f4e5a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f50',
    LEDGERHOOK_CONFIG: configFile,
    LEDGERHOOK_ALLOW_CIDRS: '127.0.0.0/8',
    // 26 attempts over about 5.5 minutes (±20%): a 2-minute outage and 10% random failures after
    // it never exhaust them (a notification that failed for good would fail the run), and the
    // last retries come within 15 s, so the outbox drains soon after the load.
    LEDGERHOOK_RETRY_SCHEDULE: ['1s', '2s', '5s', '10s', ...Array(21).fill('15s')].join(','),
    LEDGERHOOK_DELIVERY_TIMEOUT: `${DELIVERY_TIMEOUT_S}s`,
    LEDGERHOOK_CONNECT_TIMEOUT: '1s',
    LEDGERHOOK_DISPATCH_LEASE: '5s',
    LEDGERHOOK_DISABLE_AFTER: '1h',
    LEDGERHOOK_TEST_RATE_LIMIT: 'off',
    LEDGERHOOK_RATE_LIMIT: 'off',
    LEDGERHOOK_WATCH_POLL_INTERVAL: '250ms',
    LOG_LEVEL: 'info',
  };
}

/** Our processes still alive, and any process working in one of our directories (PostgreSQL's backends). */
function leftovers(pids: number[], dirs: string[]): string[] {
  const found = pids.filter(alive).map((pid) => `pid ${pid}`);
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || pids.includes(Number(entry))) continue;
    try {
      const cwd = fs.readlinkSync(`/proc/${entry}/cwd`);
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (dirs.some((d) => cwd.startsWith(d) || cmdline.includes(d)))
        found.push(`pid ${entry} (${cmdline.trim()})`);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

function say(line: string): void {
  process.stdout.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);
}

async function main(): Promise<void> {
  const started = Date.now();
  const { mode, keepLogs, ledgerhook } = readMode();
  const loadPlan = plan(mode);
  say(
    `chaos (${mode.name}): ${mode.notifications.toLocaleString('en-US')} notifications over ${mode.durationS} s; ${machineLine()}`,
  );
  const runDir = makeTempDir('lh-chaos-');

  const mainJs = snapshotBuild(path.join(runDir, 'build'), ledgerhook);
  const clusters = await Clusters.create();
  await clusters.startPrimary('ledgerhook');
  const replicationLink = await startProxy('replication link', clusters.primary.port);
  await clusters.startReplica(replicationLink.port);
  const vip = await startProxy('virtual IP', clusters.primary.port);
  const databaseUrl = `postgres://postgres@127.0.0.1:${vip.port}/ledgerhook`;
  say(
    `PostgreSQL: primary :${clusters.primary.port}, replica :${clusters.replica.port} (streaming), virtual IP :${vip.port}`,
  );

  const chains = await Promise.all([
    ChaosChain.start('CHAOSA', 71_001, RECIPIENTS_PER_CHAIN),
    ChaosChain.start('CHAOSB', 71_002, RECIPIENTS_PER_CHAIN),
  ]);
  await Promise.all(chains.map((c) => c.prepare()));
  const configFile = path.join(runDir, 'networks.json');
  fs.writeFileSync(
    configFile,
    JSON.stringify({
      networks: Object.fromEntries(
        chains.map((c) => [
          c.name,
          { family: 'evm', chainId: c.anvil.chainId, symbol: 'ETH', rpc: [c.anvil.rpcUrl], traces: 'off' },
        ]),
      ),
    }),
  );
  say(`chains: ${chains.map((c) => `${c.name} ${c.anvil.rpcUrl}`).join(', ')} (a block a second)`);

  const receivedFile = path.join(runDir, 'received.jsonl');
  const receivers = await startChild('receivers', 'bench/chaos/receivers-child.ts', [
    JSON.stringify({
      count: RECEIVERS,
      logFile: receivedFile,
      failRate: 0.1,
      hangRate: 0.01,
      hangMs: (DELIVERY_TIMEOUT_S + 1) * 1000,
      sampleEvery: 50,
    }),
  ]);
  const urls = (receivers.hello.ports as number[]).map((p) => `http://127.0.0.1:${p}/hook`);
  const probes = new Probes(receivers);

  const services = new Services(mainJs, serviceEnv(databaseUrl, configFile), runDir);
  const token = await services.migrateAndToken('chaos');
  for (const role of ['api', 'dispatcher', 'watcher'] as const)
    for (const i of [0, 1]) await services.add(role, i);
  for (const s of services.list) services.start(s);
  await Promise.all(services.list.map((s) => services.ready(s)));
  say(`processes ready: ${services.list.map((s) => `${s.name} :${s.port}`).join(', ')}`);

  const api = new Api(services.byRole('api'), token);
  const loadUrls = urls.slice(1);
  const setup = await subscribe(api, chains, SUBSCRIPTIONS_PER_CHAIN, urls[0]!, loadUrls);
  await clusters.waitReplayed();
  say(
    `${setup.lists.length + setup.probes.size} subscriptions made and replayed by the replica; load starts`,
  );

  const load = new Load(loadPlan, api, chains, setup, loadUrls);
  const loadStart = Date.now();
  const ctx = { services, clusters, vip, replicationLink, receivers, api, chains, setup, probes };
  let loadEnd = 0;
  const [faults] = await Promise.all([
    runFaults(ctx, mode.faults, loadStart, say),
    load.run().then(() => {
      loadEnd = Date.now();
    }),
  ]);
  say(
    `load sent in ${((Date.now() - loadStart) / 1000).toFixed(0)} s: ${JSON.stringify(load.counts)}; API retries ${api.retries}`,
  );

  const heads = new Map<string, number>();
  for (const chain of chains) heads.set(chain.name, await chain.settle());
  await waitSettled(databaseUrl, heads, mode.drainTimeoutS * 1000, say);
  const settledAt = Date.now();
  say(`outbox drained, followers at ${[...heads].map(([n, h]) => `${n} ${h}`).join(', ')}; checking`);
  await sleep(DELIVERY_TIMEOUT_S * 1000 + 1_000); // answers still being written to the receivers' log
  await receivers.request({ cmd: 'flush' });
  const results = await check(databaseUrl, receivedFile, chains, heads, setup);
  receiverRecoveries(faults, results.lines);
  const unexplained = attributeDuplicates(faults, results.lines);
  const explanation = await explainDuplicates(databaseUrl, unexplained, results.lines);

  const found = await teardown(
    services,
    clusters,
    [vip.child, replicationLink.child, receivers],
    chains,
    runDir,
  );
  const checks = verdicts(results, found);
  process.stdout.write(
    `\n${report(results, load.counts, faults, checks, {
      loadStart,
      loadEnd,
      settledAt,
      totalMs: Date.now() - started,
      otherDuplicates: unexplained.length,
    })}${explanation}`,
  );
  const exits = services.list.map((s) => `${s.name} ${s.exitCodes.join('/')}`).join(', ');
  process.stdout.write(`exits (kills and the final SIGTERM): ${exits}\n`);
  const failed = checks.some((c) => !c.ok);
  if (failed || keepLogs) keep(runDir);
  if (failed) throw new Error('a check failed (see above)');
}

/** A receiver outage is over when that receiver acknowledges again: from the moment it came back. */
function receiverRecoveries(faults: FaultResult[], lines: Array<{ t: number; r: number; o: number }>): void {
  for (const fault of faults) {
    const match = /^receiver (\d+) down/.exec(fault.name);
    if (!match || fault.endedAt === undefined) continue;
    const receiver = Number(match[1]);
    const first = lines.find((l) => l.r === receiver && l.o === 200 && l.t >= fault.endedAt!);
    if (first) fault.endToEndMs = first.t - fault.endedAt;
    fault.note += '; end to end: from its return to its first acknowledgement';
  }
}

/**
 * Ids acknowledged more than once, each put down to the fault in whose window it was first
 * acknowledged (a failover's lost tail, a killed dispatcher's unrecorded results); the rest.
 */
function attributeDuplicates(
  faults: FaultResult[],
  lines: Array<{ t: number; id: string; o: number }>,
): string[] {
  const first = new Map<string, number>();
  const acks = new Map<string, number>();
  for (const line of lines) {
    if (line.o !== 200) continue;
    if (!first.has(line.id)) first.set(line.id, line.t);
    acks.set(line.id, (acks.get(line.id) ?? 0) + 1);
  }
  const other: string[] = [];
  for (const fault of faults) if (fault.window) fault.duplicates = 0;
  for (const [id, n] of acks) {
    if (n < 2) continue;
    const t = first.get(id)!;
    const fault = faults.find((f) => f.window && t >= f.window.from && t <= f.window.to);
    if (fault) fault.duplicates! += 1;
    else other.push(id);
  }
  return other;
}

/**
 * For duplicates no fault explains: each attempt the service recorded beside each answer the
 * receivers logged, so the report says why it was sent again.
 */
async function explainDuplicates(
  databaseUrl: string,
  ids: string[],
  lines: Array<{ t: number; id: string; o: number; r: number }>,
): Promise<string> {
  if (ids.length === 0) return '';
  const client = await connect(databaseUrl);
  try {
    const { rows } = await client.query(
      `SELECT notification_id::text AS id, attempt_number, trigger, status_code, error, outcome,
              started_at, duration_ms FROM delivery_attempts WHERE notification_id = ANY($1::uuid[])
        ORDER BY notification_id, attempt_number`,
      [ids.slice(0, 10)],
    );
    const out = [
      `duplicates outside every fault's window (${ids.length}; the first ${Math.min(10, ids.length)}):`,
    ];
    for (const id of ids.slice(0, 10)) {
      out.push(`  ${id}`);
      for (const l of lines.filter((x) => x.id === id))
        out.push(
          `    received ${new Date(l.t).toISOString().slice(11, 23)} by receiver ${l.r}: ${l.o || 'no answer'}`,
        );
      for (const a of rows.filter((x) => x.id === id))
        out.push(
          `    attempt ${a.attempt_number} (${a.trigger}) started ${new Date(a.started_at).toISOString().slice(11, 23)}, ${a.duration_ms} ms: ${a.status_code ?? '-'} ${a.error ?? ''} → ${a.outcome}`,
        );
    }
    return `${out.join('\n')}\n`;
  } finally {
    await client.end().catch(() => {});
  }
}

/** Everything stopped (services by SIGTERM, the rest killed), then whatever is still running. */
async function teardown(
  services: Services,
  clusters: Clusters,
  children: Child[],
  chains: ChaosChain[],
  runDir: string,
): Promise<string[]> {
  await services.stopAll();
  const pids = [
    ...services.list.flatMap((s) => s.pids),
    ...children.map((c) => c.pid),
    ...chains.map((c) => c.anvil.pid),
  ];
  pids.push(...clusters.postmasterPids());
  await Promise.all(children.map((c) => stopServer(c.server)));
  await Promise.all(chains.map((c) => c.anvil.stop()));
  const base = clusters.base;
  for (const node of ['primary', 'replica']) {
    const log = path.join(base, `${node}.log`);
    if (fs.existsSync(log)) fs.copyFileSync(log, path.join(runDir, `postgres-${node}.log`));
  }
  await clusters.destroy();
  const deadline = Date.now() + 10_000;
  let found = leftovers(pids, [runDir, base]);
  while (found.length > 0 && Date.now() < deadline) {
    await sleep(250);
    found = leftovers(pids, [runDir, base]);
  }
  return found;
}

/** Copies the logs (processes, PostgreSQL, receivers) to .scratch/ before the temporary directory goes. */
function keep(runDir: string): void {
  const dest = path.join('.scratch', `chaos-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  fs.mkdirSync(dest, { recursive: true });
  for (const file of fs.readdirSync(runDir)) {
    if (file.endsWith('.log') || file.endsWith('.jsonl'))
      fs.copyFileSync(path.join(runDir, file), path.join(dest, file));
  }
  say(`logs kept in ${dest}`);
}

runMain('chaos', main);
