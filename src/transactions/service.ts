import { and, eq, sql } from 'drizzle-orm';
import { stringify } from 'lossless-json';
import { createPublicClient } from 'viem';
import { createAlgorandLookup, isAlgorandTxId } from '../chains/algorand/lookup.js';
import { createBitcoindLookup, createEsploraLookup, isBitcoinTxId } from '../chains/bitcoin/lookup.js';
import { createEvmLookup, isEvmTxId } from '../chains/evm/lookup.js';
import { jsonRpcHttp } from '../chains/evm/rpc-transport.js';
import type { Family, Network, NetworkCatalog } from '../chains/networks.js';
import { isNodeError, nodeUnavailable } from '../chains/node-errors.js';
import { createSolanaLookup, isSolanaTxId } from '../chains/solana/lookup.js';
import { createTronLookup, isTronTxId } from '../chains/tron/lookup.js';
import { NotFoundError, UpstreamUnavailableError, ValidationError } from '../errors.js';
import type { Db } from '../store/db.js';
import { transactionCache } from './schema.js';
import {
  type InternalTransferView,
  TRANSACTION_FIELDS,
  type TransactionLookup,
  type TransactionView,
} from './types.js';

const ID_FORMATS: Record<Family, { check: (id: string) => boolean; expected: string }> = {
  evm: { check: isEvmTxId, expected: '0x followed by 64 hex characters' },
  bitcoin: { check: isBitcoinTxId, expected: '64 hex characters' },
  algorand: { check: isAlgorandTxId, expected: '52 base32 characters' },
  solana: { check: isSolanaTxId, expected: 'a base58 signature of 64 bytes' },
  tron: { check: isTronTxId, expected: '64 hex characters' },
};

const NODE_TIMEOUT_MS = 10_000;

/** The lookup of a network's family, against its configured endpoints. */
export function lookupFor(network: Network): TransactionLookup {
  const url = network.rpcUrls[0];
  if (!url) throw new UpstreamUnavailableError(`No node is configured for ${network.name}`);
  switch (network.family) {
    case 'evm':
      // No retries inside viem: a node that fails answers 503 at once, with Retry-After.
      return createEvmLookup(
        createPublicClient({
          transport: jsonRpcHttp(url, { timeoutMs: NODE_TIMEOUT_MS }),
          cacheTime: 0,
        }),
        { traces: network.traces ?? 'auto' },
      );
    case 'algorand': {
      const indexerUrl = network.indexerUrls[0];
      if (!indexerUrl) throw new UpstreamUnavailableError(`No indexer is configured for ${network.name}`);
      return createAlgorandLookup({ algodUrl: url, indexerUrl, timeoutMs: NODE_TIMEOUT_MS });
    }
    case 'bitcoin':
      return network.api === 'bitcoind'
        ? createBitcoindLookup({ url, timeoutMs: NODE_TIMEOUT_MS })
        : createEsploraLookup({ url, timeoutMs: NODE_TIMEOUT_MS });
    case 'solana':
      return createSolanaLookup({ url, timeoutMs: NODE_TIMEOUT_MS });
    case 'tron':
      return createTronLookup({ url, headers: network.headers, timeoutMs: NODE_TIMEOUT_MS });
  }
}

/** The view as JSON, keys in the documented order, integers digit-exact however large. */
export function serializeView(view: TransactionView, internalTransfers?: InternalTransferView[]): string {
  const ordered: Record<string, unknown> = {};
  for (const field of TRANSACTION_FIELDS) ordered[field] = view[field];
  if (internalTransfers) ordered.internalTransfers = internalTransfers;
  return stringify(ordered) ?? 'null';
}

/** In memory, at most this many characters of cached bodies: some 16,000 of ~1 KB each. */
const MEMORY_CACHE_CHARS = 16 * 1024 * 1024;

/**
 * Strings by key, the least recently used dropped once their keys and values pass `maxChars`
 * characters (a Map iterates in insertion order, and a hit is moved to the end).
 */
