/**
 * The addresses of an address subscription: added and removed (all or nothing, announced to the
 * watchers), listed a page at a time, and looked up one by one.
 */
import { and, eq, sql } from 'drizzle-orm';
import { normalizeAddress } from '../chains/addresses.js';
import type { Network, NetworkCatalog } from '../chains/networks.js';
import { ConflictError, type FieldError, NotFoundError, ValidationError } from '../errors.js';
import { decodeCursor, type PageQuery, toPage } from '../http-kit/pagination.js';
import type { Db } from '../store/db.js';
import { insertAddresses, invalidAddresses, MAX_NAMED_ERRORS, normalizeAll, textArray } from './addresses.js';
import { announce } from './announce.js';
import type { SubscriptionsContext } from './context.js';
import type { SubscriptionChange } from './events.js';
import {
  ADDRESS_TRANSACTION,
  type AddressChangeInput,
  type AddressChangeResult,
  CONTRACT_LOG_EVENT,
  type SubscriptionRow,
  type WatchedAddressView,
} from './model.js';
import { owned, undeleted } from './owned.js';
import { subscriptionAddresses, subscriptions } from './schema.js';

/** Addresses one request may add and remove, together (create: in `attr.addresses`). */
export const MAX_ADDRESSES_PER_CALL = 100_000;

/**
 * The network of an address subscription, or of an event subscription's contracts; any other kind
 * has no addresses (409), nor has an event followed on any contract.
 */
function addressNetwork(networks: NetworkCatalog, row: SubscriptionRow): Network {
  if (row.type === CONTRACT_LOG_EVENT && row.contractEvent?.anyContract)
    throw new ConflictError(
      `Subscription ${row.id} follows its event on any contract; create one with attr.contractAddress or attr.addresses to follow it on some`,
    );
  if (row.type !== ADDRESS_TRANSACTION && row.type !== CONTRACT_LOG_EVENT)
    throw new ConflictError(`Subscription ${row.id} is a ${row.type} subscription; it watches no addresses`);
  const network = networks.find(row.network ?? '');
  if (!network) throw new ConflictError(`Network ${row.network} is no longer configured`);
  return network;
}

/** Deletes those of the addresses that are there, in one statement; how many were. */
async function deleteAddresses(tx: Db, id: string, addresses: string[]): Promise<number> {
  if (addresses.length === 0) return 0;
  // Indented as it was when this was a closure, so the statement's text is unchanged.
  const result = (await tx.execute(sql`
      WITH deleted AS (
        DELETE FROM subscription_addresses
        WHERE subscription_id = ${id}::uuid AND address = ANY(${textArray(addresses)}::text[])
        RETURNING 1)
      SELECT count(*)::int AS n FROM deleted`)) as unknown as { rows: { n: number }[] };
  return result.rows[0]!.n;
}

