/**
 * A backfill's range: its bounds as asked (block heights or ISO 8601 times), then resolved to block
 * heights against the node's chain.
 */
import { eq } from 'drizzle-orm';
import { nodeUnavailable } from '../chains/node-errors.js';
import { type FieldError, ValidationError } from '../errors.js';
import type { Db } from '../store/db.js';
import { chainCursors } from '../watch/schema.js';
import type { BackfillFamily } from './families.js';

/** A bound of the range as asked: a block height, or a time resolved to one. */
export type Bound = { block: number } | { time: Date };

// ISO 8601 date-times as people write them: a date, optionally a time and a zone.
const ISO_TIME = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

export function parseBound(value: unknown, field: 'from' | 'to'): Bound {
  const invalid = (detail: string) =>
    new ValidationError(`Invalid ${field}`, [{ pointer: `/${field}`, detail }]);
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || value < 0) throw invalid('a block number is a non-negative integer');
    return { block: value };
  }
  if (typeof value !== 'string') throw invalid('a block number or an ISO 8601 time');
  const text = value.trim();
  if (/^\d{1,15}$/.test(text)) return { block: Number(text) };
  if (ISO_TIME.test(text)) {
    const time = new Date(text);
    if (!Number.isNaN(time.getTime())) return { time };
  }
  throw invalid('a block number or an ISO 8601 time (e.g. 2024-05-01T00:00:00Z)');
}

/** The lowest height in [low, high] whose time is at least `seconds` (high + 1 when none is). */
async function firstAtOrAfter(
  history: BackfillFamily['history'],
  seconds: number,
  low: number,
  high: number,
) {
  let lo = low;
  let hi = high + 1;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    const time = await history.timeOf(mid);
    if (time === undefined || time >= seconds) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Block heights of the range asked, checked against the node's chain. */
export async function resolveRange(
  db: Db,
  family: BackfillFamily,
  network: string,
  from: Bound,
  to: Bound | undefined,
) {
  // Every read of the node: a failure reaches the client in our words (nodeUnavailable), never
  // the node's URL or the library's message.
  const fromNode = async <T>(read: Promise<T>): Promise<T> => {
    try {
      return await read;
    } catch (err) {
      throw nodeUnavailable(family.network, err);
    }
  };
  const history: BackfillFamily['history'] = {
    ...family.history,
    tip: () => fromNode(family.history.tip()),
    timeOf: (height) => fromNode(family.history.timeOf(height)),
  };
  const tip = await history.tip();
  const errors: FieldError[] = [];
  const resolve = async (bound: Bound, field: 'from' | 'to'): Promise<number | undefined> => {
    if ('block' in bound) {
      if (bound.block > tip) {
        errors.push({
          pointer: `/${field}`,
          detail: `block ${bound.block} is beyond the chain's head (${tip})`,
        });
        return undefined;
      }
      return bound.block;
    }
    const seconds = Math.floor(bound.time.getTime() / 1000);
    const tipTime = await history.timeOf(tip);
    if (tipTime === undefined || seconds > tipTime) {
      errors.push({
        pointer: `/${field}`,
        detail: `${bound.time.toISOString()} is after the chain's head (block ${tip})`,
      });
      return undefined;
    }
    // `from`: the first block at or after the time; `to`: the last block at or before it.
    const first = await firstAtOrAfter(history, field === 'from' ? seconds : seconds + 1, 0, tip);
    return field === 'from' ? first : first - 1;
  };
  const fromHeight = await resolve(from, 'from');
  let toHeight: number | undefined;
  if (to) toHeight = await resolve(to, 'to');
  else {
    // By default up to where the live follower stood when asked: it notifies what comes after,
    // so the two meet without a gap (and the dedupe keys make any overlap harmless).
    const [cursor] = await db.select().from(chainCursors).where(eq(chainCursors.network, network));
    toHeight = Math.min(cursor?.height ?? tip, tip);
  }
  if (errors.length === 0 && fromHeight !== undefined && toHeight !== undefined && fromHeight > toHeight) {
    errors.push({ pointer: '/from', detail: `from (block ${fromHeight}) is after to (block ${toHeight})` });
  }
  if (errors.length > 0) throw new ValidationError('Invalid backfill range', errors);
  return { fromHeight: fromHeight!, toHeight: toHeight! };
}
