/**
 * A loopback Tron node of our own: a real HTTP server on 127.0.0.1 speaking java-tron's HTTP API
 * (`/wallet/*` and `/walletsolidity/*`, POST with a JSON body or GET with query parameters) over
 * the blocks it is given. It answers as java-tron's servlets do (tronprotocol/java-tron at
 * 1e35f79a165424bbae319799d9aca92948b8f5c2, 2025-05-12, framework/src/main/java/org/tron/core/
 * services/http): always 200 and `application/json; charset=utf-8`, `{}` for what it does not hold,
 * `{"Error": "class <Java exception> : <message>"}` for malformed input, addresses as 21-byte hex
 * `41…` unless `visible` is true (then base58check, and TRC-10 names and `resMessage` as text).
 *
 * What is real and what is not (details and provenance in test/fixtures/chains/tron/README.md):
 * - REAL: block 69351239 (recorded `/wallet/getblockbynum`, served unchanged), every transaction
 *   body (signed, with its real txID), the TransactionInfo of e1cd4454… and the 105 recorded by
 *   Ledger, the TronGrid `/v1/assets/<id>` records and the recorded single transactions.
 * - SYNTHESIZED: the infos of block 69351239 but e1cd4454… (no gettransactioninfobyblocknum answer
 *   was ever recorded), and of assembled transactions that have no recorded info: built from the
 *   transaction (bandwidth, the `Transfer` log its TRC-20 calldata emits) and, where a TronGrid row
 *   gives them, its fee and resource fields.
 * - ASSEMBLED: blocks 69351240…69351246 (`assembledChain`, `replacementBranch`, `emptyBlocks`):
 *   real transactions in blocks of our own whose links, txTrieRoot and blockID are computed as
 *   java-tron computes them; no network ever produced these blocks, their transactions expired
 *   years before, and the witness signature (block 69351239's) does not sign them.
 * - CONSTRUCTED: the internal transactions and the contract-sent USDT `Transfer` of one real
 *   contract call (`CONSTRUCTED`), in the form java-tron prints them (no recorded internal
 *   transaction carries value), and the `triggerconstantcontract` answers.
 * - DERIVED: `getassetissuebyid` records, from the TronGrid records in java-tron's field order.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { isSafeNumber, parse, stringify } from 'lossless-json';
import { keccak256, stringToBytes } from 'viem';
import { fixturePath } from './fixture-node.js';
import { listenOnLoopback, type RestartableNode } from './loopback-server.js';

export type Json = Record<string, unknown>;

/** The USDT (Tether) TRC-20 contract on mainnet. */
export const USDT = 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t';
export const USDT_HEX = '41a614f803b6fd780986a42c78ec9c7f77e6ded13c';
export const RECORDED_BLOCK_NUMBER = 69351239;
export const RECORDED_BLOCK_ID = '00000000042237478c25c60c05f33fc618b6bb639b8c07581cad05e04731e4d3';
/** The one transaction of block 69351239 whose TransactionInfo was recorded (500 TRX with a memo). */
export const RECORDED_INFO_TX = 'e1cd4454d71d8973e89155bc2c2a91aa56fd470c8ce64547ce8c69c789c21f0c';
/** A real USDT call that failed with OUT_OF_ENERGY (real body and real info), in block 69351242. */
export const FAILED_USDT_TX = '13df06d50a1ff1f4a164e25afc946dd7b05df044894b1073b1e92eef41d8a98a';
/** keccak256("Transfer(address,address,uint256)"). */
export const TRANSFER_TOPIC = 'ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';
/** How far below the tip `/walletsolidity/*` serves: its solidified block is the tip's minus this. */
export const SOLIDITY_LAG = 19;
/** Tron's block interval. */
export const BLOCK_INTERVAL_MS = 3000;

/**
 * The CONSTRUCTED part of the assembled chain: the real JST `transfer` call 6681009a… (block
 * 69351243) gets, in its info, four internal transactions made by the JST contract and a USDT
 * `Transfer` whose `from` is that contract. Nothing like it was recorded.
 */
export const CONSTRUCTED = {
  txId: '6681009ae72be332ce405e1fd305ac368ab63d988dea3053d9e30fb9c86cfcd1',
  blockNumber: 69351243,
  /** The contract the transaction calls (JST), which makes the internal transfers. */
  contract: 'TCFLL5dx5ZJdKnWuesXxi1VPwjLVmWZZy9',
  trx: { to: 'TFFriedwRtWdFuzerDDtkoQTZ29smDZ1MB', sun: 2_500_000 },
  trc10: { to: 'TM1zzNDZD2DPASbKcgdVoTYhfmYgtfwx9R', tokenId: '1002000', amount: 1_000_000 },
  rejected: { to: 'TWFEbN2Mn68EEKAJe828C55qEEzhtF1Ef9', sun: 700_000 },
  usdtFromContract: { to: 'TPecqY13cLPBbG855V9q7tbMgQhRkwLDVr', amount: 5_000_000n },
} as const;

// ---------------------------------------------------------------------------------------------
// Shapes (java-tron's JSON, `visible` false)

export interface TronTransaction extends Json {
  txID: string;
  raw_data: Json;
  raw_data_hex: string;
  signature?: string[];
  ret?: Json[];
}

export interface TronHeaderRaw extends Json {
  number: number;
  parentHash: string;
  timestamp: number;
  txTrieRoot: string;
  version?: number;
  witness_address: string;
}

export interface TronBlock extends Json {
  blockID: string;
  block_header: { raw_data: TronHeaderRaw; witness_signature?: string };
  /** Absent for a block without transactions, as java-tron prints it. */
  transactions?: TronTransaction[];
}

export interface TronTransactionInfo extends Json {
  id: string;
  blockNumber: number;
  blockTimeStamp: number;
}

/** A block and its TransactionInfos, one per transaction in block order. */
export interface TronBlockFixture {
  block: TronBlock;
  infos: TronTransactionInfo[];
}

// ---------------------------------------------------------------------------------------------
// Fixture files

const fileTexts = new Map<string, string>();

/** A file of test/fixtures/chains/tron parsed exactly: integers beyond 2^53 as bigint. */
export function readTronFixture<T = unknown>(name: string): T {
  let text = fileTexts.get(name);
  if (text === undefined) {
    text = fs.readFileSync(fixturePath('chains/tron', name), 'utf8');
    fileTexts.set(name, text);
  }
  return parse(text, undefined, (value) => (isSafeNumber(value) ? Number(value) : BigInt(value))) as T;
}

const RECORDED_BLOCK_FILE = 'wallet-http/getblockbynum-69351239-mainnet.json';
const LEDGER_INFOS_FILE = 'wallet-http/ledger-gettransactioninfobyid-map-mainnet.json';

// ---------------------------------------------------------------------------------------------
// Bytes, protobuf and hashes

const sha256 = (data: Uint8Array): Buffer => createHash('sha256').update(data).digest();
const fromHex = (hex: string): Buffer => Buffer.from(hex.replace(/^0x/, ''), 'hex');
const utf8Hex = (text: string): string => Buffer.from(text, 'utf8').toString('hex');
/** A proto3 default, which JsonFormat does not print. */
const isZero = (value: unknown): boolean => value === 0 || value === 0n || value === false || value === '';

function varint(value: number | bigint): Buffer {
  let n = BigInt(value);
  if (n < 0n) throw new Error('negative protobuf integers are not needed here');
  const out: number[] = [];
  do {
    let byte = Number(n & 0x7fn);
    n >>= 7n;
    if (n > 0n) byte |= 0x80;
    out.push(byte);
  } while (n > 0n);
  return Buffer.from(out);
}

const tag = (field: number, wireType: number): Buffer => varint((field << 3) | wireType);

/** A singular integer field; 0 is not written (proto3 leaves defaults out). */
function intField(field: number, value: unknown): Buffer {
  if (value === undefined || value === 0 || value === 0n) return Buffer.alloc(0);
  return Buffer.concat([tag(field, 0), varint(value as number | bigint)]);
}

