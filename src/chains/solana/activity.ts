/**
 * What a Solana block does, as the follower's activity: its transactions, each reduced to the
 * balances it changed, and the arithmetic a notification needs, by docs/watching-chains.md's rules
 * (Solana). No I/O: source.ts hands each `getBlock` transaction to `solanaTransactionFromJson`. In
 * `jsonParsed` the keys include lookup-table addresses; other encodings append
 * `meta.loadedAddresses` (writable, then readonly). A token account without a balance entry on one
 * side held nothing there; 2021-era answers may lack `owner` (only the token account's change is
 * known). A JSON number beyond 2^53 throws InexactNumberError; the caller parses again exactly.
 */
import { formatUnits } from 'viem';
import { LedgerhookError } from '../../errors.js';

export const SOL = 'SOL';
export const SOL_DECIMALS = 9;

export interface SolanaTokenBalance {
  /** Index into the transaction's accounts: the token account. */
  accountIndex: number;
  mint: string;
  /** The wallet owning the token account; absent in answers from before owners were recorded. */
  owner?: string;
  /** Base units. */
  amount: bigint;
  decimals: number;
}

export interface SolanaTransaction {
  /** The first signature: the transaction's id. */
  signature: string;
  failed: boolean;
  /** Lamports, paid by accounts[0]. */
  fee: bigint;
  /** Every account of the transaction, lookup-table ones included, in balance order. */
  accounts: string[];
  preBalances: bigint[];
  postBalances: bigint[];
  preTokenBalances: SolanaTokenBalance[];
  postTokenBalances: SolanaTokenBalance[];
}

/** A slot's transactions, in block order. */
export type SolanaActivity = SolanaTransaction[];

/**
 * Whose balance a change is: a SOL account, a token owner (net of its token accounts of a mint),
 * or a token account itself. Counterparties are looked for among changes of the same holder kind.
 */
export type SolanaHolder = 'account' | 'owner' | 'tokenAccount';

/** One address's net change of one asset in one transaction. */
export interface SolanaChange {
  address: string;
  /** `SOL` or the mint. */
  asset: string;
  decimals: number;
  /** Base units (lamports or the mint's), signed: + credited, − debited. */
  amount: bigint;
  holder: SolanaHolder;
  /**
   * The other addresses of the same kind whose balance of the same asset moved the other way: whom
   * the address dealt with in the transaction, for this asset.
   */
  counterparties: string[];
}

/** The answer does not have the shape of a `jsonParsed` transaction. */
export class MalformedSolanaTransaction extends LedgerhookError {
  constructor(detail: string) {
    super(detail);
  }
}

/** A JSON number in the answer is beyond 2^53, so JSON.parse rounded it: parse exactly instead. */
export class InexactNumberError extends LedgerhookError {
  constructor(what: string) {
    super(`${what} is beyond 2^53 and was rounded`);
  }
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** An integer field read from JSON.parse (number) or parseExactJson (bigint) output. */
function integer(value: unknown, what: string): bigint {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'number' && Number.isInteger(value)) {
    if (!Number.isSafeInteger(value)) throw new InexactNumberError(what);
    return BigInt(value);
  }
  throw new MalformedSolanaTransaction(`${what} is not an integer`);
}

function smallInteger(value: unknown, what: string): number {
  const n = integer(value, what);
  if (n < 0n || n > 1_000_000n) throw new MalformedSolanaTransaction(`${what} is out of range`);
  return Number(n);
}

function list(value: unknown, what: string): unknown[] {
  if (!Array.isArray(value)) throw new MalformedSolanaTransaction(`${what} is not a list`);
  return value;
}

function text(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new MalformedSolanaTransaction(`${what} is not a string`);
  return value;
}

/** A key as `jsonParsed` writes it (`{pubkey, signer, writable, source?}`) or as a plain string. */
const keyOf = (key: unknown): string => text(isObject(key) ? key.pubkey : key, 'an account key');

/**
 * The transaction's accounts in balance order. `jsonParsed` lists the loaded addresses among the
 * message's keys already; otherwise (the keys are fewer than the balances) they follow from
 * `meta.loadedAddresses`, writable first, as the runtime orders them.
 */
export function accountsOf(message: Json, meta: Json, balances: number): string[] {
  const keys = list(message.accountKeys, 'accountKeys').map(keyOf);
  const loaded = meta.loadedAddresses;
  if (keys.length < balances && isObject(loaded)) {
    const writable = list(loaded.writable ?? [], 'loadedAddresses.writable');
    const readonly = list(loaded.readonly ?? [], 'loadedAddresses.readonly');
    for (const key of [...writable, ...readonly]) keys.push(text(key, 'a loaded address'));
  }
  if (keys.length !== balances)
    throw new MalformedSolanaTransaction(`${keys.length} accounts for ${balances} balances`);
  return keys;
}

function tokenBalance(entry: unknown): SolanaTokenBalance {
  if (!isObject(entry) || !isObject(entry.uiTokenAmount))
    throw new MalformedSolanaTransaction('a token balance without uiTokenAmount');
  const amount = text(entry.uiTokenAmount.amount, 'a token amount');
  if (!/^\d+$/.test(amount)) throw new MalformedSolanaTransaction(`token amount ${amount}`);
  return {
    accountIndex: smallInteger(entry.accountIndex, 'accountIndex'),
    mint: text(entry.mint, 'a mint'),
    ...(typeof entry.owner === 'string' ? { owner: entry.owner } : {}),
    amount: BigInt(amount),
    decimals: smallInteger(entry.uiTokenAmount.decimals, 'token decimals'),
  };
}

