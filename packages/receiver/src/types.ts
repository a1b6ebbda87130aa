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
/**
 * Takes back an earlier pending announcement (`mempool: true`) whose transaction can no longer be
 * mined: the announced body with a new `id`, `dropped: true` and, when known, `replacedBy`.
 */
export type AddressTransactionDroppedEvent = Schemas['AddressTransactionDroppedEvent'];
/**
 * A log matched by a contract event subscription (CONTRACT_LOG_EVENT): the contract, transaction,
 * block and log index, the raw `topics` and `data`, and, unless the subscription was made with a
 * bare topic0, the event's name, canonical `signature` and `args` decoded by name.
 */
export type ContractLogEvent = Schemas['ContractLogEvent'];
/** Takes back an earlier `contract.log` whose block left the chain: the same body, a new `id`, `reorg: true`. */
export type ContractLogReorgEvent = ContractLogEvent & { reorg: true };
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
  | 'address.transaction.dropped'
  | 'contract.log'
  | 'contract.log.reorg'
  | 'test'
  | RegistryEvent['type'];

export function isRegistryEvent(event: WebhookEvent): event is RegistryEvent {
  return 'type' in event && event.type.startsWith('registry.');
}

/** A contract event (`contract.log`, or its withdrawal `contract.log.reorg`): it names a contract and carries topics. */
export function isContractLog(event: WebhookEvent): event is ContractLogEvent {
  return 'contractAddress' in event && 'topics' in event;
}

/** A transfer touching a watched address (a withdrawal or a sample included): neither a contract event nor a registry's. */
export function isAddressTransaction(
  event: WebhookEvent,
): event is
  | AddressTransactionEvent
  | AddressTransactionReorgEvent
  | AddressTransactionDroppedEvent
  | TestEvent {
  return !isRegistryEvent(event) && !isContractLog(event);
}

/** A withdrawal of an earlier notification whose block left the chain, of a transfer or of a contract event. */
export function isReorg(event: WebhookEvent): event is AddressTransactionReorgEvent | ContractLogReorgEvent {
  return (event as { reorg?: unknown }).reorg === true;
}

/**
 * A withdrawal of an earlier pending announcement (`address.transaction.dropped`): its transaction
 * was replaced (`replacedBy`, when known) or dropped, and will not be mined as announced.
 */
export function isDropped(event: WebhookEvent): event is AddressTransactionDroppedEvent {
  return (event as { dropped?: unknown }).dropped === true;
}

/** A pending announcement (`address.transaction.pending`): in the mempool, not in a block yet, not a withdrawal. */
export function isPending(event: WebhookEvent): event is AddressTransactionEvent {
  return eventTypeOf(event) === 'address.transaction.pending';
}

export function isTest(event: WebhookEvent): event is TestEvent {
  return (event as { test?: unknown }).test === true;
}

/** What the Ledgerhook-Event-Type header says of this body. */
export function eventTypeOf(event: WebhookEvent): EventType {
  if (isRegistryEvent(event)) return event.type;
  if (isTest(event)) return 'test';
  if (isContractLog(event)) return isReorg(event) ? 'contract.log.reorg' : 'contract.log';
  if (isReorg(event)) return 'address.transaction.reorg';
  if (isDropped(event)) return 'address.transaction.dropped';
  return event.mempool === true ? 'address.transaction.pending' : 'address.transaction';
}
