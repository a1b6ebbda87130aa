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
  return {
    async transaction(txId) {
      const wellFormed =
        network.family === 'evm' ? isEvmTxId(txId) : network.family === 'algorand' && isAlgorandTxId(txId);
      if (!wellFormed) return undefined;
      const found = await lookupFor(network)(txId);
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
