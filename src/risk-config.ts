/**
 * Reading the risk providers' settings (the LEDGERHOOK_RISK_* variables; see docs/configuration.md):
 * configuration, read with the rest of it by config.ts, for the enricher in watch/risk/.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { NetworkCatalog } from './chains/networks.js';
import { ConfigError } from './errors.js';
import { formatBytes, statRegularFile } from './shared/regular-file.js';

/**
 * The list files are read whole into memory at start: 64 MiB holds over a million EVM addresses
 * with scores. Longer lists belong to a risk service (LEDGERHOOK_RISK_URL). Each file is polled
 * for changes, so their number is bounded too.
 */
export const RISK_LIST_LIMITS = { files: 64, bytes: 64 * 1024 * 1024 } as const;

export interface RiskConfig {
  /** Networks whose notifications carry `addressesRiskRatio` (canonical names). */
  networks: string[];
  /** List files per network (absolute paths). */
  lists: Record<string, string[]>;
  /** The HTTP provider's URL, when there is one. */
  url: string | undefined;
  token: string | undefined;
  /** How long a notification waits for scores, and the HTTP provider's request timeout. */
  timeoutMs: number;
  cacheTtlMs: number;
}

export interface RiskSettings {
  networks: string | undefined;
  lists: string | undefined;
  url: string | undefined;
  token: string | undefined;
  timeoutMs: number;
  cacheTtlMs: number;
}

/** A network's canonical name, refusing one the catalog does not have. */
function networkName(catalog: NetworkCatalog, name: string, variable: string): string {
  const network = catalog.find(name.trim());
  if (!network) throw new ConfigError(variable, `names "${name.trim()}", which is not a configured network`);
  return network.name;
}

export function parseRiskNetworks(text: string | undefined, catalog: NetworkCatalog): string[] {
  const variable = 'LEDGERHOOK_RISK_NETWORKS';
  const names = (text?.trim() || 'SOL').split(',').filter((name) => name.trim() !== '');
  const networks = [...new Set(names.map((name) => networkName(catalog, name, variable)))];
  return networks;
}

/**
 * Parses `SOL=/a.csv,/b.txt;ETH=/c.csv`; each file must be a readable regular file now, and all
 * of them within RISK_LIST_LIMITS (a file named twice is read twice, so counted twice).
 */
export function parseRiskLists(text: string | undefined, catalog: NetworkCatalog, cwd: string) {
  const variable = 'LEDGERHOOK_RISK_LISTS';
  const lists: Record<string, string[]> = {};
  let count = 0;
  let bytes = 0;
  for (const entry of (text ?? '').split(';').filter((part) => part.trim() !== '')) {
    const m = /^([^=]+)=(.+)$/.exec(entry.trim());
    if (!m) throw new ConfigError(variable, `has "${entry.trim()}"; use NETWORK=/path/a.csv,/path/b.txt;…`);
    const network = networkName(catalog, m[1]!, variable);
    const files = m[2]!.split(',').map((file) => path.resolve(cwd, file.trim()));
    for (const file of files) {
      if (++count > RISK_LIST_LIMITS.files)
        throw new ConfigError(variable, `names more than ${RISK_LIST_LIMITS.files} files, the limit`);
      bytes += checkReadableFile(file, variable);
      if (bytes > RISK_LIST_LIMITS.bytes)
        throw new ConfigError(
          variable,
          `names ${file}, which brings the lists to ${bytes.toLocaleString('en-US')} bytes, over the limit of ${formatBytes(RISK_LIST_LIMITS.bytes)} for all of them (use LEDGERHOOK_RISK_URL for more)`,
        );
    }
    lists[network] = [...(lists[network] ?? []), ...files];
  }
  return lists;
}

/** The size of `file`, a regular file this process may read. */
function checkReadableFile(file: string, variable: string): number {
  const { size } = statRegularFile(file, variable, RISK_LIST_LIMITS.bytes);
  try {
    fs.accessSync(file, fs.constants.R_OK);
  } catch (err) {
    throw new ConfigError(
      variable,
      `names ${file}, which cannot be read (${(err as NodeJS.ErrnoException).code})`,
    );
  }
  return size;
}

function parseRiskUrl(text: string | undefined): string | undefined {
  const raw = text?.trim();
  if (!raw) return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('LEDGERHOOK_RISK_URL', 'is not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ConfigError('LEDGERHOOK_RISK_URL', `must use http:// or https:// (got "${url.protocol}")`);
  return raw;
}

/** The risk settings, or undefined when neither lists nor a URL is configured: no provider. */
export function parseRiskConfig(settings: RiskSettings, catalog: NetworkCatalog, cwd: string) {
  const networks = parseRiskNetworks(settings.networks, catalog);
  const lists = parseRiskLists(settings.lists, catalog, cwd);
  const url = parseRiskUrl(settings.url);
  for (const network of Object.keys(lists)) {
    if (!networks.includes(network))
      throw new ConfigError(
        'LEDGERHOOK_RISK_LISTS',
        `has lists for ${network}, which is not in LEDGERHOOK_RISK_NETWORKS (${networks.join(',')})`,
      );
  }
  if (Object.keys(lists).length === 0 && url === undefined) return undefined;
  const risk: RiskConfig = {
    networks,
    lists,
    url,
    token: settings.token?.trim() || undefined,
    timeoutMs: settings.timeoutMs,
    cacheTtlMs: settings.cacheTtlMs,
  };
  return risk;
}
