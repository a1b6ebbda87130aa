/**
 * What an Algorand round does, as the follower's activity: its top-level transactions, each with
 * the value-moving parts of its effect (payment, asset transfer, closing amounts, rewards) and its
 * inner transactions, and the arithmetic a notification needs (docs/watching-chains.md): each address's net
 * signed change of each asset, whether value of that asset actually moved for it, and the single
 * counterparty. No I/O here: source.ts fills these from algod's msgpack blocks or the indexer.
 *
 * The rules, per (top-level transaction, address, asset), inner transactions folded in:
 * - `pay`: the receiver + amount, the sender − amount − fee; with `close-remainder-to`, that
 *   account + the closing amount (ApplyData `ca`, indexer `closing-amount`), the sender − it.
 * - `axfer`: the asset receiver + amount, the sender − amount (for a clawback the revoked
 *   `asset-sender` instead: the clawback account pays only the fee); with `close-to`, that
 *   account + the asset closing amount (`aca`, indexer `asset-closing-amount`/`close-amount`).
 * - every transaction, inner ones included, costs its own sender its `fee` as recorded: under fee
 *   pooling an inner transaction's fee is usually 0 and the outer sender paid more, which the
 *   outer fee already says; an inner fee that is not 0 is paid by the application account.
 * - rewards (`rs`/`rr`/`rc`) count: the net is the balance change, and rewards are credited to
 *   the sender, the receiver and the close-to account as the round applied them.
 * - "moved": the address sent or received a non-zero amount of the asset (a self-payment too).
 *   Fees and rewards alone do not move value, so a 0-amount opt-in, a key registration, an asset
 *   configuration or an application call without inner transfers notifies nothing.
 */
import { formatUnits } from 'viem';

/** The native asset, in µAlgo; an ASA is named by its id as a decimal string. */
export const ALGO = 'ALGO';
export const ALGO_DECIMALS = 6;

export interface AlgorandPayment {
  receiver: string;
  amount: bigint;
  closeTo?: string;
  /** What the close moved to closeTo (0 without a close). */
  closingAmount: bigint;
}

export interface AlgorandAssetTransfer {
  /** The ASA id, as a decimal string. */
  assetId: string;
  receiver: string;
  amount: bigint;
  /** A clawback's revoked account (`asnd`, indexer `asset-transfer-transaction.sender`). */
  revokedFrom?: string;
  closeTo?: string;
  closingAmount: bigint;
}

/** One transaction's value-moving effect, as applied (zero rewards and amounts are 0n). */
export interface AlgorandTransaction {
  /** `pay`, `axfer`, `appl`, `acfg`, `keyreg`, `afrz`, `stpf`, `hb`. */
  type: string;
  sender: string;
  fee: bigint;
  senderRewards: bigint;
  receiverRewards: bigint;
  closeRewards: bigint;
  payment?: AlgorandPayment;
  assetTransfer?: AlgorandAssetTransfer;
  /** Inner transactions of an application call, in execution order. */
  inner: AlgorandTransaction[];
}

/** A top-level transaction: the only kind with an id of its own. */
export interface AlgorandTopTransaction extends AlgorandTransaction {
  id: string;
}

/** A round's top-level transactions, in block order. */
export type AlgorandActivity = AlgorandTopTransaction[];

/** One address's net change of one asset in one top-level transaction. */
export interface BalanceChange {
  address: string;
  /** `ALGO` or the ASA id. */
  asset: string;
  /** Base units (µAlgo or the ASA's), signed: + credited, − debited. */
  amount: bigint;
  /** Whether the address sent or received a non-zero amount of the asset (not only a fee or rewards). */
  moved: boolean;
}

/** Accumulates changes keyed by address and asset, in first-seen order. */
class Ledger {
  readonly changes = new Map<string, BalanceChange>();

