import { LedgerhookError, UpstreamUnavailableError } from '../../errors.js';
import { nodeRequest } from '../node-http.js';
import type { LookupResult, TransactionLookup, TransactionView } from '../transaction-view.js';
import { emptyView } from '../transaction-view.js';

/**
 * Algorand transaction lookup (docs/transaction-lookup.md): the indexer's
 * `GET /v2/transactions/{id}`, final (instant finality); when it answers 404, algod's
 * `GET /v2/transactions/pending/{id}`, which knows pool transactions and for a while committed ones
 * the indexer has not ingested yet: a SignedTxn in msgpack short keys (`snd`, `fee`, `fv`, `lv`,
 * `gen`, `gh`, `note`, `type`, `sig`, `msig`, `lsig`), without round time, offset or rewards, and
 * not final. Both 404, or a non-empty `pool-error` (evicted, will not commit), → undefined.
 */

export interface AlgorandLookupOptions {
  /** algod REST base URL (the catalog's rpcUrls), for pending transactions. */
  algodUrl: string;
  /** Indexer REST base URL (the catalog's indexerUrls), for confirmed transactions. */
  indexerUrl: string;
  /** Per request; a lookup makes at most two requests. Default 10 s. */
  timeoutMs?: number;
}

const TX_ID = /^[A-Z2-7]{51}[AQ]$/;

/**
 * Whether `id` is an Algorand transaction id: the SHA-512/256 hash (32 bytes) in unpadded base32,
 * 52 characters. 52 × 5 = 260 bits, so the last character carries 4 padding bits that must be zero
 * (only A or Q). Upper case only, as the chain writes it.
 */
export function isAlgorandTxId(id: string): boolean {
  return TX_ID.test(id);
}

type Json = Record<string, unknown>;

/** A response that does not have the shape the API documents. */
class UnexpectedAnswer extends LedgerhookError {}

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function object(value: unknown, where: string): Json {
  if (!isObject(value)) throw new UnexpectedAnswer(`${where} is not an object`);
  return value;
}

function optionalInt(obj: Json, key: string): bigint | null {
  const value = obj[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'bigint') throw new UnexpectedAnswer(`"${key}" is not an integer`);
  return value;
}

function optionalString(obj: Json, key: string): string | null {
  const value = obj[key];
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') throw new UnexpectedAnswer(`"${key}" is not a string`);
  return value;
}

/** The indexer reports rewards and amounts as JSON integers; the view carries their decimal text. */
function optionalDecimal(obj: Json, key: string): string | null {
  return optionalInt(obj, key)?.toString() ?? null;
}

/**
 * The indexer's `signature`: `sig` (ed25519, base64) as a string; a `multisig` or `logicsig`
 * object as the indexer returns it (its integers, such as threshold and version, as bigint like
 * every integer the view carries); none (inner, state-proof or heartbeat transactions) → null.
 */
function indexerSignature(tx: Json): TransactionView['signature'] {
  if (tx.signature === undefined || tx.signature === null) return null;
  const signature = object(tx.signature, '"signature"');
  const sig = optionalString(signature, 'sig');
  if (sig !== null) return sig;
  if (signature.multisig !== undefined) return object(signature.multisig, '"signature.multisig"');
  if (signature.logicsig !== undefined) return object(signature.logicsig, '"signature.logicsig"');
  return null;
}

/**
 * Maps one transaction object of the indexer's Transaction model (lookups, account and block
 * searches all use it) to the view. `final` is up to the caller.
 */
export function viewFromIndexerTransaction(tx: Json): TransactionView {
  const id = optionalString(tx, 'id');
  if (id === null) throw new UnexpectedAnswer('the transaction has no "id"');
  return {
    ...emptyView(id),
    closeRewards: optionalDecimal(tx, 'close-rewards'),
    closingAmount: optionalDecimal(tx, 'closing-amount'),
    confirmedRound: optionalInt(tx, 'confirmed-round'),
    fee: optionalInt(tx, 'fee'),
    firstValid: optionalInt(tx, 'first-valid'),
    genesisHash: optionalString(tx, 'genesis-hash'),
    genesisId: optionalString(tx, 'genesis-id'),
    intraRoundOffset: optionalInt(tx, 'intra-round-offset'),
    lastValid: optionalInt(tx, 'last-valid'),
    note: optionalString(tx, 'note'),
    receiverRewards: optionalDecimal(tx, 'receiver-rewards'),
    roundTime: optionalInt(tx, 'round-time'),
    sender: optionalString(tx, 'sender'),
    senderRewards: optionalDecimal(tx, 'sender-rewards'),
    signature: indexerSignature(tx),
    txType: optionalString(tx, 'tx-type'),
  };
}

