import { and, desc, eq } from 'drizzle-orm';
import { v7 as uuidv7 } from 'uuid';
import type { NetworkCatalog } from '../chains/networks.js';
import { nodeUnavailable } from '../chains/node-errors.js';
import { ConflictError, type FieldError, NotFoundError, ValidationError } from '../errors.js';
import { type Db, isUniqueViolation } from '../store/db.js';
import { subscriptions } from '../subscriptions/schema.js';
import { ADDRESS_TRANSACTION } from '../subscriptions/service.js';
import { chainCursors } from '../watch/schema.js';
import type { BackfillFamily } from './families.js';
import { backfills } from './schema.js';

export type BackfillRow = typeof backfills.$inferSelect;

/** A bound of the range as asked: a block height, or a time resolved to one. */
type Bound = { block: number } | { time: Date };

export interface BackfillView {
  id: string;
  subscriptionId: string;
  network: string;
  state: string;
  from: number;
  to: number;
  /** Last block done (from − 1 before the first). */
  position: number;
  blocksDone: number;
  blocksTotal: number;
  /** 0 to 1. */
  progress: number;
  found: number;
  /** Seconds left at the pace since the job (re)started here; null until there is a pace. */
  etaSeconds: number | null;
  requested: { from: string; to: string | null };
  method: string;
  error: string | null;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
}

// ISO 8601 date-times as people write them: a date, optionally a time and a zone.
const ISO_TIME = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

