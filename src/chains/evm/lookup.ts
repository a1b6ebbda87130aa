/**
 * Transaction lookup on EVM chains (docs/transaction-lookup.md): the transaction, its receipt and
 * its block, mapped to the normalised view. A pending one has no `confirmedRound`, `roundTime`,
 * `intraRoundOffset` or `fee` and is never final; a reverted one reads like any included one.
 * `signature`: r ‖ s ‖ v with v = 27 + yParity for every type, what ecrecover-style tools read (a
 * typed v of 0/1 and an EIP-155 v both become 27/28; the chain id is in `genesisId`); null when
 * r = s = 0 (some rollups' system transactions). `final`: at or below the `finalized` block, or
 * `finalityDepth` deep where the node lacks the tag. Chain id and genesis hash are read once.
 */
import {
  BaseError,
  BlockNotFoundError,
  concat,
  getAddress,
  type Hash,
  type Hex,
  HttpRequestError,
  LimitExceededRpcError,
  type PublicClient,
  pad,
  ResponseBodyTooLargeError,
  RpcRequestError,
  SocketClosedError,
  TimeoutError,
  type Transaction,
  TransactionNotFoundError,
  TransactionReceiptNotFoundError,
  WebSocketRequestError,
} from 'viem';
import { UpstreamUnavailableError } from '../../errors.js';
import type { TracesSetting } from '../networks.js';
import { isMethodUnavailable } from '../node-errors.js';
import {
  emptyView,
  type InternalTransferView,
  type LookupResult,
  type TransactionLookup,
  type TransactionView,
} from '../transaction-view.js';
import {
  type CallFrame,
  callFrameTransfers,
  type InternalTransfer,
  type ParityTrace,
  parityTransfers,
  type TraceFormat,
  TraceMismatchError,
} from './traces.js';

export const DEFAULT_FINALITY_DEPTH = 64;

export interface EvmLookupOptions {
  /**
   * Blocks that must be built on top of a transaction's block before it counts as final, when the
   * node does not answer for the `finalized` block tag. Default 64.
   */
  finalityDepth?: number;
  /** How a mined transaction's internal transfers are read (the network's setting); off by default. */
  traces?: TracesSetting;
}

const TX_ID = /^0x[0-9a-f]{64}$/i;

/** An EVM transaction hash: 0x and 64 hex digits, in any case. */
export function isEvmTxId(id: string): boolean {
  return TX_ID.test(id);
}

/**
 * Looking up a transaction twice (getTransaction, then receipt and block) races a chain that
 * reorganises in between, or a load balancer whose nodes lag one another: try a few times.
 */
const MAX_ATTEMPTS = 3;

export function createEvmLookup(client: PublicClient, options: EvmLookupOptions = {}): TransactionLookup {
  const depth = options.finalityDepth ?? DEFAULT_FINALITY_DEPTH;
  if (!Number.isSafeInteger(depth) || depth < 0) {
    throw new RangeError(`finalityDepth must be a non-negative integer (got ${depth})`);
  }
  const finalityDepth = BigInt(depth);
  const traces = transactionTraces(client, options.traces ?? 'off');
  return async (txId) => {
    // Callers validate ids first (a 400); an id that cannot be a hash names no transaction.
    if (!isEvmTxId(txId)) return undefined;
    const hash = txId.toLowerCase() as Hash;
    try {
      const found = await lookup(client, hash, finalityDepth);
      if (!found || found.view.confirmedRound === null) return found;
      const internal = await traces(hash);
      return internal === undefined ? found : { ...found, internalTransfers: internal };
    } catch (err) {
      if (err instanceof TraceMismatchError)
        throw new UpstreamUnavailableError(
          `The node answered a trace that is not well formed: ${err.message}`,
        );
      throw upstreamError(err) ?? err;
    }
  };
}

/**
 * A mined transaction's internal transfers from its trace (`debug_traceTransaction` with the
 * callTracer, or `trace_transaction`), checksummed; undefined where the node has neither method
 * (asked once: a node that refused both is not asked again by this lookup).
 */
