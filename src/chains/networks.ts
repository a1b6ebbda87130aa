import { ConfigError } from '../errors.js';
import { readRegularFile } from '../shared/regular-file.js';
import { BITCOIN_CHAINS, type BitcoinChain, bitcoinAddressFormat } from './bitcoin/params.js';

export type Family = 'evm' | 'bitcoin' | 'algorand' | 'solana' | 'tron';
export const FAMILIES: readonly Family[] = ['evm', 'bitcoin', 'algorand', 'solana', 'tron'];

export interface Network {
  /** Canonical ticker-like name used in the API: ETH, BSC, POL, GLRM, ALGO, BTC, SOL, … */
  name: string;
  /** Other names accepted for it (GLMR for GLRM). */
  aliases: string[];
  family: Family;
  /** EVM chain id. */
  chainId?: number;
  /** Native asset symbol, as notifications report it. */
  symbol: string;
  decimals: number;
  /** JSON-RPC / REST endpoints, tried in order. */
  rpcUrls: string[];
  wsUrls: string[];
  /** Algorand indexer endpoints. */
  indexerUrls: string[];
  /**
   * The node API where a family has several: Bitcoin 'esplora' (REST, the default) or 'bitcoind'
   * (JSON-RPC); Algorand 'algod' (the default) or 'indexer' (followed through its indexer URL).
   */
  api?: string;
  /** Algorand only: the genesis id and hash (base64) the node must report, checked at start. */
  genesisId?: string;
  genesisHash?: string;
  /**
   * Solana only: the commitment blocks are followed at, 'confirmed' (the default: seconds behind,
   * rarely rolled back) or 'finalized' (about 13 s behind, never rolled back).
   */
  commitment?: SolanaCommitment;
  /** Bitcoin only: whose address prefixes the network uses (mainnet unless configured). */
  bitcoinChain?: BitcoinChain;
  /**
   * EVM only: how internal transfers are read from the node's traces: `auto` (the default) probes
   * `debug_traceBlockByNumber` with callTracer, then `trace_block`; `debug` and `parity` use one;
   * `off` reads none (internal transfers are not notified).
   */
  traces?: TracesSetting;
  /**
   * EVM only: the node(s) traces are read from (an archive or tracing node), tried in order;
   * blocks and receipts still come from `rpcUrls`. Absent: traces come from `rpcUrls` too.
   */
  tracesRpcUrls?: string[];
  /**
   * Tron only: headers sent with every request to the network's node (TronGrid takes its API key
   * as `TRON-PRO-API-KEY`).
   */
  headers?: Record<string, string>;
  /** How addresses are written, for error messages. */
  addressFormat: string;
  /** Confirmations a subscription waits for unless it asks otherwise. */
  defaultConfirmations: number;
}

export const TRACES_SETTINGS = ['auto', 'debug', 'parity', 'off'] as const;
export type TracesSetting = (typeof TRACES_SETTINGS)[number];

export const SOLANA_COMMITMENTS = ['confirmed', 'finalized'] as const;
export type SolanaCommitment = (typeof SOLANA_COMMITMENTS)[number];

export type NetworkDefaults = Omit<Network, 'addressFormat' | 'defaultConfirmations'>;

const ADDRESS_FORMATS: Record<Family, string> = {
  evm: '0x followed by 40 hex characters (EIP-55 checksum if mixed case)',
  bitcoin: bitcoinAddressFormat('mainnet'),
  algorand: '58 base32 characters with checksum',
  solana: 'a base58 public key (32 bytes)',
  tron: 'base58check T… (34 characters), or 41 followed by 40 hex characters',
};

/** The node APIs a family can follow through, the default first. */
const NODE_APIS: Partial<Record<Family, string[]>> = {
  bitcoin: ['esplora', 'bitcoind'],
  algorand: ['algod', 'indexer'],
};

const DEFAULT_CONFIRMATIONS: Record<Family, number> = { evm: 1, bitcoin: 2, algorand: 1, solana: 1, tron: 1 };

