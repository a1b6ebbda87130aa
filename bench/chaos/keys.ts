// What one chain event is, as a string: the same from a received notification's body and from the
// chain itself (bench/chaos/chains.ts), so the checks can match them without the service's help.

export interface ChainEvent {
  subscriptionId: string;
  chain: string;
  txId: string;
  /** native | token */
  type: string;
  /** The token contract, or the native symbol. */
  asset: string;
  from: string;
  to: string;
}

export function eventKey(e: ChainEvent, flags = ''): string {
  return [e.subscriptionId, e.chain, e.txId, e.type, e.asset, e.from, e.to]
    .map((part) => part.toLowerCase())
    .concat(flags ? [flags] : [])
    .join('|');
}

/**
 * The key of a received address notification, with its lifecycle flags (pending, withdrawn by a
 * reorganisation or dropped), which are other events than the mined transfer.
 */
export function bodyKey(body: Record<string, unknown>): string | undefined {
  if (typeof body.txId !== 'string' || typeof body.subscriptionId !== 'string') return undefined;
  const flags = [
    body.mempool === true ? 'mempool' : '',
    body.reorg === true ? 'reorg' : '',
    body.dropped ? 'dropped' : '',
  ]
    .filter(Boolean)
    .join(',');
  return eventKey(
    {
      subscriptionId: body.subscriptionId,
      chain: String(body.chain),
      txId: body.txId,
      type: String(body.type),
      asset: String(body.asset),
      from: String(body.address),
      to: String(body.counterAddress),
    },
    flags,
  );
}
