/**
 * What went wrong with a chain node, in our own words, for two readers: operators
 * (`describeNodeError`: /readyz `lastError`, logs, worded as docs/watching-chains.md shows), naming
 * the node by host and port only (its URL may carry an API key); and API clients (`nodeUnavailable`,
 * the one way a node's failure reaches them), naming the network, never the node's address, what it
 * said or a library's message. viem's message is only "HTTP request failed." (its full message
 * quotes the URL and the request); the facts are in its fields and its `cause` chain (fetch's
 * TypeError, then Node's system error with its code).
 */
import { BaseError, HttpRequestError, RpcRequestError, TimeoutError, WebSocketRequestError } from 'viem';
import { AppError, UpstreamUnavailableError } from '../errors.js';
import { urlSecretRedactor } from '../shared/url-secrets.js';
import type { Network } from './networks.js';

/** What a Node system error code means, as the end of "The node at HOST …". */
const CONNECTION_ERRORS: Record<string, string> = {
  ECONNREFUSED: 'refused the connection',
  ECONNRESET: 'reset the connection',
  EPIPE: 'closed the connection',
  UND_ERR_SOCKET: 'closed the connection',
  ETIMEDOUT: 'did not accept the connection in time',
  UND_ERR_CONNECT_TIMEOUT: 'did not accept the connection in time',
  UND_ERR_HEADERS_TIMEOUT: 'did not answer in time',
  UND_ERR_BODY_TIMEOUT: 'did not answer in time',
  ENOTFOUND: 'was not found by DNS',
  EAI_AGAIN: 'could not be resolved by DNS for now',
  EHOSTUNREACH: 'is unreachable',
  ENETUNREACH: 'is unreachable (no route to its network)',
  CERT_HAS_EXPIRED: 'presented an expired TLS certificate',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'presented a self-signed TLS certificate',
  ERR_TLS_CERT_ALTNAME_INVALID: 'presented a TLS certificate for another name',
};

interface SystemError {
  code?: unknown;
  address?: unknown;
  port?: unknown;
  hostname?: unknown;
  cause?: unknown;
  errors?: unknown;
}

/** Every error in `err`'s cause chain (and AggregateError members), outermost first. */
function chain(err: unknown): unknown[] {
  const seen: unknown[] = [];
  const visit = (e: unknown) => {
    if (typeof e !== 'object' || e === null || seen.includes(e) || seen.length > 32) return;
    seen.push(e);
    const { cause, errors } = e as SystemError;
    visit(cause);
    if (Array.isArray(errors)) for (const member of errors) visit(member);
  };
  visit(err);
  return seen;
}

/** The host (and port) of a URL; undefined when it is not one. */
function hostOf(url: unknown): string | undefined {
  if (typeof url !== 'string') return undefined;
  try {
    return new URL(url).host || undefined;
  } catch {
    return undefined;
  }
}

function firstLine(err: unknown): string {
  const text = err instanceof BaseError ? err.shortMessage : err instanceof Error ? err.message : String(err);
  return text.split('\n')[0] || 'error';
}

/** Where a node failure happened (its host, when known) and what it was, in our own words. */
interface NodeFailure {
  host: string | undefined;
  /** The end of "The node …": "refused the connection (ECONNREFUSED)", "answered HTTP 503". */
  what: string;
  /** What the node itself said (a JSON-RPC error's message): for operators, not for clients. */
  said?: string;
}

