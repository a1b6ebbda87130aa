import { isInteger, parse } from 'lossless-json';
import { request } from 'undici';
import { UpstreamUnavailableError } from '../errors.js';

/**
 * JSON with every integer as a bigint and every other number as its exact decimal text, so that
 * amounts and ids beyond 2^53 survive (JSON.parse would round them through a float).
 */
export function parseExactJson(text: string): unknown {
  return parse(text, undefined, (value) => (isInteger(value) ? BigInt(value) : value));
}

export interface NodeResponse {
  status: number;
  /** The body parsed with parseExactJson, or undefined when it is not JSON. */
  json: unknown;
  text: string;
  /** The body's bytes, when asked for with `binary` (msgpack answers). */
  bytes?: Uint8Array;
}

export interface NodeRequest {
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  /** Text, or bytes as sent (algod's `POST /v2/transactions` takes msgpack). */
  body?: string | Uint8Array;
  timeoutMs?: number;
  /**
   * The body holds no number beyond 2^53 (Esplora's satoshi amounts and heights): parsed with
   * JSON.parse, which is an order of magnitude faster on a large block's pages.
   */
  plainJson?: boolean;
  /** Keep the body's bytes as well (`bytes`): a binary answer does not survive decoding as text. */
  binary?: boolean;
  /** Aborts the request (a long poll the caller no longer needs), besides the timeout. */
  signal?: AbortSignal;
}

/**
 * A request to a chain node or indexer. A node that cannot be reached, times out or answers 5xx
 * or 429 is an UpstreamUnavailableError (HTTP 503 with Retry-After); other answers are returned.
 */
export async function nodeRequest(url: string, options: NodeRequest = {}): Promise<NodeResponse> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const host = new URL(url).host;
  let status: number;
  let text: string;
  let bytes: Uint8Array | undefined;
  const timeout = AbortSignal.timeout(timeoutMs);
  try {
    const response = await request(url, {
      method: options.method ?? 'GET',
      headers: { accept: 'application/json', ...options.headers },
      body: options.body,
      signal: options.signal ? AbortSignal.any([timeout, options.signal]) : timeout,
    });
    status = response.statusCode;
    if (options.binary) {
      bytes = new Uint8Array(await response.body.arrayBuffer());
      text = Buffer.from(bytes).toString('utf8');
    } else text = await response.body.text();
  } catch (err) {
    if (options.signal?.aborted) throw options.signal.reason;
    const reason =
      (err as Error).name === 'TimeoutError'
        ? `did not answer within ${timeoutMs} ms`
        : 'could not be reached';
    throw new UpstreamUnavailableError(`The node at ${host} ${reason}`);
  }
  if (status >= 500 || status === 429) {
    throw new UpstreamUnavailableError(`The node at ${host} answered ${status}`);
  }
  let json: unknown;
  try {
    // A binary answer is JSON only when it is an error.
    const skip = text === '' || (bytes !== undefined && status === 200);
    json = skip ? undefined : options.plainJson ? JSON.parse(text) : parseExactJson(text);
  } catch {
    json = undefined;
  }
  return bytes ? { status, json, text, bytes } : { status, json, text };
}
