/**
 * A Solana JSON-RPC call over HTTP, shared by the lookup and the block source. A node that cannot
 * be reached, times out, answers 5xx/429 or something that is not a JSON-RPC answer is an
 * UpstreamUnavailableError; a JSON-RPC error is a SolanaRpcError carrying the node's code, so
 * that a caller can tell a skipped slot from a failure.
 */
import { UpstreamUnavailableError } from '../../errors.js';
import { nodeRequest, parseExactJson } from '../node-http.js';

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The node answered the call with a JSON-RPC error. */
export class SolanaRpcError extends UpstreamUnavailableError {
  constructor(
    host: string,
    method: string,
    readonly code: number | undefined,
    readonly detail: string,
  ) {
    super(`The node at ${host} answered an error to ${method}: ${detail}`);
  }
}

export interface SolanaRpcOptions {
  url: string;
  timeoutMs?: number;
}

export interface SolanaCallOptions {
  /**
   * Parse with JSON.parse (an order of magnitude faster on a block of thousands of
   * transactions); the caller checks that no number it reads went beyond 2^53 and, if one did,
   * parses `text` again with parseExactJson. Default: parsed exactly.
   */
  plainJson?: boolean;
}

export interface SolanaRpcAnswer {
  result: unknown;
  /** The body as received, for an exact second parse. */
  text: string;
}

export type SolanaCall = (
  method: string,
  params: unknown[],
  options?: SolanaCallOptions,
) => Promise<SolanaRpcAnswer>;

export function createSolanaRpc({ url, timeoutMs }: SolanaRpcOptions): { host: string; call: SolanaCall } {
  const host = new URL(url).host;
  const call: SolanaCall = async (method, params, options = {}) => {
    const res = await nodeRequest(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      timeoutMs,
      plainJson: options.plainJson,
    });
    if (res.status !== 200 || !isObject(res.json))
      throw new UpstreamUnavailableError(`The node at ${host} answered ${res.status} to ${method}`);
    const { error } = res.json;
    if (error !== undefined && error !== null) {
      const code =
        isObject(error) && (typeof error.code === 'number' || typeof error.code === 'bigint')
          ? Number(error.code)
          : undefined;
      const message =
        isObject(error) && typeof error.message === 'string' ? error.message : JSON.stringify(String(error));
      throw new SolanaRpcError(host, method, code, message);
    }
    if (!('result' in res.json))
      throw new UpstreamUnavailableError(`The node at ${host} answered ${method} without a result`);
    return { result: res.json.result, text: res.text };
  };
  return { host, call };
}

/** The answer's result parsed again with every integer exact (see SolanaCallOptions.plainJson). */
export function exactResult(answer: SolanaRpcAnswer): unknown {
  const body = parseExactJson(answer.text);
  return isObject(body) ? body.result : undefined;
}