/** A singular bytes field; empty is not written. */
function bytesField(field: number, bytes: Uint8Array): Buffer {
  return bytes.length === 0 ? Buffer.alloc(0) : lengthDelimited(field, bytes);
}

/** An element of a repeated bytes or message field: always written, even empty. */
function lengthDelimited(field: number, bytes: Uint8Array): Buffer {
  return Buffer.concat([tag(field, 2), varint(bytes.length), bytes]);
}

/** BlockHeader.raw as java-tron serialises it (Tron.proto field numbers). */
function headerRawBytes(raw: TronHeaderRaw): Buffer {
  return Buffer.concat([
    intField(1, raw.timestamp),
    bytesField(2, fromHex(raw.txTrieRoot)),
    bytesField(3, fromHex(raw.parentHash)),
    intField(7, raw.number),
    intField(8, raw.witness_id),
    bytesField(9, fromHex(raw.witness_address)),
    intField(10, raw.version),
    bytesField(11, fromHex(String(raw.accountStateRoot ?? ''))),
  ]);
}

/** BlockCapsule.BlockId: the 8-byte big-endian number, then bytes 8..32 of sha256(header raw). */
export function blockIdOf(raw: TronHeaderRaw): string {
  const number = Buffer.alloc(8);
  number.writeBigUInt64BE(BigInt(raw.number));
  return Buffer.concat([number, sha256(headerRawBytes(raw)).subarray(8)]).toString('hex');
}

/** Transaction.Result.contractResult, by enum number. */
const CONTRACT_RESULTS = [
  'DEFAULT',
  'SUCCESS',
  'REVERT',
  'BAD_JUMP_DESTINATION',
  'OUT_OF_MEMORY',
  'PRECOMPILED_CONTRACT',
  'STACK_TOO_SMALL',
  'STACK_TOO_LARGE',
  'ILLEGAL_OPERATION',
  'STACK_OVERFLOW',
  'OUT_OF_ENERGY',
  'OUT_OF_TIME',
  'JVM_STACK_OVER_FLOW',
  'UNKNOWN',
  'TRANSFER_FAILED',
  'INVALID_CODE',
];

/** Transaction.Result with the fields a block's transactions carry (fee, ret, contractRet). */
function resultBytes(result: Json): Buffer {
  for (const key of Object.keys(result))
    if (!['fee', 'ret', 'contractRet'].includes(key)) throw new Error(`ret field ${key} is not encoded here`);
  const contractRet =
    result.contractRet === undefined ? 0 : CONTRACT_RESULTS.indexOf(String(result.contractRet));
  if (contractRet < 0) throw new Error(`unknown contractRet ${String(result.contractRet)}`);
  return Buffer.concat([
    intField(1, result.fee),
    intField(2, result.ret === 'FAILED' ? 1 : 0),
    intField(3, contractRet),
  ]);
}

/** Transaction: raw_data (1), signatures (2) and, for the block's Merkle tree, ret (5). */
function transactionBytes(tx: TronTransaction, withRet: boolean): Buffer {
  const parts = [bytesField(1, fromHex(tx.raw_data_hex))];
  for (const signature of tx.signature ?? []) parts.push(lengthDelimited(2, fromHex(signature)));
  if (withRet) for (const result of tx.ret ?? []) parts.push(lengthDelimited(5, resultBytes(result)));
  return Buffer.concat(parts);
}

/** java-tron's MerkleTree over sha256 of each transaction: pairs hashed, an odd last one carried up. */
export function txTrieRootOf(transactions: TronTransaction[]): string {
  if (transactions.length === 0) return '00'.repeat(32); // Sha256Hash.ZERO_HASH
  let level = transactions.map((tx) => sha256(transactionBytes(tx, true)));
  while (level.length > 1) {
    const next: Buffer[] = [];
    for (let i = 0; i < level.length; i += 2) {
      const right = level[i + 1];
      next.push(right ? sha256(Buffer.concat([level[i]!, right])) : level[i]!);
    }
    level = next;
  }
  return level[0]!.toString('hex');
}

/** Bandwidth a transaction uses: its size without `ret`, plus 64 (BandwidthProcessor, MAX_RESULT_SIZE_IN_TX). */
export function bandwidthOf(tx: TronTransaction): number {
  return transactionBytes(tx, false).length + 64;
}

// ---------------------------------------------------------------------------------------------
// Addresses

const BASE58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

/** A 21-byte `41…` hex address as base58check. */
export function hexToBase58(hex: string): string {
  const payload = fromHex(hex);
  const bytes = Buffer.concat([payload, sha256(sha256(payload)).subarray(0, 4)]);
  let n = BigInt(`0x${bytes.toString('hex')}`);
  let out = '';
  while (n > 0n) {
    out = BASE58[Number(n % 58n)] + out;
    n /= 58n;
  }
  for (const byte of bytes) {
    if (byte !== 0) break;
    out = `1${out}`;
  }
  return out;
}

/** A base58check T-address as 21-byte hex; throws on a bad character, length or checksum. */
export function base58ToHex(address: string): string {
  let n = 0n;
  for (const char of address) {
    const digit = BASE58.indexOf(char);
    if (digit < 0) throw new Error(`not a base58 character: ${char}`);
    n = n * 58n + BigInt(digit);
  }
  const hex = n.toString(16).padStart(50, '0');
  const bytes = fromHex(hex);
  const payload = bytes.subarray(0, 21);
  if (hex.length !== 50 || !sha256(sha256(payload)).subarray(0, 4).equals(bytes.subarray(21)))
    throw new Error(`not a base58check Tron address: ${address}`);
  return payload.toString('hex');
}

const isHexAddress = (value: unknown): value is string =>
  typeof value === 'string' && /^41[0-9a-fA-F]{40}$/.test(value);

// ---------------------------------------------------------------------------------------------
// Transactions: contract, TRC-20 calldata, Transfer logs

/** The first (in practice the only) contract of a transaction: its type and parameter value. */
export function contractOf(tx: TronTransaction): { type: string; value: Json } {
  const contract = (tx.raw_data.contract as Json[])[0]!;
  return { type: String(contract.type), value: (contract.parameter as Json).value as Json };
}

/** A TRC-20 movement: contract, from, to as 21-byte hex, amount in base units. */
export interface TokenTransfer {
  contract: string;
  from: string;
  to: string;
  amount: bigint;
}

const TRANSFER_SELECTOR = 'a9059cbb'; // transfer(address,uint256)
const TRANSFER_FROM_SELECTOR = '23b872dd'; // transferFrom(address,address,uint256)

/** The `transfer`/`transferFrom` a TriggerSmartContract's calldata asks for, if it is one. */
export function tokenTransferOf(tx: TronTransaction): TokenTransfer | undefined {
  const { type, value } = contractOf(tx);
  if (type !== 'TriggerSmartContract') return undefined;
  const data = String(value.data ?? '');
  const word = (i: number) => data.slice(8 + 64 * i, 8 + 64 * (i + 1));
  const address = (i: number) => `41${word(i).slice(24)}`;
  const contract = String(value.contract_address);
  if (data.startsWith(TRANSFER_SELECTOR) && data.length >= 8 + 128)
    return { contract, from: String(value.owner_address), to: address(0), amount: BigInt(`0x${word(1)}`) };
  if (data.startsWith(TRANSFER_FROM_SELECTOR) && data.length >= 8 + 192)
    return { contract, from: address(0), to: address(1), amount: BigInt(`0x${word(2)}`) };
  return undefined;
}

const word32 = (hex: string): string => hex.padStart(64, '0');

/** The `Transfer` log a TRC-20 transfer emits, as java-tron prints logs (20-byte addresses). */
export function transferLog(transfer: TokenTransfer): Json {
  return {
    address: transfer.contract.slice(2),
    topics: [TRANSFER_TOPIC, word32(transfer.from.slice(2)), word32(transfer.to.slice(2))],
    data: word32(transfer.amount.toString(16)),
  };
}

