// The faults of the chaos run and how long the deployment takes to get over each: SIGKILLs of
// service processes (each restarted at once, as a supervisor would), a failover of PostgreSQL to
// its asynchronous replica (the replication link cut first, so the replica really lacks the last
// commits), a restart of PostgreSQL, a receiver down for a while. Recovery is timed from the fault
// to "ready again" (the processes' /readyz) and "end to end": a test notification created after
// the fault, and for the watchers and the database a transfer sent after it, received by the probe
// receiver.
import { sleep } from '../lib.js';
import type { ChaosChain } from './chains.js';
import type { Child, TcpProxy } from './child.js';
import type { Clusters } from './cluster.js';
import type { Api, Setup } from './load.js';
import type { Role, ServiceProcess, Services } from './processes.js';

export type Fault =
  | { kind: 'kill'; role: Role; index: number; at: number }
  | { kind: 'failover'; at: number; lagMs: number }
  | { kind: 'pg-restart'; at: number }
  | { kind: 'receiver-down'; at: number; receiver: number; ms: number };

export interface FaultResult {
  name: string;
  /** Seconds since the load started. */
  at: number;
  readyMs?: number;
  endToEndMs?: number;
  /** When the fault ended (receiver back up), for what the log tells afterwards. */
  endedAt?: number;
  /**
   * Epoch ms from which deliveries may be repeated because of this fault (the replication cut of a
   * failover, the kill of a dispatcher), and until which; absent for a receiver outage.
   */
  window?: { from: number; to: number };
  /** Ids acknowledged more than once whose first acknowledgement fell in `window`. */
  duplicates?: number;
  note: string;
}

/** Arrivals at the probe receiver, by notification id and by transaction. */
export class Probes {
  private readonly seen = new Map<string, number>();
  private readonly waiters = new Map<string, (t: number) => void>();

  constructor(receivers: Child) {
    receivers.onEvent((message) => {
      if (message.ev !== 'probe') return;
      for (const key of [message.id, message.txId]) {
        if (typeof key !== 'string') continue;
        const k = key.toLowerCase();
        if (!this.seen.has(k)) this.seen.set(k, message.t as number);
        this.waiters.get(k)?.(message.t as number);
        this.waiters.delete(k);
      }
    });
  }

  /** When a notification with this id (or of this transaction) first arrived. */
  arrival(key: string, timeoutMs: number): Promise<number | undefined> {
    const k = key.toLowerCase();
    const t = this.seen.get(k);
    if (t !== undefined) return Promise.resolve(t);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters.delete(k);
        resolve(undefined);
      }, timeoutMs);
      this.waiters.set(k, (at) => {
        clearTimeout(timer);
        resolve(at);
      });
    });
  }
}

export interface FaultContext {
  services: Services;
  clusters: Clusters;
  vip: TcpProxy;
  replicationLink: TcpProxy;
  receivers: Child;
  api: Api;
  chains: ChaosChain[];
  setup: Setup;
  probes: Probes;
}

/**
 * The watcher to kill: `preferred` if it follows a network now, else the other one if that does
 * (killing a standby would test nothing).
 */
async function followingWatcher(ctx: FaultContext, preferred: number): Promise<ServiceProcess> {
  const watchers = ctx.services.byRole('watcher');
  const order = [watchers[preferred]!, ...watchers.filter((_, i) => i !== preferred)];
  for (const watcher of order) {
    try {
      const res = await fetch(`${watcher.url}/readyz`, { signal: AbortSignal.timeout(3_000) });
      const body = (await res.json()) as { networks?: Array<{ standby: boolean }> };
      if (body.networks?.some((n) => !n.standby)) return watcher;
    } catch {
      // not answering: try the next
    }
  }
  return order[0]!;
}

/** A test notification made as soon as the API takes it, until it arrives: ms from `t0`. */
async function probeTest(ctx: FaultContext, t0: number): Promise<number> {
  const probe = ctx.setup.probes.values().next().value!;
  for (let attempt = 0; attempt < 5; attempt++) {
    const answer = await ctx.api.call('POST', `/subscription/${probe.id}/test`, undefined, {
      deadlineMs: 180_000,
    });
    if (answer.status !== 202) throw new Error(`probe test: ${answer.status} ${JSON.stringify(answer.body)}`);
    const at = await ctx.probes.arrival(String(answer.body.notificationId), 120_000);
    if (at !== undefined) return at - t0;
  }
  throw new Error('the probe test notification never arrived');
}

/** A transfer to the probe address on every chain, sent at once: ms from `t0` until all arrived. */
async function probeChains(ctx: FaultContext, t0: number): Promise<number> {
  const arrivals = await Promise.all(
    ctx.chains.map(async (chain) => {
      const hash = await chain.sendProbe();
      const at = await ctx.probes.arrival(hash, 240_000);
      if (at === undefined) throw new Error(`${chain.name}: the probe transfer ${hash} was never notified`);
      return at;
    }),
  );
  return Math.max(...arrivals) - t0;
}

async function allReady(ctx: FaultContext, t0: number): Promise<number> {
  await Promise.all(ctx.services.list.map((s) => ctx.services.ready(s, 180_000)));
  return Date.now() - t0;
}

