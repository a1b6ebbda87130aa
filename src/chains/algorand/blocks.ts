/**
 * Algorand blocks from either API into the follower's terms, without I/O: algod's msgpack block
 * (decoded with algosdk) and the indexer's JSON block both become the same header facts (round,
 * hash, previous hash, genesis) and the same activity (activity.ts). Neither API gives a block's
 * hash, so it is computed here for both, SHA-512/256 of "BH" ‖ the canonical msgpack header (the
 * indexer's JSON header rebuilt field by field into algosdk's BlockHeader), and written as
 * algod's `/v2/blocks/{round}/hash` writes it: unpadded base32 of the 32 bytes.
 */
import { createHash } from 'node:crypto';
import algosdk from 'algosdk';
import { LedgerhookError } from '../../errors.js';
import type { AlgorandActivity, AlgorandTopTransaction, AlgorandTransaction } from './activity.js';

type Json = Record<string, unknown>;

/** A block that does not have the shape the API documents. */
export class MalformedBlock extends LedgerhookError {}

export interface AlgorandHeader {
  round: number;
  hash: string;
  parentHash: string;
  genesisId: string;
  /** Base64, as algod's and the indexer's JSON write it. */
  genesisHash: string;
  /** Unix seconds. */
  timestamp: number;
}

export interface AlgorandBlock extends AlgorandHeader {
  activity: AlgorandActivity;
}

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32 without padding, as Algorand writes hashes and transaction ids. */
export function base32(bytes: Uint8Array): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(buffer >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(buffer << (5 - bits)) & 31];
  return out;
}

const base64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');

/** The block hash of a header: SHA-512/256 of "BH" ‖ canonical msgpack, in base32. */
export function headerHash(header: algosdk.BlockHeader): string {
  const digest = createHash('sha512-256')
    .update(Buffer.from('BH'))
    .update(algosdk.encodeMsgpack(header))
    .digest();
  return base32(digest);
}

function headerFacts(header: algosdk.BlockHeader): AlgorandHeader {
  return {
    round: Number(header.round),
    hash: headerHash(header),
    parentHash: base32(header.branch),
    genesisId: header.genesisID,
    genesisHash: base64(header.genesisHash),
    timestamp: Number(header.timestamp),
  };
}

// ---------------------------------------------------------------------------------------------
// algod (msgpack)

const addressText = (address: algosdk.Address | undefined): string | undefined => address?.toString();

/** One transaction (top-level or inner) with its ApplyData, as activity. */
function fromSignedWithAD(signed: algosdk.SignedTxnWithAD): AlgorandTransaction {
  const { txn } = signed.signedTxn;
  const ad = signed.applyData;
  const tx: AlgorandTransaction = {
    type: txn.type,
    sender: txn.sender.toString(),
    fee: txn.fee,
    senderRewards: ad.senderRewards ?? 0n,
    receiverRewards: ad.receiverRewards ?? 0n,
    closeRewards: ad.closeRewards ?? 0n,
    inner: (ad.evalDelta?.innerTxns ?? []).map(fromSignedWithAD),
  };
  if (txn.payment) {
    const closeTo = addressText(txn.payment.closeRemainderTo);
    tx.payment = {
      receiver: txn.payment.receiver.toString(),
      amount: txn.payment.amount,
      ...(closeTo === undefined ? {} : { closeTo }),
      closingAmount: ad.closingAmount ?? 0n,
    };
  }
  if (txn.assetTransfer) {
    const closeTo = addressText(txn.assetTransfer.closeRemainderTo);
    const revokedFrom = addressText(txn.assetTransfer.assetSender);
    tx.assetTransfer = {
      assetId: txn.assetTransfer.assetIndex.toString(),
      receiver: txn.assetTransfer.receiver.toString(),
      amount: txn.assetTransfer.amount,
      ...(revokedFrom === undefined ? {} : { revokedFrom }),
      ...(closeTo === undefined ? {} : { closeTo }),
      closingAmount: ad.assetClosingAmount ?? 0n,
    };
  }
  return tx;
}

/**
 * A block transaction's id. The block stores it without the genesis id and hash it was signed
 * with (`hgi` says the id was there); both are put back before hashing. The genesis hash is put
 * back always: every protocol since the networks' launch requires it in transactions.
 */
export function blockTransactionId(stib: algosdk.SignedTxnInBlock, header: algosdk.BlockHeader): string {
  const data = stib.signedTxn.signedTxn.txn.toEncodingData();
  if (stib.hasGenesisID) data.set('gen', header.genesisID);
  data.set('gh', header.genesisHash);
  return algosdk.Transaction.fromEncodingData(data).txID();
}