// Public endpoints so that a fresh install with internet access works at once; override them with
// your own nodes (LEDGERHOOK_RPC_<NETWORK>, LEDGERHOOK_WS_<NETWORK> or the config file).
// The aliases include Tatum's v4 chain names (ethereum-mainnet, …), so its users' requests work.
const BUILT_IN: NetworkDefaults[] = [
  {
    name: 'ETH',
    aliases: ['ETHEREUM-MAINNET'],
    family: 'evm',
    chainId: 1,
    symbol: 'ETH',
    decimals: 18,
    rpcUrls: ['https://ethereum-rpc.publicnode.com'],
    wsUrls: ['wss://ethereum-rpc.publicnode.com'],
    indexerUrls: [],
  },
  {
    name: 'BSC',
    aliases: ['BSC-MAINNET'],
    family: 'evm',
    chainId: 56,
    symbol: 'BNB',
    decimals: 18,
    rpcUrls: ['https://bsc-rpc.publicnode.com'],
    wsUrls: ['wss://bsc-rpc.publicnode.com'],
    indexerUrls: [],
  },
  {
    name: 'POL',
    aliases: ['MATIC', 'POLYGON-MAINNET'],
    family: 'evm',
    chainId: 137,
    symbol: 'POL',
    decimals: 18,
    rpcUrls: ['https://polygon-bor-rpc.publicnode.com'],
    wsUrls: ['wss://polygon-bor-rpc.publicnode.com'],
    indexerUrls: [],
  },
  {
    name: 'GLRM',
    aliases: ['GLMR', 'MOONBEAM-MAINNET'],
    family: 'evm',
    chainId: 1284,
    symbol: 'GLMR',
    decimals: 18,
    rpcUrls: ['https://rpc.api.moonbeam.network'],
    wsUrls: ['wss://wss.api.moonbeam.network'],
    indexerUrls: [],
  },
  // The rollups, Avalanche and the Ethereum testnet. Names are Tatum's v3 tickers (BASE, ARB, OP,
  // AVAX); the aliases its v4 chain names, old and current (tatum-js src/dto/Network.ts:
  // base-mainnet, arb-one-mainnet / arbitrum-one-mainnet, optimism-mainnet, avax-mainnet /
  // avalanche-c-mainnet, ethereum-sepolia). Their fees are worked out in evm/fees.ts (L1 data fee,
  // operator fee, blob gas).
  {
    name: 'BASE',
    aliases: ['BASE-MAINNET'],
    family: 'evm',
    chainId: 8453,
    symbol: 'ETH',
    decimals: 18,
    rpcUrls: ['https://base-rpc.publicnode.com'],
    wsUrls: ['wss://base-rpc.publicnode.com'],
    indexerUrls: [],
  },
  {
    name: 'ARB',
    aliases: ['ARB-ONE-MAINNET', 'ARBITRUM-ONE-MAINNET', 'ARBITRUM'],
    family: 'evm',
    chainId: 42161,
    symbol: 'ETH',
    decimals: 18,
    rpcUrls: ['https://arbitrum-one-rpc.publicnode.com'],
    wsUrls: ['wss://arbitrum-one-rpc.publicnode.com'],
    indexerUrls: [],
  },
  {
    name: 'OP',
    aliases: ['OPTIMISM', 'OPTIMISM-MAINNET'],
    family: 'evm',
    chainId: 10,
    symbol: 'ETH',
    decimals: 18,
    rpcUrls: ['https://optimism-rpc.publicnode.com'],
    wsUrls: ['wss://optimism-rpc.publicnode.com'],
    indexerUrls: [],
  },
  {
    name: 'AVAX',
    aliases: ['AVAX-MAINNET', 'AVALANCHE-C-MAINNET'],
    family: 'evm',
    chainId: 43114,
    symbol: 'AVAX',
    decimals: 18,
    rpcUrls: ['https://avalanche-c-chain-rpc.publicnode.com'],
    wsUrls: ['wss://avalanche-c-chain-rpc.publicnode.com'],
    indexerUrls: [],
  },
  {
    name: 'SEPOLIA',
    aliases: ['ETHEREUM-SEPOLIA'],
    family: 'evm',
    chainId: 11155111,
    symbol: 'ETH',
    decimals: 18,
    rpcUrls: ['https://ethereum-sepolia-rpc.publicnode.com'],
    wsUrls: ['wss://ethereum-sepolia-rpc.publicnode.com'],
    indexerUrls: [],
  },
  {
    name: 'ALGO',
    aliases: ['ALGORAND-MAINNET', 'ALGORAND-MAINNET-ALGOD', 'ALGORAND-MAINNET-INDEXER'],
    family: 'algorand',
    symbol: 'ALGO',
    decimals: 6,
    rpcUrls: ['https://mainnet-api.algonode.cloud'],
    wsUrls: [],
    indexerUrls: ['https://mainnet-idx.algonode.cloud'],
    genesisId: 'mainnet-v1.0',
    genesisHash: 'wGHE2Pwdvd7S12BL5FaOP20EGYesN73ktiC1qzkkit8=',
  },
  {
    name: 'BTC',
    aliases: ['BITCOIN-MAINNET'],
    family: 'bitcoin',
    symbol: 'BTC',
    decimals: 8,
    rpcUrls: ['https://blockstream.info/api'],
    wsUrls: [],
    indexerUrls: [],
  },
  {
    name: 'SOL',
    aliases: ['SOLANA-MAINNET'],
    family: 'solana',
    symbol: 'SOL',
    decimals: 9,
    rpcUrls: ['https://api.mainnet-beta.solana.com'],
    wsUrls: ['wss://api.mainnet-beta.solana.com'],
    indexerUrls: [],
  },
  // Tron through java-tron's HTTP API; TronGrid's hosts by default (tatum-js names: tron-mainnet,
  // and tron-testnet for Shasta).
  {
    name: 'TRON',
    aliases: ['TRX', 'TRON-MAINNET'],
    family: 'tron',
    symbol: 'TRX',
    decimals: 6,
    rpcUrls: ['https://api.trongrid.io'],
    wsUrls: [],
    indexerUrls: [],
  },
  {
    name: 'NILE',
    aliases: ['TRON-NILE'],
    family: 'tron',
    symbol: 'TRX',
    decimals: 6,
    rpcUrls: ['https://nile.trongrid.io'],
    wsUrls: [],
    indexerUrls: [],
  },
  {
    name: 'SHASTA',
    aliases: ['TRON-SHASTA', 'TRON-TESTNET'],
    family: 'tron',
    symbol: 'TRX',
    decimals: 6,
    rpcUrls: ['https://api.shasta.trongrid.io'],
    wsUrls: [],
    indexerUrls: [],
  },
];

