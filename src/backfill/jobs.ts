import { and, desc, eq } from 'drizzle-orm';
import { v7 as uuidv7 } from 'uuid';
import type { NetworkCatalog } from '../chains/networks.js';
import { ConflictError, type FieldError, NotFoundError, ValidationError } from '../errors.js';
import { type Db, isUniqueViolation } from '../store/db.js';
import { subscriptions } from '../subscriptions/schema.js';
import { ADDRESS_TRANSACTION, CONTRACT_LOG_EVENT } from '../subscriptions/service.js';
import type { BackfillFamily } from './families.js';
import { type Bound, parseBound, resolveRange } from './range.js';
import { backfills } from './schema.js';

export type BackfillRow = typeof backfills.$inferSelect;
type SubscriptionRow = typeof subscriptions.$inferSelect;

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
  /** Blocks read without their internal transfers: the node could not trace them (trace gaps). */
  traceGaps: number;
  /** Seconds left at the pace since the job (re)started here; null until there is a pace. */
  etaSeconds: number | null;
  requested: { from: string; to: string | null };
  method: string;
  error: string | null;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
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
    traceGaps: row.traceGaps,
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

/** The reads that starting, reading and cancelling share: the caller's subscription, its backfills. */
function backfillLookups(deps: BackfillsDeps) {
  const { db } = deps;

  async function ownedSubscription(accountId: string, id: string) {
    const [row] = await db
      .select()
      .from(subscriptions)
      .where(and(eq(subscriptions.id, id), eq(subscriptions.accountId, accountId)));
    if (!row) throw new NotFoundError(`No subscription ${id}`);
    return row;
  }

  /** How the subscription's history is read on the network (an event subscription's: its logs). */
  const methodOf = (network: string, sub: Pick<SubscriptionRow, 'contractEvent'>) => {
    const family = deps.family(network);
    return (sub.contractEvent ? family?.events?.describe : family?.history.describe) ?? '';
  };

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

  return { ownedSubscription, methodOf, latest, running, conflict };
}

/** Starting, reading and cancelling backfills, for the API. */
export function createBackfills(deps: BackfillsDeps) {
  const { db } = deps;
  const { ownedSubscription, methodOf, latest, running, conflict } = backfillLookups(deps);

  return {
    async start(
      accountId: string,
      subscriptionId: string,
      input: { from?: unknown; to?: unknown },
    ): Promise<BackfillView> {
      const sub = await ownedSubscription(accountId, subscriptionId);
      const backfillable =
        sub.type === ADDRESS_TRANSACTION || (sub.type === CONTRACT_LOG_EVENT && sub.contractEvent !== null);
      if (!backfillable || !sub.network)
        throw new ValidationError('Only an address or contract event subscription can be backfilled', [
          { parameter: 'id', detail: `${sub.type} subscriptions watch no chain` },
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
      if (!family || (sub.contractEvent && !family.events))
        throw new ValidationError(`Backfill is not available on ${sub.network}`, [
          {
            parameter: 'id',
            detail: `the ${sub.network} network has no node configured`,
          },
        ]);
      const already = await running(subscriptionId);
      if (already) throw conflict(already);
      const { fromHeight, toHeight } = await resolveRange(db, family, sub.network, from!, to);
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
      return toView(row, methodOf(row.network, sub));
    },

    /** The subscription's latest backfill (running or finished). */
    async get(accountId: string, subscriptionId: string): Promise<BackfillView> {
      const sub = await ownedSubscription(accountId, subscriptionId);
      const row = await latest(subscriptionId);
      if (!row) throw new NotFoundError(`Subscription ${subscriptionId} has no backfill`);
      return toView(row, methodOf(row.network, sub));
    },

    /**
     * Stops the running backfill: what it committed stays (and is delivered); nothing more is
     * added. Cancelling a finished one changes nothing and shows it.
     */
    async cancel(accountId: string, subscriptionId: string): Promise<BackfillView> {
      const sub = await ownedSubscription(accountId, subscriptionId);
      const now = new Date();
      const [cancelled] = await db
        .update(backfills)
        .set({ state: 'cancelled', updatedAt: now, finishedAt: now })
        .where(and(eq(backfills.subscriptionId, subscriptionId), eq(backfills.state, 'running')))
        .returning();
      const row = cancelled ?? (await latest(subscriptionId));
      if (!row) throw new NotFoundError(`Subscription ${subscriptionId} has no backfill`);
      return toView(row, methodOf(row.network, sub));
    },

    /** The running backfills (for the runner). */
    async runnable(): Promise<BackfillRow[]> {
      return db.select().from(backfills).where(eq(backfills.state, 'running')).orderBy(backfills.createdAt);
    },
    methodOf,
  };
}

export type Backfills = ReturnType<typeof createBackfills>;
