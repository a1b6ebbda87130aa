/**
 * The pending lifecycle of one network (docs/mempool.md): which announcements may still be
 * withdrawn, and their withdrawal. Their claims are what another transaction can take first (EVM:
 * the sender's nonce; Bitcoin: the outputs spent); a transaction in a block, or entering a Bitcoin
 * pool, holding another's claim withdraws it with `replacedBy`; one mined itself is just forgotten.
 * The rows (pending_announcements) are written with the pending notifications and removed with the
 * withdrawal or the block's commit, so a process killed in between withdraws once after a restart.
 * They are held in memory, read on first use and on each takeover: with none, a block costs nothing.
 */
import { and, eq, inArray, lt } from 'drizzle-orm';
import type { Logger } from 'pino';
import { chainNotificationId, enqueueNotifications, type NewNotification } from '../../notify/outbox.js';
import { notifications } from '../../notify/schema.js';
import type { Db } from '../../store/db.js';
import type { BlockSettler } from '../follower/commit.js';
import { type Announced, cancelUnsent } from '../follower/reorg-diff.js';
import { pendingAnnouncements } from '../schema.js';

/** What a transaction takes: its id and its claims (EVM `0xsender:nonce`, Bitcoin `txid:vout`). */
export interface Claimed {
  txId: string;
  claims: string[];
}

/** Pending notifications just enqueued for one transaction. */
export interface Announcement extends Claimed {
  notificationIds: string[];
}

/** An announced transaction as held in memory. */
export interface TrackedTransaction extends Claimed {
  notificationIds: string[];
  /** EVM: since when the node's pool has not held it; null while it does (or not checked yet). */
  missingSince: Date | null;
}

/** Applied to the memory once the transaction that wrote the change has committed. */
export type AfterCommit = () => void;

const NOTHING: AfterCommit = () => {};

/**
 * Announcements older than this are forgotten when the network is taken over: Bitcoin Core
 * evicts a transaction unconfirmed for 336 hours (its default `mempoolexpiry`), and on EVM the
 * drop timeout has long withdrawn it.
 */
const FORGET_AFTER_MS = 14 * 86_400_000;

export interface PendingLifecycleDeps {
  db: Db;
  network: string;
  logger: Logger;
}

/** The announced transactions in memory, by id and by claim. */
function announcementMemory() {
  const byTx = new Map<string, TrackedTransaction>();
  /** Claim → the announced transactions holding it (two when a replacement is announced too). */
  const byClaim = new Map<string, Set<string>>();

  function remember(t: TrackedTransaction): void {
    const known = byTx.get(t.txId);
    if (known) {
      known.notificationIds.push(...t.notificationIds);
      return;
    }
    byTx.set(t.txId, t);
    for (const claim of t.claims) {
      let holders = byClaim.get(claim);
      if (!holders) {
        holders = new Set();
        byClaim.set(claim, holders);
      }
      holders.add(t.txId);
    }
  }

  function forgetInMemory(txIds: Iterable<string>): void {
    for (const txId of txIds) {
      const t = byTx.get(txId);
      if (!t) continue;
      byTx.delete(txId);
      for (const claim of t.claims) {
        const holders = byClaim.get(claim);
        holders?.delete(txId);
        if (holders?.size === 0) byClaim.delete(claim);
      }
    }
  }

  return { byTx, byClaim, remember, forgetInMemory };
}

/** The notification withdrawing a pending one: its body, an id of its own, `dropped` and `replacedBy`. */
function droppedNotification(network: string, row: Announced, replacedBy: string | null): NewNotification {
  // Once per announcement, whoever (which process, which retry) sees the conflict.
  const dedupeKey = `dropped:${row.id}`;
  const id = chainNotificationId(row.subscriptionId, network, dedupeKey);
  const body = { ...(JSON.parse(row.body) as object), id, dropped: true };
  return {
    id,
    accountId: row.accountId,
    subscriptionId: row.subscriptionId,
    eventType: 'address.transaction.dropped',
    body: JSON.stringify(replacedBy === null ? body : { ...body, replacedBy }),
    dedupeKey,
    chain: network,
  };
}