/** `transfer(to, amount)` calldata. */
function transferCalldata(toHex41: string, amount: bigint): string {
  return `${TRANSFER_SELECTOR}${word32(toHex41.slice(2))}${word32(amount.toString(16))}`;
}

// ---------------------------------------------------------------------------------------------
// TransactionInfo, in java-tron's field order (Tron.proto TransactionInfo, ResourceReceipt)

const ZERO_WORD = '00'.repeat(32);
const TRUE_WORD = word32('1');

/** ResourceReceipt with its fields in proto order, zero and absent ones left out (JsonFormat omits defaults). */
function receiptOf(fields: Json): Json {
  const order = [
    'energy_usage',
    'energy_fee',
    'origin_energy_usage',
    'energy_usage_total',
    'net_usage',
    'net_fee',
    'result',
    'energy_penalty_total',
  ];
  const receipt: Json = {};
  for (const key of order) {
    const value = fields[key];
    if (value !== undefined && !isZero(value)) receipt[key] = value;
  }
  return receipt;
}

interface InfoParts {
  id: string;
  fee?: unknown;
  contractResult: string[];
  contractAddress?: string;
  receipt: Json;
  log?: Json[];
  internal?: Json[];
}

/** A TransactionInfo as JsonFormat prints one: proto field order, defaults left out. */
function infoOf(parts: InfoParts, at: { number: number; timestamp: number }): TronTransactionInfo {
  const info: Json = { id: parts.id };
  if (parts.fee !== undefined && !isZero(parts.fee)) info.fee = parts.fee;
  info.blockNumber = at.number;
  info.blockTimeStamp = at.timestamp;
  info.contractResult = parts.contractResult;
  if (parts.contractAddress) info.contract_address = parts.contractAddress;
  info.receipt = parts.receipt;
  if (parts.log?.length) info.log = parts.log;
  if (parts.internal?.length) info.internal_transactions = parts.internal;
  return info as TronTransactionInfo;
}

/** A recorded info moved to another block: blockNumber and blockTimeStamp replaced, in place. */
function placedInfo(info: Json, at: { number: number; timestamp: number }): TronTransactionInfo {
  const placed = structuredClone(info);
  placed.blockNumber = at.number;
  placed.blockTimeStamp = at.timestamp;
  return placed as TronTransactionInfo;
}

// ---------------------------------------------------------------------------------------------
// Block 69351239: recorded block, SYNTHESIZED infos

/** The real info whose energy figures the synthesized USDT infos of block 69351239 copy. */
const USDT_RECEIPT_TEMPLATE = '0130dfde9281a48378109039ef512229d5359fbee2a8adbb17ad73aebc67ea99';

/**
 * SYNTHESIZED info of a transaction of block 69351239: bandwidth computed from the transaction;
 * a USDT transfer gets the `Transfer` log its calldata asks for and the energy and fee of the real
 * USDT info 0130dfde… (one day earlier); other contract calls no log (their effects are unknown).
 */
function recordedBlockInfo(
  tx: TronTransaction,
  at: { number: number; timestamp: number },
  usdtReceipt: Json,
): TronTransactionInfo {
  const { type, value } = contractOf(tx);
  const net_usage = bandwidthOf(tx);
  if (type !== 'TriggerSmartContract')
    return infoOf({ id: tx.txID, contractResult: [''], receipt: receiptOf({ net_usage }) }, at);
  const transfer = tokenTransferOf(tx);
  if (!transfer || transfer.contract !== USDT_HEX)
    return infoOf(
      {
        id: tx.txID,
        contractResult: [''],
        contractAddress: String(value.contract_address),
        receipt: receiptOf({ net_usage, result: 'SUCCESS' }),
      },
      at,
    );
  return infoOf(
    {
      id: tx.txID,
      fee: usdtReceipt.energy_fee,
      contractResult: [ZERO_WORD],
      contractAddress: transfer.contract,
      receipt: receiptOf({ ...usdtReceipt, net_usage }),
      log: [transferLog(transfer)],
    },
    at,
  );
}

/** Block 69351239 as recorded, with one TransactionInfo per transaction (one real, the rest SYNTHESIZED). */
export function recordedBlock69351239(): TronBlockFixture {
  const block = readTronFixture<TronBlock>(RECORDED_BLOCK_FILE);
  const real = readTronFixture<TronTransactionInfo>(
    'wallet-http/gettransactioninfobyid-e1cd4454-mainnet.json',
  );
  const usdtReceipt = readTronFixture<Record<string, Json>>(LEDGER_INFOS_FILE)[USDT_RECEIPT_TEMPLATE]!
    .receipt as Json;
  const at = { number: block.block_header.raw_data.number, timestamp: block.block_header.raw_data.timestamp };
  const infos = (block.transactions ?? []).map((tx) =>
    tx.txID === real.id ? real : recordedBlockInfo(tx, at, usdtReceipt),
  );
  return { block, infos };
}

// ---------------------------------------------------------------------------------------------
// Real transaction bodies from TronGrid v1 rows

/** Every recorded TronGrid row (a full transaction with TronGrid's fee fields), by txID. */
function tronGridRows(): Map<string, Json> {
  const ledger = readTronFixture<Record<string, { data: Json[] }>>(
    'trongrid-v1/ledger-accounts-TL24LCps-transactions-trc20-map-mainnet.json',
  );
  const rows: Json[] = [
    ...Object.values(ledger).flatMap((page) => page.data.map((entry) => entry.detail as Json)),
    ...readTronFixture<Json[]>('trongrid-v1/ledger-accounts-TL24LCps-transactions-EXTRACTED-mainnet.json'),
    ...readTronFixture<{ data: Json[] }>('trongrid-v1/accounts-TM1zzNDZ-transactions-mainnet.json').data,
    ...readTronFixture<{ data: Json[] }>('trongrid-v1/accounts-TFFriedw-transactions-mainnet.json').data,
  ];
  return new Map(rows.map((row) => [String(row.txID), row]));
}

/** The one row whose txID starts with `prefix`. */
function rowByPrefix(rows: Map<string, Json>, prefix: string): Json {
  const found = [...rows.keys()].filter((id) => id.startsWith(prefix));
  if (found.length !== 1) throw new Error(`${found.length} recorded transactions start with ${prefix}`);
  return rows.get(found[0]!)!;
}

/**
 * A TronGrid row's raw_data as java-tron prints it with `visible` false: fields at their default
 * left out (TronGrid prints `call_value: 0`, `fee_limit: 0`) and a TRC-10 `asset_name` as the hex
 * of its ASCII id (TronGrid prints the id itself).
 */
function javaTronRawData(raw: Json): Json {
  const out = structuredClone(raw);
  for (const [key, value] of Object.entries(out)) if (isZero(value)) delete out[key];
  for (const contract of out.contract as Json[]) {
    const value = (contract.parameter as Json).value as Json;
    for (const [key, field] of Object.entries(value)) if (isZero(field)) delete value[key];
    if (typeof value.asset_name === 'string' && /^\d+$/.test(value.asset_name))
      value.asset_name = utf8Hex(value.asset_name);
  }
  return out;
}

/** The transaction of a row as a block carries it: `ret` holds only `contractRet`. */
function transactionFromRow(row: Json): TronTransaction {
  const ret = (row.ret as Json[])[0]!;
  return {
    raw_data: javaTronRawData(row.raw_data as Json),
    raw_data_hex: String(row.raw_data_hex),
    ret: [{ contractRet: ret.contractRet }],
    signature: row.signature as string[],
    txID: String(row.txID),
  };
}

/**
 * SYNTHESIZED info of a row's transaction: fee and receipt from the row's fee and resource fields
 * (bandwidth computed when the row has none), `Transfer` log from the calldata of a successful
 * TRC-20 transfer. USDT's `contractResult` is 32 zero bytes, as in its 9 recorded infos.
 */