export interface NetworkCatalog {
  /** The network for a name or alias, case-insensitive; undefined when not configured. */
  find(name: string): Network | undefined;
  list(): Network[];
  names(): string[];
}

const NAME = /^[A-Z][A-Z0-9_]{1,31}$/;

const isObject = (value: unknown): boolean =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const isName = (value: unknown) => typeof value === 'string' && NAME.test(value.toUpperCase());
const isIntegerIn = (value: unknown, min: number, max: number) =>
  Number.isInteger(value) && (value as number) >= min && (value as number) <= max;

interface FileNetwork {
  family?: string;
  chainId?: number;
  symbol?: string;
  decimals?: number;
  rpc?: string[] | string;
  ws?: string[] | string;
  indexer?: string[] | string;
  aliases?: string[];
  confirmations?: number;
  api?: string;
  bitcoinChain?: string;
  commitment?: string;
  genesisId?: string;
  genesisHash?: string;
  traces?: string;
  tracesRpc?: string[] | string;
  headers?: unknown;
}

/** What a network's `headers` may hold: enough for an API key or two, never a request's worth. */
export const HEADER_LIMITS = { count: 16, valueLength: 4096 } as const;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;

/** A `headers` setting checked: header names and values a request can carry, on a Tron network. */
function nodeHeaders(value: unknown, family: Family, where: string): Record<string, string> {
  if (family !== 'tron') throw new ConfigError(where, 'is for Tron networks only');
  if (!isObject(value)) throw new ConfigError(where, 'must be an object of header names and values');
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > HEADER_LIMITS.count)
    throw new ConfigError(where, `has ${entries.length} headers, over the limit of ${HEADER_LIMITS.count}`);
  for (const [name, text] of entries) {
    if (!HEADER_NAME.test(name))
      throw new ConfigError(where, `has "${name.slice(0, 64)}", not a header name`);
    if (typeof text !== 'string' || text.length > HEADER_LIMITS.valueLength || /[\r\n\0]/.test(text))
      throw new ConfigError(
        `${where}.${name}`,
        `must be a string of at most ${HEADER_LIMITS.valueLength} characters, without line breaks`,
      );
  }
  return Object.fromEntries(entries) as Record<string, string>;
}