/** algod's msgpack-style multisig (`subsig[{pk, s}]`, `thr`, `v`) in the indexer's spelling. */
function multisigFromAlgod(msig: Json): Json {
  const subsig = msig.subsig === undefined ? [] : msig.subsig;
  if (!Array.isArray(subsig)) throw new UnexpectedAnswer('"msig.subsig" is not an array');
  const out: Json = {
    subsignature: subsig.map((entry) => {
      const sub = object(entry, '"msig.subsig[]"');
      const mapped: Json = { 'public-key': optionalString(sub, 'pk') };
      const s = optionalString(sub, 's');
      if (s !== null) mapped.signature = s;
      return mapped;
    }),
  };
  // msgpack omits zero values; an omitted threshold or version is 0.
  out.threshold = optionalInt(msig, 'thr') ?? 0n;
  out.version = optionalInt(msig, 'v') ?? 0n;
  return out;
}

/** algod's logicsig (`l`, `arg`, `sig`, `msig`, `lmsig`) in the indexer's spelling. */
function logicsigFromAlgod(lsig: Json): Json {
  const out: Json = {};
  if (lsig.arg !== undefined) out.args = lsig.arg;
  out.logic = optionalString(lsig, 'l');
  if (lsig.lmsig !== undefined)
    out['logic-multisig-signature'] = multisigFromAlgod(object(lsig.lmsig, '"lmsig"'));
  if (lsig.msig !== undefined) out['multisig-signature'] = multisigFromAlgod(object(lsig.msig, '"msig"'));
  const sig = optionalString(lsig, 'sig');
  if (sig !== null) out.signature = sig;
  return out;
}

/**
 * Maps algod's pending-transaction answer (`{"pool-error", "txn": SignedTxn, "confirmed-round"?}`)
 * to the view. msgpack omits zero values, so an absent fee or validity bound is 0. Round time,
 * intra-round offset, rewards and closing amount are only known once applied: null.
 * `confirmedRound` is algod's `confirmed-round` when it has already committed the transaction,
 * else null.
 */
export function viewFromPendingTransaction(id: string, pending: Json): TransactionView {
  const signed = object(pending.txn, '"txn"');
  const txn = object(signed.txn, '"txn.txn"');
  let signature: TransactionView['signature'] = optionalString(signed, 'sig');
  if (signature === null && signed.msig !== undefined)
    signature = multisigFromAlgod(object(signed.msig, '"txn.msig"'));
  if (signature === null && signed.lsig !== undefined)
    signature = logicsigFromAlgod(object(signed.lsig, '"txn.lsig"'));
  const confirmedRound = optionalInt(pending, 'confirmed-round');
  return {
    ...emptyView(id),
    confirmedRound: confirmedRound !== null && confirmedRound > 0n ? confirmedRound : null,
    fee: optionalInt(txn, 'fee') ?? 0n,
    firstValid: optionalInt(txn, 'fv') ?? 0n,
    genesisHash: optionalString(txn, 'gh'),
    genesisId: optionalString(txn, 'gen'),
    lastValid: optionalInt(txn, 'lv') ?? 0n,
    note: optionalString(txn, 'note'),
    sender: optionalString(txn, 'snd'),
    signature,
    txType: optionalString(txn, 'type'),
  };
}

const join = (base: string, path: string) => `${base.replace(/\/+$/, '')}${path}`;

function unexpected(what: string, url: string, detail: string): UpstreamUnavailableError {
  return new UpstreamUnavailableError(`The Algorand ${what} at ${new URL(url).host} ${detail}`);
}

export function createAlgorandLookup(options: AlgorandLookupOptions): TransactionLookup {
  const { algodUrl, indexerUrl, timeoutMs } = options;

  async function fromIndexer(txId: string): Promise<LookupResult | undefined> {
    const url = join(indexerUrl, `/v2/transactions/${txId}`);
    const response = await nodeRequest(url, { timeoutMs });
    if (response.status === 404) return undefined;
    if (response.status !== 200) throw unexpected('indexer', url, `answered ${response.status}`);
    try {
      const body = object(response.json, 'the body');
      const view = viewFromIndexerTransaction(object(body.transaction, '"transaction"'));
      if (view.id !== txId) throw new UnexpectedAnswer(`the transaction id is ${view.id}`);
      return { view, final: true };
    } catch (err) {
      if (!(err instanceof UnexpectedAnswer)) throw err;
      throw unexpected('indexer', url, `answered with an unexpected body: ${err.message}`);
    }
  }

  async function fromAlgod(txId: string): Promise<LookupResult | undefined> {
    const url = join(algodUrl, `/v2/transactions/pending/${txId}?format=json`);
    const response = await nodeRequest(url, { timeoutMs });
    if (response.status === 404) return undefined;
    if (response.status !== 200) throw unexpected('node', url, `answered ${response.status}`);
    try {
      const body = object(response.json, 'the body');
      const poolError = optionalString(body, 'pool-error');
      if (poolError !== null && poolError !== '') return undefined;
      return { view: viewFromPendingTransaction(txId, body), final: false };
    } catch (err) {
      if (!(err instanceof UnexpectedAnswer)) throw err;
      throw unexpected('node', url, `answered with an unexpected body: ${err.message}`);
    }
  }

  return async (txId) => {
    // A malformed id cannot name a transaction; it never reaches a URL.
    if (!isAlgorandTxId(txId)) return undefined;
    return (await fromIndexer(txId)) ?? (await fromAlgod(txId));
  };
}
