/**
 * viem's JSON-RPC transport over HTTP, on undici's `request` instead of the global `fetch`.
 *
 * viem's own `http()` builds every call on `fetch` (a Request, web streams, an AbortController
 * and a TimeoutError made in advance): about 600 µs of CPU a call on this project's machines,
 * against about 130 µs here, and a follower asks three a block (block, receipts, traces;
 * bench/README.md, "EVM calls on undici"). What a caller sees is what `http()` gives: the same
 * error classes (HttpRequestError, RpcRequestError, TimeoutError, ResponseBodyTooLargeError) with
 * the same fields, which viem then maps by JSON-RPC code as for any transport, and no retries.
 */
import { type Dispatcher, request } from 'undici';
import {
  createTransport,
  type EIP1193RequestFn,
  HttpRequestError,
  ResponseBodyTooLargeError,
  RpcRequestError,
  TimeoutError,
  type Transport,
} from 'viem';

/**
 * The largest answer read, in bytes. viem's default is 10 MB, which a mainnet block's traces can
 * pass; a node that answers without end is still cut off.
 */
export const MAX_RPC_RESPONSE_BYTES = 64 * 1024 * 1024;

export interface JsonRpcHttpOptions {
  /** The whole call, from sending to the body's last byte. */
  timeoutMs?: number;
  maxResponseBytes?: number;
}

interface RpcAnswer {
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

const isRpcError = (answer: unknown): answer is Required<Pick<RpcAnswer, 'error'>> => {
  const error = (answer as RpcAnswer | null)?.error;
  return typeof error?.code === 'number' && typeof error.message === 'string';
};

/** `user:password@` in the URL becomes Basic authorization, as viem's `http()` does. */
function splitCredentials(raw: string): { url: string; headers: Record<string, string> } {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const url = new URL(raw);
  if (url.username) {
    const credentials = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
    headers.authorization = `Basic ${Buffer.from(credentials).toString('base64')}`;
    url.username = '';
    url.password = '';
  }
  return { url: url.toString(), headers };
}

async function readText(body: Dispatcher.ResponseData['body'], maxBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) {
      body.destroy();
      throw new ResponseBodyTooLargeError({ maxSize: maxBytes, size });
    }
    chunks.push(chunk);
  }
  return chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks, size).toString('utf8');
}

let nextId = 0;

/** A viem transport for the JSON-RPC endpoint at `rawUrl` (one call a request, no batching). */
export function jsonRpcHttp(rawUrl: string, options: JsonRpcHttpOptions = {}): Transport {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const maxBytes = options.maxResponseBytes ?? MAX_RPC_RESPONSE_BYTES;
  const { url, headers } = splitCredentials(rawUrl);

  async function call(body: { method: string; params?: unknown }, signal?: AbortSignal): Promise<unknown> {
    const sent = JSON.stringify({ jsonrpc: '2.0', id: ++nextId, ...body });
    const timeout = AbortSignal.timeout(timeoutMs);
    let status: number;
    let responseHeaders: Headers | undefined;
    let text: string;
    try {
      const response = await request(url, {
        method: 'POST',
        headers,
        body: sent,
        signal: signal ? AbortSignal.any([timeout, signal]) : timeout,
      });
      status = response.statusCode;
      if (status < 200 || status > 299) responseHeaders = toHeaders(response.headers);
      text = await readText(response.body, maxBytes);
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (timeout.aborted) throw new TimeoutError({ body, url });
      if (err instanceof ResponseBodyTooLargeError) throw err;
      throw new HttpRequestError({ body, cause: err as Error, url });
    }
    let answer: unknown;
    try {
      answer = JSON.parse(text || '{}');
    } catch (err) {
      if (!responseHeaders) throw new HttpRequestError({ body, cause: err as Error, url });
      answer = { error: text };
    }
    if (responseHeaders) {
      if (isRpcError(answer)) {
        throw new RpcRequestError({ body, error: answer.error, headers: responseHeaders, status, url });
      }
      const details = (answer as RpcAnswer).error;
      throw new HttpRequestError({
        body,
        details: details === undefined ? String(status) : JSON.stringify(details),
        headers: responseHeaders,
        status,
        url,
      });
    }
    if (isRpcError(answer)) throw new RpcRequestError({ body, error: answer.error, url });
    return (answer as RpcAnswer).result;
  }

  return () =>
    createTransport(
      {
        key: 'http',
        name: 'JSON-RPC over undici',
        request: (({ method, params }, opts?: { signal?: AbortSignal }) =>
          call({ method, params }, opts?.signal)) as EIP1193RequestFn,
        retryCount: 0,
        timeout: timeoutMs,
        type: 'http',
      },
      { url },
    );
}

/** undici's response headers as a fetch `Headers` (what viem's errors and callers expect). */
export function toHeaders(raw: Record<string, string | string[] | undefined>): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else if (value !== undefined) headers.set(name, value);
  }
  return headers;
}