/** LEDGERHOOK_HEADERS_<NAME>: the same object as the file's `headers`, as JSON. */
function headersFromEnv(text: string, family: Family, where: string): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ConfigError(where, 'must be a JSON object of header names and values');
  }
  return nodeHeaders(parsed, family, where);
}

/** A `traces` setting checked: one of TRACES_SETTINGS, on an EVM network. */
function tracesSetting(value: unknown, family: Family, where: string): TracesSetting {
  if (family !== 'evm' || !(TRACES_SETTINGS as readonly unknown[]).includes(value))
    throw new ConfigError(
      where,
      `must be one of ${TRACES_SETTINGS.join(', ')}, for an EVM network (got "${String(value)}")`,
    );
  return value as TracesSetting;
}

/** A `tracesRpc` setting checked: HTTP(S) JSON-RPC URLs, on an EVM network. */
function tracesRpc(value: unknown, family: Family, where: string): string[] {
  if (family !== 'evm') throw new ConfigError(where, 'is for EVM networks only');
  const list = urls(value, where);
  const other = list.find((url) => !/^https?:/i.test(url));
  if (other !== undefined) throw new ConfigError(where, `has "${other}", not an http(s) JSON-RPC URL`);
  if (list.length === 0) throw new ConfigError(where, 'must name at least one URL');
  return list;
}

function urls(value: unknown, where: string): string[] {
  const list = typeof value === 'string' ? value.split(',') : value;
  if (!Array.isArray(list)) throw new ConfigError(where, 'must be a URL or a list of URLs');
  return list.map((u) => {
    const text = String(u).trim();
    try {
      const url = new URL(text);
      if (!['http:', 'https:', 'ws:', 'wss:'].includes(url.protocol)) throw new Error('scheme');
    } catch {
      throw new ConfigError(where, `has an invalid URL "${text}"`);
    }
    return text;
  });
}

function withDerived(n: NetworkDefaults & { confirmations?: number }, confirmations?: number): Network {
  const { confirmations: _fromFile, ...defaults } = n;
  return {
    ...defaults,
    addressFormat: n.family === 'bitcoin' ? bitcoinAddressFormat(n.bitcoinChain) : ADDRESS_FORMATS[n.family],
    defaultConfirmations: confirmations ?? DEFAULT_CONFIRMATIONS[n.family],
  };
}

/**
 * What LEDGERHOOK_CONFIG may hold. A network written out in full (three RPC and two WebSocket URLs
 * with API keys, aliases, every setting) is about 700 bytes pretty-printed, so the most networks
 * allowed (1,000) fit in 1 MiB however fully written; a real file, a few dozen networks, is a few
 * KB. The node URLs are bounded in all, as doctor asks every one of them.
 */
