/**
 * A sample notification, sent on request through the real outbox so a customer can test their
 * endpoint.
 */
import { eq } from 'drizzle-orm';
import { type AbiParameter, encodeAbiParameters, getAddress, type Hex, zeroAddress } from 'viem';
import { minimumEncodedBytes } from '../chains/evm/abi-encoded-size.js';
import { decodeFollowedLog } from '../chains/evm/event-decode.js';
import { MAX_EVENT_DATA_BYTES } from '../chains/evm/event-parse.js';
import type { Network } from '../chains/networks.js';
import { ConflictError } from '../errors.js';
import { enqueueNotifications, newNotificationId } from '../notify/outbox.js';
import type { SubscriptionsContext } from './context.js';
import { CONTRACT_LOG_EVENT, REGISTRY_EVENTS, type SubscriptionRow } from './model.js';
import { undeleted } from './owned.js';
import { subscriptionAddresses } from './schema.js';

/** Transaction ids shaped as each family writes them (hex hash, base32 id, base58 signature). */
const SAMPLE_TX_ID: Record<Network['family'], string> = {
  evm: `0x${'ab'.repeat(32)}`,
  bitcoin: 'ab'.repeat(32),
  algorand: 'A'.repeat(52),
  solana: '5'.repeat(88),
  tron: 'ab'.repeat(32),
};

/**
 * A sample notification with exactly the documented fields (docs/watching-chains.md) a real one carries, so a
 * customer can test their endpoint: one base unit of the native asset, sent on EVM chains (where
 * `address` is the sender), received elsewhere.
 */
function samplePayload(
  network: Network,
  address: string,
  sub: SubscriptionRow,
  id: string,
): Record<string, unknown> {
  const isEvm = network.family === 'evm';
  const oneUnit = network.decimals > 0 ? `0.${'0'.repeat(network.decimals - 1)}1` : '1';
  return {
    address,
    txId: SAMPLE_TX_ID[network.family],
    type: 'native',
    blockNumber: 1,
    asset: network.symbol,
    amount: isEvm ? `-${oneUnit}` : oneUnit,
    ...(isEvm ? { mempool: false, counterAddress: '0x000000000000000000000000000000000000dEaD' } : {}),
    id,
    subscriptionId: sub.id,
    chain: network.name,
    watchedAddress: address,
    confirmations: sub.confirmations,
    test: true,
  };
}

const ZERO_WORD: Hex = `0x${'00'.repeat(32)}`;

/** The zero value of an ABI type, as viem encodes it: 0, false, the zero address, empty bytes… */
function zeroValue(param: AbiParameter): unknown {
  const array = /^(.*)\[(\d*)\]$/.exec(param.type);
  if (array) {
    const element = { ...param, type: array[1]! } as AbiParameter;
    return array[2] === '' ? [] : Array.from({ length: Number(array[2]) }, () => zeroValue(element));
  }
  if (param.type === 'tuple') {
    const { components } = param as { components: readonly AbiParameter[] };
    return components.map(zeroValue);
  }
  if (param.type === 'address') return zeroAddress;
  if (param.type === 'bool') return false;
  if (param.type === 'string') return '';
  if (param.type === 'bytes') return '0x';
  if (param.type.startsWith('bytes')) return `0x${'00'.repeat(Number(param.type.slice(5)))}`;
  return 0n;
}

/**
 * A sample contract event with the documented fields (docs/watching-chains.md) of a real one: every argument
 * zero (an indexed one a zero topic), decoded as a real log would be, from the contract followed
 * (the zero address for an event followed on any contract).
 */
function sampleEventPayload(
  network: Network,
  contract: string,
  sub: SubscriptionRow,
  id: string,
): Record<string, unknown> {
  const { event } = sub.contractEvent!;
  const inputs = event.abi?.inputs ?? [];
  // Events are bounded when created; one stored before the bound could declare more than any log holds.
  if (minimumEncodedBytes(inputs) > MAX_EVENT_DATA_BYTES)
    throw new ConflictError(
      `The event's arguments take more than ${MAX_EVENT_DATA_BYTES} bytes encoded, more than a log can carry: no sample can be made of it`,
    );
  const indexed = event.topicCount === null ? 0 : inputs.filter((i) => i.indexed).length;
  const topics: Hex[] = [
    ...(event.topic0 ? [event.topic0] : []),
    ...Array.from({ length: indexed }, () => ZERO_WORD),
  ];
  const unindexed = inputs.filter((i) => !i.indexed);
  const data = encodeAbiParameters(unindexed, unindexed.map(zeroValue));
  const log = { address: contract as Hex, topics, data };
  const args = event.abi ? decodeFollowedLog(event, log) : undefined;
  return {
    chain: network.name,
    contractAddress: getAddress(contract),
    txId: SAMPLE_TX_ID.evm,
    blockNumber: 1,
    blockHash: `0x${'cd'.repeat(32)}`,
    logIndex: 0,
    ...(event.abi ? { event: event.abi.name, signature: event.signature } : {}),
    topics,
    data,
    ...(args === undefined ? {} : { args }),
    id,
    subscriptionId: sub.id,
    confirmations: sub.confirmations,
    test: true,
  };
}

export function createTestNotifications(ctx: SubscriptionsContext) {
  const { db, networks } = ctx;

  return {
    /** Enqueues a sample notification through the real outbox. */
    async sendTest(accountId: string, id: string): Promise<{ notificationId: string }> {
      const row = await undeleted(ctx, accountId, id);
      if (row.status !== 'active') throw new ConflictError('The subscription is disabled; enable it first');
      const notificationId = newNotificationId();
      let payload: Record<string, unknown>;
      if (row.type === REGISTRY_EVENTS) {
        payload = {
          type: 'registry.test',
          id: notificationId,
          subscriptionId: row.id,
          registry: { id: row.registryId },
          test: true,
        };
      } else {
        const network = networks.find(row.network ?? '');
        if (!network) throw new ConflictError(`Network ${row.network} is no longer configured`);
        // A list's sample names one of its addresses (the first in order), as a real one would.
        const [first] =
          row.address === null
            ? await db
                .select({ address: subscriptionAddresses.address })
                .from(subscriptionAddresses)
                .where(eq(subscriptionAddresses.subscriptionId, row.id))
                .orderBy(subscriptionAddresses.address)
                .limit(1)
            : [{ address: row.address }];
        if (row.type === CONTRACT_LOG_EVENT) {
          const contract = row.contractEvent?.anyContract ? zeroAddress : first?.address;
          if (!contract) throw new ConflictError('The subscription follows no contract yet; add some first');
          payload = sampleEventPayload(network, contract, row, notificationId);
        } else {
          if (!first) throw new ConflictError('The subscription watches no addresses yet; add some first');
          payload = samplePayload(network, first.address, row, notificationId);
        }
      }
      await db.transaction((tx) =>
        enqueueNotifications(tx, [
          {
            id: notificationId,
            accountId,
            subscriptionId: row.id,
            eventType: 'test',
            body: JSON.stringify(payload),
            armedBy: 'test',
          },
        ]),
      );
      return { notificationId };
    },
  };
}
