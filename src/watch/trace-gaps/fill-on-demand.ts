/**
 * `ledgerhook traces fill`'s work, wherever it runs (in the service through its admin endpoint, or
 * on the database itself): a network's open trace gaps, or those of a range, filled now from its
 * node, its tracing node (tracesRpc), or another node given for the occasion (an archive node).
 * The same filler as the background one (filler.ts), with the same ids.
 */
import { and, eq, gte, lte } from 'drizzle-orm';
import type { Logger } from 'pino';
import { createTokenInfoCache } from '../../chains/evm/activity.js';
import { evmSource } from '../../chains/evm/source.js';
import { createTraceReader } from '../../chains/evm/trace-reader.js';
import type { Network } from '../../chains/networks.js';
import type { Db } from '../../store/db.js';
import { createAddressIndex } from '../matching/address-index.js';
import { evmMatcher } from '../notifications/evm.js';
import { traceGaps } from '../schema.js';
import { evmClient } from '../watcher-families.js';
import { createTraceGapFiller, type FillOutcome } from './filler.js';

/** What a fill did, for the command's lines (JSON: it travels from the service to the CLI). */
export interface FillSummary {
  network: string;
  /** The host (and port) traces were read from. */
  tracedBy: string;
  filled: number;
  /** Notifications the filled gaps added. */
  notified: number;
  /** Gaps whose block left the chain: closed, nothing notified. */
  closed: number;
  /** Gaps whose notifications still wait for confirmations: left for later. */
  waiting: number;
  /** Gaps the node still cannot trace, with why. */
  open: { block: number; hash: string; reason: string }[];
}

export interface FillRequest {
  network: Network;
  /** Traces from this node instead of the network's (tracesRpc, else rpc). */
  rpc?: string;
  from?: number;
  to?: number;
}

function summarise(network: string, tracedBy: string, outcomes: FillOutcome[]): FillSummary {
  const summary: FillSummary = { network, tracedBy, filled: 0, notified: 0, closed: 0, waiting: 0, open: [] };
  for (const result of outcomes) {
    if (result.outcome === 'filled') {
      summary.filled++;
      summary.notified += result.notified;
    } else if (result.outcome === 'closed') summary.closed++;
    else if (result.outcome === 'waiting') summary.waiting++;
    else summary.open.push({ block: result.gap.height, hash: result.gap.hash, reason: result.reason });
  }
  return summary;
}

/**
 * Fills the network's open gaps of the range, oldest first. The watched addresses are read from
 * the database here: the subscriptions a gap's notifications go to are those that watched them
 * when its block was committed (the filler checks when each was created).
 */
export async function fillTraceGaps(
  deps: { db: Db; logger: Logger; traceWaitMs: number },
  request: FillRequest,
): Promise<FillSummary> {
  const { network } = request;
  const tracingUrl = request.rpc ?? network.tracesRpcUrls?.[0] ?? network.rpcUrls[0]!;
  const tracedBy = new URL(tracingUrl).host;
  // Nothing to fill: no node is asked and no address loaded.
  const [any] = await deps.db
    .select({ height: traceGaps.height })
    .from(traceGaps)
    .where(
      and(
        eq(traceGaps.network, network.name),
        request.from === undefined ? undefined : gte(traceGaps.height, request.from),
        request.to === undefined ? undefined : lte(traceGaps.height, request.to),
      ),
    )
    .limit(1);
  if (!any) return summarise(network.name, tracedBy, []);
  const client = evmClient(network.rpcUrls);
  const tracer = request.rpc
    ? evmClient([request.rpc])
    : network.tracesRpcUrls
      ? evmClient(network.tracesRpcUrls)
      : client;
  // Asked for on purpose: a network whose traces are off is traced all the same.
  const setting = network.traces === undefined || network.traces === 'off' ? 'auto' : network.traces;
  const reader = createTraceReader(tracer, setting, { waitMs: deps.traceWaitMs });
  const source = evmSource(client, undefined, undefined, reader);
  const index = createAddressIndex((name) => (name === network.name ? network.family : undefined));
  await index.load(deps.db);
  const filler = createTraceGapFiller({
    db: deps.db,
    network: network.name,
    block: (height) => source.block(height),
    head: async () => (await source.tip()).height,
    match: evmMatcher({ network, index, tokens: createTokenInfoCache(client), onMismatch: () => {} }),
    logger: deps.logger,
  });
  const outcomes = await filler.fillAll({ from: request.from, to: request.to });
  return summarise(network.name, tracedBy, outcomes);
}

/** Each network's gaps filled in turn, as `ledgerhook traces fill` asks: a summary per network. */
export async function fillTraceGapsOf(
  deps: { db: Db; logger: Logger; traceWaitMs: number },
  networks: Network[],
  range: Omit<FillRequest, 'network'>,
): Promise<FillSummary[]> {
  const summaries: FillSummary[] = [];
  for (const network of networks) summaries.push(await fillTraceGaps(deps, { network, ...range }));
  return summaries;
}
