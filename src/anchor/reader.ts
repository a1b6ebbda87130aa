/**
 * Reads anchoring transactions through the same node clients as transaction lookup, so a receipt
 * is checked against exactly what `GET /transaction/{network}/{txId}` shows.
 */
import { isAlgorandTxId } from '../chains/algorand/lookup.js';
import { isEvmTxId } from '../chains/evm/lookup.js';
import type { Network } from '../chains/networks.js';
import { nodeRequest } from '../chains/node-http.js';
import { UpstreamUnavailableError } from '../errors.js';
import { lookupFor } from '../transactions/service.js';
import type { AnchorKind } from './receipt.js';
import type { AnchorReader } from './verify.js';

const TIMEOUT_MS = 10_000;

/** The family whose transactions carry each kind of anchor. */
export const ANCHOR_FAMILY: Record<AnchorKind, Network['family']> = {
  'evm-input': 'evm',
  'algorand-note': 'algorand',
};

async function tipOf(network: Network): Promise<number> {
  const url = network.rpcUrls[0];
  if (!url) throw new UpstreamUnavailableError(`No node is configured for ${network.name}`);
  if (network.family === 'evm') {
    const answer = await nodeRequest(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }),
      timeoutMs: TIMEOUT_MS,
      plainJson: true,
    });
    const result = (answer.json as { result?: unknown } | undefined)?.result;
    if (typeof result !== 'string')
      throw new UpstreamUnavailableError(`The ${network.name} node gave no block number`);
    return Number(BigInt(result));
  }
  const answer = await nodeRequest(`${url.replace(/\/$/, '')}/v2/status`, {
    timeoutMs: TIMEOUT_MS,
    plainJson: true,
  });
  const round = (answer.json as Record<string, unknown> | undefined)?.['last-round'];
  if (typeof round !== 'number') throw new UpstreamUnavailableError(`The ${network.name} node gave no round`);
  return round;
}

export function networkReader(network: Network): AnchorReader {
  // Built at the first transaction read, then kept: a lookup remembers what never changes (the
  // chain's genesis and id) instead of asking the node again for every receipt.
  let lookup: ReturnType<typeof lookupFor> | undefined;
  return {
    async transaction(txId) {
      const wellFormed =
        network.family === 'evm' ? isEvmTxId(txId) : network.family === 'algorand' && isAlgorandTxId(txId);
      if (!wellFormed) return undefined;
      lookup ??= lookupFor(network);
      const found = await lookup(txId);
      if (found === undefined) return undefined;
      const { view } = found;
      return {
        payload: view.note === null ? null : Buffer.from(view.note, 'base64'),
        blockNumber: view.confirmedRound === null ? null : Number(view.confirmedRound),
        chain: network.family === 'evm' ? view.genesisId : view.genesisHash,
      };
    },
    tip: () => tipOf(network),
  };
}

/**
 * For one run over many receipts (`ledgerhook verify` of a folder): each transaction and the tip
 * are read once, as receipts of one batch name the same transaction. A failed read is not kept.
 */
export function readOnce(reader: AnchorReader): AnchorReader {
  const transactions = new Map<string, ReturnType<AnchorReader['transaction']>>();
  let tip: Promise<number> | undefined;
  const kept = <T>(promise: Promise<T>, forget: () => void) => {
    promise.catch(forget);
    return promise;
  };
  return {
    transaction(txId) {
      let read = transactions.get(txId);
      if (!read) {
        read = kept(reader.transaction(txId), () => transactions.delete(txId));
        transactions.set(txId, read);
      }
      return read;
    },
    tip() {
      tip ??= kept(reader.tip(), () => {
        tip = undefined;
      });
      return tip;
    },
  };
}
