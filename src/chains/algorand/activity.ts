/**
 * What an Algorand round does, as the follower's activity: its top-level transactions with their
 * value-moving effects, inner transactions folded in, and per address and asset the net change,
 * whether value moved and the single counterparty, by the rules of docs/watching-chains.md
 * (Algorand). Closing amounts are ApplyData `ca`/`aca` (indexer `closing-amount`,
 * `asset-closing-amount`/`close-amount`). Every transaction, inner ones too, costs its own sender
 * its recorded `fee` (under fee pooling an inner fee is usually 0, the outer sender paid it). No
 * I/O: source.ts fills these from algod's msgpack blocks or the indexer.
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