export function createAddressLists(ctx: SubscriptionsContext) {
  const { db, networks } = ctx;

  return {
    /**
     * Adds and removes addresses of an address subscription, all or nothing: every address is
     * validated first, and the bad ones are named. Adding a watched address or removing one not
     * watched changes nothing. A subscription made with `attr.address` becomes a list at its first
     * change (its `attr.address` goes, and with it the one-address duplicate rule).
     */
    async changeAddresses(
      accountId: string,
      id: string,
      input: AddressChangeInput,
    ): Promise<AddressChangeResult> {
      const row = await undeleted(ctx, accountId, id);
      const network = addressNetwork(networks, row);
      const addInput = input.add ?? [];
      const removeInput = input.remove ?? [];
      const total = addInput.length + removeInput.length;
      if (total > MAX_ADDRESSES_PER_CALL)
        throw new ValidationError(`${total} addresses in one call`, [
          {
            pointer: '#',
            detail: `holds ${total} addresses; add and remove may hold ${MAX_ADDRESSES_PER_CALL} together`,
          },
        ]);
      const errors: FieldError[] = [];
      const invalid = { count: 0 };
      const add = normalizeAll(network, addInput, '#/add', errors, invalid);
      const remove = normalizeAll(network, removeInput, '#/remove', errors, invalid);
      if (invalid.count > 0) throw invalidAddresses(errors, invalid.count, total);
      const adding = new Set(add);
      const both = removeInput.flatMap((input, i) => {
        const check = normalizeAddress(network.family, input, network.bitcoinChain);
        return check.ok && adding.has(check.address)
          ? [{ pointer: `#/remove/${i}`, detail: 'is also in add; send it in one of them' }]
          : [];
      });
      if (both.length > 0)
        throw new ValidationError('Addresses both added and removed', both.slice(0, MAX_NAMED_ERRORS));
      const change: SubscriptionChange = { type: 'addresses', id, add, remove };
      const result = await db.transaction(async (tx) => {
        // One change of a subscription at a time: counts stay exact and NOTIFYs in commit order.
        const [locked] = await tx
          .select({ deletedAt: subscriptions.deletedAt })
          .from(subscriptions)
          .where(eq(subscriptions.id, id))
          .for('update');
        if (locked?.deletedAt) throw new ConflictError(`Subscription ${id} was deleted meanwhile`);
        const removed = await deleteAddresses(tx, id, remove);
        const added = await insertAddresses(ctx, tx, id, network.name, add);
        const [updated] = await tx
          .update(subscriptions)
          .set({
            addressCount: sql`${subscriptions.addressCount} + ${added - removed}`,
            // A change (not a call that changed nothing) makes a one-address subscription a list.
            ...(added + removed > 0 ? { address: null } : {}),
          })
          .where(eq(subscriptions.id, id))
          .returning({ addressCount: subscriptions.addressCount });
        if (added + removed > 0) await announce(tx, change, ctx.origin, ctx.notifyOthers);
        return { added, removed, addressCount: updated!.addressCount };
      });
      if (result.added + result.removed > 0) await ctx.onChange?.(change);
      return result;
    },

    /** The subscription's addresses in ascending order, a page at a time. */
    async listAddresses(
      accountId: string,
      id: string,
      query: PageQuery,
    ): Promise<{ data: WatchedAddressView[]; next_cursor: string | null }> {
      const row = await owned(ctx, accountId, id);
      addressNetwork(networks, row);
      const after = query.cursor
        ? decodeCursor(query.cursor, (key) => key.length > 0 && key.length <= 256)
        : undefined;
      const rows = await db
        .select({ address: subscriptionAddresses.address, createdAt: subscriptionAddresses.createdAt })
        .from(subscriptionAddresses)
        .where(
          and(
            eq(subscriptionAddresses.subscriptionId, id),
            after === undefined ? undefined : sql`${subscriptionAddresses.address} > ${after}`,
          ),
        )
        .orderBy(subscriptionAddresses.address)
        .limit(query.limit + 1)
        .offset(query.offset ?? 0);
      return toPage(
        rows,
        query.limit,
        (r) => r.address,
        (r) => ({ address: r.address, createdAt: r.createdAt.toISOString() }),
      );
    },

    /**
     * Whether the subscription watches `address` (normalised for its network first): its entry,
     * or NotFoundError.
     */
    async getWatchedAddress(accountId: string, id: string, address: string): Promise<WatchedAddressView> {
      const row = await owned(ctx, accountId, id);
      const network = addressNetwork(networks, row);
      const check = normalizeAddress(network.family, address, network.bitcoinChain);
      if (!check.ok)
        throw new ValidationError('Invalid address', [
          {
            parameter: 'address',
            detail: `${check.reason} (${network.name} expects ${network.addressFormat})`,
          },
        ]);
      const [found] = await db
        .select({ address: subscriptionAddresses.address, createdAt: subscriptionAddresses.createdAt })
        .from(subscriptionAddresses)
        .where(
          and(eq(subscriptionAddresses.subscriptionId, id), eq(subscriptionAddresses.address, check.address)),
        );
      if (!found) throw new NotFoundError(`Subscription ${id} does not watch ${check.address}`);
      return { address: found.address, createdAt: found.createdAt.toISOString() };
    },
  };
}
