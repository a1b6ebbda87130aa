/**
 * Filling trace gaps (tracker.ts; docs/internal-transfers.md#when-the-node-cannot-trace-a-block): a
 * gap's block read again with its traces, and exactly the internal transfers that were missed
 * notified, with the ids they would have had live, to the subscriptions that watched their addresses
 * when the block was committed; one transaction per gap, so a kill loses and doubles nothing. A gap
 * whose block left the chain closes with nothing notified; one still untraceable stays open with the
 * new reason. The follower's process fills its network's gaps in the background, oldest first, a
 * few at a time, only while the follower is at the head, so a catch-up is never slowed by it.
 */
import { and, asc, eq, gte, inArray, isNull, lte, or, sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { EvmBlockActivity } from '../../chains/evm/types.js';
import type { ChainBlock } from '../../chains/source.js';
import { enqueueNotifications } from '../../notify/outbox.js';
import { createSleeper } from '../../shared/sleeper.js';
import type { Db } from '../../store/db.js';
import { subscriptions } from '../../subscriptions/schema.js';
import { type BlockMatcher, blockNotifications } from '../follower/follower.js';
import { traceGaps } from '../schema.js';

export type TraceGapRow = typeof traceGaps.$inferSelect;

/** What became of a gap asked to be filled. */
export type FillOutcome =
  /** Traced, and its missed internal transfers notified (`notified` of them were new). */
  | { gap: TraceGapRow; outcome: 'filled'; notified: number }
  /** Its block is no longer at its height on the node's chain: closed, nothing notified. */
  | { gap: TraceGapRow; outcome: 'closed' }
  /** The node still cannot trace it: left open, with why. */
  | { gap: TraceGapRow; outcome: 'open'; reason: string }
  /** Some of its notifications would still wait for confirmations: left for later. */
  | { gap: TraceGapRow; outcome: 'waiting' };

export interface TraceGapFillerDeps {
  db: Db;
  network: string;
  /** The block at a height with its traces read, as the follower reads it (undefined: none there). */
  block(height: number): Promise<ChainBlock<EvmBlockActivity> | undefined>;
  /** The height of the node's latest block. */
  head(): Promise<number>;
  /** The follower's matcher of the network. */
  match: BlockMatcher<EvmBlockActivity>;
  logger: Logger;
}

/** Fill attempts back off from a minute to a day, doubling: a node that cannot trace is not asked at every turn. */
const RETRY_BASE_MS = 60_000;
const RETRY_MAX_MS = 86_400_000;

/** The subscriptions among `ids` that existed when the block was committed without its traces. */
async function watchingAt(db: Db, ids: string[], since: Date): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .select({ id: subscriptions.id })
    .from(subscriptions)
    .where(and(inArray(subscriptions.id, ids), lte(subscriptions.createdAt, since)));
  return new Set(rows.map((row) => row.id));
}

