/**
 * Contract event notifications (`contract.log`, docs/watching-chains.md): a block's logs matched against the
 * followed events, decoded with the event's ABI, one notification per log and subscription.
 */
import { type AbiEvent, getAddress } from 'viem';
import { decodeFollowedLog } from '../../chains/evm/event-decode.js';
import type { EvmLog } from '../../chains/evm/types.js';
import type { Network } from '../../chains/networks.js';
import type { BlockMatch } from '../follower/commit.js';
import type { FollowedSubscription, LogAddressAndTopics } from '../matching/event-index.js';

export const CONTRACT_LOG = 'contract.log';

/** A log's identity on its chain: its transaction and position, as a transfer's (transferKey). */
export const logKey = (log: Pick<EvmLog, 'txHash' | 'logIndex'>): string =>
  `${log.txHash}:log:${log.logIndex}`;

export interface ContractLogInput {
  id: string;
  network: Network;
  log: EvmLog;
  blockNumber: number;
  blockHash: string;
  followed: FollowedSubscription;
  /** The decoded arguments; absent for a bare topic0 subscription. */
  args: Record<string, unknown> | undefined;
  confirmations: number;
}

/**
 * The body (docs/watching-chains.md) for a contract event: where it was emitted, the raw topics and data as the
 * node returned them, and (with an ABI) the event's name, canonical signature and arguments.
 */
export function buildContractLogNotification(input: ContractLogInput): Record<string, unknown> {
  const { log, followed } = input;
  const { event } = followed;
  return {
    chain: input.network.name,
    contractAddress: getAddress(log.address),
    txId: log.txHash,
    blockNumber: input.blockNumber,
    blockHash: input.blockHash,
    logIndex: log.logIndex,
    ...(event.abi ? { event: event.abi.name, signature: event.signature } : {}),
    topics: log.topics.map((t) => t.toLowerCase()),
    data: log.data.toLowerCase(),
    ...(input.args === undefined ? {} : { args: input.args }),
    id: input.id,
    subscriptionId: followed.endpoint.id,
    confirmations: input.confirmations,
  };
}

export interface EventMatchDeps {
  network: Network;
  index: {
    followsEvents(network: string): boolean;
    matchLog(network: string, log: LogAddressAndTopics): readonly FollowedSubscription[];
  };
  /** A log whose topic0 matched an event but whose topics or data do not fit its ABI. */
  onMismatch?: (network: string) => void;
}

/** Each ABI's JSON, written once per ABI object (events are long-lived), not once per match. */
const abiKeys = new WeakMap<AbiEvent, string>();

function abiKeyOf(abi: AbiEvent): string {
  let key = abiKeys.get(abi);
  if (key === undefined) {
    key = JSON.stringify(abi);
    abiKeys.set(abi, key);
  }
  return key;
}

/**
 * The notifications of a block's logs: one per log and subscription following its event there.
 * A log is decoded once per distinct ABI that matched it; one that does not fit is not that event.
 */
export function matchContractLogs(
  deps: EventMatchDeps,
  block: { height: number; hash: string },
  logs: readonly EvmLog[],
  out: BlockMatch[],
): void {
  const { network, index } = deps;
  if (!index.followsEvents(network.name)) return;
  for (const log of logs) {
    const followers = index.matchLog(network.name, log);
    if (followers.length === 0) continue;
    let decoded: Map<string, Record<string, unknown> | undefined> | undefined;
    for (const followed of followers) {
      let args: Record<string, unknown> | undefined;
      if (followed.event.abi) {
        // Two subscriptions of one signature may name its arguments differently: keyed by the ABI.
        const abiKey = abiKeyOf(followed.event.abi);
        decoded ??= new Map();
        if (!decoded.has(abiKey)) {
          const result = decodeFollowedLog(followed.event, log);
          if (!result) deps.onMismatch?.(network.name);
          decoded.set(abiKey, result);
        }
        args = decoded.get(abiKey);
        if (args === undefined) continue;
      }
      const confirmations = Math.max(1, followed.endpoint.confirmations);
      out.push({
        subscription: { ...followed.endpoint, address: log.address },
        key: logKey(log),
        counterparties: [],
        eventType: CONTRACT_LOG,
        body: (id) =>
          buildContractLogNotification({
            id,
            network,
            log,
            blockNumber: block.height,
            blockHash: block.hash,
            followed,
            args,
            confirmations,
          }),
      });
    }
  }
}
