/**
 * One line saying what went wrong with a chain node, for operators (/readyz `lastError`, logs):
 * which node (its host and port only: a node's URL may carry an API key in its path, query or
 * user part) and how: the HTTP status it answered, the connection error (refused, reset, timed
 * out, DNS), a JSON-RPC error. viem wraps all of these in an error whose message is only "HTTP
 * request failed."; the facts sit in its fields and in the `cause` chain (fetch's TypeError, then
 * Node's system error with its code).
 */
import { BaseError, HttpRequestError, RpcRequestError, TimeoutError, WebSocketRequestError } from 'viem';

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

/** One line naming the node and what failed; the error's own first line when it is not the node's. */
export function describeNodeError(err: unknown): string {
  const errors = chain(err);
  let host: string | undefined;
  for (const e of errors) {
    if (e instanceof HttpRequestError || e instanceof TimeoutError || e instanceof WebSocketRequestError) {
      host ??= hostOf(e.url);
    } else if (e instanceof RpcRequestError) host ??= hostOf(e.url);
  }
  const at = (what: string, where = host) => (where ? `The node at ${where} ${what}` : `The node ${what}`);

  for (const e of errors) {
    if (e instanceof HttpRequestError && e.status !== undefined) return at(`answered HTTP ${e.status}`);
    if (e instanceof RpcRequestError && e.status !== undefined && e.status >= 400) {
      return at(`answered HTTP ${e.status}`);
    }
    if (e instanceof TimeoutError) return at('did not answer in time');
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
    return at(`${what} (${code})`, host ?? socket);
  }
  for (const e of errors) {
    if (e instanceof RpcRequestError) {
      const details = typeof e.details === 'string' && e.details ? `: ${e.details.split('\n')[0]}` : '';
      return at(`answered JSON-RPC error ${e.code}${details}`);
    }
  }
  if (host && errors.some((e) => e instanceof HttpRequestError || e instanceof WebSocketRequestError)) {
    return at(`could not be reached (${firstLine(errors[errors.length - 1])})`);
  }
  return firstLine(err);
}
