// The EVM matcher's index of watched addresses as bench:ingest fills it (the EVM pass and the
// contract events pass): random addresses, one subscription each, applied as the API would.
import crypto from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';
import type { NetworkCatalog } from '../src/chains/networks.js';
import { type AddressIndex, createAddressIndex } from '../src/watch/matching/address-index.js';
import { gc, now } from './lib.js';

/** The network the EVM passes name their chain. */
export const NETWORK = 'DEVNET';
const ACCOUNT_ID = '0190a8e4-5b1c-7000-8000-000000000000';

/**
 * `count` random addresses in mixed case, as flat strings, like the EIP-55 forms the API stores (the
 * index then keeps a lower-case key beside each; checksumming a million addresses would take ~30 s).
 */
export function randomWatchedAddresses(count: number): string[] {
  const hex = Buffer.from('0123456789abcdef0123456789ABCDEF');
  const out = new Array<string>(count);
  const line = Buffer.alloc(42);
  line.write('0x', 0, 'latin1');
  const chunk = 10_000;
  for (let start = 0; start < count; start += chunk) {
    const random = crypto.randomBytes(chunk * 40);
    for (let i = 0; i < chunk && start + i < count; i++) {
      for (let c = 0; c < 40; c++) {
        const r = random[i * 40 + c]!;
        const nibble = r & 15;
        line[2 + c] = hex[nibble + (nibble > 9 && r & 16 ? 16 : 0)]!;
      }
      out[start + i] = line.toString('latin1');
    }
  }
  return out;
}

export interface IndexReport {
  index: AddressIndex;
  addresses: number;
  applySeconds: number;
  heapBytes: number;
  rssBytes: number;
}

/** The matcher's index with `count` watched addresses (one subscription each), as the API would fill it. */
export function buildIndex(chain: { networks: NetworkCatalog }, count: number): IndexReport {
  const index = createAddressIndex((name) => chain.networks.find(name)?.family);
  gc();
  const before = process.memoryUsage();
  let changes = randomWatchedAddresses(count).map((address) => ({
    type: 'upsert' as const,
    subscription: {
      // As the subscription service makes them (crypto.randomUUID() would retain ~490 bytes: a rope).
      id: uuidv7(),
      // A string of its own per subscription, as rows loaded from the database (or the API's
      // principal, read per request) give them.
      accountId: Buffer.from(ACCOUNT_ID, 'latin1').toString('latin1'),
      network: NETWORK,
      address,
      confirmations: 1,
      mempool: false,
    },
  }));
  const t0 = now();
  for (const change of changes) index.apply(change);
  const applySeconds = (now() - t0) / 1000;
  changes = [];
  gc();
  const after = process.memoryUsage();
  return {
    index,
    addresses: index.size(),
    applySeconds,
    // The index keeps its tables in typed arrays, whose memory is counted apart from the heap.
    heapBytes: after.heapUsed + after.arrayBuffers - (before.heapUsed + before.arrayBuffers),
    rssBytes: after.rss - before.rss,
  };
}
