import type { Network } from '../../src/chains/networks.js';
import { type AddressIndex, createAddressIndex } from '../../src/watch/matching/address-index.js';

/**
 * A matcher's address index watching each address once on the network, as the API would fill it:
 * subscription `sub-<i>` for the i-th address, confirmations 1, no mempool.
 */
export function indexWatching(network: Network, ...addresses: string[]): AddressIndex {
  const index = createAddressIndex(() => network.family);
  for (const [i, address] of addresses.entries())
    index.apply({
      type: 'upsert',
      subscription: {
        id: `sub-${i}`,
        accountId: 'a',
        network: network.name,
        address,
        confirmations: 1,
        mempool: false,
      },
    });
  return index;
}