function rowInfo(
  row: Json,
  tx: TronTransaction,
  at: { number: number; timestamp: number },
): TronTransactionInfo {
  const { type, value } = contractOf(tx);
  const contractRet = String((row.ret as Json[])[0]!.contractRet);
  const call = type === 'TriggerSmartContract';
  const hasResources = row.net_usage !== undefined || row.net_fee !== undefined;
  const receipt = receiptOf({
    energy_usage: row.energy_usage,
    energy_fee: row.energy_fee,
    energy_usage_total: row.energy_usage_total,
    net_usage: hasResources ? row.net_usage : bandwidthOf(tx),
    net_fee: row.net_fee,
    result: call ? contractRet : undefined,
  });
  const transfer = contractRet === 'SUCCESS' ? tokenTransferOf(tx) : undefined;
  const returned = transfer ? (transfer.contract === USDT_HEX ? ZERO_WORD : TRUE_WORD) : '';
  return infoOf(
    {
      id: tx.txID,
      fee: (row.ret as Json[])[0]!.fee,
      contractResult: [call ? returned : ''],
      contractAddress: call ? String(value.contract_address) : undefined,
      receipt,
      log: transfer ? [transferLog(transfer)] : [],
    },
    at,
  );
}

// ---------------------------------------------------------------------------------------------
// CONSTRUCTED internal transactions

interface InternalCall {
  parentTxId: string;
  caller: string;
  transferTo: string;
  sun?: number;
  token?: { id: string; amount: number };
  data?: string;
  nonce: number;
  rejected?: boolean;
}

/**
 * An internal transaction as TransactionUtil.buildInternalTransaction builds it and JsonFormat
 * prints it: `callValueInfo` always starts with the TRX value (`{}` when 0), a TRC-10 transfer adds
 * `{callValue, tokenId}`; `note` is the hex of "call"; `rejected` only when true; `hash` as
 * InternalTransaction.getHash computes a child's: keccak256(parent hash ‖ receive address ‖ data ‖
 * value (8 bytes) ‖ nonce (8 bytes)), the value being 0 for a TRC-10 transfer.
 */
function internalTransaction(call: InternalCall): Json {
  const eight = (n: number) => {
    const bytes = Buffer.alloc(8);
    bytes.writeBigUInt64BE(BigInt(n));
    return bytes;
  };
  const hash = keccak256(
    Buffer.concat([
      fromHex(call.parentTxId),
      fromHex(call.transferTo),
      fromHex(call.data ?? ''),
      eight(call.sun ?? 0),
      eight(call.nonce),
    ]),
  ).slice(2);
  const callValueInfo: Json[] = [call.sun ? { callValue: call.sun } : {}];
  if (call.token) callValueInfo.push({ callValue: call.token.amount, tokenId: call.token.id });
  return {
    hash,
    caller_address: call.caller,
    transferTo_address: call.transferTo,
    callValueInfo,
    note: utf8Hex('call'),
    ...(call.rejected ? { rejected: true } : {}),
  };
}

/** CONSTRUCTED info for `CONSTRUCTED.txId`: its own (synthesized) info plus what its contract does. */
function constructedInfo(
  row: Json,
  tx: TronTransaction,
  at: { number: number; timestamp: number },
): TronTransactionInfo {
  const own = rowInfo(row, tx, at);
  const caller = String(contractOf(tx).value.contract_address);
  const base = { parentTxId: tx.txID, caller };
  const usdtTo = base58ToHex(CONSTRUCTED.usdtFromContract.to);
  const internal = [
    internalTransaction({
      ...base,
      transferTo: base58ToHex(CONSTRUCTED.trx.to),
      sun: CONSTRUCTED.trx.sun,
      nonce: 1,
    }),
    internalTransaction({
      ...base,
      transferTo: base58ToHex(CONSTRUCTED.trc10.to),
      token: { id: CONSTRUCTED.trc10.tokenId, amount: CONSTRUCTED.trc10.amount },
      nonce: 2,
    }),
    internalTransaction({
      ...base,
      transferTo: base58ToHex(CONSTRUCTED.rejected.to),
      sun: CONSTRUCTED.rejected.sun,
      nonce: 3,
      rejected: true,
    }),
    internalTransaction({
      ...base,
      transferTo: USDT_HEX,
      data: transferCalldata(usdtTo, CONSTRUCTED.usdtFromContract.amount),
      nonce: 4,
    }),
  ];
  const usdtLog = transferLog({
    contract: USDT_HEX,
    from: caller,
    to: usdtTo,
    amount: CONSTRUCTED.usdtFromContract.amount,
  });
  return { ...own, log: [...((own.log as Json[]) ?? []), usdtLog], internal_transactions: internal };
}

// ---------------------------------------------------------------------------------------------
// ASSEMBLED blocks

const RECORDED_TIMESTAMP = 1738705566000;
const timestampAt = (number: number): number =>
  RECORDED_TIMESTAMP + (number - RECORDED_BLOCK_NUMBER) * BLOCK_INTERVAL_MS;

/** Block 69351239's producer and signature, which every assembled block carries. */
const WITNESS = {
  address: '4114f2c09d3de3fe82a71960da65d4935a30b24e1f',
  signature:
    '384f8c97294450cd58b3c3a859ba947b047de164a14d6bb32803102735eb95a8331e3d862b2f628bad6a116bf9126a40c59e6d875271ecb613ede3b37ea0259301',
};

export interface AssembleOptions {
  number: number;
  parentHash: string;
  /** Default: block 69351239's timestamp plus 3 s a block. */
  timestamp?: number;
  /** Transactions with their infos, in block order (the infos' blockNumber/blockTimeStamp are set). */
  entries?: { tx: TronTransaction; info: Json }[];
}

/** An ASSEMBLED block: txTrieRoot and blockID computed, version 31, block 69351239's witness. */
export function assembleBlock(options: AssembleOptions): TronBlockFixture {
  const entries = options.entries ?? [];
  const at = { number: options.number, timestamp: options.timestamp ?? timestampAt(options.number) };
  const transactions = entries.map((entry) => entry.tx);
  const raw: TronHeaderRaw = {
    number: at.number,
    parentHash: options.parentHash,
    timestamp: at.timestamp,
    txTrieRoot: txTrieRootOf(transactions),
    version: 31,
    witness_address: WITNESS.address,
  };
  const block: TronBlock = {
    blockID: blockIdOf(raw),
    block_header: { raw_data: raw, witness_signature: WITNESS.signature },
    ...(transactions.length > 0 ? { transactions } : {}),
  };
  return { block, infos: entries.map((entry) => placedInfo(entry.info, at)) };
}

/**
 * Which real transactions go in which assembled block (by txID prefix). Each gets its recorded
 * info (Ledger's 105) when there is one, the CONSTRUCTED one for CONSTRUCTED.txId, else one
 * SYNTHESIZED from its TronGrid row.
 */
const MAIN_PLAN: string[][] = [
  // 69351240: three USDT transfers, a TRX transfer (1.1 TRX fee) and a TRC-10 1005065 transfer, all with real infos
  ['0130dfde', '46710419', 'f34b0925', '3f8b651b', '034897cb'],
  // 69351241: a USDT transfer, a TRX transfer and a TRC-10 1002000 transfer of 2020 (synthesized infos)
  ['18f5908a', '3fca53c0', '79010512'],
  // 69351242: the USDT call that failed OUT_OF_ENERGY, two USDT transfers, 1 sun of TRX (real infos)
  ['13df06d5', '501bd2c8', '01b7542b', '5144c4f5'],
  // 69351243: the JST call with CONSTRUCTED internal transactions, a USDT transfer (synthesized), two real
  ['6681009a', '1de1f78e', '4b845fb5', '8eabb36d'],
  // 69351244: no transactions
  [],
  // 69351245 (tip): TRC-10 1002000 and 1002814, TRX, SUNDOG (2^64 < amount), WIN, two USDT with real infos
  ['f6804d16', 'cf097ddd', '3ef5e225', '629adf1e', '0e74f2d4', '225e55c4', '33b72dc2'],
];