function transactionTraces(client: PublicClient, setting: TracesSetting) {
  const methods: TraceFormat[] =
    setting === 'auto' ? ['debug', 'parity'] : setting === 'off' ? [] : [setting];
  return async (hash: Hash): Promise<InternalTransferView[] | undefined> => {
    while (methods.length > 0) {
      const format = methods[0]!;
      let moved: InternalTransfer[];
      try {
        moved =
          format === 'debug'
            ? callFrameTransfers(
                (await client.request({
                  method: 'debug_traceTransaction' as never,
                  params: [hash, { tracer: 'callTracer' }] as never,
                })) as CallFrame,
              )
            : parityTransfers(
                (await client.request({
                  method: 'trace_transaction' as never,
                  params: [hash] as never,
                })) as ParityTrace[],
              );
      } catch (err) {
        if (!isMethodUnavailable(err)) throw err;
        methods.shift();
        continue;
      }
      return moved.map((m) => ({
        traceAddress: m.traceAddress,
        type: m.frame,
        from: getAddress(m.from),
        to: getAddress(m.to),
        value: m.value,
      }));
    }
    return undefined;
  };
}

async function lookup(
  client: PublicClient,
  hash: Hash,
  finalityDepth: bigint,
): Promise<LookupResult | undefined> {
  for (let attempt = 1; ; attempt++) {
    const tx = await client.getTransaction({ hash }).catch(unless(TransactionNotFoundError));
    if (tx === undefined) return undefined;
    const view = transactionView(tx);

    if (tx.blockHash === null || tx.blockNumber === null) {
      // In the mempool: not in a block, no gas used yet.
      return { view: { ...view, ...(await chainIdentity(client)) }, final: false };
    }

    const { blockHash, blockNumber } = tx;
    const [receipt, block, identity, final] = await Promise.all([
      client.getTransactionReceipt({ hash }).catch(unless(TransactionReceiptNotFoundError)),
      client.getBlock({ blockHash }).catch(unless(BlockNotFoundError)),
      chainIdentity(client),
      isFinal(client, blockNumber, finalityDepth),
    ]);
    if (receipt === undefined || block === undefined || receipt.blockHash !== blockHash) {
      if (attempt < MAX_ATTEMPTS) continue;
      throw new UpstreamUnavailableError(
        `The node reports transaction ${hash} in block ${blockNumber} but not that block or the ` +
          'receipt of the transaction in it: its chain may be reorganising, or it is still indexing',
      );
    }

    // A node without EIP-1559 receipts (effectiveGasPrice) charged the legacy gas price.
    const gasPrice = (receipt.effectiveGasPrice as bigint | null | undefined) ?? tx.gasPrice ?? null;
    // A blob transaction (type 3) also paid for its blobs' gas, at the block's blob gas price.
    const blobFee =
      receipt.blobGasUsed !== undefined && receipt.blobGasPrice !== undefined
        ? receipt.blobGasUsed * receipt.blobGasPrice
        : 0n;
    return {
      view: {
        ...view,
        ...identity,
        confirmedRound: receipt.blockNumber,
        roundTime: block.timestamp,
        intraRoundOffset: BigInt(receipt.transactionIndex),
        // What the sender paid, whether the transaction succeeded or reverted.
        fee: gasPrice === null ? null : receipt.gasUsed * gasPrice + blobFee,
      },
      final,
    };
  }
}

/** The fields a transaction alone determines, included or not. */
function transactionView(tx: Transaction): TransactionView {
  const input = tx.input ?? '0x';
  return {
    ...emptyView(tx.hash),
    sender: getAddress(tx.from),
    txType: tx.to === null ? 'create' : input === '0x' ? 'transfer' : 'call',
    note: input === '0x' ? null : Buffer.from(input.slice(2), 'hex').toString('base64'),
    signature: signature(tx),
  };
}

/** r ‖ s ‖ v with v = 27 + yParity, whatever v the transaction type reports. */
function signature(tx: Transaction): Hex | null {
  const { r, s } = tx;
  if (!r || !s || (BigInt(r) === 0n && BigInt(s) === 0n)) return null;
  const parity = yParity(tx);
  if (parity === undefined) return null;
  return concat([pad(r, { size: 32 }), pad(s, { size: 32 }), parity === 0 ? '0x1b' : '0x1c']);
}

function yParity(tx: Transaction): 0 | 1 | undefined {
  // viem sets yParity on typed transactions and drops it from legacy ones, which carry only v.
  if (tx.yParity === 0 || tx.yParity === 1) return tx.yParity;
  const v = tx.v;
  if (v === undefined) return undefined;
  if (v === 0n || v === 27n) return 0;
  if (v === 1n || v === 28n) return 1;
  if (v >= 35n) return Number((v - 35n) % 2n) as 0 | 1; // EIP-155: chainId × 2 + 35 + yParity
  return undefined;
}