/** A failure of a node's transport recognised in `err`'s cause chain, or undefined. */
function classify(err: unknown): NodeFailure | undefined {
  const errors = chain(err);
  let host: string | undefined;
  for (const e of errors) {
    if (e instanceof HttpRequestError || e instanceof TimeoutError || e instanceof WebSocketRequestError) {
      host ??= hostOf(e.url);
    } else if (e instanceof RpcRequestError) host ??= hostOf(e.url);
  }
  for (const e of errors) {
    if (e instanceof HttpRequestError && e.status !== undefined)
      return { host, what: `answered HTTP ${e.status}` };
    if (e instanceof RpcRequestError && e.status !== undefined && e.status >= 400) {
      return { host, what: `answered HTTP ${e.status}` };
    }
    if (e instanceof TimeoutError) return { host, what: 'did not answer in time' };
  }
  for (const e of errors) {
    const { code, address, port, hostname } = e as SystemError;
    if (typeof code !== 'string' || !/^[A-Z][A-Z0-9_]+$/.test(code)) continue;
    // The URL's host names what was configured; the socket's address serves when there is none.
    const socket =
      typeof address === 'string'
        ? `${address}${typeof port === 'number' ? `:${port}` : ''}`
        : typeof hostname === 'string'
          ? hostname
          : undefined;
    const what = CONNECTION_ERRORS[code] ?? 'could not be reached';
    return { host: host ?? socket, what: `${what} (${code})` };
  }
  for (const e of errors) {
    if (e instanceof RpcRequestError) {
      const said = typeof e.details === 'string' ? e.details.split('\n')[0] : undefined;
      return { host, what: `answered JSON-RPC error ${e.code}`, said };
    }
  }
  if (errors.some((e) => e instanceof HttpRequestError || e instanceof WebSocketRequestError)) {
    return { host, what: 'could not be reached' };
  }
  return undefined;
}

/**
 * True when `err` is a chain node's failure: a viem transport or JSON-RPC error, or our own
 * UpstreamUnavailableError. A database's refused connection has the same code and is not one.
 */
export function isNodeError(err: unknown): boolean {
  return chain(err).some((e) => e instanceof BaseError || e instanceof UpstreamUnavailableError);
}

/** One line naming the node and what failed; the error's own first line when it is not the node's. */
export function describeNodeError(err: unknown): string {
  const failure = classify(err);
  if (!failure) return firstLine(err);
  const at = failure.host ? `The node at ${failure.host}` : 'The node';
  return `${at} ${failure.what}${failure.said ? `: ${failure.said}` : ''}`;
}

/** describeNodeError without the node's host: what is kept in the database and may reach a client. */
export function describeNodeFailure(err: unknown): string {
  const failure = classify(err);
  if (!failure) return firstLine(err);
  return `The node ${failure.what}${failure.said ? `: ${failure.said}` : ''}`;
}

/** Where a network's nodes are reached. */
type NodeUrls = Pick<Network, 'rpcUrls' | 'wsUrls' | 'indexerUrls'> & Partial<Pick<Network, 'tracesRpcUrls'>>;

/** Every URL a network's nodes are reached at. */
function nodeUrls(network: NodeUrls): string[] {
  return [...network.rpcUrls, ...network.wsUrls, ...network.indexerUrls, ...(network.tracesRpcUrls ?? [])];
}

const redactors = new WeakMap<object, (text: string) => string>();

/** Blanks the secret parts of the network's node URLs (path, query, user, password) out of a text. */
export function redactNodeUrls(network: NodeUrls, text: string): string {
  let redact = redactors.get(network);
  if (!redact) {
    redact = urlSecretRedactor(nodeUrls(network)) ?? ((t) => t);
    redactors.set(network, redact);
  }
  return redact(text);
}

/**
 * The one way a node's failure reaches an API client: which network's node failed and how, in our
 * own words, never its address (host, path, query, credentials) nor a library's message. The
 * original error stays in `cause`, for the log.
 */
export function nodeUnavailable(
  network: NodeUrls & Pick<Network, 'name'>,
  err: unknown,
): UpstreamUnavailableError {
  let reason: string;
  const failure = classify(err);
  if (failure) reason = `The node ${failure.what}`;
  else if (err instanceof AppError) {
    // Our own words, which may name the node's host: the client learns that a node failed, not where.
    reason = firstLine(err);
    for (const url of nodeUrls(network)) {
      let host: string;
      try {
        host = new URL(url).host;
      } catch {
        continue;
      }
      if (host) reason = reason.split(` at ${host}`).join('').split(host).join('the node');
    }
    reason = redactNodeUrls(network, reason);
  } else reason = 'The node failed unexpectedly';
  const wrapped = new UpstreamUnavailableError(
    `The ${network.name} node is unavailable: ${reason}`,
    err instanceof UpstreamUnavailableError ? err.retryAfterSeconds : undefined,
  );
  wrapped.cause = err;
  return wrapped;
}

