/** A subscription as the API shows it: its attr by kind, its state and its signing keys. */
import type { SubscriptionsContext } from './context.js';
import { CONTRACT_LOG_EVENT, REGISTRY_EVENTS, type SubscriptionRow, type SubscriptionView } from './model.js';
import { signingSecrets } from './signing-secrets.js';

export const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** An event subscription's attr: the event, where it is followed, and its filter as given. */
function eventAttr(row: SubscriptionRow): SubscriptionView['attr'] {
  const { event, anyContract, filter } = row.contractEvent!;
  return {
    chain: row.network ?? '',
    url: row.url,
    // A bare topic0 subscription has no ABI, and every other has one.
    event: event.abi ?? event.topic0!,
    ...(event.signature === null ? {} : { signature: event.signature }),
    topic0: event.topic0,
    ...(anyContract
      ? { anyContract: true }
      : row.address !== null
        ? { contractAddress: row.address }
        : { addressCount: row.addressCount }),
    ...(filter === null ? {} : { filter }),
  };
}

export function toView(ctx: SubscriptionsContext, row: SubscriptionRow): SubscriptionView {
  // One address as Tatum shows it; a list by its size (GET …/addresses lists it).
  const attr: SubscriptionView['attr'] =
    row.type === CONTRACT_LOG_EVENT && row.contractEvent
      ? eventAttr(row)
      : row.type === REGISTRY_EVENTS
        ? { registryId: row.registryId ?? '', url: row.url }
        : row.address !== null
          ? { address: row.address, chain: row.network ?? '', url: row.url }
          : { chain: row.network ?? '', url: row.url, addressCount: row.addressCount };
  if (row.fees) attr.fees = true;
  return {
    id: row.id,
    type: row.type,
    attr,
    mempool: row.mempool,
    confirmations: row.confirmations,
    ack: row.ack,
    signature: row.signature,
    ...(row.publicKey === null ? {} : { publicKey: row.publicKey }),
    status: row.deletedAt ? 'deleted' : row.status,
    disabledReason: row.disabledReason,
    disabledAt: iso(row.disabledAt),
    previousSecretExpiresAt: signingSecrets(ctx, row.previousSecrets).at(-1)?.expiresAt ?? null,
    createdAt: row.createdAt.toISOString(),
    deletedAt: iso(row.deletedAt),
  };
}
