/**
 * What the subscriptions service takes and answers: its kinds, inputs and views (re-exported by
 * service.ts, where callers import them).
 */
import type { SignatureScheme } from '../notify/signing.js';
import type { subscriptions } from './schema.js';

export const ADDRESS_TRANSACTION = 'ADDRESS_TRANSACTION';
export const REGISTRY_EVENTS = 'REGISTRY_EVENTS';
export const CONTRACT_LOG_EVENT = 'CONTRACT_LOG_EVENT';

export interface CreateSubscriptionInput {
  type: typeof ADDRESS_TRANSACTION | typeof CONTRACT_LOG_EVENT;
  /**
   * ADDRESS_TRANSACTION: `address` (one) or `addresses` (a list, managed by
   * /subscription/{id}/addresses). CONTRACT_LOG_EVENT: `event`, on `contractAddress` (one),
   * `addresses` (a list of contracts) or neither (any contract), `filter` on indexed arguments.
   */
  attr: {
    address?: string;
    addresses?: string[];
    chain: string;
    url: string;
    fees?: boolean;
    event?: unknown;
    contractAddress?: string;
    filter?: unknown;
  };
  mempool?: boolean;
  confirmations?: number;
  ack?: 'status' | '2xx';
  callbackToken?: string;
  /** hmac (the default) or ed25519. */
  signature?: SignatureScheme;
}

/** How a receiver checks a subscription's signatures: the one of these its scheme has. */
export type VerificationKey =
  /** hmac: the Standard Webhooks signing secret (whsec_…), shown only at creation and rotation. */
  | { secret: string }
  /** ed25519: the public key (whpk_…) of the `v1a` signatures, public and shown on every GET. */
  | { publicKey: string };

export type CreatedSubscription = {
  id: string;
  /** Sent as `Authorization: Bearer <callbackToken>` with every notification, shown only now. */
  callbackToken: string;
} & VerificationKey;

export interface AddressChangeInput {
  add?: string[];
  remove?: string[];
}

export interface AddressChangeResult {
  /** Addresses newly watched and no longer watched by this call (present or absent ones aside). */
  added: number;
  removed: number;
  addressCount: number;
}

export interface WatchedAddressView {
  address: string;
  createdAt: string;
}

export interface SubscriptionView {
  id: string;
  type: string;
  attr: {
    address?: string;
    addressCount?: number;
    chain?: string;
    url: string;
    registryId?: string;
    fees?: boolean;
    /** CONTRACT_LOG_EVENT: the event's ABI fragment, or the bare topic0 it was made with. */
    event?: object | string;
    /** CONTRACT_LOG_EVENT with an ABI: the canonical signature. */
    signature?: string;
    /** CONTRACT_LOG_EVENT: topic0 (null for an anonymous event). */
    topic0?: string | null;
    /** CONTRACT_LOG_EVENT with one contract. */
    contractAddress?: string;
    /** CONTRACT_LOG_EVENT: the filter as given (absent without one). */
    filter?: Record<string, unknown>;
    /** CONTRACT_LOG_EVENT: true when it follows the event on any contract. */
    anyContract?: boolean;
  };
  mempool: boolean;
  confirmations: number;
  ack: string;
  signature: SignatureScheme;
  /** ed25519 only: the `whpk_` key that verifies the `v1a` signatures. */
  publicKey?: string;
  /** active, disabled, or deleted (kept readable with its delivery log). */
  status: string;
  disabledReason: string | null;
  disabledAt: string | null;
  previousSecretExpiresAt: string | null;
  createdAt: string;
  deletedAt: string | null;
}

export interface AttemptView {
  attempt: number;
  trigger: string;
  startedAt: string;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
  response: string | null;
  outcome: string;
  nextAttemptAt: string | null;
}

export interface NotificationView {
  id: string;
  subscriptionId: string;
  eventType: string;
  state: string;
  attemptCount: number;
  nextAttemptAt: string | null;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: string;
  deliveredAt: string | null;
  payload: unknown;
  attempts: AttemptView[];
}

/** What a delivery log is narrowed to: a state, and a creation time from `since` (inclusive) to `until` (exclusive). */
export interface LogFilter {
  state?: string;
  since?: Date;
  until?: Date;
}

export type SubscriptionRow = typeof subscriptions.$inferSelect;