export const CONFIG_FILE_LIMITS = {
  bytes: 1024 * 1024,
  networks: 1_000,
  aliasesPerNetwork: 16,
  /** In each of a network's rpc, ws, indexer and tracesRpc lists (tried in order: a fallback, not a pool). */
  urlsPerList: 8,
  /** Node URLs of all the networks together. */
  urls: 2_000,
} as const;

/** The node URLs one of a network's URL fields lists, as they are split below. */
function urlCount(value: unknown): number {
  if (typeof value === 'string') return value.split(',').length;
  return Array.isArray(value) ? value.length : 0;
}

/** Refuses a file past CONFIG_FILE_LIMITS before any of its networks is looked at. */
function checkFileLimits(file: string, networks: Record<string, unknown>): void {
  const limits = CONFIG_FILE_LIMITS;
  const count = Object.keys(networks).length;
  if (count > limits.networks)
    throw new ConfigError(
      'LEDGERHOOK_CONFIG',
      `names ${file}, which has ${count} networks, over the limit of ${limits.networks}`,
    );
  let urls = 0;
  for (const [name, spec] of Object.entries(networks)) {
    if (!isObject(spec)) continue;
    const where = `LEDGERHOOK_CONFIG networks.${name}`;
    const fields = spec as Record<string, unknown>;
    if (Array.isArray(fields.aliases) && fields.aliases.length > limits.aliasesPerNetwork)
      throw new ConfigError(
        `${where}.aliases`,
        `has ${fields.aliases.length} names, over the limit of ${limits.aliasesPerNetwork}`,
      );
    for (const field of ['rpc', 'ws', 'indexer', 'tracesRpc']) {
      const n = urlCount(fields[field]);
      if (n > limits.urlsPerList)
        throw new ConfigError(`${where}.${field}`, `has ${n} URLs, over the limit of ${limits.urlsPerList}`);
      urls += n;
    }
  }
  if (urls > limits.urls)
    throw new ConfigError(
      'LEDGERHOOK_CONFIG',
      `names ${file}, whose networks have ${urls} node URLs, over the limit of ${limits.urls}`,
    );
}

/**
 * The catalog: built-in networks, then the config file's `networks` (overriding fields of a
 * built-in one or adding a network), then LEDGERHOOK_RPC_/WS_/INDEXER_<NAME> variables.
 */
