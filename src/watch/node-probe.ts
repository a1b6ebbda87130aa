/**
 * One look at a network's node, through the same clients and block sources the watcher follows
 * it with (watcher-families.ts), for `ledgerhook doctor`: is it there, is it on the network the
 * catalog says, how tall is its chain, and (EVM) does it give the traces internal transfers need.
 * Whatever a source checks when it follows (an Algorand node's genesis) is checked here the same
 * way, by the same code.
 */
import type { Hex } from 'viem';
import { createAlgorandSource } from '../chains/algorand/source.js';
import { bitcoinParams } from '../chains/bitcoin/params.js';
import { createBitcoinSource } from '../chains/bitcoin/source.js';
import { createTraceReader, isTraceGap, type TracesStatus } from '../chains/evm/trace-reader.js';
import type { Network, TracesSetting } from '../chains/networks.js';
import { createSolanaSource } from '../chains/solana/source.js';
import { createTronSource } from '../chains/tron/source.js';
import { evmClient } from './watcher-families.js';

export interface NodeProbe {
  /** The endpoint asked. */
  url: string;
  /** The height (round, slot) of the node's latest block. */
  head: number;
  /** EVM: the chain id the node reports (eth_chainId). */
  chainId?: number;
  /** EVM: the traces setting and what the node answered to it; absent elsewhere. */
  traces?: {
    setting: TracesSetting;
    status?: TracesStatus;
    error?: unknown;
    /** Why the latest block could not be traced (the node no longer has its state, say). */
    gap?: string;
    /** The tracing node asked (host and port), when the network names one (tracesRpc). */
    node?: string;
    /** The chain id of that tracing node, when it is not the network's. */
    otherChain?: number;
  };
}

/** The endpoints the watcher reads a network through: every EVM RPC URL (a fallback list), else the first. */
export function probedUrls(network: Network): string[] {
  if (network.family === 'evm') return network.rpcUrls;
  if (network.family === 'algorand' && network.api === 'indexer')
    return [network.indexerUrls[0] ?? network.rpcUrls[0]!].filter(Boolean);
  return network.rpcUrls.slice(0, 1);
}

/**
 * EVM: the chain id, the latest block, and the network's trace method tried on that block by the
 * follower's own trace reader, on the network's tracing node if it names one (a refusal is a
 * status, a block it cannot trace a `gap`, any other failure an `error`).
 */
async function probeEvm(network: Network, url: string, timeoutMs: number): Promise<NodeProbe> {
  const client = evmClient([url], timeoutMs);
  const [chainId, latest] = await Promise.all([client.getChainId(), client.getBlock({ blockTag: 'latest' })]);
  const setting = network.traces ?? 'auto';
  const tracing = network.tracesRpcUrls?.[0];
  const node = tracing === undefined ? undefined : new URL(tracing).host;
  const probe: NodeProbe = { url, head: Number(latest.number), chainId, traces: { setting, node } };
  if (setting === 'off' || chainId !== network.chainId) return probe;
  const tracer = tracing === undefined ? client : evmClient([tracing], timeoutMs);
  const reader = createTraceReader(tracer, setting, { waitMs: 0 });
  try {
    if (tracing !== undefined) {
      const tracerChain = await tracer.getChainId();
      if (tracerChain !== chainId) return { ...probe, traces: { setting, node, otherChain: tracerChain } };
    }
    const outcome = await reader.read(latest.number)({
      hash: latest.hash,
      number: latest.number,
      transactions: latest.transactions.map((hash: Hex) => ({ hash })),
    });
    probe.traces = {
      setting,
      node,
      status: reader.status(),
      ...(isTraceGap(outcome) ? { gap: outcome.gap } : {}),
    };
  } catch (error) {
    probe.traces = { setting, node, error };
  }
  return probe;
}

/** Asks the node at `url` of `network`; rejects when it cannot be reached or is on another chain. */
export async function probeNode(network: Network, url: string, timeoutMs: number): Promise<NodeProbe> {
  switch (network.family) {
    case 'evm':
      return probeEvm(network, url, timeoutMs);
    case 'bitcoin': {
      const source = createBitcoinSource({
        url,
        network: bitcoinParams(network.bitcoinChain),
        api: network.api,
        timeoutMs,
      });
      return { url, head: (await source.tip()).height };
    }
    case 'algorand': {
      const source = createAlgorandSource({
        url,
        api: network.api === 'indexer' ? 'indexer' : 'algod',
        genesisId: network.genesisId,
        genesisHash: network.genesisHash,
        timeoutMs,
      });
      return { url, head: (await source.tip()).height };
    }
    case 'solana': {
      const source = createSolanaSource({ url, commitment: network.commitment, timeoutMs });
      return { url, head: (await source.tip()).height };
    }
    case 'tron': {
      const source = createTronSource({ url, headers: network.headers, timeoutMs });
      return { url, head: (await source.tip()).height };
    }
  }
}
