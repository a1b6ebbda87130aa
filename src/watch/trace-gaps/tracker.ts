/**
 * Trace gaps (schema.ts, `trace_gaps`): blocks committed without their internal transfers because
 * the node could not trace them. They are written with their blocks, in the follower's (or a
 * backfill's) transaction; the follower's network keeps its open gaps' count and range for
 * /readyz and the metric, and says in the log when a run of gaps begins and when it ends.
 */
import { and, count, eq, gte, max, min, notInArray } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { ChainBlock, UntracedBlock } from '../../chains/source.js';
import type { Db } from '../../store/db.js';
import type { BlockSettler } from '../follower/follower.js';
import { traceGaps } from '../schema.js';

/** A network's open gaps, as /readyz shows them: how many, and the first and last block. */
export interface TraceGapStatus {
  count: number;
  first: number | null;
  last: number | null;
}

/** Records gaps in the transaction committing their blocks; a gap already recorded stays as it was. */
export async function recordTraceGaps(
  tx: Db,
  network: string,
  gaps: readonly UntracedBlock[],
): Promise<number> {
  if (gaps.length === 0) return 0;
  const since = new Date();
  const inserted = await tx
    .insert(traceGaps)
    .values(gaps.map((gap) => ({ network, ...gap, since })))
    .onConflictDoNothing()
    .returning({ height: traceGaps.height });
  return inserted.length;
}

/** The open gaps of a network: their count and range. */
export async function traceGapStatus(db: Db, network: string): Promise<TraceGapStatus> {
  const [row] = await db
    .select({ count: count(), first: min(traceGaps.height), last: max(traceGaps.height) })
    .from(traceGaps)
    .where(eq(traceGaps.network, network));
  return { count: row?.count ?? 0, first: row?.first ?? null, last: row?.last ?? null };
}

/**
 * A followed network's trace gaps: `settler` records those of the blocks the follower commits and
 * drops those of blocks a reorganisation replaced; `status` is what /readyz shows.
 */
export function createTraceGapTracker<Activity>(deps: {
  db: Db;
  network: string;
  logger: Logger;
  /** Why the block was read without its traces; undefined when it was not. */
  gapOf: (activity: Activity) => string | undefined;
  /** A run of gaps ended: blocks are traced again, so the open gaps may be filled now. */
  onTracedAgain?: () => void;
}) {
  const { db, network } = deps;
  const log = deps.logger.child({ component: 'trace-gaps', network });
  let status: TraceGapStatus = { count: 0, first: null, last: null };
  /** The run of gaps the last committed blocks are in, if they are. */
  let run: { from: number; to: number; blocks: number } | undefined;

  /** Says once when a run of gaps begins and once when it ends, not per block. */
  function noteRuns(blocks: readonly ChainBlock<Activity>[], reasons: (string | undefined)[]): void {
    blocks.forEach((block, i) => {
      const reason = reasons[i];
      if (reason !== undefined) {
        if (!run) {
          run = { from: block.height, to: block.height, blocks: 0 };
          log.warn(
            { block: block.height, reason },
            'blocks are committed without their internal transfers from here: the node cannot trace them (trace gaps)',
          );
        }
        run.to = block.height;
        run.blocks++;
      } else if (run) {
        log.info(
          { from: run.from, to: run.to, gaps: run.blocks },
          'blocks are traced again: the trace gaps before are filled in the background',
        );
        run = undefined;
        deps.onTracedAgain?.();
      }
    });
  }

  const settler: BlockSettler<Activity> = async (tx, blocks) => {
    const reasons = blocks.map((block) => deps.gapOf(block.activity));
    const gaps = blocks.flatMap((block, i) => {
      const reason = reasons[i];
      return reason === undefined ? [] : [{ height: block.height, hash: block.hash, reason }];
    });
    let dropped = 0;
    const from = blocks[0]?.height;
    // Only a reorganisation commits blocks at heights that may hold gaps of the branch it replaced.
    if (from !== undefined && status.last !== null && status.last >= from) {
      const gone = await tx
        .delete(traceGaps)
        .where(
          and(
            eq(traceGaps.network, network),
            gte(traceGaps.height, from),
            notInArray(
              traceGaps.hash,
              blocks.map((block) => block.hash),
            ),
          ),
        )
        .returning({ height: traceGaps.height });
      dropped = gone.length;
    }
    const added = await recordTraceGaps(tx, network, gaps);
    const changed = added > 0 || dropped > 0;
    const counted = changed ? await traceGapStatus(tx, network) : undefined;
    return () => {
      if (counted) status = counted;
      noteRuns(blocks, reasons);
    };
  };

  return {
    settler,
    /** Reads the network's open gaps anew: when this process takes the network's lead. */
    async load(): Promise<void> {
      status = await traceGapStatus(db, network);
    },
    status: (): TraceGapStatus => status,
  };
}

/** Settlers run one after the other in the same transaction; what each applies after it, in order. */
export function bothSettlers<Activity>(
  first: BlockSettler<Activity>,
  second: BlockSettler<Activity>,
): BlockSettler<Activity> {
  return async (tx, blocks) => {
    const a = await first(tx, blocks);
    const b = await second(tx, blocks);
    return () => {
      a();
      b();
    };
  };
}
