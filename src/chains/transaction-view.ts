/**
 * One transaction, normalised across chains (docs/transaction-lookup.md). Every key is always
 * present; null when it does not apply to the chain. Integers are bigint so that they reach the
 * client digit-exact, whatever their size.
 */
export interface TransactionView {
  /** Algorand only, as the indexer reports them (decimal strings of µAlgo). */
  closeRewards: string | null;
  closingAmount: string | null;
  /** Block height / round / slot; null while pending. */
  confirmedRound: bigint | null;
  /** In the chain's base unit: µAlgo, wei (gasUsed × effectiveGasPrice), satoshi, lamports. */
  fee: bigint | null;
  firstValid: bigint | null;
  genesisHash: string | null;
  genesisId: string | null;
  id: string;
  intraRoundOffset: bigint | null;
  lastValid: bigint | null;
  /** base64. */
  note: string | null;
  receiverRewards: string | null;
  /** Block time, seconds since the epoch. */
  roundTime: bigint | null;
  sender: string | null;
  senderRewards: string | null;
  /** A signature string (hex r‖s‖v on EVM, base64 on Algorand, base58 on Solana), or a multisig/logicsig object. */
  signature: string | Record<string, unknown> | null;
  txType: string | null;
}

/** Native value a contract call of the transaction moved (EVM, from its trace), in wei. */
export interface InternalTransferView {
  traceAddress: string;
  type: 'call' | 'create' | 'create2' | 'selfdestruct';
  from: string;
  to: string;
  value: bigint;
}

export interface LookupResult {
  view: TransactionView;
  /**
   * EVM, where the node has traces: the transaction's internal transfers (empty when it made
   * none). Absent where traces are not available, so that "none" and "not known" differ.
   */
  internalTransfers?: InternalTransferView[];
  /** Final: the answer can no longer change, so it may be cached for good. */
  final: boolean;
}

/**
 * A chain family's lookup. Resolves undefined when the node does not know the transaction; throws
 * UpstreamUnavailableError (src/errors.ts) when the node cannot be reached, times out or answers
 * with a server error.
 */
export type TransactionLookup = (txId: string) => Promise<LookupResult | undefined>;

export const TRANSACTION_FIELDS = [
  'closeRewards',
  'closingAmount',
  'confirmedRound',
  'fee',
  'firstValid',
  'genesisHash',
  'genesisId',
  'id',
  'intraRoundOffset',
  'lastValid',
  'note',
  'receiverRewards',
  'roundTime',
  'sender',
  'senderRewards',
  'signature',
  'txType',
] as const satisfies readonly (keyof TransactionView)[];

/** A view with every field null but the id, for lookups to fill in. */
export function emptyView(id: string): TransactionView {
  return {
    closeRewards: null,
    closingAmount: null,
    confirmedRound: null,
    fee: null,
    firstValid: null,
    genesisHash: null,
    genesisId: null,
    id,
    intraRoundOffset: null,
    lastValid: null,
    note: null,
    receiverRewards: null,
    roundTime: null,
    sender: null,
    senderRewards: null,
    signature: null,
    txType: null,
  };
}