  private entry(address: string, asset: string): BalanceChange {
    const key = `${address}\u0000${asset}`;
    let change = this.changes.get(key);
    if (!change) {
      change = { address, asset, amount: 0n, moved: false };
      this.changes.set(key, change);
    }
    return change;
  }

  /** A fee or rewards: changes the balance without moving value. */
  adjust(address: string, asset: string, amount: bigint): void {
    if (amount !== 0n) this.entry(address, asset).amount += amount;
  }

  /** Value moved from one address to another (possibly itself). */
  transfer(from: string, to: string, asset: string, amount: bigint): void {
    if (amount === 0n) return;
    const sender = this.entry(from, asset);
    sender.amount -= amount;
    sender.moved = true;
    const receiver = this.entry(to, asset);
    receiver.amount += amount;
    receiver.moved = true;
  }
}

function applyPayment(ledger: Ledger, tx: AlgorandTransaction, payment: AlgorandPayment): void {
  ledger.transfer(tx.sender, payment.receiver, ALGO, payment.amount);
  ledger.adjust(payment.receiver, ALGO, tx.receiverRewards);
  if (payment.closeTo === undefined) return;
  ledger.transfer(tx.sender, payment.closeTo, ALGO, payment.closingAmount);
  ledger.adjust(payment.closeTo, ALGO, tx.closeRewards);
}

function applyAssetTransfer(ledger: Ledger, tx: AlgorandTransaction, transfer: AlgorandAssetTransfer): void {
  const from = transfer.revokedFrom ?? tx.sender;
  ledger.transfer(from, transfer.receiver, transfer.assetId, transfer.amount);
  ledger.adjust(transfer.receiver, ALGO, tx.receiverRewards);
  if (transfer.closeTo === undefined) return;
  ledger.transfer(from, transfer.closeTo, transfer.assetId, transfer.closingAmount);
  ledger.adjust(transfer.closeTo, ALGO, tx.closeRewards);
}

function apply(ledger: Ledger, tx: AlgorandTransaction): void {
  ledger.adjust(tx.sender, ALGO, tx.senderRewards - tx.fee);
  if (tx.payment) applyPayment(ledger, tx, tx.payment);
  if (tx.assetTransfer) applyAssetTransfer(ledger, tx, tx.assetTransfer);
  for (const inner of tx.inner) apply(ledger, inner);
}

/**
 * Every (address, asset) whose balance the transaction (with its inner transactions) changed,
 * with the net change and whether value moved, in first-seen order. Only `moved` entries are
 * notified; the others (fees, rewards) are kept so that the arithmetic can be checked.
 */
export function balanceChanges(tx: AlgorandTransaction): BalanceChange[] {
  const ledger = new Ledger();
  apply(ledger, tx);
  return [...ledger.changes.values()];
}

/** The changes that notify: value of the asset moved for the address. */
export function movedChanges(tx: AlgorandTransaction): BalanceChange[] {
  return balanceChanges(tx).filter((change) => change.moved);
}

/**
 * The single other address whose balance of the same asset moved the other way, when there is
 * exactly one; none for a net of zero (nothing flowed either way).
 */
export function counterparty(changes: BalanceChange[], change: BalanceChange): string | undefined {
  const others = counterparties(changes, change);
  return others.length === 1 ? others[0] : undefined;
}

/** The other addresses whose balance of the same asset moved the other way, in first-seen order. */
export function counterparties(changes: BalanceChange[], change: BalanceChange): string[] {
  if (change.amount === 0n) return [];
  const others = new Set<string>();
  for (const other of changes) {
    if (other.asset !== change.asset || other.address === change.address || !other.moved) continue;
    if (other.amount !== 0n && other.amount < 0n !== change.amount < 0n) others.add(other.address);
  }
  return [...others];
}

/** Base units as a signed decimal string in display units ("-0.001", "5", "1.5"). */
export function formatAlgorandAmount(amount: bigint, decimals: number): string {
  return formatUnits(amount, decimals);
}
