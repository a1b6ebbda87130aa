// The chaos run's load, sent from outside as clients would: subscriptions made through the API,
// then chain transfers, registry creates with a callback and test notifications, each paced to
// spread its total over the load's duration, and retried across the API processes while one is
// killed or the database fails over (registry creates with an Idempotency-Key, so a retry never
// makes a second).
import crypto from 'node:crypto';
import { sleep } from '../lib.js';
import type { ChaosChain } from './chains.js';
import type { ServiceProcess } from './processes.js';

export interface ApiAnswer {
  status: number;
  body: Record<string, unknown>;
}

export class Api {
  private next = 0;
  /** Calls that needed another try (a process down, the database away). */
  retries = 0;

  constructor(
    private readonly apis: ServiceProcess[],
    private readonly token: string,
  ) {}

  /** Tries the API processes in turn until one answers other than 5xx/429, or `deadlineMs` passes. */
  async call(
    method: string,
    route: string,
    body?: unknown,
    options: { idempotencyKey?: string; deadlineMs?: number } = {},
  ): Promise<ApiAnswer> {
    const deadline = Date.now() + (options.deadlineMs ?? 120_000);
    let last = '';
    for (;;) {
      const api = this.apis[this.next++ % this.apis.length]!;
      try {
        const res = await fetch(`${api.url}/api/v1${route}`, {
          method,
          headers: {
            authorization: `Bearer ${this.token}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
            ...(options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : {}),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(20_000),
        });
        const text = await res.text();
        if (res.status < 500 && res.status !== 429) {
          return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
        }
        last = `${res.status} ${text.slice(0, 200)}`;
      } catch (err) {
        last = err instanceof Error ? err.message : String(err);
      }
      this.retries++;
      if (Date.now() > deadline) throw new Error(`${method} ${route}: no answer in time (last: ${last})`);
      await sleep(200);
    }
  }

  async expect(
    status: number,
    method: string,
    route: string,
    body?: unknown,
  ): Promise<Record<string, unknown>> {
    const answer = await this.call(method, route, body);
    if (answer.status !== status)
      throw new Error(`${method} ${route}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 500)}`);
    return answer.body;
  }
}

export interface Subscription {
  id: string;
  chain: string;
  addresses: string[];
  url: string;
}

export interface Setup {
  /** Per chain: the probe subscription (the probe address, the probe receiver). */
  probes: Map<string, Subscription>;
  /** The load's subscriptions: every watched address of a chain in each. */
  lists: Subscription[];
  /** Signing secrets by subscription id, for the signature sample. */
  secrets: Map<string, string>;
}

/** The probe subscriptions and `perChain` address-list subscriptions on each chain. */
export async function subscribe(
  api: Api,
  chains: ChaosChain[],
  perChain: number,
  probeUrl: string,
  loadUrls: string[],
): Promise<Setup> {
  const setup: Setup = { probes: new Map(), lists: [], secrets: new Map() };
  for (const chain of chains) {
    const probe = await api.expect(201, 'POST', '/subscription', {
      type: 'ADDRESS_TRANSACTION',
      mempool: false,
      attr: { address: chain.probeAddress, chain: chain.name, url: probeUrl },
    });
    setup.secrets.set(String(probe.id), String(probe.secret));
    setup.probes.set(chain.name, {
      id: String(probe.id),
      chain: chain.name,
      addresses: [chain.probeAddress],
      url: probeUrl,
    });
    for (let i = 0; i < perChain; i++) {
      const url = loadUrls[(i + chains.indexOf(chain)) % loadUrls.length]!;
      const list = await api.expect(201, 'POST', '/subscription', {
        type: 'ADDRESS_TRANSACTION',
        mempool: false,
        attr: { addresses: chain.recipients, chain: chain.name, url },
      });
      setup.secrets.set(String(list.id), String(list.secret));
      setup.lists.push({ id: String(list.id), chain: chain.name, addresses: chain.recipients, url });
    }
  }
  return setup;
}

export interface LoadPlan {
  transfersPerChain: number;
  registries: number;
  tests: number;
  durationMs: number;
}

export interface LoadCounts {
  transfers: number;
  registries: number;
  tests: number;
  /** Calls that failed for good (past their deadline). */
  failed: number;
}

/** Drives the three kinds of load to their totals over the plan's duration. */
export class Load {
  readonly counts: LoadCounts = { transfers: 0, registries: 0, tests: 0, failed: 0 };
  private start = 0;

  constructor(
    private readonly plan: LoadPlan,
    private readonly api: Api,
    private readonly chains: ChaosChain[],
    private readonly setup: Setup,
    private readonly loadUrls: string[],
  ) {}

  /** How many of `total` should have been issued by now. */
  private due(total: number): number {
    return Math.min(total, Math.ceil((total * (Date.now() - this.start)) / this.plan.durationMs));
  }

  async run(): Promise<void> {
    this.start = Date.now();
    const workers = (n: number, work: () => Promise<boolean>) =>
      Promise.all(
        Array.from({ length: n }, async () => {
          while (await work());
        }),
      );
    await Promise.all([
      this.transfers(),
      workers(4, () => this.next('registries', this.plan.registries, (i) => this.registry(i))),
      workers(4, () => this.next('tests', this.plan.tests, (i) => this.test(i))),
    ]);
  }

  private issued = { registries: 0, tests: 0 };

  /** Takes the next item of a kind when it is due; false once all are issued. */
  private async next(
    kind: 'registries' | 'tests',
    total: number,
    send: (i: number) => Promise<void>,
  ): Promise<boolean> {
    if (this.issued[kind] >= total) return false;
    if (this.issued[kind] >= this.due(total)) {
      await sleep(50);
      return true;
    }
    const i = this.issued[kind]++;
    try {
      await send(i);
      this.counts[kind]++;
    } catch (err) {
      this.counts.failed++;
      process.stderr.write(`load: ${err instanceof Error ? err.message : String(err)}\n`);
    }
    return true;
  }

  private async registry(i: number): Promise<void> {
    const answer = await this.api.call(
      'POST',
      '/registry/create',
      {
        title: `chaos ${i}`,
        folder_id: 'chaos',
        template: 'STORAGE',
        metadata: [{ type: 'NUMBER', key: 'n', value: String(i) }],
        callback_url: this.loadUrls[i % this.loadUrls.length],
      },
      { idempotencyKey: crypto.randomUUID() },
    );
    if (answer.status !== 201)
      throw new Error(`registry create: ${answer.status} ${JSON.stringify(answer.body)}`);
    const data = answer.body.data as Record<string, unknown>;
    this.setup.secrets.set(String(data.subscription_id), String(data.secret));
  }

  private async test(i: number): Promise<void> {
    const sub = this.setup.lists[i % this.setup.lists.length]!;
    const answer = await this.api.call('POST', `/subscription/${sub.id}/test`);
    if (answer.status !== 202) throw new Error(`test: ${answer.status} ${JSON.stringify(answer.body)}`);
  }

  /** Each second, on every chain, the transfers due by then in one batch (several per block). */
  private async transfers(): Promise<void> {
    const total = this.plan.transfersPerChain;
    for (;;) {
      const batches = this.chains.map((chain) =>
        chain.sendBatch(Math.min(500, this.due(total) - chain.sent)),
      );
      await Promise.all(batches);
      if (this.chains.every((c) => c.sent >= total)) break;
      await sleep(1_000);
    }
    this.counts.transfers = this.chains.reduce((sum, c) => sum + c.sent, 0);
  }
}
