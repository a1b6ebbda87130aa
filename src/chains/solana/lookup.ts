/**
 * Solana transaction lookup (docs/transaction-lookup.md has the mapping), through `getTransaction`
 * in `jsonParsed` with maxSupportedTransactionVersion 0 (versioned transactions too). The note is
 * the first top-level Memo's text (memos in inner, CPI, instructions are not read); mainnet-beta's
 * genesisId is solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp. `final`: read at `finalized` first, and
 * found there it is final (a finalized block cannot be rolled back); otherwise read again at
 * `confirmed`, not final. A finalized transaction, the case a cache keeps, costs one call.
 */
import { getBase58Encoder } from '@solana/kit';
import { UpstreamUnavailableError, ValidationError } from '../../errors.js';
import { emptyView, type TransactionLookup } from '../transaction-view.js';
import { createSolanaRpc } from './rpc.js';

const base58 = getBase58Encoder();

/** The bytes of a base58 string; undefined when it is not base58. */
function base58Bytes(text: string): Uint8Array | undefined {
  try {
    return base58.encode(text) as Uint8Array;
  } catch {
    return undefined;
  }
}

/** A Solana transaction id: a base58 signature decoding to 64 bytes (64 to 88 characters). */
export function isSolanaTxId(id: string): boolean {
  if (id.length < 64 || id.length > 88) return false;
  return base58Bytes(id)?.length === 64;
}

/** The CAIP-2 chain id of a Solana cluster: `solana:` and the first 32 characters of its genesis hash. */
export function solanaChainId(genesisHash: string): string {
  return `solana:${genesisHash.slice(0, 32)}`;
}

export const COMPUTE_BUDGET_PROGRAM = 'ComputeBudget111111111111111111111111111111';
export const MEMO_PROGRAMS: readonly string[] = [
  'MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr',
  'Memo1UhkJRfHyvLMcVucJwxXeuD728EqVDDwQDxFMNo',
];

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const asString = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
const asBigint = (value: unknown): bigint | undefined => (typeof value === 'bigint' ? value : undefined);

const isMemo = (ix: Json) =>
  ix.program === 'spl-memo' || MEMO_PROGRAMS.includes(asString(ix.programId) ?? '');

function isBookkeeping(ix: Json): boolean {
  if (ix.programId === COMPUTE_BUDGET_PROGRAM || isMemo(ix)) return true;
  return ix.program === 'system' && isObject(ix.parsed) && ix.parsed.type === 'advanceNonce';
}

function nameOf(ix: Json): string {
  const program = asString(ix.program);
  const type = isObject(ix.parsed) ? asString(ix.parsed.type) : undefined;
  if (program && type) return program === 'system' ? type : `${program}:${type}`;
  if (program && ix.parsed !== undefined) return program;
  return 'unknown';
}

/** txType from a jsonParsed transaction's top-level instructions (the vocabulary above). */
export function solanaTxType(instructions: readonly unknown[]): string {
  const all = instructions.filter(isObject);
  const main = all.find((ix) => !isBookkeeping(ix)) ?? all[0];
  return main ? nameOf(main) : 'unknown';
}

/** The first top-level memo, base64; null without one. */
export function solanaMemo(instructions: readonly unknown[]): string | null {
  const memo = instructions.filter(isObject).find(isMemo);
  if (!memo) return null;
  if (typeof memo.parsed === 'string') return Buffer.from(memo.parsed, 'utf8').toString('base64');
  const bytes = base58Bytes(asString(memo.data) ?? '');
  return bytes ? Buffer.from(bytes).toString('base64') : null;
}

export interface SolanaLookupOptions {
  /** The JSON-RPC endpoint, e.g. https://api.mainnet-beta.solana.com. */
  url: string;
  timeoutMs?: number;
}

export function createSolanaLookup(options: SolanaLookupOptions): TransactionLookup {
  const rpc = createSolanaRpc(options);
  const unexpected = (what: string) =>
    new UpstreamUnavailableError(`The node at ${rpc.host} answered ${what}`);
  const call = async (method: string, params: unknown[]) => (await rpc.call(method, params)).result;

  // Read once and kept; a failed or malformed answer is forgotten so the next lookup asks again.
  let genesis: Promise<string> | undefined;
  const genesisHash = (): Promise<string> => {
    genesis ??= (async () => {
      const hash = await call('getGenesisHash', []);
      if (typeof hash !== 'string' || base58Bytes(hash)?.length !== 32) throw unexpected('no genesis hash');
      return hash;
    })().catch((err: unknown) => {
      genesis = undefined;
      throw err;
    });
    return genesis;
  };

  const getTransaction = (signature: string, commitment: 'finalized' | 'confirmed') =>
    call('getTransaction', [
      signature,
      { encoding: 'jsonParsed', maxSupportedTransactionVersion: 0, commitment },
    ]);

  return async (txId) => {
    if (!isSolanaTxId(txId)) {
      throw new ValidationError('Not a Solana transaction id', [
        { parameter: 'txId', detail: 'must be a base58 signature (64 bytes)' },
      ]);
    }
    const [genesis, finalized] = await Promise.all([genesisHash(), getTransaction(txId, 'finalized')]);
    const final = finalized !== null && finalized !== undefined;
    const found = final ? finalized : await getTransaction(txId, 'confirmed');
    if (found === null || found === undefined) return undefined;
    if (!isObject(found) || !isObject(found.transaction) || !isObject(found.transaction.message))
      throw unexpected('getTransaction with an unexpected shape');

    const { transaction, meta } = found;
    const message = transaction.message as Json;
    const signatures = Array.isArray(transaction.signatures) ? transaction.signatures : [];
    const first = asString(signatures[0]);
    if (!first) throw unexpected('getTransaction without signatures');
    const keys = Array.isArray(message.accountKeys) ? message.accountKeys : [];
    const payer = keys[0];
    const instructions = Array.isArray(message.instructions) ? message.instructions : [];

    const view = emptyView(first);
    view.signature = first;
    view.confirmedRound = asBigint(found.slot) ?? null;
    view.roundTime = asBigint(found.blockTime) ?? null;
    view.intraRoundOffset = asBigint(found.transactionIndex) ?? null;
    view.fee = isObject(meta) ? (asBigint(meta.fee) ?? null) : null;
    view.sender = (isObject(payer) ? asString(payer.pubkey) : asString(payer)) ?? null;
    view.txType = solanaTxType(instructions);
    view.note = solanaMemo(instructions);
    view.genesisHash = genesis;
    view.genesisId = solanaChainId(genesis);
    return { view, final };
  };
}
