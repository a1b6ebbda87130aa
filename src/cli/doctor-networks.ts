/**
 * `ledgerhook doctor`'s network checks: which networks' nodes are asked, and what each line says.
 *
 * A network is checked when the service would use its node: a subscription uses it (the watcher
 * follows exactly those), registries are anchored on it, or its node was configured (a URL other
 * than the catalog's public default, or a network the catalog does not have). The other catalog
 * networks are named as not checked and never contacted, so a setup (or a test) that overrides the
 * networks it uses reaches no other host.
 */
import { AlgorandGenesisMismatchError } from '../chains/algorand/source.js';
import { loadNetworks, type Network } from '../chains/networks.js';
import type { Config } from '../config.js';
import type { FollowState } from '../watch/followed-networks.js';
import { type NodeProbe, probedUrls, probeNode } from '../watch/node-probe.js';
import { type Check, describeUnreachable, withDeadline } from './doctor-report.js';

/** A follower this many blocks (rounds, slots) behind its node's head is reported. */
export const LAG_WARNING_BLOCKS = 100;

export interface NetworkSelection {
  /** The networks to check, with why. */
  checked: { network: Network; why: string }[];
  /** Catalog networks left alone. */
  notChecked: string[];
  /** Networks that subscriptions name but the configuration no longer has. */
  unknownInUse: string[];
}

/** The nodes a network is read through, its tracing node included. */
const nodesOf = (network: Network): string =>
  [...probedUrls(network), ...(network.tracesRpcUrls ?? [])].join(',');

/** `inUse`: the networks of the subscriptions, undefined when the database could not be read. */
export function selectNetworks(config: Config, inUse: string[] | undefined): NetworkSelection {
  const builtIn = loadNetworks({});
  const used = new Set(inUse ?? []);
  const checked: NetworkSelection['checked'] = [];
  const notChecked: string[] = [];
  for (const network of config.networks.list()) {
    const catalog = builtIn.find(network.name);
    const why: string[] = [];
    if (used.has(network.name)) why.push('used by subscriptions');
    if (config.anchor.network && config.networks.find(config.anchor.network) === network)
      why.push('anchor network');
    if (!catalog || nodesOf(catalog) !== nodesOf(network)) why.push('node configured');
    if (why.length > 0) checked.push({ network, why: why.join(', ') });
    else notChecked.push(network.name);
  }
  const unknownInUse = [...used].filter((name) => !config.networks.find(name));
  return { checked, notChecked, unknownInUse };
}

/** The variable that sets the node a network is read through, to name in a failure. */
function nodeVariable(network: Network, env: Record<string, string | undefined>): string {
  const variable =
    network.family === 'algorand' && network.api === 'indexer'
      ? `LEDGERHOOK_INDEXER_${network.name}`
      : `LEDGERHOOK_RPC_${network.name}`;
  return env[variable]?.trim() || !env.LEDGERHOOK_CONFIG?.trim()
    ? variable
    : `${variable} or the network in LEDGERHOOK_CONFIG`;
}

type Probed = { url: string; probe: NodeProbe } | { url: string; failure: Check };

async function probe(network: Network, url: string, timeoutMs: number, variable: string): Promise<Probed> {
  const subject = `network ${network.name}`;
  try {
    // Two rounds at most (EVM: the chain id and head, then the traces), each within the timeout.
    const found = await withDeadline(probeNode(network, url, timeoutMs), 2 * timeoutMs + 500);
    if (network.chainId !== undefined && found.chainId !== undefined && found.chainId !== network.chainId)
      return {
        url,
        failure: {
          outcome: 'FAIL',
          subject,
          detail: `${url} is a node of chain ${found.chainId}, not of chain ${network.chainId} (${network.name})`,
          fix: `point ${variable} at a node of chain ${network.chainId}`,
        },
      };
    return { url, probe: found };
  } catch (err) {
    const otherNetwork = err instanceof AlgorandGenesisMismatchError;
    return {
      url,
      failure: {
        outcome: 'FAIL',
        subject,
        detail: otherNetwork ? `${url}: ${err.message}` : `${url} ${describeUnreachable(err, timeoutMs)}`,
        fix: otherNetwork
          ? `point ${variable} at a node of ${network.genesisId ?? 'the configured genesis'}`
          : `check ${variable}`,
      },
    };
  }
}

