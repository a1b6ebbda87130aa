/**
 * `ledgerhook traces fill`: trace gaps filled now, rather than waiting for the background filler
 * (which runs while the node traces and the follower is at its head), optionally from another node
 * (an archive node for old blocks). Through the running service's admin endpoint while one holds
 * the embedded database, as backup does; on the database itself otherwise.
 */
import fs from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { connectAdmin } from '../accounts/admin.js';
import { openConfiguredStore, PGLITE_SUBDIR } from '../app/store.js';
import type { Network } from '../chains/networks.js';
import { type Config, ConfigError } from '../config.js';
import { TRACES_FILL_ROUTE, type TracesFillBody } from '../http/admin-traces.js';
import { dataDirHolder } from '../store/lock.js';
import { type FillSummary, fillTraceGapsOf } from '../watch/trace-gaps/fill-on-demand.js';
import { UsageError } from './usage.js';

/** How long the command waits for a service that is still starting to publish its admin endpoint. */
const ADMIN_WAIT_MS = 10_000;

interface FillOptions {
  network?: string;
  rpc?: string;
  from?: string;
  to?: string;
}

function blockOption(name: 'from' | 'to', value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,15}$/.test(value)) throw new UsageError(`--${name} must be a block number; got "${value}"`);
  return Number(value);
}

/** The command line checked: EVM networks, an http(s) node, a range that is one. */
function request(values: FillOptions, config: Config): { networks: Network[]; body: TracesFillBody } {
  let networks: Network[];
  if (values.network !== undefined) {
    const network = config.networks.find(values.network);
    if (!network)
      throw new UsageError(
        `--network ${values.network} is not a configured network; use one of ${config.networks.names().join(', ')}`,
      );
    if (network.family !== 'evm')
      throw new UsageError(
        `--network ${network.name} is a ${network.family} network; trace gaps are of EVM networks`,
      );
    networks = [network];
  } else networks = config.networks.list().filter((n) => n.family === 'evm' && n.rpcUrls.length > 0);
  if (values.rpc !== undefined) {
    let url: URL | undefined;
    try {
      url = new URL(values.rpc);
    } catch {}
    if (!url || !['http:', 'https:'].includes(url.protocol))
      throw new UsageError(`--rpc must be an http(s) JSON-RPC URL; got "${values.rpc}"`);
    if (values.network === undefined)
      throw new UsageError('--rpc names a node of one network: give --network too');
  }
  const from = blockOption('from', values.from);
  const to = blockOption('to', values.to);
  if (from !== undefined && to !== undefined && from > to)
    throw new UsageError(`--from ${from} is after --to ${to}`);
  return {
    networks,
    body: {
      networks: networks.map((n) => n.name),
      ...(values.rpc === undefined ? {} : { rpc: values.rpc }),
      ...(from === undefined ? {} : { from }),
      ...(to === undefined ? {} : { to }),
    },
  };
}

/** On the database itself: no service holds it (or it is PostgreSQL, which admits many). */
async function fillDirectly(
  config: Config,
  networks: Network[],
  body: TracesFillBody,
): Promise<FillSummary[]> {
  if (!config.databaseUrl && !fs.existsSync(path.join(config.dataDir, PGLITE_SUBDIR, 'PG_VERSION')))
    throw new ConfigError(
      'LEDGERHOOK_DATA_DIR',
      `${config.dataDir} holds no Ledgerhook data; point it at the data directory of your service`,
    );
  const { store, lock } = await openConfiguredStore(config);
  const logger = pino({ level: 'warn' }, process.stderr);
  try {
    return await fillTraceGapsOf({ db: store.db, logger, traceWaitMs: config.traceWaitMs }, networks, {
      rpc: body.rpc,
      from: body.from,
      to: body.to,
    });
  } finally {
    await store.close();
    lock?.release();
  }
}

/** One line per network, and one per gap left open. */
function report(summary: FillSummary): string {
  const parts = [
    `${summary.filled} filled (${summary.notified} notification${summary.notified === 1 ? '' : 's'})`,
  ];
  if (summary.closed > 0) parts.push(`${summary.closed} closed (their blocks left the chain)`);
  if (summary.waiting > 0) parts.push(`${summary.waiting} waiting for confirmations`);
  parts.push(`${summary.open.length} still open`);
  const lines = [`${summary.network}: trace gaps ${parts.join(', ')}; traces from ${summary.tracedBy}`];
  for (const gap of summary.open) lines.push(`  block ${gap.block} (${gap.hash}): ${gap.reason}`);
  return lines.join('\n');
}

/** `ledgerhook traces fill`; resolves with the exit code: 0 when no gap of the range is left open. */
export async function tracesFillCommand(values: FillOptions, config: Config): Promise<number> {
  const { networks, body } = request(values, config);
  let summaries: FillSummary[] | undefined;
  if (!config.databaseUrl) {
    const holder = dataDirHolder(config.dataDir);
    const admin =
      holder === undefined ? undefined : await connectAdmin(config.dataDir, holder, ADMIN_WAIT_MS);
    if (admin) {
      const response = await admin.request('POST', TRACES_FILL_ROUTE, body);
      const payload = (await response.json()) as FillSummary[] | { error?: string };
      if (!response.ok || !Array.isArray(payload))
        throw new Error(
          `the service (pid ${holder}) could not fill the gaps: ${(payload as { error?: string }).error ?? response.status}`,
        );
      summaries = payload;
    }
  }
  summaries ??= await fillDirectly(config, networks, body);
  const touched = summaries.filter((s) => s.filled + s.closed + s.waiting + s.open.length > 0);
  if (touched.length === 0) {
    const where = values.network === undefined ? 'on any EVM network' : `on ${networks[0]!.name}`;
    const range =
      body.from === undefined && body.to === undefined
        ? ''
        : ` between blocks ${body.from ?? 0} and ${body.to ?? 'the head'}`;
    process.stdout.write(`no open trace gaps ${where}${range}\n`);
  }
  for (const summary of touched) process.stdout.write(`${report(summary)}\n`);
  return summaries.some((s) => s.open.length > 0 || s.waiting > 0) ? 1 : 0;
}