export function createTraceGapFiller(deps: TraceGapFillerDeps) {
  const { db, network } = deps;
  const log = deps.logger.child({ component: 'trace-gaps', network });

  async function close(gap: TraceGapRow): Promise<void> {
    await db
      .delete(traceGaps)
      .where(
        and(eq(traceGaps.network, network), eq(traceGaps.height, gap.height), eq(traceGaps.hash, gap.hash)),
      );
  }

  async function stillOpen(gap: TraceGapRow, reason: string): Promise<void> {
    await db
      .update(traceGaps)
      .set({ reason, tries: sql`${traceGaps.tries} + 1`, triedAt: new Date() })
      .where(
        and(eq(traceGaps.network, network), eq(traceGaps.height, gap.height), eq(traceGaps.hash, gap.hash)),
      );
  }

  /** Reads the gap's block with its traces and notifies what was missed; see FillOutcome. */
  async function fill(gap: TraceGapRow): Promise<FillOutcome> {
    let block: ChainBlock<EvmBlockActivity> | undefined;
    try {
      block = await deps.block(gap.height);
    } catch (err) {
      const reason = err instanceof Error ? err.message.split('\n')[0]! : String(err);
      await stillOpen(gap, `filling failed: ${reason}`.slice(0, 1_000));
      return { gap, outcome: 'open', reason };
    }
    if (!block || block.hash !== gap.hash) {
      await close(gap);
      return { gap, outcome: 'closed' };
    }
    if (block.activity.traceGap !== undefined) {
      await stillOpen(gap, block.activity.traceGap);
      return { gap, outcome: 'open', reason: block.activity.traceGap };
    }
    // Only what the traces add: the rest of the block was notified when it was committed.
    const internal: ChainBlock<EvmBlockActivity> = {
      ...block,
      activity: {
        ...block.activity,
        transfers: block.activity.transfers.filter((t) => t.traceAddress !== undefined),
        payments: [],
        logs: [],
      },
    };
    const matches = await deps.match(internal);
    const existed = await watchingAt(db, [...new Set(matches.map((m) => m.subscription.id))], gap.since);
    const items = blockNotifications(
      network,
      block,
      matches.filter((m) => existed.has(m.subscription.id)),
      await deps.head(),
    );
    // Held rows would wait on a releaser that never heard of them: fill once they are due.
    if (items.some((item) => item.state === 'held')) return { gap, outcome: 'waiting' };
    let notified = 0;
    await db.transaction(async (tx) => {
      notified = (await enqueueNotifications(tx, items)).length;
      await tx
        .delete(traceGaps)
        .where(
          and(eq(traceGaps.network, network), eq(traceGaps.height, gap.height), eq(traceGaps.hash, gap.hash)),
        );
    });
    return { gap, outcome: 'filled', notified };
  }

  /** Open gaps of the network in a range, oldest first; `due` keeps those not tried too recently. */
  async function openGaps(options: {
    from?: number;
    to?: number;
    limit: number;
    due?: boolean;
    /** Only those after this one, in the same order (keyset pagination). */
    after?: Pick<TraceGapRow, 'height' | 'hash'>;
  }) {
    const conditions = [eq(traceGaps.network, network)];
    if (options.after)
      conditions.push(
        sql`(${traceGaps.height}, ${traceGaps.hash}) > (${options.after.height}, ${options.after.hash})`,
      );
    if (options.from !== undefined) conditions.push(gte(traceGaps.height, options.from));
    if (options.to !== undefined) conditions.push(lte(traceGaps.height, options.to));
    if (options.due)
      conditions.push(
        or(
          isNull(traceGaps.triedAt),
          sql`${traceGaps.triedAt} <= now() - least(${RETRY_MAX_MS}, ${RETRY_BASE_MS} * power(2, least(${traceGaps.tries}, 20))) * interval '1 millisecond'`,
        )!,
      );
    return db
      .select()
      .from(traceGaps)
      .where(and(...conditions))
      .orderBy(asc(traceGaps.height), asc(traceGaps.hash))
      .limit(options.limit);
  }

  /** Fills the open gaps of a range (all by default), oldest first; what became of each. */
  async function fillAll(options: { from?: number; to?: number } = {}): Promise<FillOutcome[]> {
    const outcomes: FillOutcome[] = [];
    let after: TraceGapRow | undefined;
    for (;;) {
      const batch = await openGaps({ ...options, limit: 100, after });
      if (batch.length === 0) return outcomes;
      for (const gap of batch) outcomes.push(await fill(gap));
      after = batch[batch.length - 1];
    }
  }

  return { fill, fillAll, openGaps, log };
}

export type TraceGapFiller = ReturnType<typeof createTraceGapFiller>;

/**
 * Fills in the background: every `intervalMs`, while `canFill()` (this process follows the
 * network and is at its head), up to `perTurn` gaps that are due, oldest first.
 */
export function fillInBackground(
  filler: TraceGapFiller,
  options: {
    canFill: () => boolean;
    intervalMs: number;
    perTurn?: number;
    onChange?: () => Promise<void> | void;
  },
) {
  const { fill, openGaps, log } = filler;
  const sleeper = createSleeper();
  let running = false;
  let loop: Promise<void> | undefined;
  /** Set when the node traces again: the next turns try every gap, whenever it was last tried. */
  let retryAll = false;
  let retried: TraceGapRow | undefined;
  async function turn(): Promise<void> {
    if (!options.canFill()) return;
    const limit = options.perTurn ?? 4;
    const gaps = retryAll
      ? await openGaps({ limit, ...(retried ? { after: retried } : {}) })
      : await openGaps({ limit, due: true });
    if (retryAll) {
      retried = gaps[gaps.length - 1];
      if (gaps.length < limit) {
        retryAll = false;
        retried = undefined;
      }
    }
    let changed = false;
    for (const gap of gaps) {
      if (!running || !options.canFill()) break;
      const result = await fill(gap);
      if (result.outcome === 'filled' || result.outcome === 'closed') {
        changed = true;
        log.info(
          {
            block: gap.height,
            hash: gap.hash,
            outcome: result.outcome,
            ...('notified' in result ? { notified: result.notified } : {}),
          },
          result.outcome === 'filled' ? 'trace gap filled' : 'trace gap closed: its block left the chain',
        );
      }
    }
    if (changed) await options.onChange?.();
  }
  return {
    start(): void {
      if (running) return;
      running = true;
      loop = (async () => {
        while (running) {
          try {
            await turn();
          } catch (err) {
            log.warn({ err }, 'filling trace gaps failed; trying again later');
          }
          await sleeper.sleep(options.intervalMs);
        }
      })();
    },
    async stop(): Promise<void> {
      running = false;
      sleeper.wake();
      await loop;
    },
    /** The node traces again: every open gap is tried now, whenever it was last tried. */
    retryNow(): void {
      retryAll = true;
      retried = undefined;
      sleeper.wake();
    },
  };
}
