/**
 * `ledgerhook listen --forward-to URL`: for local development, reads the account's notifications
 * from the pull feed (GET /api/v1/events, long-polled) as they are committed, and POSTs each to a
 * local URL signed per Standard Webhooks with a secret of its own, printing a line per delivery.
 * It only makes outbound requests, so it works behind NAT with nothing to expose.
 *
 * It does not retry: a receiver that is down gets a printed failure and the next event, as a
 * developer restarting a server would want; replaying is `--after` with a cursor printed earlier.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { parse, stringify } from 'lossless-json';
import { Agent, request } from 'undici';
import type { Config } from '../config.js';
import { LedgerhookError } from '../errors.js';
import { dispatchPost, postTarget } from '../notify/http-post.js';
import { newWebhookSecret, signWebhook, webhookKey } from '../notify/signing.js';
import { packageVersion } from '../version.js';
import { type CommandValues, serviceApi } from './service-api.js';
import { UsageError } from './usage.js';

export interface ListenOptions {
  /** The service's base URL and an API token of the account. */
  url: string;
  token: string;
  forwardTo: string;
  subscription?: string;
  /** A `whsec_` secret to sign with; a new one is made (and printed) without it. */
  secret?: string;
  /** Start after this feed cursor rather than at the end of the feed. */
  after?: string;
  /** Delivery lines and the banner. */
  out(line: string): void;
  /** Trouble with the service. */
  err(line: string): void;
  /** Ends listening (Ctrl-C, SIGTERM): the long-poll and a forward in flight are cut short. */
  signal: AbortSignal;
}

const WAIT_SECONDS = 30;
/** A local receiver gets this long to answer; longer would hold up every event after it. */
const FORWARD_TIMEOUT_MS = 10_000;
const MAX_SERVICE_BACKOFF_MS = 30_000;

interface FeedItem {
  id: string;
  eventType: string;
  payload: unknown;
}
interface FeedPage {
  data: FeedItem[];
  next_cursor: string;
}

/** The service said no in a way that waiting will not change (bad token, unknown subscription). */
class ServiceRefused extends LedgerhookError {}