/** The replacement for the tip 69351245 (f6804d16 again, two others) and its successor 69351246. */
const REPLACEMENT_PLAN: string[][] = [
  ['f6804d16', '2a9eda92', 'af2c820f'],
  ['c838b8a6', 'b38fb632', '05397e25'],
];

function assembleRun(first: number, parentHash: string, plan: string[][]): TronBlockFixture[] {
  const rows = tronGridRows();
  const realInfos = readTronFixture<Record<string, Json>>(LEDGER_INFOS_FILE);
  const run: TronBlockFixture[] = [];
  let parent = parentHash;
  plan.forEach((prefixes, i) => {
    const at = { number: first + i, timestamp: timestampAt(first + i) };
    const entries = prefixes.map((prefix) => {
      const row = rowByPrefix(rows, prefix);
      const tx = transactionFromRow(row);
      const info =
        tx.txID === CONSTRUCTED.txId
          ? constructedInfo(row, tx, at)
          : (realInfos[tx.txID] ?? rowInfo(row, tx, at));
      return { tx, info };
    });
    const assembled = assembleBlock({ number: at.number, parentHash: parent, entries });
    run.push(assembled);
    parent = assembled.block.blockID;
  });
  return run;
}

/** Blocks 69351240…69351245, ASSEMBLED after the real block 69351239 (the first links to it). */
export function assembledChain(): TronBlockFixture[] {
  return assembleRun(RECORDED_BLOCK_NUMBER + 1, RECORDED_BLOCK_ID, MAIN_PLAN);
}

/** Another 69351245 (other content, so another blockID) on the same parent, and a 69351246 after it. */
export function replacementBranch(): TronBlockFixture[] {
  const main = assembledChain();
  const parent = main[main.length - 2]!.block;
  return assembleRun(parent.block_header.raw_data.number + 1, parent.blockID, REPLACEMENT_PLAN);
}

/** `count` ASSEMBLED blocks without transactions after `after`, linked. */
export function emptyBlocks(after: TronBlockFixture, count: number): TronBlockFixture[] {
  const out: TronBlockFixture[] = [];
  let parent = after.block;
  for (let i = 0; i < count; i++) {
    const next = assembleBlock({
      number: parent.block_header.raw_data.number + 1,
      parentHash: parent.blockID,
    });
    out.push(next);
    parent = next.block;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Recorded singles and TRC-10 records

/** The recorded `/wallet/gettransactionbyid` answers and the recorded infos not in any held block. */
function recordedSingles(): { transactions: TronTransaction[]; infos: TronTransactionInfo[] } {
  const transactions = [
    'wallet-http/gettransactionbyid-5a9935a1-trx-mainnet.json',
    'wallet-http/gettransactionbyid-0b9e01dd-usdt-mainnet.json',
    'wallet-http/gettransactionbyid-5977852d-trx-memo-mainnet.json',
  ].map((name) => readTronFixture<TronTransaction>(name));
  const infos = [
    'wallet-http/gettransactioninfobyid-5a9935a1-mainnet.json',
    'wallet-http/gettransactioninfobyid-ec7c9584-mainnet.json',
  ].map((name) => readTronFixture<TronTransactionInfo>(name));
  return { transactions, infos };
}

/**
 * DERIVED: a TronGrid `/v1/assets/<id>` record as java-tron's `getassetissuebyid` prints the
 * AssetIssueContract (field order of asset_issue_contract.proto; name, abbr, description and url as
 * hex; total_supply a number). Fields TronGrid does not give (frozen_supply, vote_score, the
 * free-bandwidth limits) are left out.
 */
export function assetIssueFromTronGrid(asset: Json): Json {
  const total = String(asset.total_supply);
  const fields: Json = {
    owner_address: asset.owner_address,
    name: utf8Hex(String(asset.name ?? '')),
    abbr: utf8Hex(String(asset.abbr ?? '')),
    total_supply: isSafeNumber(total) ? Number(total) : BigInt(total),
    trx_num: asset.trx_num,
    precision: asset.precision,
    num: asset.num,
    start_time: asset.start_time,
    end_time: asset.end_time,
    description: utf8Hex(String(asset.description ?? '')),
    url: utf8Hex(String(asset.url ?? '')),
    id: String(asset.id),
  };
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined && !isZero(v)));
}

/** The three recorded TRC-10 records (1002000 BTT, 1002798, 1002814), DERIVED to java-tron's form. */
export function recordedAssets(): Map<string, Json> {
  const out = new Map<string, Json>();
  for (const id of ['1002000', '1002798', '1002814']) {
    const answer = readTronFixture<{ data: Json[] }>(`trongrid-v1/assets-${id}-mainnet.json`);
    out.set(id, assetIssueFromTronGrid(answer.data[0]!));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// visible=true: base58 addresses, text names (HttpSelfFormatFieldName)

const textOfHex = (hex: unknown): unknown =>
  typeof hex === 'string' && /^([0-9a-f]{2})*$/i.test(hex) ? Buffer.from(hex, 'hex').toString('utf8') : hex;

/** Every `…address` field holding a 41… hex address (at any depth) as base58. */
function base58Addresses(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(base58Addresses);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, field]) => [
      key,
      key.endsWith('address') && isHexAddress(field) ? hexToBase58(field) : base58Addresses(field),
    ]),
  );
}

function visibleTransaction(tx: Json): Json {
  const out = structuredClone(tx);
  const raw = out.raw_data as Json;
  raw.contract = (raw.contract as Json[]).map((contract) => {
    const parameter = contract.parameter as Json;
    const value = base58Addresses(parameter.value) as Json;
    if (value.asset_name !== undefined) value.asset_name = textOfHex(value.asset_name);
    return { ...contract, parameter: { ...parameter, value } };
  });
  return out;
}

function visibleBlock(block: TronBlock): Json {
  const out = structuredClone(block) as Json;
  const header = out.block_header as Json;
  const raw = header.raw_data as Json;
  raw.witness_address = hexToBase58(String(raw.witness_address));
  if (block.transactions) out.transactions = block.transactions.map(visibleTransaction);
  return out;
}

/** Log addresses (20 bytes) as base58 of 41‖address (Util.convertLogAddressToTronAddress). */
function visibleInfo(info: Json): Json {
  const out = structuredClone(info);
  if (isHexAddress(out.contract_address)) out.contract_address = hexToBase58(out.contract_address);
  if (Array.isArray(out.log))
    out.log = (out.log as Json[]).map((log) => ({
      ...log,
      address: hexToBase58(`41${String(log.address)}`),
    }));
  if (Array.isArray(out.internal_transactions))
    out.internal_transactions = (out.internal_transactions as Json[]).map((it) => base58Addresses(it));
  if (out.resMessage !== undefined) out.resMessage = textOfHex(out.resMessage);
  return out;
}

