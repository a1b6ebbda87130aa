/**
 * What the parts of the subscriptions service (creation.ts, lifecycle.ts, address-lists.ts,
 * secret-rotation.ts, test-notification.ts, delivery-log.ts, redelivery.ts) share: the
 * dependencies `createSubscriptions` is given, with their defaults resolved, built once.
 */
import type { NetworkCatalog } from '../chains/networks.js';
import type { Idempotency } from '../idempotency/service.js';
import type { Envelope } from '../secrets/envelope.js';
import type { Db } from '../store/db.js';
import type { SubscriptionChange } from './events.js';

export interface UrlChecker {
  /** Rejects URLs that are not http(s) or that resolve to addresses we will not call. */
  checkUrl(url: string): Promise<void>;
}

/** What `createSubscriptions` is given (service.ts). */
export interface SubscriptionsDeps {
  db: Db;
  envelope: Envelope;
  idempotency: Idempotency;
  networks: NetworkCatalog;
  urls: UrlChecker;
  /**
   * Called after a change that the watchers' in-memory address index must follow; awaited, so
   * the change is in force in this process before the request is answered.
   */
  onChange?: (change: SubscriptionChange) => void | Promise<void>;
  /** Marks this instance's NOTIFY payloads, which its own watchers skip (onChange applied them). */
  origin?: string;
  /**
   * Whether watchers of other processes may listen (PostgreSQL). Embedded PGlite admits one
   * process, whose watchers onChange keeps in step: a change is then not stored for others.
   */
  notifyOthers?: boolean;
  now?: () => Date;
}

/** The dependencies with their defaults resolved: the clock, and NOTIFY for other processes. */
export interface SubscriptionsContext {
  db: Db;
  envelope: Envelope;
  idempotency: Idempotency;
  networks: NetworkCatalog;
  urls: UrlChecker;
  onChange: SubscriptionsDeps['onChange'];
  origin: string | undefined;
  notifyOthers: boolean;
  now: () => Date;
}

export function createSubscriptionsContext(deps: SubscriptionsDeps): SubscriptionsContext {
  const { db, envelope, networks, urls, idempotency } = deps;
  return {
    db,
    envelope,
    idempotency,
    networks,
    urls,
    onChange: deps.onChange,
    origin: deps.origin,
    notifyOthers: deps.notifyOthers ?? true,
    now: deps.now ?? (() => new Date()),
  };
}