function checkForwardTo(forwardTo: string): string {
  let parsed: URL;
  try {
    parsed = new URL(forwardTo);
  } catch {
    throw new UsageError(`--forward-to ${forwardTo} is not a URL; e.g. http://localhost:3000/hooks`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new UsageError(`--forward-to must be an http:// or https:// URL, not ${parsed.protocol}`);
  return parsed.href;
}

function checkSecret(secret: string | undefined): string {
  if (secret === undefined) return newWebhookSecret();
  const key = secret.slice('whsec_'.length);
  if (!secret.startsWith('whsec_') || !/^[A-Za-z0-9+/]+={0,2}$/.test(key) || webhookKey(secret).length < 16)
    throw new UsageError(
      '--secret must be a whsec_ secret (whsec_ and base64 of 16 bytes or more), as listen prints',
    );
  return secret;
}

/** The problem details' detail of an API error answer, or the status alone. */
function describeAnswer(status: number, text: string): string {
  try {
    const problem = JSON.parse(text) as {
      detail?: string;
      errors?: { detail: string; parameter?: string }[];
    };
    const fields = (problem.errors ?? []).map((e) => `${e.parameter ?? ''} ${e.detail}`.trim());
    return [problem.detail, ...fields].filter(Boolean).join('; ') || `HTTP ${status}`;
  } catch {
    return `HTTP ${status}`;
  }
}

/** A network failure in a few words: its code (ECONNREFUSED, UND_ERR_HEADERS_TIMEOUT…) or message. */
function describeError(err: unknown): string {
  const e = err as { code?: string; message?: string; cause?: { code?: string } };
  return e.code ?? e.cause?.code ?? e.message ?? String(err);
}

const clock = () => new Date().toTimeString().slice(0, 8);

export async function runListen(o: ListenOptions): Promise<number> {
  const forwardTo = checkForwardTo(o.forwardTo);
  const secret = checkSecret(o.secret);
  const key = webhookKey(secret);
  const base = `${o.url.replace(/\/$/, '')}/api/v1/events`;
  // Separate pools: the long-poll waits 30 s for an answer, a forward gets 10 s.
  const service = new Agent();
  const local = new Agent({
    connect: { timeout: 5_000 },
    headersTimeout: FORWARD_TIMEOUT_MS,
    bodyTimeout: FORWARD_TIMEOUT_MS,
  });
  const userAgent = `ledgerhook-listen/${packageVersion()}`;

  async function page(after: string | undefined, limit: number, wait: number): Promise<FeedPage> {
    const query = new URLSearchParams({ limit: String(limit), wait: String(wait) });
    if (after !== undefined) query.set('after', after);
    if (o.subscription !== undefined) query.set('subscription', o.subscription);
    const res = await request(`${base}?${query}`, {
      dispatcher: service,
      headers: { authorization: `Bearer ${o.token}`, 'user-agent': userAgent },
      signal: o.signal,
    });
    const text = await res.body.text();
    if (res.statusCode === 200) return parse(text) as FeedPage;
    const why = `the service answered ${res.statusCode}: ${describeAnswer(res.statusCode, text)}`;
    if (res.statusCode >= 500 || res.statusCode === 429) throw new Error(why);
    throw new ServiceRefused(why);
  }

  /**
   * Where to start: after the cursor given (checked with the service now, not at the first event),
   * else at the end of the feed (`after=now`), so that listening starts from now. Events committed
   * while that first request ran come with it, to be forwarded first.
   */
  async function start(): Promise<{ cursor: string; events: FeedItem[] }> {
    if (o.after !== undefined) {
      await page(o.after, 1, 0);
      return { cursor: o.after, events: [] };
    }
    const p = await page('now', 100, 0);
    return { cursor: p.next_cursor, events: p.data };
  }

  async function forward(event: FeedItem): Promise<void> {
    const body = stringify(event.payload) ?? 'null';
    const headers = {
      'content-type': 'application/json',
      'user-agent': userAgent,
      'ledgerhook-event-type': event.eventType,
      // webhook-id is the notification's id, as the service sends it: receivers deduplicate by it.
      ...signWebhook(event.id, Math.floor(Date.now() / 1000), body, [key]),
    };
    const started = performance.now();
    const post = dispatchPost(local, postTarget(forwardTo), headers, body, 1_024);
    const stop = () => post.abort(new Error('stopped'));
    o.signal.addEventListener('abort', stop);
    let outcome: string;
    try {
      outcome = String((await post.done).statusCode);
    } catch (err) {
      if (o.signal.aborted) return;
      outcome = `failed (${describeError(err)})`;
    } finally {
      o.signal.removeEventListener('abort', stop);
    }
    const ms = Math.round(performance.now() - started);
    o.out(`${clock()}  ${event.id}  ${event.eventType}  ${outcome}  ${ms}ms`);
  }

  let cursor: string;
  let first: FeedItem[];
  try {
    try {
      ({ cursor, events: first } = await start());
    } catch (err) {
      if (o.signal.aborted) return 0;
      // At the start a failure is a setup mistake (URL, token, subscription): say it and stop.
      o.err(
        `ledgerhook: cannot listen: ${err instanceof ServiceRefused ? err.message : `${base}: ${describeError(err)}`}`,
      );
      return 1;
    }
    const which = o.subscription ? `subscription ${o.subscription}` : 'every subscription of the account';
    o.out(`Forwarding the events of ${which} to ${forwardTo}`);
    o.out(`Signing secret: ${secret}${o.secret ? '' : '  (pass it as --secret to keep it next time)'}`);
    o.out(`Starting after cursor ${cursor}. Ctrl-C to stop.`);

    for (const event of first) {
      if (o.signal.aborted) break;
      await forward(event);
    }
    let backoff = 1_000;
    while (!o.signal.aborted) {
      let p: FeedPage;
      try {
        p = await page(cursor, 100, WAIT_SECONDS);
        backoff = 1_000;
      } catch (err) {
        if (o.signal.aborted) break;
        if (err instanceof ServiceRefused) {
          o.err(`ledgerhook: ${err.message}`);
          return 1;
        }
        o.err(
          `ledgerhook: reading the events failed (${describeError(err)}); trying again in ${backoff / 1000}s`,
        );
        await sleep(backoff, undefined, { signal: o.signal }).catch(() => {});
        backoff = Math.min(backoff * 2, MAX_SERVICE_BACKOFF_MS);
        continue;
      }
      for (const event of p.data) {
        if (o.signal.aborted) break;
        await forward(event);
      }
      // Stopped within a page: the cursor stays before it, so going on from there may send some
      // of its events again, with the same webhook-id, which receivers deduplicate.
      if (!o.signal.aborted) cursor = p.next_cursor;
    }
    o.out(`Stopped. To go on from here: --after ${cursor}`);
    return 0;
  } finally {
    await Promise.all([service.destroy(), local.destroy()]);
  }
}

/** `listen` from the command line, until SIGINT or SIGTERM ends it (a second signal exits at once). */
export async function listenCommand(values: CommandValues, config: Config): Promise<number> {
  const api = serviceApi('listen', values, config.port);
  const stop = new AbortController();
  const onSignal = () => {
    if (stop.signal.aborted) process.exit(130);
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await runListen({
      ...api,
      // The command line requires it (usage.ts).
      forwardTo: values['forward-to']!,
      subscription: values.subscription,
      secret: values.secret,
      after: values.after,
      out: (line) => process.stdout.write(`${line}\n`),
      err: (line) => process.stderr.write(`${line}\n`),
      signal: stop.signal,
    });
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
