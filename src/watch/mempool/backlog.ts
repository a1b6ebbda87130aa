/**
 * The mempool watcher's backlog (evm-mempool.ts): pending transactions waiting to be read and matched,
 * and those already handled, so that one still pending is not read again.
 */
import type { Logger } from 'pino';
import { type Hex, type PublicClient, TransactionNotFoundError } from 'viem';
import { enqueueNotifications, type NewNotification } from '../../notify/outbox.js';
import type { Db } from '../../store/db.js';
import type { Announcement, PendingLifecycle } from './pending-lifecycle.js';
import type { PendingTransaction } from './pending-transfers.js';

/** Transaction hashes remembered as handled, so a transaction still pending is not read again. */
const SEEN_LIMIT = 50_000;
/** Pending transactions waiting to be read or notified (a node failing mid-way leaves some). */
const BACKLOG_LIMIT = 20_000;
const FETCH_CONCURRENCY = 8;

/** A bounded set: the oldest entries go first once it is full. */
function boundedSet<T>(limit: number) {
  const entries = new Set<T>();
  return {
    has: (value: T) => entries.has(value),
    add(value: T): void {
      entries.delete(value);
      entries.add(value);
      if (entries.size > limit) entries.delete(entries.values().next().value as T);
    },
  };
}

export interface BacklogDeps {
  db: Db;
  client: PublicClient;
  log: Logger;
  /** The notifications of a pending transaction (match.ts). */
  notificationsOf: (tx: PendingTransaction) => Promise<NewNotification[]>;
  /** False once the watcher stops: a drain reads no more. */
  isRunning: () => boolean;
  /** Remembers what was announced, to withdraw it if its transaction can no longer be mined. */
  lifecycle: Pick<PendingLifecycle, 'track' | 'ready'>;
}

/** What a pending EVM transaction needs that another could take: its sender's nonce. */
export const nonceClaim = (from: string, nonce: number | bigint): string => `${from.toLowerCase()}:${nonce}`;

export function createBacklog(deps: BacklogDeps) {
  const { db, client, log, notificationsOf, isRunning, lifecycle } = deps;
  const seen = boundedSet<Hex>(SEEN_LIMIT);
  /** Hash → the transaction when already known (pending block), null when it is still to be read. */
  const backlog = new Map<Hex, PendingTransaction | null>();

  function enqueue(hash: Hex, tx: PendingTransaction | null): void {
    // Known already, or waiting with its transaction: nothing to add.
    if (seen.has(hash) || backlog.get(hash)) return;
    backlog.set(hash, tx);
    if (backlog.size > BACKLOG_LIMIT) {
      backlog.delete(backlog.keys().next().value as Hex);
      log.warn('mempool backlog full; the oldest pending transaction is skipped');
    }
  }

  /** A transaction the filter reported, if it is still pending (a mined one is the follower's). */
  async function readPending(hash: Hex): Promise<PendingTransaction | undefined> {
    try {
      const tx = await client.getTransaction({ hash });
      return tx.blockNumber === null ? tx : undefined;
    } catch (err) {
      if (err instanceof TransactionNotFoundError) return undefined; // dropped, or not on this node
      throw err;
    }
  }

  /** Reads and matches the backlog; what fails stays in it for the next poll. */
  async function drain(): Promise<void> {
    const work = [...backlog];
    const items: NewNotification[] = [];
    const announced: Announcement[] = [];
    const handled: Hex[] = [];
    let failure: unknown;
    let next = 0;
    const worker = async () => {
      while (next < work.length && isRunning()) {
        const [hash, known] = work[next++]!;
        try {
          const tx = known ?? (await readPending(hash));
          const notified = tx ? await notificationsOf(tx) : [];
          if (tx && notified.length > 0) {
            items.push(...notified);
            const claims = [nonceClaim(tx.from, tx.nonce)];
            announced.push({ txId: tx.hash, claims, notificationIds: notified.map((n) => n.id) });
          }
          handled.push(hash);
        } catch (err) {
          failure ??= err;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(FETCH_CONCURRENCY, work.length) }, worker));
    if (items.length > 0) {
      await lifecycle.ready();
      const tracked = await db.transaction(async (tx) => {
        // Only those inserted now: one seen before (another poll, a restart) is tracked already.
        const inserted = new Set(await enqueueNotifications(tx, items));
        const fresh = announced.map((a) => ({
          ...a,
          notificationIds: a.notificationIds.filter((id) => inserted.has(id)),
        }));
        return lifecycle.track(tx, fresh);
      });
      tracked();
      log.debug({ notifications: items.length }, 'pending transactions notified');
    }
    for (const hash of handled) {
      backlog.delete(hash);
      seen.add(hash);
    }
    if (failure !== undefined) throw failure;
  }

  return {
    enqueue,
    drain,
    /** Forgets what waits (nobody wants the mempool any more, or another process follows). */
    clear: () => backlog.clear(),
  };
}
