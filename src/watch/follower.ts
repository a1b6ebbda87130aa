import { and, eq, gt, inArray, lt, min, sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { BlockNotFoundError, type PublicClient } from 'viem';
import type { EvmBlockActivity, TokenInfo } from '../chains/evm/types.js';
import type { Network } from '../chains/networks.js';
import {
  enqueueNotifications,
  type NewNotification,
  newNotificationId,
  signalOutbox,
} from '../notify/outbox.js';
import { notifications } from '../notify/schema.js';
import { createSleeper } from '../shared/sleeper.js';
import type { Db, HeldLock } from '../store/db.js';
import type { AddressIndex } from './address-index.js';
import { buildEvmNotification, transferKey } from './evm-notifications.js';
import { runPolling } from './polling.js';
import { chainCursors, chainHeaders } from './schema.js';

/** Headers kept per network: a reorganisation deeper than this is not followed. */
const KEPT_HEADERS = 128;

/** What the follower reads of the node's latest block. */
interface TipBlock {
  number: bigint;
  hash: `0x${string}`;
  parentHash: `0x${string}`;
}

export interface FollowerStatus {
  network: string;
  /** Last block processed. */
  height: number | null;
  /** Last head the node reported. */
  head: number | null;
  healthy: boolean;
  lastError: string | null;
  /** Another process holds this network's follower lock; this one waits to take over. */
  standby: boolean;
  /** Rounds that failed (node or database errors) since the process started. */
  errors: number;
}

export interface EvmFollowerDeps {
  db: Db;
  network: Network;
  client: PublicClient;
  index: AddressIndex;
  fetchActivity: (client: PublicClient, number: bigint) => Promise<EvmBlockActivity>;
  tokens: { get(token: `0x${string}`): Promise<TokenInfo> };
  logger: Logger;
  pollIntervalMs: number;
  /** Longest wait between retries while the node is unreachable. */
  maxBackoffMs?: number;
  /**
   * One process at a time follows a network (PostgreSQL advisory lock); the others stand by and
   * take over from the cursor when the holder's connection goes away.
   */
  acquireLock?: () => Promise<HeldLock | undefined>;
  /** How often a standby tries to take the lock. */
  lockRetryMs?: number;
}

/**
 * Follows one EVM network: processes each new block once, in order, writing its notifications and
 * the new cursor in one transaction; on a parent-hash mismatch walks back to the common ancestor,
 * withdraws what the orphaned blocks announced, and carries on along the new branch.
 */
export function createEvmFollower(deps: EvmFollowerDeps) {
  const { db, network, client, index } = deps;
  const log = deps.logger.child({ component: 'follower', network: network.name });
  const maxBackoffMs = deps.maxBackoffMs ?? 30_000;
  const status: FollowerStatus = {
    network: network.name,
    height: null,
    head: null,
    healthy: false,
    lastError: null,
    standby: false,
    errors: 0,
  };
  let lock: HeldLock | undefined;
  let lockLost = false;

  /** True while this process may follow the network. */
  async function holdLock(): Promise<boolean> {
    if (!deps.acquireLock) return true;
    if (lock && !lockLost) return true;
    lock = await deps.acquireLock();
    status.standby = lock === undefined;
    if (!lock) return false;
    lockLost = false;
    const held = lock;
    void held.lost.then(() => {
      if (lock !== held) return;
      lockLost = true;
      status.standby = true;
      log.warn('lost the follower lock; standing by');
    });
    log.info('following (holds the network lock)');
    return true;
  }
  let running = false;
  let loopDone: Promise<void> | undefined;

  const sleeper = createSleeper();
  const { wake } = sleeper;

  async function cursor(): Promise<{ height: number; hash: string } | undefined> {
    const [row] = await db.select().from(chainCursors).where(eq(chainCursors.network, network.name));
    return row ? { height: row.height, hash: row.hash } : undefined;
  }

  /** A new network starts at the current head: history before the first start is not replayed. */
  async function initialise(block: TipBlock): Promise<{ height: number; hash: string }> {
    await db.transaction(async (tx) => {
      await tx
        .insert(chainCursors)
        .values({
          network: network.name,
          height: Number(block.number),
          hash: block.hash,
          updatedAt: new Date(),
        })
        .onConflictDoNothing();
      await tx
        .insert(chainHeaders)
        .values({
          network: network.name,
          height: Number(block.number),
          hash: block.hash,
          parentHash: block.parentHash,
        })
        .onConflictDoNothing();
    });
    return (await cursor())!;
  }

  async function buildNotifications(block: EvmBlockActivity, head: number): Promise<NewNotification[]> {
    const height = Number(block.number);
    const items: NewNotification[] = [];
    for (const transfer of block.transfers) {
      const watchers = [
        ...index.lookup(network.name, transfer.from),
        ...index.lookup(network.name, transfer.to),
      ];
      if (watchers.length === 0) continue;
      const decimals =
        transfer.kind === 'erc20' && transfer.token ? (await deps.tokens.get(transfer.token)).decimals : 0;
      const seen = new Set<string>();
      for (const subscription of watchers) {
        if (seen.has(subscription.id)) continue; // a transfer to oneself is one notification
        seen.add(subscription.id);
        const releaseHeight = height + Math.max(1, subscription.confirmations) - 1;
        const id = newNotificationId();
        const body = buildEvmNotification({
          id,
          network,
          transfer,
          subscription,
          blockNumber: height,
          decimals,
          confirmations: Math.max(1, subscription.confirmations),
          mempool: false,
        });
        items.push({
          id,
          accountId: subscription.accountId,
          subscriptionId: subscription.id,
          eventType: 'address.transaction',
          body: JSON.stringify(body),
          dedupeKey: transferKey(block.hash, transfer),
          state: head >= releaseHeight ? 'pending' : 'held',
          chain: network.name,
          blockNumber: height,
          blockHash: block.hash,
          releaseHeight,
        });
      }
    }
    return items;
  }

  /**
   * The lowest release height among this network's held notifications: undefined when none are
   * held, null when not known (at start, and after any failure, which may have rolled back what
   * was computed). Most subscriptions want one confirmation, so most blocks skip the query.
   */
  let nextRelease: number | undefined | null = null;

  /** Held notifications whose block is now deep enough become due. */
  async function release(tx: Db, head: number): Promise<void> {
    if (nextRelease === undefined || (nextRelease !== null && head < nextRelease)) return;
    const released = await tx
      .update(notifications)
      .set({ state: 'pending', nextAttemptAt: sql`now()` })
      .where(
        and(
          eq(notifications.chain, network.name),
          eq(notifications.state, 'held'),
          lt(notifications.releaseHeight, head + 1),
        ),
      )
      .returning({ id: notifications.id });
    if (released.length > 0) await signalOutbox(tx);
    const [left] = await tx
      .select({ lowest: min(notifications.releaseHeight) })
      .from(notifications)
      .where(and(eq(notifications.chain, network.name), eq(notifications.state, 'held')));
    nextRelease = left?.lowest === null || left?.lowest === undefined ? undefined : Number(left.lowest);
  }

  async function commit(block: EvmBlockActivity, head: number): Promise<void> {
    const items = await buildNotifications(block, head);
    const height = Number(block.number);
    await db.transaction(async (tx) => {
      await enqueueNotifications(tx, items);
      if (nextRelease !== null) {
        for (const item of items) {
          if (item.state === 'held')
            nextRelease = Math.min(nextRelease ?? Number.POSITIVE_INFINITY, item.releaseHeight!);
        }
      }
      await tx
        .insert(chainHeaders)
        .values({ network: network.name, height, hash: block.hash, parentHash: block.parentHash })
        .onConflictDoUpdate({
          target: [chainHeaders.network, chainHeaders.height],
          set: { hash: block.hash, parentHash: block.parentHash },
        });
      // Old headers are pruned now and then, not on every block.
      if (height % 32 === 0) {
        await tx
          .delete(chainHeaders)
          .where(and(eq(chainHeaders.network, network.name), lt(chainHeaders.height, height - KEPT_HEADERS)));
      }
      await tx
        .update(chainCursors)
        .set({ height, hash: block.hash, updatedAt: new Date() })
        .where(eq(chainCursors.network, network.name));
      await release(tx, head);
    });
    if (items.length > 0) log.debug({ block: height, notifications: items.length }, 'block processed');
  }

  /**
   * Walks back from the cursor to the last block the node still has, withdraws the notifications
   * of the orphaned blocks and moves the cursor there. Returns the ancestor's height.
   */
  async function reorganise(from: { height: number; hash: string }): Promise<number> {
    let height = from.height;
    for (; height > from.height - KEPT_HEADERS && height >= 0; height--) {
      const [stored] = await db
        .select()
        .from(chainHeaders)
        .where(and(eq(chainHeaders.network, network.name), eq(chainHeaders.height, height)));
      if (!stored) break;
      // A chain now shorter than the cursor has no block at this height: that block left it too.
      const canonical = await client.getBlock({ blockNumber: BigInt(height) }).catch((err: unknown) => {
        if (err instanceof BlockNotFoundError) return undefined;
        throw err;
      });
      if (canonical?.hash === stored.hash) break;
    }
    const ancestor = height;
    const orphaned = await db
      .select({ hash: chainHeaders.hash })
      .from(chainHeaders)
      .where(and(eq(chainHeaders.network, network.name), gt(chainHeaders.height, ancestor)));
    const hashes = orphaned.map((o) => o.hash);
    const ancestorHeader = (
      await db
        .select()
        .from(chainHeaders)
        .where(and(eq(chainHeaders.network, network.name), eq(chainHeaders.height, ancestor)))
    )[0];
    const ancestorHash =
      ancestorHeader?.hash ?? (await client.getBlock({ blockNumber: BigInt(ancestor) })).hash;

    await db.transaction(async (tx) => {
      if (hashes.length > 0) {
        const announced = await tx
          .select()
          .from(notifications)
          .where(and(eq(notifications.chain, network.name), inArray(notifications.blockHash, hashes)));
        // Never sent: cancelled quietly. Sent (or being sent): withdrawn with a reorg notification.
        const unsent = announced.filter(
          (n) => n.state === 'held' || (n.state === 'pending' && n.attempts === 0 && !n.lockedBy),
        );
        const sent = announced.filter(
          (n) => !unsent.includes(n) && n.state !== 'cancelled' && !n.dedupeKey?.startsWith('reorg:'),
        );
        if (unsent.length > 0) {
          await tx
            .update(notifications)
            .set({
              state: 'cancelled',
              nextAttemptAt: null,
              lastError: 'its block left the canonical chain before it was sent',
            })
            .where(
              inArray(
                notifications.id,
                unsent.map((n) => n.id),
              ),
            );
        }
        await enqueueNotifications(
          tx,
          sent.map((n) => {
            const id = newNotificationId();
            return {
              id,
              accountId: n.accountId,
              subscriptionId: n.subscriptionId,
              eventType: 'address.transaction.reorg',
              body: JSON.stringify({ ...(JSON.parse(n.body) as object), id, reorg: true }),
              dedupeKey: `reorg:${n.id}`,
              chain: network.name,
              blockNumber: n.blockNumber ?? undefined,
              blockHash: n.blockHash ?? undefined,
            };
          }),
        );
      }
      await tx
        .delete(chainHeaders)
        .where(and(eq(chainHeaders.network, network.name), gt(chainHeaders.height, ancestor)));
      await tx
        .update(chainCursors)
        .set({ height: ancestor, hash: ancestorHash, updatedAt: new Date() })
        .where(eq(chainCursors.network, network.name));
    });
    log.warn({ from: from.height, ancestor, orphaned: hashes.length }, 'chain reorganised');
    return ancestor;
  }

  /**
   * Whether the node's latest block, at or below the cursor, is not the one processed at its
   * height: the tip was replaced without a taller block (anvil_reorg, a node that switched forks),
   * which no parent-hash check would see until the next block. A node merely behind us, on our
   * chain, agrees with what we stored.
   */
  async function tipReplaced(latest: TipBlock, at: { height: number; hash: string }): Promise<boolean> {
    const height = Number(latest.number);
    if (height > at.height) return false;
    if (height === at.height) return latest.hash !== at.hash;
    const [stored] = await db
      .select({ hash: chainHeaders.hash })
      .from(chainHeaders)
      .where(and(eq(chainHeaders.network, network.name), eq(chainHeaders.height, height)));
    return stored !== undefined && stored.hash !== latest.hash;
  }

  /** Processes every block up to the node's head. */
  async function catchUp(): Promise<void> {
    // The latest block's header, for its number and its hash in one call (where eth_blockNumber
    // gave the number alone): a tip replaced at the same height shows only in its hash.
    const latest = await client.getBlock({ blockTag: 'latest' });
    const head = Number(latest.number);
    status.head = head;
    let at = (await cursor()) ?? (await initialise(latest));
    if (await tipReplaced(latest, at)) {
      await reorganise(at);
      at = (await cursor())!;
    }
    while (running && !lockLost && at.height < head) {
      const block = await deps.fetchActivity(client, BigInt(at.height + 1));
      if (block.parentHash !== at.hash) {
        await reorganise(at);
        at = (await cursor())!;
        continue;
      }
      await commit(block, head);
      at = { height: Number(block.number), hash: block.hash };
      status.height = at.height;
    }
    status.height = at.height;
    // Confirmations count from the head, which may move without a block of ours to process.
    await db.transaction((tx) => release(tx, head));
  }

  function loop(): Promise<void> {
    return runPolling({
      intervalMs: deps.pollIntervalMs,
      maxBackoffMs,
      sleeper,
      isRunning: () => running,
      status,
      round: async () => {
        if (!(await holdLock())) return deps.lockRetryMs ?? 2_000;
        await catchUp();
        return undefined;
      },
      onError: (message, retryInMs) => {
        nextRelease = null; // a failed transaction may have rolled back what release() computed
        log.warn({ err: message, retryInMs }, 'node unreachable or failing; retrying');
      },
    });
  }

  return {
    network: network.name,
    status: (): FollowerStatus => ({ ...status }),
    start(): void {
      if (running) return;
      running = true;
      loopDone = loop();
    },
    /** Checks for a new head now (e.g. on a WebSocket newHeads message). */
    wake,
    async stop(): Promise<void> {
      running = false;
      wake();
      await loopDone;
      const held = lock;
      lock = undefined;
      await held?.release();
    },
  };
}

export type EvmFollower = ReturnType<typeof createEvmFollower>;
