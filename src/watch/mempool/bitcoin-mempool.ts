/**
 * The mempool of one Bitcoin network (docs/mempool.md): a pool transaction moving value of an
 * address watched with `mempool: true` is announced with the mined notification's fields, no
 * `blockNumber` and `mempool: true`; a pool transaction or a block spending one of its inputs
 * withdraws it (`dropped`, `replacedBy`). Leaving the pool is no reason: a node restarting with an
 * empty pool would make every announcement look dropped, while a conflicting spend is proof. The
 * pool is read by chains/bitcoin/mempool.ts; this polls it only while a subscription of the network
 * wants the mempool and this process follows the network.
 */
import type { Logger } from 'pino';
import { addressesOf, type BitcoinTransaction } from '../../chains/bitcoin/activity.js';
import type { BitcoinMempoolReader } from '../../chains/bitcoin/mempool.js';
import type { Network } from '../../chains/networks.js';
import { chainNotificationId, enqueueNotifications, type NewNotification } from '../../notify/outbox.js';
import type { Db } from '../../store/db.js';
import type { AddressIndex } from '../matching/address-index.js';
import { bitcoinBody } from '../notifications/bitcoin.js';
import { type MempoolStatus, type MempoolWatcher, mempoolLoop } from './evm-mempool.js';
import type { Announcement, PendingLifecycle } from './pending-lifecycle.js';

export interface BitcoinMempoolWatcherDeps {
  db: Db;
  network: Network;
  reader: BitcoinMempoolReader;
  index: Pick<AddressIndex, 'lookup' | 'watchesMempool'>;
  lifecycle: Pick<PendingLifecycle, 'settle' | 'track' | 'ready'>;
  logger: Logger;
  pollIntervalMs: number;
  /** False while another process follows this network (a standby). */
  isFollowing?: () => boolean;
  maxBackoffMs?: number;
}

/** The pending notifications of new pool transactions, and what each announces. */
export function pendingBitcoinNotifications(
  network: Network,
  index: Pick<AddressIndex, 'lookup'>,
  entered: readonly BitcoinTransaction[],
): { items: NewNotification[]; announced: Announcement[] } {
  const items: NewNotification[] = [];
  const announced: Announcement[] = [];
  for (const tx of entered) {
    const ids: string[] = [];
    for (const address of addressesOf(tx)) {
      for (const subscription of index.lookup(network.name, address)) {
        if (!subscription.mempool) continue;
        // The same pool transaction read again (a restart, a reset) inserts nothing.
        const dedupeKey = `mempool:${tx.txid}:${address}`;
        const id = chainNotificationId(subscription.id, network.name, dedupeKey);
        ids.push(id);
        items.push({
          id,
          accountId: subscription.accountId,
          subscriptionId: subscription.id,
          eventType: 'address.transaction.pending',
          body: JSON.stringify(bitcoinBody(network, tx, address, subscription, id, undefined)),
          dedupeKey,
          chain: network.name,
        });
      }
    }
    if (ids.length > 0) announced.push({ txId: tx.txid, claims: tx.spends, notificationIds: ids });
  }
  return { items, announced };
}

export function createBitcoinMempoolWatcher(deps: BitcoinMempoolWatcherDeps): MempoolWatcher {
  const { db, network, reader, index, lifecycle } = deps;
  const log = deps.logger.child({ component: 'mempool', network: network.name });

  /** One poll: withdraws what new pool transactions replaced, announces what they move. */
  async function poll(status: MempoolStatus): Promise<boolean> {
    status.active = index.watchesMempool(network.name) && (deps.isFollowing?.() ?? true);
    if (!status.active) {
      reader.reset();
      return false;
    }
    const { entered, waiting } = await reader.poll();
    status.source = network.api === 'bitcoind' ? 'bitcoind' : 'esplora';
    if (entered.length === 0) return waiting > 0;
    const { items, announced } = pendingBitcoinNotifications(network, index, entered);
    const spends = entered.map((tx) => ({ txId: tx.txid, claims: tx.spends }));
    await lifecycle.ready(); // outside the transaction (see PendingLifecycle.ready)
    const [settled, tracked] = await db.transaction(async (tx) => {
      // Withdrawals first: a replacement that is itself watched is then announced in its place.
      const after = await lifecycle.settle(tx, spends, false);
      const inserted = new Set(await enqueueNotifications(tx, items));
      const fresh = announced.map((a) => ({
        ...a,
        notificationIds: a.notificationIds.filter((id) => inserted.has(id)),
      }));
      return [after, await lifecycle.track(tx, fresh)] as const;
    });
    settled();
    tracked();
    if (items.length > 0) log.debug({ notifications: items.length }, 'pending transactions notified');
    return waiting > 0;
  }

  return mempoolLoop({
    network,
    log,
    pollIntervalMs: deps.pollIntervalMs,
    maxBackoffMs: deps.maxBackoffMs,
    poll,
  });
}
