/**
 * Anchoring as the rest of the service sees it: the anchorer for the configured network (in the
 * process that watches chains), and receipt verification against the configured nodes.
 */
import type { Logger } from 'pino';
import { algorandAnchorChain, anchorAccount } from '../chains/algorand/anchor.js';
import { evmAnchorChain, parseEvmAnchorKey } from '../chains/evm/anchor.js';
import type { Network, NetworkCatalog } from '../chains/networks.js';
import { isNodeError, nodeUnavailable } from '../chains/node-errors.js';
import type { AnchorSettings } from '../config.js';
import { ConfigError } from '../errors.js';
import type { Db, Store } from '../store/db.js';
import { type Anchorer, createAnchorer } from './anchorer.js';
import type { AnchorChain } from './chain.js';
import { ANCHOR_FAMILY, networkReader } from './reader.js';
import type { Receipt } from './receipt.js';
import { type AnchorReader, type Verification, verifyReceipt } from './verify.js';

/** How often the anchorer looks at the chain while a batch is in flight. */
const ANCHOR_POLL_MS = 1_000;

/** The network registries are anchored on, checked: known, and of a family that can anchor. */
export function anchorNetwork(settings: AnchorSettings, networks: NetworkCatalog): Network | undefined {
  if (settings.network === undefined) return undefined;
  const network = networks.find(settings.network);
  if (network === undefined) {
    throw new ConfigError(
      'LEDGERHOOK_ANCHOR_NETWORK',
      `names ${settings.network}, which is not a configured network`,
    );
  }
  if (network.family !== 'evm' && network.family !== 'algorand') {
    throw new ConfigError(
      'LEDGERHOOK_ANCHOR_NETWORK',
      `names ${network.name}, a ${network.family} network; anchoring is on EVM and Algorand networks`,
    );
  }
  // A key of the wrong kind is refused at start, before anything is anchored (or signed) with it.
  if (network.family === 'evm') parseEvmAnchorKey(settings.key ?? '');
  else anchorAccount(settings.key ?? '');
  return network;
}

export function anchorChainFor(network: Network, key: string): AnchorChain {
  const url = network.rpcUrls[0];
  if (url === undefined)
    throw new ConfigError('LEDGERHOOK_ANCHOR_NETWORK', `${network.name} has no node configured`);
  if (network.family === 'evm') return evmAnchorChain({ rpcUrl: url, key });
  return withIndexerFallback(algorandAnchorChain({ algodUrl: url, key }), network);
}

/**
 * algod forgets a committed transaction after 1000 rounds: a transaction the anchorer did not see
 * committed in time (it was stopped that long) is looked up in the indexer, when there is one,
 * before the anchorer concludes it was never included and sends the batch again.
 */
function withIndexerFallback(chain: AnchorChain, network: Network): AnchorChain {
  if (network.indexerUrls.length === 0) return chain;
  const reader = networkReader(network);
  return {
    ...chain,
    async inclusion(txId) {
      const pending = await chain.inclusion(txId);
      if (pending !== undefined) return pending;
      const found = await reader.transaction(txId);
      if (found?.blockNumber === null || found === undefined) return undefined;
      const blockHash = await chain.hashAt(found.blockNumber);
      return blockHash === undefined
        ? undefined
        : { blockNumber: found.blockNumber, blockHash, success: true };
    },
  };
}

export function startAnchorer(deps: {
  db: Db;
  network: Network;
  settings: AnchorSettings;
  logger: Logger;
  tryLock: Store['tryLock'];
  receiptUrl: (registryId: string) => string;
  pollIntervalMs?: number;
}): Anchorer {
  const { network, settings } = deps;
  const anchorer = createAnchorer({
    db: deps.db,
    network: network.name,
    chain: anchorChainFor(network, settings.key!),
    logger: deps.logger,
    batchSize: settings.batchSize,
    intervalMs: settings.intervalMs,
    confirmations: settings.confirmations ?? network.defaultConfirmations,
    replaceAfterMs: settings.replaceAfterMs,
    pollIntervalMs: Math.min(deps.pollIntervalMs ?? ANCHOR_POLL_MS, settings.intervalMs),
    receiptUrl: deps.receiptUrl,
    acquireLock: () => deps.tryLock(`anchor:${network.name}`),
  });
  anchorer.start();
  return anchorer;
}

/** A reader per configured network, kept so that its lookup's client and chain identity are reused. */
const readers = new WeakMap<Network, AnchorReader>();

/** Checks a receipt against this service's node for the network it names. */
export async function verifyAgainst(
  networks: NetworkCatalog,
  receipt: Receipt,
  content: unknown,
): Promise<Verification> {
  const anchor = receipt.anchors[0]!;
  const network = networks.find(anchor.network);
  const family = ANCHOR_FAMILY[anchor.type];
  if (network === undefined || network.family !== family) {
    return {
      verified: false,
      checks: { content: null, path: false, transaction: false },
      blockNumber: null,
      confirmations: null,
      problems: [
        network === undefined
          ? `${anchor.network} is not a network of this service`
          : `${anchor.network} is a ${network.family} network; a ${anchor.type} anchor is on ${family}`,
      ],
    };
  }
  let reader = readers.get(network);
  if (!reader) {
    reader = networkReader(network);
    readers.set(network, reader);
  }
  try {
    return await verifyReceipt(receipt, content, reader);
  } catch (err) {
    // As transaction lookup says it: which network's node failed, not the node's address.
    throw isNodeError(err) ? nodeUnavailable(network, err) : err;
  }
}