/** algod's `/v2/blocks/{round}?format=msgpack` body (`{block, cert}`) as a block. */
export function blockFromAlgod(bytes: Uint8Array): AlgorandBlock {
  let block: algosdk.Block;
  try {
    block = algosdk.decodeMsgpack(bytes, algosdk.modelsv2.BlockResponse).block;
  } catch (err) {
    throw new MalformedBlock(`a body that is not a msgpack block (${(err as Error).message})`);
  }
  const activity = block.payset.map(
    (stib): AlgorandTopTransaction => ({
      id: blockTransactionId(stib, block.header),
      ...fromSignedWithAD(stib.signedTxn),
    }),
  );
  return { ...headerFacts(block.header), activity };
}

// ---------------------------------------------------------------------------------------------
// indexer (JSON, integers as bigint: node-http's parseExactJson)

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function field<T>(obj: Json, key: string, check: (v: unknown) => v is T, what: string): T {
  const value = obj[key];
  if (!check(value)) throw new MalformedBlock(`"${key}" is not ${what}`);
  return value;
}

const isBigint = (v: unknown): v is bigint => typeof v === 'bigint';
const isString = (v: unknown): v is string => typeof v === 'string';

/** An integer the indexer may leave out when it is zero. */
function int(obj: Json, key: string): bigint {
  return obj[key] === undefined ? 0n : field(obj, key, isBigint, 'an integer');
}

function text(obj: Json, key: string): string {
  return obj[key] === undefined ? '' : field(obj, key, isString, 'a string');
}

function bytes(obj: Json, key: string): Uint8Array {
  return new Uint8Array(Buffer.from(text(obj, key), 'base64'));
}

/** A fixed-length hash the indexer leaves out when zero: algosdk wants the zero bytes. */
function hashBytes(obj: Json, key: string, length: 32 | 64): Uint8Array {
  const value = bytes(obj, key);
  if (value.length === 0) return new Uint8Array(length);
  if (value.length !== length) throw new MalformedBlock(`"${key}" is not ${length} bytes`);
  return value;
}

function optionalText(obj: Json, key: string): string | undefined {
  const value = text(obj, key);
  return value === '' ? undefined : value;
}

function sub(obj: Json, key: string): Json {
  const value = obj[key] ?? {};
  if (!isObject(value)) throw new MalformedBlock(`"${key}" is not an object`);
  return value;
}

function list(obj: Json, key: string): unknown[] {
  const value = obj[key] ?? [];
  if (!Array.isArray(value)) throw new MalformedBlock(`"${key}" is not an array`);
  return value;
}

const ZERO_ADDRESS = algosdk.ALGORAND_ZERO_ADDRESS_STRING;
const address = (text: string | undefined) => algosdk.Address.fromString(text || ZERO_ADDRESS);

function stateProofTracking(header: Json): Map<number, algosdk.StateProofTrackingData> {
  const tracking = new Map<number, algosdk.StateProofTrackingData>();
  for (const entry of list(header, 'state-proof-tracking')) {
    if (!isObject(entry)) throw new MalformedBlock('a "state-proof-tracking" entry is not an object');
    tracking.set(
      Number(int(entry, 'type')),
      new algosdk.StateProofTrackingData({
        stateProofVotersCommitment: bytes(entry, 'voters-commitment'),
        stateProofOnlineTotalWeight: int(entry, 'online-total-weight'),
        stateProofNextRound: int(entry, 'next-round'),
      }),
    );
  }
  return tracking;
}

function addresses(obj: Json, key: string): algosdk.Address[] {
  return list(obj, key).map((a) => address(isString(a) ? a : undefined));
}

