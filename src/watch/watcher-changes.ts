/**
 * The watcher's subscription changes (watcher.ts): applied to the address index one at a time, in
 * the order they arrive, whether from this process's API or by NOTIFY from others; and blocks
 * matched only once the changes before them are in force.
 */
import { sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import type { Db } from '../store/db.js';
import type { SubscriptionChange, SubscriptionNotice } from '../subscriptions/events.js';
import type { BlockMatcher } from './follower/follower.js';
import type { AddressIndex } from './matching/address-index.js';

export interface ChangeDeps {
  db: Db;
  index: AddressIndex;
  logger: Logger;
  /** This app instance's mark on its NOTIFY payloads: those were applied through onSubscriptionChange. */
  origin?: string;
}

/** @param follow starts the network's follower, if it is not running, when a subscription comes. */
export function createChangeQueue(deps: ChangeDeps, follow: (network: string) => void) {
  function apply(change: SubscriptionChange): void {
    deps.index.apply(change);
    if (change.type === 'upsert') follow(change.subscription.network);
  }

  /**
   * Changes are applied one at a time in the order they arrive (a NOTIFY's commit order), even
   * when one must first be read from the database; a block is matched only once every change
   * that arrived before it has been applied, so a change is in force for the next block.
   */
  let changes: Promise<void> = Promise.resolve();
  function inOrder(task: () => void | Promise<void>): Promise<void> {
    const run = changes.then(task);
    changes = run.catch((err) => deps.logger.error({ err }, 'applying a subscription change failed'));
    return run;
  }

  function reload(): void {
    void inOrder(() =>
      deps.index.load(deps.db).then(
        () => {},
        (err) => deps.logger.error({ err }, 'reloading watched addresses failed'),
      ),
    );
  }

  function onNotice(payload: string | undefined): void {
    // Without a payload (after a reconnect) changes may have been missed: reload them all.
    if (!payload) {
      reload();
      return;
    }
    const notice = JSON.parse(payload) as SubscriptionNotice;
    if (deps.origin !== undefined && notice.origin === deps.origin) return;
    if (notice.type !== 'stored') {
      void inOrder(() => apply(notice));
      return;
    }
    void inOrder(async () => {
      const result = (await deps.db.execute(
        sql`SELECT change FROM subscription_changes WHERE seq = ${notice.seq}::bigint`,
      )) as unknown as { rows: { change: string }[] };
      const row = result.rows[0];
      // Pruned before we read it (a listener minutes behind): read everything again.
      if (!row) return deps.index.load(deps.db).then(() => {});
      apply(JSON.parse(row.change) as SubscriptionChange);
    });
  }

  /** Matches a block once the changes that arrived before it are in force. */
  function afterChanges<Activity>(match: BlockMatcher<Activity>): BlockMatcher<Activity> {
    return async (block) => {
      await changes;
      return match(block);
    };
  }

  return { apply, inOrder, onNotice, afterChanges };
}