/** Whether any error of the chain (viem's causes, or the error alone) is an object `test` accepts. */
function someInChain(err: unknown, test: (e: object) => boolean): boolean {
  const errors: unknown[] = [];
  if (err instanceof BaseError) {
    err.walk((e) => {
      errors.push(e);
      return false;
    });
  } else errors.push(err);
  return errors.some((e) => typeof e === 'object' && e !== null && test(e));
}

const METHOD_UNAVAILABLE =
  /method.{0,40}(not found|not supported|unsupported|does not exist|not available|not allowed)|unsupported method|unknown method/i;

/** Whether an error says the node does not offer the method (rather than failing to answer). */
export function isMethodUnavailable(err: unknown): boolean {
  return someInChain(err, (e) => {
    const { code, details, message } = e as { code?: unknown; details?: unknown; message?: unknown };
    if (code === -32601 || code === -32004) return true;
    return [details, message].some((text) => typeof text === 'string' && METHOD_UNAVAILABLE.test(text));
  });
}

/**
 * What nodes and providers answer when an `eth_getLogs` range holds more than they serve at once
 * (Infura, Polygon: "query returned more than 10000 results"; reth: "query exceeds max results
 * 20000" / "max block range"; Alchemy: "Log response size exceeded"; BSC: "exceed maximum block
 * range: 5000"; Moonbeam, Ankr: "block range is too wide"; QuickNode: "limited to a 10,000 block
 * range"; Chainstack: "Block range limit exceeded"; some: "query timeout exceeded"). Rate limits
 * ("request rate exceeded", "capacity") are not among them: a smaller range would not help.
 */
const LOG_RANGE_TOO_LARGE = new RegExp(
  [
    'more than [\\d,]+ (results|logs|entries)',
    'too many (results|logs)',
    'response size',
    'exceeds? (the )?(max|maximum)\\b',
    'exceeded max(imum)? (block )?(range|results)',
    'max(imum)? (block )?range',
    '(block )?range (is )?too (large|wide|big)',
    'range limit',
    'limited to (a |an )?[\\d,]+',
    'query timeout',
  ].join('|'),
  'i',
);

/**
 * Whether a node refused an `eth_getLogs` request because its range holds too much (too many blocks
 * or too many logs): the same query over a smaller range may pass.
 */
export function isLogRangeTooLarge(err: unknown): boolean {
  return someInChain(err, (e) => {
    // Its words, wherever it said them: a JSON-RPC error, or the body of an HTTP 4xx some providers
    // answer with; a failure to reach it says none of them.
    const { details, message } = e as { details?: unknown; message?: unknown };
    return [details, message].some((text) => typeof text === 'string' && LOG_RANGE_TOO_LARGE.test(text));
  });
}

/**
 * What EVM clients answer when they keep a block but no longer the state it ran on, so cannot trace
 * it (the messages: docs/internal-transfers.md#when-the-node-cannot-trace-a-block). Their sources:
 * geth eth/state_accessor.go ("… (reexec=128)"), trie.MissingNodeError, and the path scheme, also
 * "historical state 0x… is not available" once it keeps state history; reth
 * ProviderError::StateAtBlockPruned and EIP-4444 (code 4444); erigon 3 state.PrunedError;
 * nethermind's trace and debug modules (-32002), and before that check "MissingTrieNodeException:
 * Node … is missing from the DB".
 */
const STATE_UNAVAILABLE = new RegExp(
  [
    'required historical state unavailable',
    'historical state (0x[0-9a-f]+ )?(is )?not available',
    'missing trie node',
    'state at block #?\\d+ is pruned',
    'pruned history unavailable',
    'not available due to pruning',
    'no state available for block',
    'is missing from the db',
  ].join('|'),
  'i',
);

/** Whether a node refused a request because it no longer has the state of that block (pruned). */
export function isStateUnavailable(err: unknown): boolean {
  return someInChain(err, (e) => {
    const { code, details, message, data } = e as {
      code?: unknown;
      details?: unknown;
      message?: unknown;
      data?: unknown;
    };
    if (code === 4444) return true;
    return [details, message, data].some((text) => typeof text === 'string' && STATE_UNAVAILABLE.test(text));
  });
}