interface ChainIdentity {
  genesisHash: Hex;
  genesisId: string;
}

const identities = new WeakMap<PublicClient, Promise<ChainIdentity>>();

/** The chain's genesis block hash and CAIP-2 id, asked of the node once per client. */
function chainIdentity(client: PublicClient): Promise<ChainIdentity> {
  const known = identities.get(client);
  if (known) return known;
  const asked = Promise.all([client.getBlock({ blockNumber: 0n }), client.getChainId()]).then(
    ([genesis, chainId]): ChainIdentity => {
      if (genesis.hash === null) throw new Error('the node returned a genesis block without a hash');
      return { genesisHash: genesis.hash, genesisId: `eip155:${chainId}` };
    },
  );
  identities.set(client, asked);
  // A failure is not remembered: the next lookup asks again.
  asked.catch(() => {
    if (identities.get(client) === asked) identities.delete(client);
  });
  return asked;
}

/**
 * Whether a block is final: at or below the node's `finalized` block, or, where the node does not
 * know that tag or has no finalized block yet, `finalityDepth` blocks below its latest.
 */
async function isFinal(client: PublicClient, blockNumber: bigint, finalityDepth: bigint): Promise<boolean> {
  let finalized: bigint | null | undefined;
  try {
    finalized = (await client.getBlock({ blockTag: 'finalized' })).number;
  } catch (err) {
    // The node is down or busy: that is an answer for the whole lookup, not a missing tag.
    if (upstreamError(err, { rpcErrors: false })) throw err;
    // An error answer: the tag is unknown (pre-merge chains, older nodes) or has no block yet.
  }
  if (finalized !== undefined && finalized !== null) return blockNumber <= finalized;
  const latest = await client.getBlockNumber({ cacheTime: 0 });
  return latest - blockNumber >= finalityDepth;
}

/** Resolves not-found errors of the given class to undefined and rethrows the rest. */
function unless(notFound: new (...args: never[]) => Error) {
  return (err: unknown): undefined => {
    if (err instanceof notFound) return undefined;
    throw err;
  };
}

/**
 * The UpstreamUnavailableError for an error of viem that means the node could not serve the
 * request: not reached, timed out, an HTTP error status, a body that is not JSON-RPC, a rate limit,
 * or (unless `rpcErrors` is false) any JSON-RPC error answer: a lookup by a well-formed hash is a
 * valid request, so an error answer is the node's failure. Undefined for other errors.
 */
function upstreamError(
  err: unknown,
  { rpcErrors = true }: { rpcErrors?: boolean } = {},
): UpstreamUnavailableError | undefined {
  if (err instanceof UpstreamUnavailableError) return err;
  if (!(err instanceof BaseError)) return undefined;
  let reason: string | undefined;
  let url: string | undefined;
  err.walk((e) => {
    if (e instanceof TimeoutError) {
      reason = 'did not answer in time';
      url = e.url;
    } else if (e instanceof LimitExceededRpcError) {
      reason = 'is rate limiting requests';
    } else if (e instanceof HttpRequestError || e instanceof ResponseBodyTooLargeError) {
      const status = e instanceof HttpRequestError ? e.status : undefined;
      reason = status === undefined ? 'could not be reached' : `answered HTTP ${status}`;
      if (e instanceof ResponseBodyTooLargeError) reason = 'answered with an oversized body';
      if (e instanceof HttpRequestError) url = e.url;
    } else if (e instanceof WebSocketRequestError || e instanceof SocketClosedError) {
      reason = 'could not be reached';
      url = e.url;
    } else if (e instanceof RpcRequestError) {
      url = e.url;
      // A JSON-RPC error in an HTTP error response (5xx, 429) is the node failing, whatever its code.
      if (e.status !== undefined && (e.status >= 500 || e.status === 429)) {
        reason = `answered HTTP ${e.status}`;
      } else if (e.code === -32005) {
        reason = 'is rate limiting requests';
      } else if (rpcErrors) {
        reason = `answered with an error (${e.code}: ${e.details})`;
      }
    }
    return reason !== undefined;
  });
  if (reason === undefined) return undefined;
  const where = url === undefined ? undefined : host(url);
  return new UpstreamUnavailableError(`The EVM node${where ? ` at ${where}` : ''} ${reason}`);
}

/** Only the host: a node's URL may carry an API key in its path or query. */
function host(url: string): string | undefined {
  try {
    return new URL(url).host || undefined;
  } catch {
    return undefined;
  }
}
