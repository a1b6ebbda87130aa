/**
 * A Tron block read from `/wallet/getblockbynum` and `/wallet/gettransactioninfobyblocknum`, both
 * with hex addresses: the header that links it, and each transaction with what it moved. The two
 * answers must describe the same transactions (one info per transaction, in order): otherwise the
 * block is refused whole and read again, never applied in part.
 */
import { LedgerhookError } from '../../errors.js';
import { TRX, type TronActivity, type TronTransaction, type TronTransfer } from './activity.js';
import { tronFromHex } from './address.js';

/** The answer is not a block (or its infos) as java-tron writes them. */
export class MalformedTronBlock extends LedgerhookError {}

/** A number in the answer is beyond 2^53, so JSON.parse rounded it: parse exactly instead. */
export class InexactTronNumber extends LedgerhookError {}

export interface TronHeader {
  height: number;
  hash: string;
  parentHash: string;
  timestamp: number;
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const TRANSFER_TOPIC = 'ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';
const HASH = /^[0-9a-f]{64}$/;

/** An integer field of JSON.parse or parseExactJson output; absent is 0 where java-tron omits zeros. */
function integer(value: unknown, what: string): bigint {
  if (value === undefined) return 0n;
  if (typeof value === 'bigint') return value;
  if (typeof value === 'number' && Number.isInteger(value)) {
    if (!Number.isSafeInteger(value)) throw new InexactTronNumber(`${what} is beyond 2^53 and was rounded`);
    return BigInt(value);
  }
  throw new MalformedTronBlock(`${what} is not an integer`);
}

function text(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new MalformedTronBlock(`${what} is not a string`);
  return value;
}

/** base58 of a hex address in the answer, remembered: the same few contracts and senders recur. */
const base58Of = (() => {
  const known = new Map<string, string>();
  return (hex: unknown, what: string): string => {
    const key = text(hex, what).toLowerCase();
    let address = known.get(key);
    if (address === undefined) {
      try {
        address = tronFromHex(key);
      } catch {
        throw new MalformedTronBlock(`${what} is not a Tron address`);
      }
      if (known.size >= 100_000) known.clear();
      known.set(key, address);
    }
    return address;
  };
})();

/** The header of a getblockbynum (or getblock) answer; undefined for `{}`, a height the node lacks. */
export function tronHeader(answer: unknown): TronHeader | undefined {
  if (!isObject(answer)) throw new MalformedTronBlock('the block is not an object');
  if (answer.blockID === undefined && answer.block_header === undefined) return undefined;
  const hash = text(answer.blockID, 'blockID');
  const header = isObject(answer.block_header) ? answer.block_header.raw_data : undefined;
  if (!isObject(header)) throw new MalformedTronBlock('the block has no block_header.raw_data');
  const height = Number(integer(header.number, 'block_header.raw_data.number'));
  const parentHash = text(header.parentHash, 'block_header.raw_data.parentHash');
  if (!HASH.test(hash) || !HASH.test(parentHash))
    throw new MalformedTronBlock('the block hashes are not 32 bytes of hex');
  // A block id starts with its height (8 bytes): an answer for another height is caught here.
  if (BigInt(`0x${hash.slice(0, 16)}`) !== BigInt(height))
    throw new MalformedTronBlock(`blockID ${hash} is not that of block ${height}`);
  return { height, hash, parentHash, timestamp: Number(integer(header.timestamp, 'timestamp')) };
}

/** A TRC-10 token id from a contract's `asset_name` (hex of its decimal digits). */
function assetId(hex: unknown, what: string): string {
  const name = Buffer.from(text(hex, what), 'hex').toString('utf8');
  if (name === '') throw new MalformedTronBlock(`${what} is empty`);
  return name;
}

/** What the transaction's own contract moved: TRX, a TRC-10 token, or value sent with a call. */
function contractTransfers(type: string, value: Json, owner: string, where: string): TronTransfer[] {
  const transfer = (kind: TronTransfer['kind'], asset: string, to: string, amount: bigint, ref: string) =>
    amount > 0n ? [{ kind, asset, from: owner, to, amount, ref }] : [];
  switch (type) {
    case 'TransferContract':
      return transfer(
        'trx',
        TRX,
        base58Of(value.to_address, `${where}.to_address`),
        integer(value.amount, `${where}.amount`),
        'contract',
      );
    case 'TransferAssetContract':
      return transfer(
        'trc10',
        assetId(value.asset_name, `${where}.asset_name`),
        base58Of(value.to_address, `${where}.to_address`),
        integer(value.amount, `${where}.amount`),
        'contract',
      );
    case 'TriggerSmartContract': {
      const contract = base58Of(value.contract_address, `${where}.contract_address`);
      const tokenValue = integer(value.call_token_value, `${where}.call_token_value`);
      return [
        ...transfer('trx', TRX, contract, integer(value.call_value, `${where}.call_value`), 'contract'),
        ...(tokenValue > 0n
          ? transfer(
              'trc10',
              String(integer(value.token_id, `${where}.token_id`)),
              contract,
              tokenValue,
              'contract:token',
            )
          : []),
      ];
    }
    default:
      return [];
  }
}

/** TRC-20 `Transfer(address,address,uint256)` logs: three topics, the amount in the data. */
function logTransfers(logs: unknown, where: string): TronTransfer[] {
  if (logs === undefined) return [];
  if (!Array.isArray(logs)) throw new MalformedTronBlock(`${where}.log is not a list`);
  const transfers: TronTransfer[] = [];
  logs.forEach((log, index) => {
    if (!isObject(log) || !Array.isArray(log.topics))
      throw new MalformedTronBlock(`${where}.log[${index}] has no topics`);
    const topics = log.topics as unknown[];
    // An ERC-721-style Transfer has its token id as a fourth topic: not a fungible amount.
    if (topics.length !== 3 || topics[0] !== TRANSFER_TOPIC) return;
    const data = text(log.data ?? '', `${where}.log[${index}].data`);
    if (!/^[0-9a-f]{64}$/.test(data)) return;
    const party = (topic: unknown) => {
      const word = text(topic, `${where}.log[${index}].topics`);
      return /^0{24}[0-9a-f]{40}$/.test(word)
        ? base58Of(word.slice(24), `${where}.log[${index}].topics`)
        : undefined;
    };
    const from = party(topics[1]);
    const to = party(topics[2]);
    if (from === undefined || to === undefined) return;
    const amount = BigInt(`0x${data}`);
    if (amount === 0n) return;
    const asset = base58Of(log.address, `${where}.log[${index}].address`);
    transfers.push({ kind: 'trc20', asset, from, to, amount, ref: `log:${index}` });
  });
  return transfers;
}

/** TRX and TRC-10 moved by contract calls; a rejected one moved nothing. */
function internalTransfers(internals: unknown, where: string): TronTransfer[] {
  if (internals === undefined) return [];
  if (!Array.isArray(internals)) throw new MalformedTronBlock(`${where}.internal_transactions is not a list`);
  const transfers: TronTransfer[] = [];
  internals.forEach((internal, index) => {
    const at = `${where}.internal_transactions[${index}]`;
    if (!isObject(internal)) throw new MalformedTronBlock(`${at} is not an object`);
    if (internal.rejected === true || !Array.isArray(internal.callValueInfo)) return;
    const from = base58Of(internal.caller_address, `${at}.caller_address`);
    const to = base58Of(internal.transferTo_address, `${at}.transferTo_address`);
    internal.callValueInfo.forEach((info, valueIndex) => {
      if (!isObject(info)) throw new MalformedTronBlock(`${at}.callValueInfo is not a list of objects`);
      const amount = integer(info.callValue, `${at}.callValueInfo[${valueIndex}].callValue`);
      if (amount <= 0n) return;
      const token =
        info.tokenId === undefined ? undefined : text(info.tokenId, `${at}.callValueInfo.tokenId`);
      transfers.push({
        kind: token === undefined ? 'trx' : 'trc10',
        asset: token ?? TRX,
        from,
        to,
        amount,
        ref: `internal:${index}.${valueIndex}`,
        traceAddress: String(index),
      });
    });
  });
  return transfers;
}

/** One transaction of the block with its info. */
function tronTransaction(tx: Json, info: Json, index: number): TronTransaction {
  const where = `transactions[${index}]`;
  const txId = text(tx.txID, `${where}.txID`);
  const raw = isObject(tx.raw_data) ? tx.raw_data : undefined;
  const contract = raw && Array.isArray(raw.contract) ? raw.contract[0] : undefined;
  if (!isObject(contract) || !isObject(contract.parameter) || !isObject(contract.parameter.value))
    throw new MalformedTronBlock(`${where} has no contract`);
  const contractType = text(contract.type, `${where}.raw_data.contract[0].type`);
  const value = contract.parameter.value;
  const sender = base58Of(value.owner_address, `${where}.owner_address`);
  const ret = Array.isArray(tx.ret) && isObject(tx.ret[0]) ? tx.ret[0] : {};
  const receipt = isObject(info.receipt) ? info.receipt : {};
  const result = String(ret.contractRet ?? receipt.result ?? 'SUCCESS');
  const failed = result !== 'SUCCESS' || info.result === 'FAILED';
  const transfers = failed
    ? []
    : [
        ...contractTransfers(contractType, value, sender, `${where}.raw_data.contract[0].parameter.value`),
        ...internalTransfers(info.internal_transactions, `infos[${index}]`),
        ...logTransfers(info.log, `infos[${index}]`),
      ];
  return {
    txId,
    sender,
    contractType,
    result,
    failed,
    fee: integer(info.fee, `infos[${index}].fee`),
    transfers,
  };
}

/**
 * The block's activity from its two answers; throws MalformedTronBlock when they do not fit
 * together, InexactTronNumber when JSON.parse rounded one of their integers.
 */
export function tronActivity(block: Json, infos: unknown, header: TronHeader): TronActivity {
  const transactions = block.transactions === undefined ? [] : block.transactions;
  if (!Array.isArray(transactions)) throw new MalformedTronBlock('transactions is not a list');
  // An empty block's infos may be an empty object rather than an empty list.
  const list = Array.isArray(infos)
    ? infos
    : isObject(infos) && Object.keys(infos).length === 0
      ? []
      : undefined;
  if (list === undefined) throw new MalformedTronBlock('the transaction infos are not a list');
  if (list.length !== transactions.length)
    throw new MalformedTronBlock(
      `block ${header.height} has ${transactions.length} transactions but ${list.length} transaction infos`,
    );
  // java-tron answers the infos in block order: each must be its transaction's.
  const read = transactions.map((tx, index) => {
    const info = list[index];
    if (!isObject(tx)) throw new MalformedTronBlock(`transactions[${index}] is not an object`);
    if (!isObject(info) || info.id !== tx.txID)
      throw new MalformedTronBlock(
        `block ${header.height}'s transaction ${String(tx.txID)} has no transaction info in its place`,
      );
    return tronTransaction(tx, info, index);
  });
  return read;
}