const tokenBalances = (value: unknown): SolanaTokenBalance[] =>
  // Nodes before token balances were recorded answer null.
  value === null || value === undefined ? [] : list(value, 'token balances').map(tokenBalance);

/**
 * One entry of a `jsonParsed` getBlock's `transactions` (or a getTransaction result): with full
 * transaction details the keys are the message's; with `accounts` details (what the block source
 * asks for) there is no message and the transaction carries them, lookup-table ones included.
 */
export function solanaTransactionFromJson(entry: unknown): SolanaTransaction {
  if (!isObject(entry) || !isObject(entry.transaction) || !isObject(entry.meta))
    throw new MalformedSolanaTransaction('a transaction without transaction or meta');
  const { transaction, meta } = entry;
  const keys = isObject(transaction.message) ? transaction.message : transaction;
  if (keys.accountKeys === undefined)
    throw new MalformedSolanaTransaction('a transaction without message or accountKeys');
  const signature = text(list(transaction.signatures, 'signatures')[0], 'the first signature');
  const preBalances = list(meta.preBalances, 'preBalances').map((b) => integer(b, 'a balance'));
  const postBalances = list(meta.postBalances, 'postBalances').map((b) => integer(b, 'a balance'));
  if (preBalances.length !== postBalances.length)
    throw new MalformedSolanaTransaction('preBalances and postBalances differ in length');
  return {
    signature,
    failed: meta.err !== null && meta.err !== undefined,
    fee: integer(meta.fee, 'fee'),
    accounts: accountsOf(keys, meta, preBalances.length),
    preBalances,
    postBalances,
    preTokenBalances: tokenBalances(meta.preTokenBalances),
    postTokenBalances: tokenBalances(meta.postTokenBalances),
  };
}

/** Accumulates signed changes keyed by address and asset, in first-seen order. */
class Tally {
  readonly changes = new Map<string, SolanaChange>();

  add(holder: SolanaHolder, address: string, asset: string, decimals: number, amount: bigint): void {
    const key = `${holder}\u0000${address}\u0000${asset}`;
    const change = this.changes.get(key);
    if (change) change.amount += amount;
    else this.changes.set(key, { address, asset, decimals, amount, holder, counterparties: [] });
  }
}

function solChanges(tx: SolanaTransaction, tally: Tally): void {
  tx.accounts.forEach((address, i) => {
    const amount = tx.postBalances[i]! - tx.preBalances[i]!;
    // The fee payer paying its fee and nothing else moved no value.
    const feeOnly = i === 0 && amount === -tx.fee;
    if (amount !== 0n && !feeOnly) tally.add('account', address, SOL, SOL_DECIMALS, amount);
  });
}

function tokenChanges(tx: SolanaTransaction, tally: Tally): void {
  const sides: [SolanaTokenBalance[], bigint][] = [
    [tx.preTokenBalances, -1n],
    [tx.postTokenBalances, 1n],
  ];
  for (const [balances, sign] of sides) {
    for (const balance of balances) {
      const account = tx.accounts[balance.accountIndex];
      if (account === undefined)
        throw new MalformedSolanaTransaction(
          `token balance of account ${balance.accountIndex}, not in the transaction`,
        );
      const amount = sign * balance.amount;
      tally.add('tokenAccount', account, balance.mint, balance.decimals, amount);
      if (balance.owner !== undefined)
        tally.add('owner', balance.owner, balance.mint, balance.decimals, amount);
    }
  }
}

/**
 * Every change that notifies: non-zero net changes of SOL (the fee payer's fee alone left out)
 * and of each token, per owner and per token account, each with its counterparties. An address
 * seen both as an owner and as a token account of the same mint is reported once, as the owner.
 * A failed transaction: none.
 */
export function solanaChanges(tx: SolanaTransaction): SolanaChange[] {
  if (tx.failed) return [];
  const tally = new Tally();
  solChanges(tx, tally);
  tokenChanges(tx, tally);
  const moved = [...tally.changes.values()].filter((change) => change.amount !== 0n);
  for (const change of moved) change.counterparties = counterpartiesAmong(moved, change);
  const seen = new Set<string>();
  const out: SolanaChange[] = [];
  for (const change of moved.sort((a, b) => rank(a.holder) - rank(b.holder))) {
    const key = `${change.address}\u0000${change.asset}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(change);
  }
  return out;
}

const rank = (holder: SolanaHolder): number => (holder === 'tokenAccount' ? 1 : 0);

function counterpartiesAmong(changes: SolanaChange[], change: SolanaChange): string[] {
  const others: string[] = [];
  for (const other of changes) {
    if (other.asset !== change.asset || other.holder !== change.holder || other.address === change.address)
      continue;
    if (other.amount < 0n !== change.amount < 0n && !others.includes(other.address))
      others.push(other.address);
  }
  return others;
}

/** The single counterparty, when there is exactly one. */
export function counterpartyOf(change: SolanaChange): string | undefined {
  return change.counterparties.length === 1 ? change.counterparties[0] : undefined;
}

/** Base units as a signed decimal string in display units ("-0.000005", "3.8"). */
export function formatSolanaAmount(amount: bigint, decimals: number): string {
  return formatUnits(amount, decimals);
}
