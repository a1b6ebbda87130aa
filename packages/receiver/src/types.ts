/**
 * Names for the generated body types (openapi.ts), and the event type of a body, told from the
 * verified body itself rather than from the unsigned Ledgerhook-Event-Type header.
 */
import type { components } from './openapi.js';

type Schemas = components['schemas'];

/** Any body Ledgerhook delivers. */
export type WebhookEvent = Schemas['WebhookEvent'];
/** A transfer touching a watched address, on any chain (pending while `mempool: true`). */
export type AddressTransactionEvent = Schemas['AddressTransactionEvent'];
/** Takes back an earlier notification whose block left the chain. */
export type AddressTransactionReorgEvent = Schemas['AddressTransactionReorgEvent'];
/** A sample sent by POST /api/v1/subscription/{id}/test. */
export type TestEvent = Schemas['TestEvent'];
export type RegistryCreatedEvent = Schemas['RegistryCreatedEvent'];
export type RegistryAnchoredEvent = Schemas['RegistryAnchoredEvent'];
export type RegistryRevokedEvent = Schemas['RegistryRevokedEvent'];
export type RegistryEvent = RegistryCreatedEvent | RegistryAnchoredEvent | RegistryRevokedEvent;

/** The values of the Ledgerhook-Event-Type header. */
export type EventType =
  | 'address.transaction'
  | 'address.transaction.pending'
  | 'address.transaction.reorg'
  | 'test'
  | RegistryEvent['type'];

export function isRegistryEvent(event: WebhookEvent): event is RegistryEvent {
  return event.type.startsWith('registry.');
}

export function isReorg(event: WebhookEvent): event is AddressTransactionReorgEvent {
  return (event as { reorg?: unknown }).reorg === true;
}

export function isTest(event: WebhookEvent): event is TestEvent {
  return (event as { test?: unknown }).test === true;
}

/** What the Ledgerhook-Event-Type header says of this body. */
export function eventTypeOf(event: WebhookEvent): EventType {
  if (isRegistryEvent(event)) return event.type;
  if (isReorg(event)) return 'address.transaction.reorg';
  if (isTest(event)) return 'test';
  return event.mempool === true ? 'address.transaction.pending' : 'address.transaction';
}
