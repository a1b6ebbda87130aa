/**
 * A CONTRACT_LOG_EVENT create request validated: an EVM network, the event (a human-readable
 * signature, a JSON ABI fragment or a bare topic0) and its filter parsed with viem, and the
 * contracts it is followed on (one, a list, or any).
 */
import { parseFollowedEvent } from '../chains/evm/parse-followed-event.js';
import type { Network, NetworkCatalog } from '../chains/networks.js';
import type { FieldError } from '../errors.js';
import { normalizeAll } from './addresses.js';
import type { ContractEventSpec } from './events.js';
import type { CreateSubscriptionInput } from './model.js';

/** Fields of an address subscription that an event subscription does not take, and why. */
const ADDRESS_ONLY: [keyof CreateSubscriptionInput['attr'], string][] = [
  ['address', 'is for ADDRESS_TRANSACTION; an event subscription names its contract in attr.contractAddress'],
  ['fees', 'is for ADDRESS_TRANSACTION subscriptions'],
];

/** Fields of an event subscription that an address subscription does not take. */
const EVENT_ONLY = ['event', 'contractAddress', 'filter'] as const;

/** The errors of event fields sent on an ADDRESS_TRANSACTION create. */
export function eventFieldsOnAddressCreate(input: CreateSubscriptionInput): FieldError[] {
  return EVENT_ONLY.filter((field) => input.attr[field] !== undefined).map((field) => ({
    pointer: `#/attr/${field}`,
    detail: 'is for CONTRACT_LOG_EVENT subscriptions',
  }));
}

export interface ValidEventCreate {
  net: Network;
  /** The contracts, EIP-55 and without repeats; empty with `anyContract`. */
  contracts: string[];
  /** The one contract of a subscription made with `contractAddress`. */
  single: string | undefined;
  spec: ContractEventSpec;
}

/** The network of an event subscription: configured, and EVM (events are EVM logs). */
function eventNetwork(networks: NetworkCatalog, chain: string, errors: FieldError[]): Network | undefined {
  const network = networks.find(chain);
  if (!network) {
    errors.push({
      pointer: '#/attr/chain',
      detail: `is not a configured network; use one of ${networks.names().join(', ')}`,
    });
    return undefined;
  }
  if (network.family !== 'evm') {
    errors.push({
      pointer: '#/attr/chain',
      detail: `is a ${network.family} network; contract events are followed on EVM networks only`,
    });
    return undefined;
  }
  return network;
}

/**
 * Every problem of an event create request at once (pushed to `errors`, with `invalid` counting
 * bad contract addresses); the validated request when there is none.
 */
export function validateEventCreate(
  networks: NetworkCatalog,
  input: CreateSubscriptionInput,
  errors: FieldError[],
  invalid: { count: number },
): ValidEventCreate | undefined {
  const { attr } = input;
  for (const [field, detail] of ADDRESS_ONLY)
    if (attr[field] !== undefined) errors.push({ pointer: `#/attr/${field}`, detail });
  if (input.mempool === true)
    errors.push({
      pointer: '#/mempool',
      detail: 'contract events are notified from mined blocks only; leave it out or send false',
    });
  if (attr.contractAddress !== undefined && attr.addresses !== undefined)
    errors.push({
      pointer: '#/attr/addresses',
      detail: 'cannot be combined with attr.contractAddress; send one contract or a list of them',
    });
  if (attr.event === undefined)
    errors.push({
      pointer: '#/attr/event',
      detail: 'is required: an event signature, ABI fragment or topic0',
    });
  const parsed = attr.event === undefined ? undefined : parseFollowedEvent(attr.event, attr.filter);
  if (parsed && 'errors' in parsed) errors.push(...parsed.errors);
  const event = parsed && 'event' in parsed ? parsed.event : undefined;
  const anyContract = attr.contractAddress === undefined && attr.addresses === undefined;
  if (event && event.abi?.anonymous === true && anyContract)
    errors.push({
      pointer: '#/attr/contractAddress',
      detail: 'is required for an anonymous event: without a topic0 it is told apart only by its contract',
    });
  const net = eventNetwork(networks, attr.chain, errors);
  let contracts: string[] = [];
  if (net) {
    if (attr.contractAddress !== undefined && attr.addresses === undefined)
      contracts = normalizeAll(net, [attr.contractAddress], '#/attr/contractAddress', errors, invalid);
    else if (attr.addresses !== undefined)
      contracts = normalizeAll(net, attr.addresses, '#/attr/addresses', errors, invalid);
    for (const e of errors)
      if (e.pointer === '#/attr/contractAddress/0') e.pointer = '#/attr/contractAddress';
  }
  if (errors.length > 0 || !net || !event) return undefined;
  const filter =
    attr.filter !== undefined && attr.filter !== null && Object.keys(attr.filter as object).length > 0
      ? (attr.filter as Record<string, unknown>)
      : null;
  return {
    net,
    contracts,
    single: attr.contractAddress === undefined ? undefined : contracts[0],
    spec: { event, anyContract, filter },
  };
}