function visibleAsset(record: Json): Json {
  const out = base58Addresses(record) as Json;
  for (const key of ['name', 'abbr', 'description', 'url'])
    if (out[key] !== undefined) out[key] = textOfHex(out[key]);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Reading requests as java-tron's servlets read them

/** A Java exception as Util.printErrorMsg prints it: `{"Error": "class <name> : <message>"}`. */
class JavaException extends Error {
  constructor(
    readonly javaClass: string,
    message: string,
  ) {
    super(message);
  }
}

const PARSE_EXCEPTION = 'org.tron.core.services.http.JsonFormat$ParseException';
const NUMBER_FORMAT = 'java.lang.NumberFormatException';
const FASTJSON = 'com.alibaba.fastjson.JSONException';
const HEX_DECODER = 'org.bouncycastle.util.encoders.DecoderException';

interface ApiRequest {
  isGet: boolean;
  query: URLSearchParams;
  body: string;
  json: Json;
  /** `visible` from the query (GET) or the body (POST, Util.getVisiblePost). */
  visible: boolean;
}

/**
 * The request's parameters. A POST body that is not a JSON object fails in fastjson first
 * (PostParams → Util.getVisiblePost); the message text is ours, fastjson's is not reproduced.
 */
function apiRequest(method: string, query: URLSearchParams, body: string): ApiRequest {
  const isGet = method === 'GET';
  if (isGet) return { isGet, query, body, json: {}, visible: query.get('visible')?.toLowerCase() === 'true' };
  if (body.trim() === '') return { isGet, query, body, json: {}, visible: false };
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (err) {
    throw new JavaException(FASTJSON, `syntax error, ${(err as Error).message}`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw new JavaException(FASTJSON, 'can not cast to JSONObject.');
  const visible = String((json as Json).visible).toLowerCase() === 'true';
  return { isGet, query, body, json: json as Json, visible };
}

/** JsonFormat's tokenizer: the token after `"key":`, with its 1-based line and column. */
function tokenAfterKey(body: string, key: string): { text: string; where: string } | undefined {
  const keyAt = new RegExp(`"${key}"\\s*:\\s*`, 'g');
  const match = keyAt.exec(body);
  if (!match) return undefined;
  const start = match.index + match[0].length;
  const token =
    /[a-zA-Z_][0-9a-zA-Z_+-]*|[.]?[0-9+-][0-9a-zA-Z_.+-]*|"([^"\n\\]|\\.)*("|\\?$)|'([^'\n\\]|\\.)*('|\\?$)/y;
  token.lastIndex = start;
  const text = token.exec(body)?.[0] ?? body.charAt(start);
  const before = body.slice(0, start);
  const line = before.split('\n').length;
  const column = start - before.lastIndexOf('\n');
  return { text, where: `${line}:${column}` };
}

const parseError = (where: string, description: string) =>
  new JavaException(PARSE_EXCEPTION, `${where}: ${description}`);

/** Java's Long.parseLong(text, radix), with its NumberFormatException text (Java 8). */
function javaParseLong(text: string | null, radix = 10): bigint {
  if (text === null) throw new JavaException(NUMBER_FORMAT, 'null');
  const value = integerOf(text, radix);
  if (value === undefined || value > LONG_MAX || value < -LONG_MAX - 1n)
    throw new JavaException(NUMBER_FORMAT, `For input string: "${text}"`);
  return value;
}

const LONG_MAX = 2n ** 63n - 1n;

/** WalletUtil.isLong: whether Long.parseLong takes it. */
const isJavaLong = (text: string): boolean => {
  const value = integerOf(text, 10);
  return value !== undefined && value <= LONG_MAX && value >= -LONG_MAX - 1n;
};

/** Digits in `radix`, an optional sign first; undefined when they are not. */
function integerOf(text: string, radix: number): bigint | undefined {
  const digits = radix === 16 ? /^[+-]?[0-9a-fA-F]+$/ : radix === 8 ? /^[+-]?[0-7]+$/ : /^[+-]?[0-9]+$/;
  if (!digits.test(text)) return undefined;
  const prefix = radix === 16 ? '0x' : radix === 8 ? '0o' : '';
  const magnitude = BigInt(`${prefix}${text.replace(/^[+-]/, '')}`);
  return text.startsWith('-') ? -magnitude : magnitude;
}

/**
 * A POST int64 field as JsonFormat.merge reads it: a bare integer token (JsonFormat.parseInteger:
 * `-`, then 0x hex or 0 octal), absent or null is 0; anything else is a ParseException at the token.
 */
function postInt64(request: ApiRequest, key: string): number {
  const token = tokenAfterKey(request.body, key);
  if (!token || token.text === 'null') return 0;
  const negative = token.text.startsWith('-');
  const unsigned = negative ? token.text.slice(1) : token.text;
  const radix = unsigned.startsWith('0x') ? 16 : unsigned.startsWith('0') ? 8 : 10;
  const numberText = radix === 16 ? unsigned.slice(2) : unsigned;
  const magnitude = integerOf(numberText, radix);
  const fail = (why: string) => parseError(token.where, `Couldn't parse integer: ${why}`);
  if (magnitude === undefined) throw fail(`For input string: "${numberText}"`);
  const value = negative ? -magnitude : magnitude;
  if (value > LONG_MAX || value < -LONG_MAX - 1n)
    throw fail(`Number out of range for 64-bit signed integer: ${token.text}`);
  return Number(value);
}

/** A POST string field (JsonFormat: a quoted token); absent is "". */
function postString(request: ApiRequest, key: string): string {
  const token = tokenAfterKey(request.body, key);
  if (!token || token.text === 'null') return '';
  const quote = token.text.charAt(0);
  if (quote !== '"' && quote !== "'") throw parseError(token.where, 'Expected string.');
  if (token.text.length < 2 || !token.text.endsWith(quote))
    throw parseError(token.where, 'String missing ending quote.');
  return String(request.json[key]);
}

/** A POST bool field (JsonFormat: `true` or `false` only); absent is false. */
function postBool(request: ApiRequest, key: string): boolean {
  const token = tokenAfterKey(request.body, key);
  if (!token || token.text === 'null') return false;
  if (token.text !== 'true' && token.text !== 'false')
    throw parseError(token.where, 'Expected "true" or "false".');
  return token.text === 'true';
}

/** ByteArray.fromHexString: 0x stripped, an odd length padded with a leading 0; null when not hex. */
function hexBytes(text: string): string | null {
  let hex = text.replace(/^0x/, '');
  if (hex.length % 2 === 1) hex = `0${hex}`;
  return /^[0-9a-fA-F]*$/.test(hex) ? hex.toLowerCase() : null;
}

/** A transaction id (`value`): GET through ByteArray.fromHexString, POST through JsonFormat bytes. */
function requestTxId(request: ApiRequest): string {
  if (request.isGet) {
    const hex = hexBytes(request.query.get('value') ?? '');
    if (hex === null)
      throw new JavaException(
        HEX_DECODER,
        'exception decoding Hex string: invalid characters encountered in Hex string',
      );
    return hex;
  }
  const text = postString(request, 'value');
  const hex = hexBytes(text);
  if (hex === null) throw parseError(tokenAfterKey(request.body, 'value')!.where, 'invalidate hex String');
  return hex;
}

// ---------------------------------------------------------------------------------------------
// The node

export interface TronNodeRequest {
  method: string;
  path: string;
  query: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export type TronLie = { kind: 'infos-count' | 'infos-ids' | 'garbage' };

export interface TronNode extends RestartableNode {
  /** `http://127.0.0.1:<port>`, for `/wallet/*` and `/walletsolidity/*` alike (as TronGrid serves both). */
  readonly url: string;
  readonly requests: TronNodeRequest[];
  /** The highest block held, or undefined. */
  readonly tip: number | undefined;
  /** Present these blocks (the last is the tip), replacing those held. */
  setBlocks(blocks: TronBlockFixture[]): void;
  /** Adds a block and makes it the tip; held blocks at or above its height are dropped (a switch of branch). */
  addBlock(block: TronBlockFixture): void;
  /** A TRC-10 record for `getassetissuebyid`, in java-tron's `visible` false form. */
  setAsset(id: string, record: Json): void;
  /** What `decimals()` answers for a TRC-20 contract (base58), or that the call reverts. */
  setDecimals(contract: string, decimals: number | 'revert'): void;
  /** The next `count` requests answer `status` (default 500). */
  failNext(count: number, status?: number): void;
  /** The next `count` requests get no answer: their connection is closed. */
  dropNext(count: number): void;
  /**
   * The next `gettransactioninfobyblocknum` answer lies: `infos-count` drops its last info,
   * `infos-ids` swaps the ids of its first two infos (or alters the id of a lone one), both waiting
   * for an answer with infos; `garbage` cuts the next answer in half (unparseable JSON).
   */
  lieNext(lie: TronLie): void;
}

export interface TronNodeOptions {
  /** Every request without header `TRON-PRO-API-KEY: <apiKey>` answers 401, as TronGrid does. */
  apiKey?: string;
  /** Blocks to start with. */
  blocks?: TronBlockFixture[];
}

interface Reply {
  status: number;
  body: string;
}

const JSON_TYPE = 'application/json; charset=utf-8';
/** java-tron's servlets print with println. */
const answer = (value: unknown): Reply => ({ status: 200, body: `${stringify(value) ?? 'null'}\n` });
const EMPTY: Reply = answer({});
const javaError = (err: JavaException): Reply => answer({ Error: `class ${err.javaClass} : ${err.message}` });

/** What TronGrid answers to a key it does not know (TRON-US/trongrid#20). */
const API_KEY_REFUSAL: Reply = { status: 401, body: '{"Error":"ApiKey not exists"}' };
const DECIMALS_SELECTOR = '313ce567';
/** energy_used of a constant decimals() call: ours, not recorded. */
const DECIMALS_ENERGY = 292;

interface HeldTransaction {
  tx: TronTransaction;
  info?: TronTransactionInfo;
  blockNumber?: number;
}

/** What one API (full node or solidified) sees: blocks up to `head`. */
interface ChainView {
  head: number | undefined;
  block(number: number): TronBlockFixture | undefined;
}

export async function startTronNode(options: TronNodeOptions = {}): Promise<TronNode> {
  const requests: TronNodeRequest[] = [];
  const blocks = new Map<number, TronBlockFixture>();
  let tip: number | undefined;
  const assets = recordedAssets();
  const decimals = new Map<string, number | 'revert'>([[USDT_HEX, 6]]);
  let failures = { count: 0, status: 500 };
  let drops = 0;
  let lie: TronLie | undefined;
  const singles = recordedSingles();

  function hold(fixtures: TronBlockFixture[]) {
    for (const fixture of fixtures) blocks.set(fixture.block.block_header.raw_data.number, fixture);
    tip = blocks.size > 0 ? Math.max(...blocks.keys()) : undefined;
  }
  hold(options.blocks ?? []);

  const fullView = (): ChainView => ({ head: tip, block: (n) => blocks.get(n) });
  const solidView = (): ChainView => {
    const head = tip === undefined ? undefined : tip - SOLIDITY_LAG;
    return { head, block: (n) => (head !== undefined && n <= head ? blocks.get(n) : undefined) };
  };

  /** A transaction and its info in the view's blocks, else among the recorded singles. */
  function findTransaction(view: ChainView, id: string): HeldTransaction | undefined {
    for (const [number, fixture] of blocks) {
      if (!view.block(number)) continue;
      const index = (fixture.block.transactions ?? []).findIndex((tx) => tx.txID === id);
      if (index >= 0)
        return { tx: fixture.block.transactions![index]!, info: fixture.infos[index], blockNumber: number };
    }
    return undefined;
  }

  const printBlock = (block: TronBlock, visible: boolean) => answer(visible ? visibleBlock(block) : block);

  // ---- servlets

  function getNowBlock(view: ChainView, request: ApiRequest): Reply {
    // GetNowBlockServlet's doPost calls doGet: `visible` is read from the query only.
    const block = view.head === undefined ? undefined : view.block(view.head);
    return block ? printBlock(block.block, request.query.get('visible')?.toLowerCase() === 'true') : EMPTY;
  }

  function getBlockByNum(view: ChainView, request: ApiRequest): Reply {
    const num = request.isGet
      ? request.query.has('num')
        ? Number(javaParseLong(request.query.get('num')))
        : 0
      : postInt64(request, 'num');
    const block = view.block(num);
    return block ? printBlock(block.block, request.visible) : EMPTY;
  }

  /** Wallet.getBlock: by number or id, `detail` false drops the transactions (java-tron ≥ 4.7.x). */
  function getBlock(view: ChainView, request: ApiRequest): Reply {
    const idOrNum = request.isGet ? (request.query.get('id_or_num') ?? '') : postString(request, 'id_or_num');
    const detail = request.isGet
      ? request.query.get('detail')?.toLowerCase() === 'true'
      : postBool(request, 'detail');
    let found: TronBlockFixture | undefined;
    if (idOrNum === '') found = view.head === undefined ? undefined : view.block(view.head);
    else if (isJavaLong(idOrNum)) {
      const num = Number(idOrNum);
      if (view.head === undefined || num > view.head) return EMPTY;
      if (num < 0) return answer({ Error: 'num must be non-positive number.' });
      found = view.block(num);
    } else {
      const illegal = answer({ Error: 'id must be legal block hash.' });
      if (!/^[0-9a-fA-F]{64}$/.test(idOrNum)) return illegal;
      const num = Number(BigInt(`0x${idOrNum.slice(0, 16)}`));
      if (view.head === undefined || num > view.head || num < 0) return illegal;
      const candidate = view.block(num);
      found = candidate?.block.blockID === idOrNum.toLowerCase() ? candidate : undefined;
    }
    if (!found) return EMPTY;
    const { transactions: _, ...withoutTransactions } = found.block;
    return printBlock(detail ? found.block : (withoutTransactions as TronBlock), request.visible);
  }

  function getTransactionInfoByBlockNum(view: ChainView, request: ApiRequest): Reply {
    const num = request.isGet ? Number(javaParseLong(request.query.get('num'))) : postInt64(request, 'num');
    if (num <= 0) return EMPTY;
    // No block there: Wallet.getTransactionInfoByBlockNum catches ItemNotFoundException, answers [].
    const infos = view.block(num)?.infos ?? [];
    return lying(infos.map((info) => (request.visible ? visibleInfo(info) : info)));
  }

  function lying(infos: Json[]): Reply {
    const current = lie;
    if (current?.kind === 'garbage') {
      lie = undefined;
      const text = answer(infos).body;
      return { status: 200, body: text.slice(0, Math.floor(text.length / 2)) };
    }
    if (!current || infos.length === 0) return answer(infos);
    lie = undefined;
    const told = infos.map((info) => ({ ...info }));
    if (current.kind === 'infos-count') told.pop();
    else if (told.length >= 2) [told[0]!.id, told[1]!.id] = [told[1]!.id, told[0]!.id];
    else told[0]!.id = sha256(fromHex(String(told[0]!.id))).toString('hex');
    return answer(told);
  }

  function getTransactionById(view: ChainView, request: ApiRequest): Reply {
    const id = requestTxId(request);
    const tx = findTransaction(view, id)?.tx ?? singles.transactions.find((t) => t.txID === id);
    if (!tx) return EMPTY;
    return answer(request.visible ? visibleTransaction(tx) : tx);
  }

  function getTransactionInfoById(view: ChainView, request: ApiRequest): Reply {
    const id = requestTxId(request);
    const info = findTransaction(view, id)?.info ?? singles.infos.find((i) => i.id === id);
    if (!info) return EMPTY;
    return answer(request.visible ? visibleInfo(info) : info);
  }

  function getAssetIssueById(request: ApiRequest): Reply {
    const id = request.isGet ? request.query.get('value') : request.json.value;
    const record = assets.get(String(id ?? ''));
    if (!record) return EMPTY;
    return answer(request.visible ? visibleAsset(record) : record);
  }

  const constantCall = triggerConstantContract(
    () => (tip === undefined ? undefined : blocks.get(tip)?.block),
    decimals,
  );

  type Servlet = (view: ChainView, request: ApiRequest) => Reply;
  const servlets: Record<string, Servlet> = {
    getnowblock: getNowBlock,
    getblockbynum: getBlockByNum,
    getblock: getBlock,
    gettransactioninfobyblocknum: getTransactionInfoByBlockNum,
    gettransactionbyid: getTransactionById,
    gettransactioninfobyid: getTransactionInfoById,
    getassetissuebyid: (_view, request) => getAssetIssueById(request),
  };

  function route(method: string, path: string, query: URLSearchParams, body: string): Reply {
    const match = /^\/(wallet|walletsolidity)\/([a-z]+)$/.exec(path);
    if (match?.[2] === 'triggerconstantcontract')
      // Its doGet is empty: a GET gets 200 and no body.
      return method === 'GET' ? { status: 200, body: '' } : constantCall(body);
    const servlet = match ? servlets[match[2]!] : undefined;
    if (!match || !servlet) return { status: 404, body: 'Not Found' };
    const view = match[1] === 'wallet' ? fullView() : solidView();
    try {
      // GetNowBlockServlet's doPost calls doGet: it never reads the body.
      const request =
        match[2] === 'getnowblock' ? apiRequest('GET', query, '') : apiRequest(method, query, body);
      return servlet(view, request);
    } catch (err) {
      if (err instanceof JavaException) return javaError(err);
      throw err;
    }
  }

  function reply(req: http.IncomingMessage, res: http.ServerResponse, url: URL, body: string) {
    const method = req.method ?? 'GET';
    requests.push({ method, path: url.pathname, query: url.search, headers: req.headers, body });
    if (drops > 0) {
      drops--;
      req.socket.destroy();
      return;
    }
    let out: Reply;
    if (options.apiKey !== undefined && req.headers['tron-pro-api-key'] !== options.apiKey)
      out = API_KEY_REFUSAL;
    else if (failures.count > 0) {
      failures = { ...failures, count: failures.count - 1 };
      out = { status: failures.status, body: '{"Error":"injected failure (loopback Tron node)"}' };
    } else out = route(method, url.pathname, url.searchParams, body);
    res.writeHead(out.status, { 'content-type': JSON_TYPE });
    res.end(out.body);
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://node.invalid');
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => reply(req, res, url, Buffer.concat(chunks).toString('utf8')));
  });
  server.keepAliveTimeout = 1000;
  const { port, start, stop } = await listenOnLoopback(server);

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    get tip() {
      return tip;
    },
    setBlocks(next) {
      blocks.clear();
      hold(next);
    },
    addBlock(fixture) {
      const number = fixture.block.block_header.raw_data.number;
      for (const held of [...blocks.keys()]) if (held >= number) blocks.delete(held);
      hold([fixture]);
    },
    setAsset(id, record) {
      assets.set(id, record);
    },
    setDecimals(contract, value) {
      decimals.set(base58ToHex(contract), value);
    },
    failNext(count, status = 500) {
      failures = { count, status };
    },
    dropNext(count) {
      drops = count;
    },
    lieNext(next) {
      lie = { ...next };
    },
    start,
    stop,
    close: stop,
  };
}