async function kill(ctx: FaultContext, service: ServiceProcess): Promise<Omit<FaultResult, 'at'>> {
  const t0 = Date.now();
  await ctx.services.kill(service);
  ctx.services.start(service);
  const [readyMs, endToEndMs] = await Promise.all([
    ctx.services.ready(service, 180_000).then(() => Date.now() - t0),
    service.role === 'watcher' ? probeChains(ctx, t0) : probeTest(ctx, t0),
  ]);
  return {
    name: `SIGKILL ${service.name}`,
    readyMs,
    endToEndMs,
    // A killed dispatcher's last results were never recorded; those rows are sent again.
    window: { from: t0 - 3_000, to: t0 + 1_000 },
    note: `restarted (start ${service.starts})`,
  };
}

async function failover(ctx: FaultContext, lagMs: number): Promise<Omit<FaultResult, 'at'>> {
  const { clusters } = ctx;
  // The replica stops receiving: what the primary commits from now on is the tail a failover loses.
  const cutAt = Date.now();
  await ctx.replicationLink.cut();
  await sleep(lagMs);
  const primaryLsn = await clusters.currentLsn(clusters.primary);
  const replicaLsn = await clusters.receivedLsn(clusters.replica);
  const t0 = Date.now();
  await clusters.killPrimary();
  await clusters.promoteReplica();
  await ctx.vip.switchTarget(clusters.replica.port);
  const switchedMs = Date.now() - t0;
  const lost = replicaLsn ? await clusters.lsnDiff(clusters.replica, primaryLsn, replicaLsn) : Number.NaN;
  const [readyMs, testMs, chainMs] = await Promise.all([
    allReady(ctx, t0),
    probeTest(ctx, t0),
    probeChains(ctx, t0),
  ]);
  return {
    name: 'failover to the replica',
    readyMs,
    endToEndMs: Math.max(testMs, chainMs),
    // Requests in flight at the kill are answered while no database records them: sent again.
    window: { from: cutAt - 1_000, to: t0 + readyMs + 5_000 },
    note: `${(lost / 1024).toFixed(0)} KiB of WAL lost (${lagMs / 1000} s of commits); promoted and switched in ${(switchedMs / 1000).toFixed(1)} s`,
  };
}

async function pgRestart(ctx: FaultContext): Promise<Omit<FaultResult, 'at'>> {
  const t0 = Date.now();
  await ctx.clusters.restartCurrent();
  const restartedMs = Date.now() - t0;
  const [readyMs, testMs, chainMs] = await Promise.all([
    allReady(ctx, t0),
    probeTest(ctx, t0),
    probeChains(ctx, t0),
  ]);
  return {
    name: `PostgreSQL restart (${ctx.clusters.current.name})`,
    readyMs,
    endToEndMs: Math.max(testMs, chainMs),
    window: { from: t0 - 1_000, to: t0 + readyMs + 5_000 },
    note: `pg_ctl restart -m fast took ${(restartedMs / 1000).toFixed(1)} s`,
  };
}

async function receiverDown(
  ctx: FaultContext,
  receiver: number,
  ms: number,
): Promise<Omit<FaultResult, 'at'>> {
  await ctx.receivers.request({ cmd: 'down', receiver });
  await sleep(ms);
  await ctx.receivers.request({ cmd: 'up', receiver });
  return {
    name: `receiver ${receiver} down ${ms / 1000} s`,
    endedAt: Date.now(),
    note: 'port refusing, then back',
  };
}

function faultName(fault: Fault): string {
  return fault.kind === 'kill' ? `SIGKILL a ${fault.role}` : fault.kind;
}

/**
 * Runs the faults at their times (seconds after `loadStart`), one after the other (each waits for
 * the previous one's recovery), the receiver outages beside them.
 */
export async function runFaults(
  ctx: FaultContext,
  faults: Fault[],
  loadStart: number,
  log: (line: string) => void,
): Promise<FaultResult[]> {
  const results: FaultResult[] = [];
  const runOne = async (fault: Fault) => {
    const wait = loadStart + fault.at * 1000 - Date.now();
    if (wait > 0) await sleep(wait);
    const at = (Date.now() - loadStart) / 1000;
    log(`fault at ${at.toFixed(0)} s: ${faultName(fault)}`);
    const result =
      fault.kind === 'kill'
        ? await kill(
            ctx,
            fault.role === 'watcher'
              ? await followingWatcher(ctx, fault.index)
              : ctx.services.byRole(fault.role)[fault.index]!,
          )
        : fault.kind === 'failover'
          ? await failover(ctx, fault.lagMs)
          : fault.kind === 'pg-restart'
            ? await pgRestart(ctx)
            : await receiverDown(ctx, fault.receiver, fault.ms);
    results.push({ ...result, at });
    const took = [result.readyMs, result.endToEndMs]
      .filter((v) => v !== undefined)
      .map((v) => `${(v! / 1000).toFixed(1)} s`);
    log(
      `  ${result.name}: ${took.length ? `recovered (ready, end to end) ${took.join(', ')}; ` : ''}${result.note}`,
    );
  };
  const outages = faults.filter((f) => f.kind === 'receiver-down');
  const others = faults.filter((f) => f.kind !== 'receiver-down').sort((a, b) => a.at - b.at);
  await Promise.all([
    Promise.all(outages.map(runOne)),
    (async () => {
      for (const fault of others) await runOne(fault);
    })(),
  ]);
  return results.sort((a, b) => a.at - b.at);
}