function parseBound(value: unknown, field: 'from' | 'to'): Bound {
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

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function toView(row: BackfillRow, method: string, now = Date.now()): BackfillView {
  const total = row.toHeight - row.fromHeight + 1;
  const done = Math.max(0, row.position - row.fromHeight + 1);
  let eta: number | null = null;
  if (row.state === 'running' && row.startedAt && row.startedPosition !== null) {
    const elapsed = (now - row.startedAt.getTime()) / 1000;
    const advanced = row.position - row.startedPosition;
    if (advanced > 0 && elapsed > 0) eta = Math.ceil(((row.toHeight - row.position) * elapsed) / advanced);
  } else if (row.state === 'done') eta = 0;
  return {
    id: row.id,
    subscriptionId: row.subscriptionId,
    network: row.network,
    state: row.state,
    from: row.fromHeight,
    to: row.toHeight,
    position: row.position,
    blocksDone: done,
    blocksTotal: total,
    progress: total > 0 ? Math.min(1, done / total) : 1,
    found: row.found,
    etaSeconds: eta,
    requested: { from: row.requestedFrom, to: row.requestedTo },
    method,
    error: row.error,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    finishedAt: iso(row.finishedAt),
  };
}

export interface BackfillsDeps {
  db: Db;
  networks: NetworkCatalog;
  /** The network's backfill parts (undefined: no node is configured for it). */
  family(network: string): BackfillFamily | undefined;
  /** A backfill was created: the runner in this process may start it at once. */
  onCreated?: () => void;
}

/** Starting, reading and cancelling backfills, for the API. */
export function createBackfills(deps: BackfillsDeps) {
  const { db } = deps;

  async function ownedSubscription(accountId: string, id: string) {
    const [row] = await db
      .select()
      .from(subscriptions)
      .where(and(eq(subscriptions.id, id), eq(subscriptions.accountId, accountId)));
    if (!row) throw new NotFoundError(`No subscription ${id}`);
    return row;
  }

  const methodOf = (network: string) => deps.family(network)?.history.describe ?? '';

  async function latest(subscriptionId: string): Promise<BackfillRow | undefined> {
    const [row] = await db
      .select()
      .from(backfills)
      .where(eq(backfills.subscriptionId, subscriptionId))
      .orderBy(desc(backfills.createdAt), desc(backfills.id))
      .limit(1);
    return row;
  }

  async function running(subscriptionId: string): Promise<BackfillRow | undefined> {
    const [row] = await db
      .select()
      .from(backfills)
      .where(and(eq(backfills.subscriptionId, subscriptionId), eq(backfills.state, 'running')));
    return row;
  }

  const conflict = (row: BackfillRow) =>
    new ConflictError(`Backfill ${row.id} of this subscription is still running; cancel it or wait for it`, {
      existingId: row.id,
    });

  /** Block heights of the range asked, checked against the node's chain. */
  async function resolveRange(family: BackfillFamily, network: string, from: Bound, to: Bound | undefined) {
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

  return {
    async start(
      accountId: string,
      subscriptionId: string,
      input: { from?: unknown; to?: unknown },
    ): Promise<BackfillView> {
      const sub = await ownedSubscription(accountId, subscriptionId);
      if (sub.type !== ADDRESS_TRANSACTION || !sub.network)
        throw new ValidationError('Only an address subscription can be backfilled', [
          { parameter: 'id', detail: `${sub.type} subscriptions watch no addresses` },
        ]);
      if (sub.deletedAt)
        throw new ValidationError('The subscription is deleted', [
          { parameter: 'id', detail: 'a deleted subscription is no longer watched or delivered' },
        ]);
      const errors: FieldError[] = [];
      let from: Bound | undefined;
      let to: Bound | undefined;
      try {
        from = parseBound(input.from, 'from');
      } catch (err) {
        errors.push(...(err as ValidationError).errors);
      }
      try {
        if (input.to !== undefined && input.to !== null) to = parseBound(input.to, 'to');
      } catch (err) {
        errors.push(...(err as ValidationError).errors);
      }
      if (errors.length > 0) throw new ValidationError('Invalid backfill range', errors);
      const family = deps.family(sub.network);
      if (!family)
        throw new ValidationError(`Backfill is not available on ${sub.network}`, [
          {
            parameter: 'id',
            detail: `the ${sub.network} network has no node configured`,
          },
        ]);
      const already = await running(subscriptionId);
      if (already) throw conflict(already);
      const { fromHeight, toHeight } = await resolveRange(family, sub.network, from!, to);
      const now = new Date();
      let row: BackfillRow;
      try {
        [row] = (await db
          .insert(backfills)
          .values({
            id: uuidv7(),
            accountId,
            subscriptionId,
            network: sub.network,
            fromHeight,
            toHeight,
            position: fromHeight - 1,
            state: 'running',
            requestedFrom: String(input.from),
            requestedTo: input.to === undefined || input.to === null ? null : String(input.to),
            createdAt: now,
            updatedAt: now,
          })
          .returning()) as [BackfillRow];
      } catch (err) {
        // Another request started one meanwhile: the partial unique index kept it single.
        if (!isUniqueViolation(err)) throw err;
        const other = await running(subscriptionId);
        throw other ? conflict(other) : err;
      }
      deps.onCreated?.();
      return toView(row, methodOf(row.network));
    },

    /** The subscription's latest backfill (running or finished). */
    async get(accountId: string, subscriptionId: string): Promise<BackfillView> {
      await ownedSubscription(accountId, subscriptionId);
      const row = await latest(subscriptionId);
      if (!row) throw new NotFoundError(`Subscription ${subscriptionId} has no backfill`);
      return toView(row, methodOf(row.network));
    },

    /**
     * Stops the running backfill: what it committed stays (and is delivered); nothing more is
     * added. Cancelling a finished one changes nothing and shows it.
     */
    async cancel(accountId: string, subscriptionId: string): Promise<BackfillView> {
      await ownedSubscription(accountId, subscriptionId);
      const now = new Date();
      const [cancelled] = await db
        .update(backfills)
        .set({ state: 'cancelled', updatedAt: now, finishedAt: now })
        .where(and(eq(backfills.subscriptionId, subscriptionId), eq(backfills.state, 'running')))
        .returning();
      const row = cancelled ?? (await latest(subscriptionId));
      if (!row) throw new NotFoundError(`Subscription ${subscriptionId} has no backfill`);
      return toView(row, methodOf(row.network));
    },

    /** The running backfills (for the runner). */
    async runnable(): Promise<BackfillRow[]> {
      return db.select().from(backfills).where(eq(backfills.state, 'running')).orderBy(backfills.createdAt);
    },
    methodOf,
  };
}

export type Backfills = ReturnType<typeof createBackfills>;
