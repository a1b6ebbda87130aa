import type { Dispatcher } from 'undici';

/** What one POST came to: the status and at most the first `maxResponseBytes` of the answer. */
export interface PostResponse {
  statusCode: number;
  body: string;
  /** The `retry-after` header, when the answer had one. */
  retryAfter: string | undefined;
}

export interface PostTarget {
  origin: string;
  path: string;
}

/** A POST in flight: its outcome, and how to stop it (it then rejects with `reason`). */
export interface PostInFlight {
  done: Promise<PostResponse>;
  abort(reason: Error): void;
}

const targets = new Map<string, PostTarget>();
/** Endpoints are few and reused; the bound only keeps a stream of distinct URLs from growing it. */
const MAX_TARGETS = 10_000;

/** The origin and path undici dispatches to, parsed once per URL. */
export function postTarget(url: string): PostTarget {
  let target = targets.get(url);
  if (!target) {
    const parsed = new URL(url);
    target = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}` };
    if (targets.size >= MAX_TARGETS) targets.clear();
    targets.set(url, target);
  }
  return target;
}

/**
 * One POST through undici's `dispatch`, keeping the answer's first bytes. undici's `request()` wraps
 * every answer in a Readable stream and its headers in an object; for a webhook whose answer is a
 * few bytes that wrapping cost about 25 µs of CPU of the ~70 µs a POST costs (bench/README.md,
 * bench:delivery), the largest single share of the dispatcher's time. A longer answer is cut at
 * `maxResponseBytes` and the connection dropped, as before, so a receiver cannot make us read a
 * gigabyte. A character cut in two at the limit is dropped.
 */
export function dispatchPost(
  dispatcher: Dispatcher,
  target: PostTarget,
  headers: Record<string, string>,
  body: string,
  maxResponseBytes: number,
): PostInFlight {
  let controller: Dispatcher.DispatchController | undefined;
  let pendingAbort: Error | undefined;
  let settled = false;
  let statusCode = 0;
  let retryAfter: string | undefined;
  let first: Buffer | undefined;
  let more: Buffer[] | undefined;
  let size = 0;
  let resolve!: (value: PostResponse) => void;
  let reject!: (err: Error) => void;
  const done = new Promise<PostResponse>((res, rej) => {
    resolve = res;
    reject = rej;
  });

  function text(cut: boolean): string {
    const bytes = more ? Buffer.concat(more) : first;
    if (!bytes) return '';
    return cut ? new TextDecoder().decode(bytes, { stream: true }) : bytes.toString('utf8');
  }

  function finish(cut: boolean): void {
    if (settled) return;
    settled = true;
    resolve({ statusCode, body: text(cut), retryAfter });
  }

  function fail(err: Error): void {
    if (settled) return;
    settled = true;
    reject(err);
  }

  const handler: Dispatcher.DispatchHandler = {
    onRequestStart(c) {
      controller = c;
      if (pendingAbort) c.abort(pendingAbort);
    },
    onResponseStart(_c, status, responseHeaders) {
      statusCode = status;
      const value = responseHeaders['retry-after'];
      retryAfter = Array.isArray(value) ? value[0] : value;
    },
    onResponseData(c, chunk) {
      if (settled) return;
      const room = maxResponseBytes - size;
      const kept = room < chunk.length ? chunk.subarray(0, room) : chunk;
      size += kept.length;
      if (first === undefined) first = kept;
      else {
        more ??= [first];
        more.push(kept);
      }
      if (room < chunk.length) {
        finish(true);
        c.abort(new Error('response longer than kept'));
      }
    },
    onResponseEnd() {
      finish(false);
    },
    onResponseError(_c, err) {
      fail(err);
    },
  };

  try {
    dispatcher.dispatch({ origin: target.origin, path: target.path, method: 'POST', headers, body }, handler);
  } catch (err) {
    fail(err as Error);
  }

  return {
    done,
    abort(reason) {
      if (settled) return;
      // Before undici has started the request (queued, or connecting) it cannot be aborted yet:
      // the caller is answered now, and the request is stopped as soon as it starts.
      if (controller) controller.abort(reason);
      else pendingAbort = reason;
      fail(reason);
    },
  };
}