/** What the node's traces mean for internal transfers, and whether that is worth a warning. */
function tracesPart(
  network: Network,
  found: NodeProbe,
  timeoutMs: number,
): { text: string; concern?: Check['outcome']; fix?: string } {
  const traces = found.traces;
  if (!traces) return { text: '' };
  if (traces.setting === 'off') return { text: ', traces off (no internal transfers)' };
  const variable = `LEDGERHOOK_TRACES_RPC_${network.name} (tracesRpc)`;
  const tracer = traces.node === undefined ? 'the node' : `the tracing node ${traces.node}`;
  if (traces.otherChain !== undefined)
    return {
      text: `, ${tracer} is a node of chain ${traces.otherChain}`,
      concern: 'FAIL',
      fix: `point ${variable} at a node of chain ${network.chainId}`,
    };
  if (traces.error)
    return {
      text: `, traces could not be read (${tracer} ${describeUnreachable(traces.error, timeoutMs)})`,
      concern: 'warn',
      fix: `blocks whose traces keep failing for LEDGERHOOK_TRACE_WAIT are committed without their internal transfers (trace gaps)${traces.node === undefined ? '' : `: check ${variable}`}`,
    };
  if (traces.gap)
    return {
      text: `, ${tracer} cannot trace its latest block: ${traces.gap}`,
      concern: 'warn',
      fix: `blocks it cannot trace are committed without their internal transfers (trace gaps): name an archive or tracing node in ${variable}`,
    };
  const status = traces.status;
  const from = traces.node === undefined ? '' : ` from ${traces.node}`;
  if (status?.available) return { text: `, traces by ${status.method}${from}` };
  return {
    text: `, no traces: ${status?.reason ?? 'not answered'}`,
    // The operator asked for this method: without it, what they expect is not notified.
    concern: traces.setting === 'auto' ? 'warn' : 'FAIL',
    fix: `use a node that serves debug_traceBlockByNumber or trace_block, or set traces: off for ${network.name}`,
  };
}

/** How far the follower stands behind the node's head, from its stored cursor. */
function lagPart(
  name: string,
  head: number,
  follow: FollowState | undefined,
): { text: string; concern?: Check['outcome']; fix?: string } {
  if (!follow) return { text: ', follower position unknown (database not read)' };
  const cursor = follow.cursors[name];
  if (!cursor)
    return {
      text: follow.inUse.includes(name) ? ', not followed yet' : ', not followed (no subscription uses it)',
    };
  const behind = head - cursor.height;
  if (behind < 0)
    return {
      text: `, follower at ${cursor.height}: the node is ${-behind} behind it`,
      concern: 'warn',
      fix: 'is the node still syncing, or another node than before?',
    };
  if (behind > LAG_WARNING_BLOCKS)
    return {
      text: `, follower at ${cursor.height} (${behind} behind)`,
      concern: 'warn',
      fix: 'the follower is falling behind: see /readyz and ledgerhook_follower_lag_blocks',
    };
  return { text: `, follower at ${cursor.height} (${behind} behind)` };
}

/** One network's line: every node URL it is read through asked, the first failure (if any) reported. */
export async function checkNetwork(
  network: Network,
  why: string,
  follow: FollowState | undefined,
  timeoutMs: number,
  env: Record<string, string | undefined>,
): Promise<Check> {
  const variable = nodeVariable(network, env);
  const urls = probedUrls(network);
  if (urls.length === 0)
    return {
      outcome: 'FAIL',
      subject: `network ${network.name}`,
      detail: 'no node URL',
      fix: `set ${variable}`,
    };
  const results = await Promise.all(urls.map((url) => probe(network, url, timeoutMs, variable)));
  const failed = results.find((r): r is Extract<Probed, { failure: Check }> => 'failure' in r);
  if (failed) return failed.failure;
  const { probe: found } = results[0] as Extract<Probed, { probe: NodeProbe }>;
  const identity = found.chainId !== undefined ? `, chain ${found.chainId}` : '';
  const others = urls.length > 1 ? ` (and ${urls.length - 1} fallback URL(s), answering)` : '';
  const lag = lagPart(network.name, found.head, follow);
  const traces = tracesPart(network, found, timeoutMs);
  const concerns = [lag, traces].filter((p) => p.concern);
  const outcome = concerns.some((p) => p.concern === 'FAIL') ? 'FAIL' : concerns.length > 0 ? 'warn' : 'ok';
  return {
    outcome,
    subject: `network ${network.name}`,
    detail: `${found.url}${others}${identity}, head ${found.head}${lag.text}${traces.text} [${why}]`,
    ...(concerns.length > 0 ? { fix: concerns.map((p) => p.fix).join('; ') } : {}),
  };
}
