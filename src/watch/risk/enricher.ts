/**
 * What the watcher uses: built once from the configuration, it gives each network that carries
 * `addressesRiskRatio` a function from a transaction's counterparties to the field's value.
 */
import type { Logger } from 'pino';
import type { NetworkCatalog } from '../../chains/networks.js';
import { tronAddress } from '../../chains/tron/address.js';
import type { RiskConfig } from '../../risk-config.js';
import { createHttpRiskProvider } from './http.js';
import { createListRiskProvider } from './lists.js';
import { createRiskStats, enrichWithRisk, type RiskProvider, type RiskStatus } from './provider.js';

/** The field's value for a transaction's counterparties, or undefined to leave it out. */
export type RiskLookup = (addresses: string[]) => Promise<Record<string, number>[] | undefined>;

export interface RiskEnricher {
  /** Undefined when the network's notifications do not carry the field. */
  forNetwork(network: string): RiskLookup | undefined;
  /** Counters for `/metrics`. */
  status(): RiskStatus;
  close(): Promise<void>;
}

/**
 * EVM addresses are hex, compared without regard to case (lists often hold checksummed ones);
 * Tron's are compared as base58, a list's hex `41…` entries included.
 */
function addressKey(catalog: NetworkCatalog | undefined) {
  return (network: string, address: string) => {
    const family = catalog?.find(network)?.family;
    if (family === 'evm') return address.toLowerCase();
    if (family === 'tron') {
      const check = tronAddress(address);
      return check.ok ? check.address : address;
    }
    return address;
  };
}

/**
 * The providers of the configuration: lists for the networks that have them, and the HTTP
 * provider for every risk network. No configuration, no provider: `forNetwork` is always undefined.
 * A list file that cannot be read throws a ConfigError naming LEDGERHOOK_RISK_LISTS.
 */
export function createRiskEnricher(
  config: RiskConfig | undefined,
  deps: { logger: Logger; networks?: NetworkCatalog },
): RiskEnricher {
  const stats = createRiskStats();
  const lists =
    config && Object.keys(config.lists).length > 0
      ? createListRiskProvider({
          files: config.lists,
          logger: deps.logger,
          normalize: addressKey(deps.networks),
        })
      : undefined;
  const http = config?.url
    ? createHttpRiskProvider({
        url: config.url,
        token: config.token,
        timeoutMs: config.timeoutMs,
        cacheTtlMs: config.cacheTtlMs,
        logger: deps.logger,
      })
    : undefined;

  function providersOf(network: string): RiskProvider[] {
    if (!config?.networks.includes(network)) return [];
    return [...(lists && config.lists[network] ? [lists] : []), ...(http ? [http] : [])];
  }

  return {
    forNetwork(name) {
      const network = deps.networks?.find(name)?.name ?? name;
      const providers = providersOf(network);
      if (providers.length === 0) return undefined;
      return (addresses) =>
        enrichWithRisk(providers, network, addresses, {
          deadlineMs: config?.timeoutMs,
          stats,
          logger: deps.logger,
        });
    },
    status: () => stats.status(),
    async close() {
      await Promise.all([lists?.close(), http?.close()]);
    },
  };
}
