/** A followed event (CONTRACT_LOG_EVENT, docs/subscriptions.md) as stored and matched, and the logs it is matched against. */
import type { AbiEvent, Hex } from 'viem';

/** A followed event as stored (JSON, in a jsonb column) and as the matcher uses it. */
export interface FollowedEvent {
  /** The event's ABI item as viem parses it; null for a bare topic0 subscription (Tatum style: nothing decoded). */
  abi: AbiEvent | null;
  /** keccak256 of the canonical signature; null for an anonymous event. */
  topic0: Hex | null;
  /** The canonical signature, `Transfer(address,address,uint256)`; null for a bare topic0. */
  signature: string | null;
  /** Topics a matching log has: 1 + indexed inputs, or the indexed inputs for an anonymous event; null for a bare topic0 (any count). */
  topicCount: number | null;
  /**
   * The filter compiled: for each indexed input in order, the allowed topic values (lower-case 0x + 64 hex), or null when any value is allowed.
   * Length = number of indexed inputs (empty array without a filter, or for a bare topic0). filter[i] constrains log.topics[i + (anonymous ? 0 : 1)].
   */
  filter: (Hex[] | null)[];
}

/** A log as a node returns it (receipts' logs): address lower or mixed case, topics and data lower-case hex. */
export interface LogLike {
  address: Hex;
  topics: readonly Hex[];
  data: Hex;
}