export function createPendingLifecycle(deps: PendingLifecycleDeps) {
  const { db, network } = deps;
  const log = deps.logger.child({ component: 'pending-lifecycle', network });
  const memory = announcementMemory();
  const { byTx, byClaim, remember, forgetInMemory } = memory;
  let loading: Promise<void> | undefined;
  let loaded = false;

  async function load(): Promise<void> {
    await db
      .delete(pendingAnnouncements)
      .where(
        and(
          eq(pendingAnnouncements.network, network),
          lt(pendingAnnouncements.announcedAt, new Date(Date.now() - FORGET_AFTER_MS)),
        ),
      );
    const rows = await db
      .select()
      .from(pendingAnnouncements)
      .where(eq(pendingAnnouncements.network, network));
    byTx.clear();
    byClaim.clear();
    for (const row of rows) {
      remember({
        txId: row.txId,
        claims: row.claims,
        notificationIds: [row.notificationId],
        missingSince: row.missingSince,
      });
    }
    loaded = true;
    if (rows.length > 0) log.info({ announcements: rows.length }, 'pending announcements loaded');
  }

  /**
   * Reads the announcements once (again after `reload`); a failed read is retried on next use.
   * Never awaited inside a transaction: on the embedded database the read would wait for the
   * transaction's own connection. `track` and `settle` run inside one and use what is loaded.
   */
  function ready(): Promise<void> {
    if (!loading) {
      loading = load();
      loading.catch(() => {
        loading = undefined;
      });
    }
    return loading;
  }

  function assertLoaded(): void {
    if (!loaded) throw new Error(`the pending announcements of ${network} are not loaded yet`);
  }

  /** Within the transaction that enqueued the notifications: remembers the announcements. */
  async function track(tx: Db, announced: Announcement[], now = new Date()): Promise<AfterCommit> {
    const rows = announced.flatMap((a) =>
      a.notificationIds.map((notificationId) => ({
        notificationId,
        network,
        txId: a.txId,
        claims: a.claims,
        announcedAt: now,
      })),
    );
    if (rows.length === 0) return NOTHING;
    assertLoaded();
    await tx.insert(pendingAnnouncements).values(rows).onConflictDoNothing();
    return () => {
      for (const a of announced) if (a.notificationIds.length > 0) remember({ ...a, missingSince: null });
    };
  }

  /**
   * Within the transaction committing what `seen` holds: forgets the announcements of the
   * transactions in it that were mined (`mined`: a block's), and withdraws those whose claims
   * another of them took, naming it as `replacedBy`.
   */
  async function settle(tx: Db, seen: readonly Claimed[], mined: boolean): Promise<AfterCommit> {
    assertLoaded();
    if (byTx.size === 0) return NOTHING;
    const minedIds = mined ? seen.filter((s) => byTx.has(s.txId)).map((s) => s.txId) : [];
    const replaced = new Map<string, string>();
    for (const s of seen) {
      for (const claim of s.claims) {
        for (const holder of byClaim.get(claim) ?? []) {
          if (holder !== s.txId && !replaced.has(holder)) replaced.set(holder, s.txId);
        }
      }
    }
    for (const txId of minedIds) replaced.delete(txId);
    if (minedIds.length === 0 && replaced.size === 0) return NOTHING;
    await deleteRows(tx, minedIds);
    await withdrawIn(tx, replaced);
    return () => forgetInMemory([...minedIds, ...replaced.keys()]);
  }

  /** Withdraws announced transactions (to their replacement's id, or null when none is known). */
  async function withdrawIn(tx: Db, replacedBy: ReadonlyMap<string, string | null>): Promise<void> {
    if (replacedBy.size === 0) return;
    const owner = new Map<string, string>();
    for (const txId of replacedBy.keys()) {
      for (const id of byTx.get(txId)?.notificationIds ?? []) owner.set(id, txId);
    }
    const ids = [...owner.keys()];
    const rows =
      ids.length === 0 ? [] : await tx.select().from(notifications).where(inArray(notifications.id, ids));
    const { sent } = await cancelUnsent(
      tx,
      rows,
      'its transaction can no longer be mined; withdrawn before it was sent',
    );
    await enqueueNotifications(
      tx,
      sent.map((row) => droppedNotification(network, row, replacedBy.get(owner.get(row.id)!) ?? null)),
    );
    await deleteRows(tx, [...replacedBy.keys()]);
    log.info({ transactions: replacedBy.size, withdrawn: sent.length }, 'pending announcements withdrawn');
  }

  async function deleteRows(tx: Db, txIds: string[]): Promise<void> {
    if (txIds.length === 0) return;
    await tx
      .delete(pendingAnnouncements)
      .where(and(eq(pendingAnnouncements.network, network), inArray(pendingAnnouncements.txId, txIds)));
  }

  /** The follower's part (follower/commit.ts): each committed block's transactions, mined. */
  function blockSettler<Activity>(claimsOf: (activity: Activity) => Claimed[]): BlockSettler<Activity> {
    return async (tx, blocks) => {
      assertLoaded();
      if (byTx.size === 0) return NOTHING; // nothing announced: the blocks are not even read
      return settle(
        tx,
        blocks.flatMap((b) => claimsOf(b.activity)),
        true,
      );
    };
  }

  return {
    ready,
    track,
    settle,
    blockSettler,
    /** The transactions announced and not yet mined or withdrawn. */
    async tracked(): Promise<TrackedTransaction[]> {
      await ready();
      return [...byTx.values()];
    },
    /** Forgets announcements of transactions found mined (the follower notifies them). */
    async forget(txIds: string[]): Promise<void> {
      if (txIds.length === 0) return;
      await deleteRows(db, txIds);
      forgetInMemory(txIds);
    },
    /** Withdraws announced transactions that can no longer be mined, with no replacement known. */
    async withdraw(txIds: string[]): Promise<void> {
      if (txIds.length === 0) return;
      await db.transaction((tx) => withdrawIn(tx, new Map(txIds.map((txId) => [txId, null]))));
      forgetInMemory(txIds);
    },
    /** Records since when the pool has not held these transactions (null: it holds them again). */
    async markMissing(txIds: string[], since: Date | null): Promise<void> {
      if (txIds.length === 0) return;
      await db
        .update(pendingAnnouncements)
        .set({ missingSince: since })
        .where(and(eq(pendingAnnouncements.network, network), inArray(pendingAnnouncements.txId, txIds)));
      for (const txId of txIds) {
        const t = byTx.get(txId);
        if (t) t.missingSince = since;
      }
    },
    /** This process takes over the network (the follower's onLead): the announcements are read again. */
    reload(): Promise<void> {
      loading = undefined;
      return ready();
    },
  };
}

export type PendingLifecycle = ReturnType<typeof createPendingLifecycle>;
