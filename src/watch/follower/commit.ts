/**
 * The follower's writes of blocks (follower.ts): what a block's matches notify, and the commit of
 * consecutive blocks with their notifications, headers and the cursor in one transaction.
 */
import type { Logger } from 'pino';
import type { ChainBlock } from '../../chains/source.js';
import {
  type ClaimedNotification,
  chainNotificationId,
  enqueueAndClaim,
  type NewNotification,
  type OutboxHandoff,
} from '../../notify/outbox.js';
import type { Db } from '../../store/db.js';
import type { WatchedSubscription } from '../../subscriptions/events.js';
import type { ChainState } from './cursor.js';
import type { Releaser } from './release.js';
import { blockDedupeKey } from './reorg-diff.js';

/** A transfer in a block that a subscription watches: what a family's matcher finds. */
export interface BlockMatch {
  subscription: WatchedSubscription;
  /**
   * The transfer's identity on its chain, independent of the block holding it (transaction and
   * position), so that a reorganisation sees the same transfer on both branches.
   */
  key: string;
  /** The notification body (docs/watching-chains.md), given the notification's id. */
  body: (id: string) => Record<string, unknown>;
  /**
   * The addresses the watched address dealt with in the transaction (the other side of the
   * movement), which a risk provider scores for `addressesRiskRatio` (watch/risk/).
   */
  counterparties: string[];
  /** The delivery's event type: `address.transaction` unless said (`contract.log`). */
  eventType?: string;
}

/**
 * The outbox rows of a block's matches: due at once, or held until the head is deep enough. The
 * dedupe key (block hash and transfer key) is what makes a backfill's notification of a transfer
 * and the follower's one row; `extra` adds fields to each body (a backfill's `backfill: true`).
 */
export function blockNotifications(
  network: string,
  block: { height: number; hash: string },
  matches: readonly BlockMatch[],
  head: number,
  extra?: Record<string, unknown>,
): NewNotification[] {
  return matches.map(({ subscription, key, body, eventType }) => {
    const dedupeKey = blockDedupeKey(block.hash, key);
    const id = chainNotificationId(subscription.id, network, dedupeKey);
    const releaseHeight = block.height + Math.max(1, subscription.confirmations) - 1;
    return {
      id,
      accountId: subscription.accountId,
      subscriptionId: subscription.id,
      eventType: eventType ?? 'address.transaction',
      body: JSON.stringify(extra ? { ...body(id), ...extra } : body(id)),
      dedupeKey,
      state: head >= releaseHeight ? 'pending' : 'held',
      chain: network,
      blockNumber: block.height,
      blockHash: block.hash,
      releaseHeight,
    };
  });
}

/** How a family's block activity becomes notifications for the watched addresses. */
export type BlockMatcher<Activity> = (block: ChainBlock<Activity>) => Promise<BlockMatch[]>;

/**
 * Within the transaction committing blocks: what else they settle (the pending announcements
 * they mine or make impossible, pending-lifecycle.ts). Returns what to apply in memory once the
 * transaction has committed.
 */
export type BlockSettler<Activity> = (tx: Db, blocks: readonly ChainBlock<Activity>[]) => Promise<() => void>;

export function createBlockCommitter<Activity>(
  db: Db,
  network: string,
  match: BlockMatcher<Activity>,
  state: ChainState,
  releaser: Releaser,
  log: Logger,
  settle?: BlockSettler<Activity>,
  handoff?: OutboxHandoff,
) {
  /** The block's notifications: due at once, or held until the head is deep enough. */
  async function notificationsOf(block: ChainBlock<Activity>, head: number): Promise<NewNotification[]> {
    return blockNotifications(network, block, await match(block), head);
  }

  function noteHeld(items: NewNotification[]): void {
    releaser.held(items.filter((n) => n.state === 'held').map((n) => n.releaseHeight!));
  }

  /**
   * Consecutive blocks (one, unless more had already been read) in one transaction: their
   * notifications, their headers and the cursor, so a block costs a share of one commit.
   */
  async function commit(blocks: ChainBlock<Activity>[], head: number): Promise<void> {
    const items: NewNotification[] = [];
    for (const block of blocks) items.push(...(await notificationsOf(block, head)));
    let settled: (() => void) | undefined;
    // A dispatcher in this process takes the rows as they commit, without a claim of its own.
    const claim = items.length > 0 ? handoff?.claim() : undefined;
    let claimed: ClaimedNotification[] = [];
    await db.transaction(async (tx) => {
      ({ claimed } = await enqueueAndClaim(tx, items, claim));
      noteHeld(items);
      settled = await settle?.(tx, blocks);
      await state.advanceThrough(tx, blocks);
      await releaser.release(tx, head);
    });
    if (claim) handoff!.accept(claim, claimed);
    settled?.();
    if (items.length > 0) {
      const through = blocks[blocks.length - 1]!.height;
      log.debug({ block: blocks[0]!.height, through, notifications: items.length }, 'blocks processed');
    }
  }

  return { notificationsOf, noteHeld, commit, settle };
}

export type BlockCommitter<Activity> = ReturnType<typeof createBlockCommitter<Activity>>;
