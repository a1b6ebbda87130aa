/**
 * java-tron's HTTP API (`/wallet/*`), as TronGrid and any full node serve it: every call a POST
 * of a JSON body, addresses in hex (`visible` false), integers kept exact. A node that cannot be
 * reached, times out, answers 5xx or 429, refuses the network's API key, or answers `{"Error"}`
 * is unavailable for this call; the caller retries.
 */
import { UpstreamUnavailableError } from '../../errors.js';
import { nodeRequest } from '../node-http.js';

export interface TronApiOptions {
  /** The node's base URL, e.g. https://api.trongrid.io. */
  url: string;
  /** Sent with every request (TronGrid's `TRON-PRO-API-KEY`). */
  headers?: Record<string, string>;
  /** Per request, default 10 s. */
  timeoutMs?: number;
}

export interface TronApi {
  /** The node's host (and port), for messages. */
  host: string;
  /**
   * POSTs `body` to `path` and resolves with the answer, parsed by JSON.parse unless `exact`
   * (integers as bigint, for an answer JSON.parse would round); undefined for a 404 when
   * `missingOk` (a path this node's version does not serve).
   */
  call(path: string, body: Record<string, unknown>, options?: TronCallOptions): Promise<unknown>;
}

export interface TronCallOptions {
  exact?: boolean;
  missingOk?: boolean;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

export function createTronApi(options: TronApiOptions): TronApi {
  const base = options.url.replace(/\/+$/, '');
  const host = new URL(base).host;
  const headers = { 'content-type': 'application/json', ...options.headers };
  return {
    host,
    async call(path, body, { exact = false, missingOk = false } = {}) {
      const res = await nodeRequest(`${base}${path}`, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        timeoutMs: options.timeoutMs,
        plainJson: !exact,
      });
      if (res.status === 404 && missingOk) return undefined;
      if (res.status === 401 || res.status === 403)
        throw new UpstreamUnavailableError(
          `The node at ${host} refused ${path} (${res.status}): check the network's headers (API key)`,
        );
      if (res.status !== 200)
        throw new UpstreamUnavailableError(`The node at ${host} answered ${res.status} to ${path}`);
      if (res.json === undefined)
        throw new UpstreamUnavailableError(
          `The node at ${host} answered ${path} with a body that is not JSON`,
        );
      if (isObject(res.json) && typeof res.json.Error === 'string')
        throw new UpstreamUnavailableError(
          `The node at ${host} answered ${path}: ${res.json.Error.slice(0, 200)}`,
        );
      return res.json;
    },
  };
}
