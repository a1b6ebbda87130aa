/**
 * What the mempool watcher (evm-mempool.ts) notifies of a pending transaction: its transfers from or
 * to an address watched for the mempool, a token's only once it is known to be fungible.
 */
import { encodeFunctionData, type Hex, type PublicClient, parseAbi } from 'viem';
import { view } from '../../chains/evm/activity.js';
import type { TokenInfo } from '../../chains/evm/types.js';
import type { Network } from '../../chains/networks.js';
import { chainNotificationId, type NewNotification } from '../../notify/outbox.js';
import type { AddressIndex } from '../matching/address-index.js';
import { buildEvmNotification } from '../notifications/evm.js';
import { type PendingTransaction, pendingTransfers } from './pending-transfers.js';

const ERC165 = parseAbi(['function supportsInterface(bytes4 id) view returns (bool)']);
/** ERC-721's interface id: its `transferFrom(address,address,uint256)` has ERC-20's selector. */
const SUPPORTS_ERC721 = encodeFunctionData({
  abi: ERC165,
  functionName: 'supportsInterface',
  args: ['0x80ac58cd'],
});

/** Token contracts remembered as ERC-20 or not. */
const TOKEN_KINDS_LIMIT = 10_000;

export interface PendingMatchDeps {
  network: Network;
  client: PublicClient;
  index: AddressIndex;
  tokens: { get(token: Hex): Promise<TokenInfo> };
}

/** The notifications of a pending transaction (none when nobody watches it). */
export function createPendingMatcher(deps: PendingMatchDeps) {
  const { network, client, index } = deps;
  const tokenKinds = new Map<string, Promise<boolean>>();

  /**
   * Whether `token` is a fungible token: a contract that does not claim ERC-721 (whose
   * `transferFrom` calldata looks like ERC-20's). Remembered; a node failure is not.
   */
  function isFungible(token: Hex): Promise<boolean> {
    const key = token.toLowerCase();
    let kind = tokenKinds.get(key);
    if (!kind) {
      kind = Promise.all([client.getCode({ address: token }), view(client, token, SUPPORTS_ERC721)]).then(
        ([code, erc721]) =>
          code !== undefined && code !== '0x' && !(erc721.length >= 66 && BigInt(erc721.slice(0, 66)) === 1n),
      );
      tokenKinds.set(key, kind);
      if (tokenKinds.size > TOKEN_KINDS_LIMIT) tokenKinds.delete(tokenKinds.keys().next().value as string);
      kind.catch(() => {
        if (tokenKinds.get(key) === kind) tokenKinds.delete(key);
      });
    }
    return kind;
  }

  async function notificationsOf(tx: PendingTransaction): Promise<NewNotification[]> {
    const items: NewNotification[] = [];
    for (const { index: position, transfer } of pendingTransfers(tx)) {
      const watchers = [
        ...index.lookup(network.name, transfer.from),
        ...index.lookup(network.name, transfer.to),
      ].filter((s) => s.mempool);
      if (watchers.length === 0) continue;
      let decimals: number | null = 0;
      if (transfer.kind === 'erc20' && transfer.token) {
        if (!(await isFungible(transfer.token))) continue;
        decimals = (await deps.tokens.get(transfer.token)).decimals;
      }
      const notified = new Set<string>();
      for (const subscription of watchers) {
        if (notified.has(subscription.id)) continue; // a transfer to oneself is one notification
        notified.add(subscription.id);
        // The same pending transaction seen again (another poll, a restart) inserts nothing.
        const dedupeKey = `mempool:${tx.hash}:${position}`;
        const id = chainNotificationId(subscription.id, network.name, dedupeKey);
        const body = buildEvmNotification({
          id,
          network,
          transfer,
          subscription,
          blockNumber: undefined,
          decimals,
          confirmations: 0,
          mempool: true,
        });
        items.push({
          id,
          accountId: subscription.accountId,
          subscriptionId: subscription.id,
          eventType: 'address.transaction.pending',
          body: JSON.stringify(body),
          dedupeKey,
          chain: network.name,
        });
      }
    }
    return items;
  }

  return notificationsOf;
}
