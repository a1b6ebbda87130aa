import { sql } from 'drizzle-orm';
import type { Db } from '../store/db.js';
import { FEED_CHANNEL } from './feed.js';

/** Longest long-poll, in seconds. */
export const MAX_FEED_WAIT_SECONDS = 30;

export interface FeedQuery {
  /** The sequence number read last ('0': from the start). */
  afterSequence: string;
  limit: number;
  /** Only this subscription's events (it must be the account's). */
  subscriptionId?: string;
  /** Seconds to wait for a first event when there is none yet (0: answer at once). */
  waitSeconds: number;
}

/** One event as stored; `body` is the JSON text exactly as webhooks carry it. */
export interface FeedEvent {
  id: string;
  sequence: string;
  subscriptionId: string;
  eventType: string;
  createdAt: string;
  body: string;
}

export interface FeedPage {
  events: FeedEvent[];
  /** Where the next read resumes: the last event's sequence, or where this one started. */
  lastSequence: string;
}

export interface EventFeedOptions {
  db: Db;
  /** LISTEN on a channel (any process); resolves to a function that stops listening. */
  listen(channel: string, onNotify: (payload?: string) => void): Promise<() => Promise<void>>;
  /** Rejects with NotFoundError unless the subscription is the account's (deleted ones count). */
  checkSubscription(accountId: string, subscriptionId: string): Promise<void>;
}

const rowsOf = <T>(result: unknown): T[] => (result as { rows: T[] }).rows;

/**
 * Reads the feed for an account, and holds long-polls until the sequencer announces events for it
 * (in this process directly, from others by NOTIFY) or their wait ends.
 */
export function createEventFeed(options: EventFeedOptions) {
  const { db } = options;
  /** Woken long-polls by account; each resolves its wait. */
  const waiting = new Map<string, Set<() => void>>();
  let waitingCount = 0;
  let stopped = false;
  let unlisten: (() => Promise<void>) | undefined;

  function signal(accounts: string[] | 'all'): void {
    const sets = accounts === 'all' ? [...waiting.values()] : accounts.map((a) => waiting.get(a));
    for (const set of sets) for (const wake of set ?? []) wake();
  }

  /**
   * Registers interest before the read, so that events sequenced between the read and the wait
   * are not missed: `wait` then returns at once.
   */
  function watch(accountId: string) {
    let signalled = false;
    let resolveWait: (() => void) | undefined;
    const wake = () => {
      signalled = true;
      resolveWait?.();
    };
    let set = waiting.get(accountId);
    if (!set) {
      set = new Set();
      waiting.set(accountId, set);
    }
    set.add(wake);
    waitingCount++;
    return {
      /** Until signalled, `ms` pass, the client goes away, or the service stops. */
      wait(ms: number, abort: AbortSignal): Promise<void> {
        if (signalled || stopped || abort.aborted) return Promise.resolve();
        return new Promise((resolve) => {
          const done = () => {
            clearTimeout(timer);
            abort.removeEventListener('abort', done);
            resolveWait = undefined;
            resolve();
          };
          const timer = setTimeout(done, ms);
          abort.addEventListener('abort', done);
          resolveWait = done;
        });
      },
      dispose(): void {
        resolveWait?.();
        const current = waiting.get(accountId);
        if (current?.delete(wake)) waitingCount--;
        if (current?.size === 0) waiting.delete(accountId);
      },
    };
  }

  async function fetchPage(accountId: string, query: FeedQuery): Promise<FeedPage> {
    const bySubscription = query.subscriptionId
      ? sql`f.subscription_id = ${query.subscriptionId} AND f.account_id = ${accountId}`
      : sql`f.account_id = ${accountId}`;
    const rows = rowsOf<{
      seq: string;
      id: string;
      subscription_id: string;
      event_type: string;
      created_at: string;
      body: string;
    }>(
      await db.execute(sql`
        SELECT f.seq::text AS seq, n.id, n.subscription_id, n.event_type,
          to_char(n.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at, n.body
        FROM feed_events f JOIN notifications n ON n.id = f.notification_id
        WHERE ${bySubscription} AND f.seq > ${query.afterSequence}::bigint
        ORDER BY f.seq
        LIMIT ${query.limit}`),
    );
    const last = rows.at(-1)?.seq ?? query.afterSequence;
    return {
      events: rows.map((r) => ({
        id: r.id,
        sequence: r.seq,
        subscriptionId: r.subscription_id,
        eventType: r.event_type,
        createdAt: r.created_at,
        body: r.body,
      })),
      lastSequence: last,
    };
  }

  return {
    /** Listens for events sequenced by other processes. */
    async start(): Promise<void> {
      unlisten = await options.listen(FEED_CHANNEL, (payload) =>
        signal(payload ? payload.split(',') : 'all'),
      );
    },

    /** Events sequenced in this process, for these accounts. */
    signal,

    /**
     * A page of the account's events after the cursor; with `waitSeconds`, waits for the first
     * one up to then. `abort` ends the wait early (the client went away): nothing is left behind.
     */
    async read(accountId: string, query: FeedQuery, abort: AbortSignal): Promise<FeedPage> {
      if (query.subscriptionId !== undefined)
        await options.checkSubscription(accountId, query.subscriptionId);
      const deadline = Date.now() + Math.min(query.waitSeconds, MAX_FEED_WAIT_SECONDS) * 1000;
      for (;;) {
        const watcher = watch(accountId);
        try {
          const page = await fetchPage(accountId, query);
          const left = deadline - Date.now();
          if (page.events.length > 0 || left <= 0 || stopped || abort.aborted) return page;
          await watcher.wait(left, abort);
          // The client is gone or the service stops: the answer would not be read, or must not wait.
          if (abort.aborted || stopped) return page;
        } finally {
          watcher.dispose();
        }
      }
    },

    /**
     * The end of the feed now: the last sequence number given (of any account's events, as every
     * cursor holds one), '0' while the feed is empty. Reading after it gives only what comes next.
     */
    async head(): Promise<string> {
      const [row] = rowsOf<{ seq: string }>(
        await db.execute(sql`SELECT coalesce(max(seq), 0)::text AS seq FROM feed_events`),
      );
      return row?.seq ?? '0';
    },

    /** Long-polls waiting now (for /metrics and tests). */
    waiting: () => waitingCount,

    /** Ends every wait (answered with what is there) and stops listening. */
    async stop(): Promise<void> {
      stopped = true;
      signal('all');
      await unlisten?.().catch(() => {});
    },
  };
}

export type EventFeed = ReturnType<typeof createEventFeed>;