// ---------------------------------------------------------------------------------------------
// /wallet/triggerconstantcontract (TriggerConstantContractServlet, Wallet.triggerConstantContract)

/** The contract-call transaction java-tron builds for a constant call (Wallet.createTransactionCapsule). */
function constantCallTransaction(head: TronBlock, value: Json, data: string): TronTransaction {
  const headNumber = head.block_header.raw_data.number;
  const refBlockBytes = (headNumber & 0xffff).toString(16).padStart(4, '0');
  const refBlockHash = head.blockID.slice(16, 32);
  const expiration = head.block_header.raw_data.timestamp + 60_000; // TRANSACTION_DEFAULT_EXPIRATION_TIME
  const timestamp = Date.now();
  const typeUrl = 'type.googleapis.com/protocol.TriggerSmartContract';
  const trigger = Buffer.concat([
    bytesField(1, fromHex(String(value.owner_address))),
    bytesField(2, fromHex(String(value.contract_address))),
    bytesField(4, fromHex(data)),
  ]);
  const any = Buffer.concat([bytesField(1, Buffer.from(typeUrl)), bytesField(2, trigger)]);
  const contract = Buffer.concat([intField(1, 31), lengthDelimited(2, any)]);
  const raw = Buffer.concat([
    bytesField(1, fromHex(refBlockBytes)),
    bytesField(4, fromHex(refBlockHash)),
    intField(8, expiration),
    lengthDelimited(11, contract),
    intField(14, timestamp),
  ]);
  return {
    ret: [{}],
    txID: sha256(raw).toString('hex'),
    raw_data: {
      contract: [
        {
          parameter: {
            value: { data, owner_address: value.owner_address, contract_address: value.contract_address },
            type_url: typeUrl,
          },
          type: 'TriggerSmartContract',
        },
      ],
      ref_block_bytes: refBlockBytes,
      ref_block_hash: refBlockHash,
      expiration,
      timestamp,
    },
    raw_data_hex: raw.toString('hex'),
  };
}