export function loadNetworks(
  env: Record<string, string | undefined> = process.env,
  extra: NetworkDefaults[] = [],
): NetworkCatalog {
  const byName = new Map<string, NetworkDefaults & { confirmations?: number }>();
  for (const n of [...BUILT_IN, ...extra]) byName.set(n.name, structuredClone(n));

  const file = env.LEDGERHOOK_CONFIG?.trim();
  if (file) {
    const text = readRegularFile(file, 'LEDGERHOOK_CONFIG', CONFIG_FILE_LIMITS.bytes);
    let parsed: { networks?: Record<string, FileNetwork> };
    try {
      parsed = JSON.parse(text) as typeof parsed;
    } catch (err) {
      throw new ConfigError('LEDGERHOOK_CONFIG', `cannot be read as JSON (${(err as Error).message})`);
    }
    if (!isObject(parsed)) throw new ConfigError('LEDGERHOOK_CONFIG', 'must hold a JSON object');
    if (parsed.networks !== undefined && !isObject(parsed.networks))
      throw new ConfigError('LEDGERHOOK_CONFIG networks', 'must be an object keyed by network name');
    checkFileLimits(file, parsed.networks ?? {});
    for (const [rawName, spec] of Object.entries(parsed.networks ?? {})) {
      const name = rawName.toUpperCase();
      const where = `LEDGERHOOK_CONFIG networks.${rawName}`;
      if (!NAME.test(name)) throw new ConfigError(where, 'must be named with 2-32 letters, digits or _');
      if (!isObject(spec)) throw new ConfigError(where, 'must be an object');
      if (spec.aliases !== undefined && !(Array.isArray(spec.aliases) && spec.aliases.every(isName)))
        throw new ConfigError(`${where}.aliases`, 'must be a list of names (2-32 letters, digits or _)');
      if (spec.symbol !== undefined && (typeof spec.symbol !== 'string' || spec.symbol.trim() === ''))
        throw new ConfigError(`${where}.symbol`, 'must be a non-empty string');
      if (spec.decimals !== undefined && !isIntegerIn(spec.decimals, 0, 255))
        throw new ConfigError(`${where}.decimals`, 'must be an integer from 0 to 255');
      if (spec.confirmations !== undefined && !isIntegerIn(spec.confirmations, 1, 1000))
        throw new ConfigError(`${where}.confirmations`, 'must be an integer from 1 to 1000');
      const base = byName.get(name);
      const family = (spec.family ?? base?.family) as Family | undefined;
      if (!family || !FAMILIES.includes(family))
        throw new ConfigError(where, `needs a family: one of ${FAMILIES.join(', ')}`);
      if (family === 'evm' && spec.chainId === undefined && base?.chainId === undefined) {
        throw new ConfigError(where, 'needs a chainId (EVM network)');
      }
      if (spec.chainId !== undefined && (!Number.isInteger(spec.chainId) || spec.chainId <= 0)) {
        throw new ConfigError(where, 'chainId must be a positive integer');
      }
      if (
        spec.bitcoinChain !== undefined &&
        !(family === 'bitcoin' && (BITCOIN_CHAINS as readonly string[]).includes(spec.bitcoinChain))
      ) {
        throw new ConfigError(
          `${where}.bitcoinChain`,
          `must be one of ${BITCOIN_CHAINS.join(', ')}, for a Bitcoin network`,
        );
      }
      if (
        spec.commitment !== undefined &&
        !(family === 'solana' && (SOLANA_COMMITMENTS as readonly string[]).includes(spec.commitment))
      ) {
        throw new ConfigError(
          `${where}.commitment`,
          `must be ${SOLANA_COMMITMENTS.join(' or ')}, for a Solana network`,
        );
      }
      for (const field of ['genesisId', 'genesisHash'] as const) {
        const value = spec[field];
        if (value === undefined) continue;
        if (family !== 'algorand' || typeof value !== 'string' || value.trim() === '' || value.length > 128)
          throw new ConfigError(`${where}.${field}`, 'must be a non-empty string, for an Algorand network');
      }
      if (spec.genesisHash !== undefined && !/^[A-Za-z0-9+/]{43}=$/.test(spec.genesisHash))
        throw new ConfigError(`${where}.genesisHash`, 'must be a base64 SHA-512/256 hash (44 characters)');
      const symbol = spec.symbol ?? base?.symbol;
      if (!symbol) throw new ConfigError(where, 'needs a symbol (the native asset, e.g. ETH)');
      const rpcUrls = spec.rpc !== undefined ? urls(spec.rpc, `${where}.rpc`) : (base?.rpcUrls ?? []);
      if (rpcUrls.length === 0) throw new ConfigError(where, 'needs at least one rpc URL');
      byName.set(name, {
        name,
        aliases: (spec.aliases ?? base?.aliases ?? []).map((a) => a.toUpperCase()),
        family,
        chainId: spec.chainId ?? base?.chainId,
        symbol,
        decimals: spec.decimals ?? base?.decimals ?? 18,
        rpcUrls,
        wsUrls: spec.ws !== undefined ? urls(spec.ws, `${where}.ws`) : (base?.wsUrls ?? []),
        indexerUrls:
          spec.indexer !== undefined ? urls(spec.indexer, `${where}.indexer`) : (base?.indexerUrls ?? []),
        confirmations: spec.confirmations,
        ...((spec.api ?? base?.api) === undefined ? {} : { api: spec.api ?? base?.api }),
        ...((spec.genesisId ?? base?.genesisId) === undefined
          ? {}
          : { genesisId: spec.genesisId ?? base?.genesisId }),
        ...((spec.genesisHash ?? base?.genesisHash) === undefined
          ? {}
          : { genesisHash: spec.genesisHash ?? base?.genesisHash }),
        ...((spec.commitment ?? base?.commitment) === undefined
          ? {}
          : { commitment: (spec.commitment ?? base?.commitment) as SolanaCommitment }),
        ...((spec.bitcoinChain ?? base?.bitcoinChain) === undefined
          ? {}
          : { bitcoinChain: (spec.bitcoinChain ?? base?.bitcoinChain) as BitcoinChain }),
        ...(spec.traces === undefined
          ? base?.traces === undefined
            ? {}
            : { traces: base.traces }
          : { traces: tracesSetting(spec.traces, family, `${where}.traces`) }),
        ...(spec.tracesRpc === undefined
          ? base?.tracesRpcUrls === undefined
            ? {}
            : { tracesRpcUrls: base.tracesRpcUrls }
          : { tracesRpcUrls: tracesRpc(spec.tracesRpc, family, `${where}.tracesRpc`) }),
        ...(spec.headers === undefined
          ? base?.headers === undefined
            ? {}
            : { headers: base.headers }
          : { headers: nodeHeaders(spec.headers, family, `${where}.headers`) }),
      });
    }
  }

  for (const n of byName.values()) {
    const rpc = env[`LEDGERHOOK_RPC_${n.name}`];
    if (rpc?.trim()) n.rpcUrls = urls(rpc, `LEDGERHOOK_RPC_${n.name}`);
    const ws = env[`LEDGERHOOK_WS_${n.name}`];
    if (ws?.trim()) n.wsUrls = urls(ws, `LEDGERHOOK_WS_${n.name}`);
    const indexer = env[`LEDGERHOOK_INDEXER_${n.name}`];
    if (indexer?.trim()) n.indexerUrls = urls(indexer, `LEDGERHOOK_INDEXER_${n.name}`);
    const api = env[`LEDGERHOOK_API_${n.name}`]?.trim();
    if (api) n.api = api;
    const traces = env[`LEDGERHOOK_TRACES_${n.name}`]?.trim();
    if (traces) n.traces = tracesSetting(traces, n.family, `LEDGERHOOK_TRACES_${n.name}`);
    const tracesNode = env[`LEDGERHOOK_TRACES_RPC_${n.name}`];
    if (tracesNode?.trim())
      n.tracesRpcUrls = tracesRpc(tracesNode, n.family, `LEDGERHOOK_TRACES_RPC_${n.name}`);
    const headers = env[`LEDGERHOOK_HEADERS_${n.name}`];
    if (headers?.trim()) n.headers = headersFromEnv(headers, n.family, `LEDGERHOOK_HEADERS_${n.name}`);
  }
  for (const n of byName.values()) {
    const apis = NODE_APIS[n.family];
    if (n.api !== undefined && !apis?.includes(n.api)) {
      throw new ConfigError(
        `LEDGERHOOK_API_${n.name}`,
        apis
          ? `must be ${apis.join(' or ')}, for ${n.family === 'bitcoin' ? 'a Bitcoin' : 'an Algorand'} network (got "${n.api}")`
          : `is for Bitcoin (esplora, bitcoind) and Algorand (algod, indexer) networks only (got "${n.api}")`,
      );
    }
  }

  const networks = [...byName.values()].map((n) => withDerived(n, n.confirmations));
  const index = new Map<string, Network>();
  for (const n of networks) {
    index.set(n.name, n);
    for (const alias of n.aliases) if (!byName.has(alias)) index.set(alias, n);
  }
  return {
    find: (name) => index.get(name.trim().toUpperCase()),
    list: () => [...networks],
    names: () => networks.map((n) => n.name),
  };
}