/** The indexer's JSON header rebuilt as the header algod hashes (zero fields are left out by both). */
export function headerFromIndexer(block: Json): algosdk.BlockHeader {
  const rewards = sub(block, 'rewards');
  const upgrade = sub(block, 'upgrade-state');
  const vote = sub(block, 'upgrade-vote');
  const participation = sub(block, 'participation-updates');
  return new algosdk.BlockHeader({
    round: field(block, 'round', isBigint, 'an integer'),
    branch: hashBytes(block, 'previous-block-hash', 32),
    branch512: hashBytes(block, 'previous-block-hash-512', 64),
    seed: hashBytes(block, 'seed', 32),
    txnCommitments: new algosdk.TxnCommitments({
      nativeSha512_256Commitment: hashBytes(block, 'transactions-root', 32),
      sha256Commitment: hashBytes(block, 'transactions-root-sha256', 32),
      sha512Commitment: hashBytes(block, 'transactions-root-sha512', 64),
    }),
    timestamp: int(block, 'timestamp'),
    genesisID: text(block, 'genesis-id'),
    genesisHash: hashBytes(block, 'genesis-hash', 32),
    proposer: address(optionalText(block, 'proposer')),
    feesCollected: int(block, 'fees-collected'),
    bonus: int(block, 'bonus'),
    proposerPayout: int(block, 'proposer-payout'),
    rewardState: new algosdk.RewardState({
      feeSink: address(optionalText(rewards, 'fee-sink')),
      rewardsPool: address(optionalText(rewards, 'rewards-pool')),
      rewardsLevel: int(rewards, 'rewards-level'),
      rewardsRate: int(rewards, 'rewards-rate'),
      rewardsResidue: int(rewards, 'rewards-residue'),
      rewardsRecalculationRound: int(rewards, 'rewards-calculation-round'),
    }),
    upgradeState: new algosdk.UpgradeState({
      currentProtocol: text(upgrade, 'current-protocol'),
      nextProtocol: text(upgrade, 'next-protocol'),
      nextProtocolApprovals: int(upgrade, 'next-protocol-approvals'),
      nextProtocolVoteBefore: int(upgrade, 'next-protocol-vote-before'),
      nextProtocolSwitchOn: int(upgrade, 'next-protocol-switch-on'),
    }),
    upgradeVote: new algosdk.UpgradeVote({
      upgradePropose: text(vote, 'upgrade-propose'),
      upgradeDelay: int(vote, 'upgrade-delay'),
      upgradeApprove: vote['upgrade-approve'] === true,
    }),
    txnCounter: int(block, 'txn-counter'),
    stateproofTracking: stateProofTracking(block),
    participationUpdates: new algosdk.ParticipationUpdates({
      expiredParticipationAccounts: addresses(participation, 'expired-participation-accounts'),
      absentParticipationAccounts: addresses(participation, 'absent-participation-accounts'),
    }),
  });
}

/** One transaction of the indexer's Transaction model (inner ones have no id) as activity. */
function fromIndexerTransaction(tx: Json): AlgorandTransaction {
  const out: AlgorandTransaction = {
    type: field(tx, 'tx-type', isString, 'a string'),
    sender: field(tx, 'sender', isString, 'a string'),
    fee: int(tx, 'fee'),
    senderRewards: int(tx, 'sender-rewards'),
    receiverRewards: int(tx, 'receiver-rewards'),
    closeRewards: int(tx, 'close-rewards'),
    inner: list(tx, 'inner-txns').map((inner) => {
      if (!isObject(inner)) throw new MalformedBlock('an inner transaction is not an object');
      return fromIndexerTransaction(inner);
    }),
  };
  if (out.type === 'pay') {
    const payment = sub(tx, 'payment-transaction');
    const closeTo = optionalText(payment, 'close-remainder-to');
    out.payment = {
      receiver: text(payment, 'receiver') || ZERO_ADDRESS,
      amount: int(payment, 'amount'),
      ...(closeTo === undefined ? {} : { closeTo }),
      closingAmount: int(tx, 'closing-amount'),
    };
  }
  if (out.type === 'axfer') {
    const transfer = sub(tx, 'asset-transfer-transaction');
    const closeTo = optionalText(transfer, 'close-to');
    const revokedFrom = optionalText(transfer, 'sender');
    out.assetTransfer = {
      assetId: field(transfer, 'asset-id', isBigint, 'an integer').toString(),
      receiver: text(transfer, 'receiver') || ZERO_ADDRESS,
      amount: int(transfer, 'amount'),
      ...(revokedFrom === undefined ? {} : { revokedFrom }),
      ...(closeTo === undefined ? {} : { closeTo }),
      closingAmount: int(transfer, 'close-amount'),
    };
  }
  return out;
}

/** A top-level transaction of the indexer's Transaction model (a block's, or a search's) as activity. */
export function topTransactionFromIndexer(tx: unknown): AlgorandTopTransaction {
  if (!isObject(tx)) throw new MalformedBlock('a transaction is not an object');
  return { id: field(tx, 'id', isString, 'a string'), ...fromIndexerTransaction(tx) };
}

/** The indexer's `/v2/blocks/{round}` body as a block (its header only when it has no transactions). */
export function blockFromIndexer(block: unknown): AlgorandBlock {
  if (!isObject(block)) throw new MalformedBlock('the body is not an object');
  const header = headerFromIndexer(block);
  const activity = list(block, 'transactions').map(topTransactionFromIndexer);
  return { ...headerFacts(header), activity };
}