export function boundedCache(maxChars: number) {
  const entries = new Map<string, string>();
  let chars = 0;
  return {
    get(key: string): string | undefined {
      const value = entries.get(key);
      if (value !== undefined) {
        entries.delete(key);
        entries.set(key, value);
      }
      return value;
    },
    set(key: string, value: string): void {
      const old = entries.get(key);
      if (old !== undefined) {
        entries.delete(key);
        chars -= key.length + old.length;
      }
      if (key.length + value.length > maxChars) return;
      entries.set(key, value);
      chars += key.length + value.length;
      for (const [oldest, v] of entries) {
        if (chars <= maxChars) break;
        entries.delete(oldest);
        chars -= oldest.length + v.length;
      }
    },
    get size(): number {
      return entries.size;
    },
  };
}

export function createTransactions(deps: {
  db: Db;
  networks: NetworkCatalog;
  /** Overridable for tests; by default built from the catalog, one per network. */
  lookupFor?: (network: Network) => TransactionLookup;
  now?: () => Date;
  /** How many characters of final transactions' JSON this process keeps in memory (16 Mi by default). */
  memoryCacheChars?: number;
}) {
  const lookups = new Map<string, TransactionLookup>();
  const now = deps.now ?? (() => new Date());
  // A final transaction never changes and its cached row is never removed, so this process may
  // keep the bodies it has read without ever asking whether they are still right.
  const memory = boundedCache(deps.memoryCacheChars ?? MEMORY_CACHE_CHARS);
  // The hot read (a final transaction asked again), built once and prepared by name per connection.
  const cachedBody = deps.db
    .select({ body: transactionCache.body })
    .from(transactionCache)
    .where(
      and(
        eq(transactionCache.network, sql.placeholder('network')),
        eq(transactionCache.txId, sql.placeholder('txId')),
      ),
    )
    .prepare('transaction_cached');

  function lookup(network: Network): TransactionLookup {
    let found = lookups.get(network.name);
    if (!found) {
      found = (deps.lookupFor ?? lookupFor)(network);
      lookups.set(network.name, found);
    }
    return found;
  }

  return {
    /** The transaction as exact JSON; validated before any node is asked. */
    async get(networkName: string, rawId: string): Promise<string> {
      const network = deps.networks.find(networkName);
      if (!network) {
        throw new ValidationError('Unknown network', [
          {
            parameter: 'network',
            detail: `is not a configured network; use one of ${deps.networks.names().join(', ')}`,
          },
        ]);
      }
      const format = ID_FORMATS[network.family];
      const txId = network.family === 'evm' || network.family === 'tron' ? rawId.toLowerCase() : rawId;
      if (!format.check(txId)) {
        throw new ValidationError('Invalid transaction id', [
          {
            parameter: 'txId',
            detail: `is not a ${network.name} transaction id (expected ${format.expected})`,
          },
        ]);
      }
      const key = `${network.name}:${txId}`;
      const remembered = memory.get(key);
      if (remembered !== undefined) return remembered;
      const [cached] = await cachedBody.execute({ network: network.name, txId });
      if (cached) {
        memory.set(key, cached.body);
        return cached.body;
      }

      let result: Awaited<ReturnType<TransactionLookup>>;
      try {
        result = await lookup(network)(txId);
      } catch (err) {
        if (isNodeError(err)) throw nodeUnavailable(network, err);
        throw err;
      }
      if (!result) throw new NotFoundError(`No transaction ${rawId} on ${network.name}`);
      const body = serializeView(result.view, result.internalTransfers);
      if (result.final) {
        await deps.db
          .insert(transactionCache)
          .values({ network: network.name, txId, body, createdAt: now() })
          .onConflictDoNothing();
        memory.set(key, body);
      }
      return body;
    },
  };
}

export type Transactions = ReturnType<typeof createTransactions>;