/**
 * The servlet: a TransactionExtention. `decimals()` of a contract set with setDecimals answers
 * `{result: {result: true}, energy_used, constant_result: [32-byte word], transaction}`; a contract
 * set to revert (or any other selector) answers as java-tron does a REVERT: result still true,
 * `message` "REVERT opcode executed" (hex unless visible), the transaction's ret `FAILED`, empty
 * revert data. An unknown contract is CONTRACT_VALIDATE_ERROR "Smart contract is not exist."; other
 * failures OTHER_ERROR with the exception's class (Return.message, hex unless visible).
 */
function triggerConstantContract(
  headBlock: () => TronBlock | undefined,
  decimals: Map<string, number | 'revert'>,
): (body: string) => Reply {
  const message = (text: string, visible: boolean) => (visible ? text : utf8Hex(text));
  const failure = (code: string, text: string, visible: boolean) =>
    answer({ result: { code, message: message(text, visible) } });

  function call(request: ApiRequest): Reply {
    const { json, visible } = request;
    if (!json.owner_address)
      throw new JavaException('java.security.InvalidParameterException', "owner_address isn't set.");
    if (!json.contract_address && !json.data)
      throw new JavaException(
        'java.security.InvalidParameterException',
        'At least one of contract_address and data must be set.',
      );
    const address = (key: string): string => {
      const text = postString(request, key);
      const where = tokenAfterKey(request.body, key)!.where;
      if (visible) {
        try {
          return base58ToHex(text);
        } catch (err) {
          throw parseError(where, `INVALID base58 String, ${(err as Error).message}`);
        }
      }
      const hex = hexBytes(text);
      if (hex === null) throw parseError(where, 'invalidate hex String');
      return hex;
    };
    const value = { owner_address: address('owner_address'), contract_address: address('contract_address') };
    const selector = typeof json.function_selector === 'string' ? json.function_selector : '';
    const data = selector
      ? `${keccak256(stringToBytes(selector)).slice(2, 10)}${String(json.parameter ?? '')}`
      : String(json.data ?? '');
    const set = decimals.get(value.contract_address);
    if (set === undefined) return failure('CONTRACT_VALIDATE_ERROR', 'Smart contract is not exist.', visible);
    const head = headBlock();
    if (!head) throw new JavaException('org.tron.core.exception.HeaderNotFound', 'latest block not found');
    const tx = constantCallTransaction(head, value, data);
    const printed = { ...(visible ? visibleTransaction(tx) : tx), visible };
    if (set === 'revert' || !data.startsWith(DECIMALS_SELECTOR))
      return answer({
        result: { result: true, message: message('REVERT opcode executed', visible) },
        energy_used: DECIMALS_ENERGY,
        constant_result: [''],
        transaction: { ...printed, ret: [{ ret: 'FAILED' }] },
      });
    return answer({
      result: { result: true },
      energy_used: DECIMALS_ENERGY,
      constant_result: [word32(set.toString(16))],
      transaction: printed,
    });
  }

  return (body) => {
    let visible = false;
    try {
      const request = apiRequest('POST', new URLSearchParams(), body);
      visible = request.visible;
      return call(request);
    } catch (err) {
      if (!(err instanceof JavaException)) throw err;
      // The servlet catches everything: OTHER_ERROR, `class … : message` with " replaced by '.
      return failure('OTHER_ERROR', `class ${err.javaClass} : ${err.message.replaceAll('"', "'")}`, visible);
    }
  };
}
