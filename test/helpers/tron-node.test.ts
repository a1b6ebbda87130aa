/**
 * The loopback Tron node against independent computation: block ids, txTrieRoots and txIDs are
 * recomputed here (sha256 of our own header encoding, tronweb's protobuf for transactions),
 * addresses and calldata are read with tronweb, signatures recover their owners. The recorded
 * block is served as recorded; the assembled blocks link, recompute and carry real signed
 * transactions; every block's infos follow its transactions. Then the controls: API key, failures,
 * drops, lies, the solidified view and a switch of branch.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { isSafeNumber, parse } from 'lossless-json';
import { utils } from 'tronweb';
import { request } from 'undici';
import { recoverAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { fixturePath } from './fixture-node.js';
import {
  assembledChain,
  CONSTRUCTED,
  emptyBlocks,
  FAILED_USDT_TX,
  type Json,
  RECORDED_BLOCK_ID,
  RECORDED_BLOCK_NUMBER,
  RECORDED_INFO_TX,
  recordedBlock69351239,
  replacementBranch,
  SOLIDITY_LAG,
  startTronNode,
  TRANSFER_TOPIC,
  type TronBlock,
  type TronBlockFixture,
  type TronHeaderRaw,
  type TronNode,
  type TronTransaction,
  USDT,
  USDT_HEX,
} from './tron-node.js';

// ---- reading answers and fixtures (integers beyond 2^53 as bigint)

const exact = (text: string): unknown =>
  parse(text, undefined, (value) => (isSafeNumber(value) ? Number(value) : BigInt(value)));
const fixture = (name: string): unknown => exact(fs.readFileSync(fixturePath('chains/tron', name), 'utf8'));

interface Answer {
  status: number;
  text: string;
  /** The body parsed, undefined when it is not JSON. */
  json: unknown;
}

let node: TronNode;

async function call(
  path: string,
  options: { body?: unknown; raw?: string; method?: 'GET' | 'POST'; headers?: Record<string, string> } = {},
  target: TronNode = node,
): Promise<Answer> {
  const method = options.method ?? (options.body === undefined && options.raw === undefined ? 'GET' : 'POST');
  const res = await request(`${target.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...options.headers },
    body: options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body)),
    headersTimeout: 5_000,
    bodyTimeout: 5_000,
  });
  const text = await res.body.text();
  let json: unknown;
  try {
    json = text.trim() === '' ? undefined : exact(text);
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, text, json };
}

const post = async (path: string, body: unknown): Promise<unknown> => (await call(path, { body })).json;

// ---- independent computation

const sha256 = (data: Uint8Array): Buffer => createHash('sha256').update(data).digest();
const hex = (text: string): Buffer => Buffer.from(text, 'hex');

/** Protobuf varint and fields, written here for the BlockHeader.raw (Tron.proto) check. */
function pbVarint(value: number): number[] {
  const out: number[] = [];
  let n = BigInt(value);
  do {
    const low = Number(n % 128n);
    n /= 128n;
    out.push(n > 0n ? low + 128 : low);
  } while (n > 0n);
  return out;
}
const pbInt = (field: number, value: number | undefined): number[] =>
  value ? [...pbVarint(field * 8), ...pbVarint(value)] : [];
const pbBytes = (field: number, bytes: Buffer): number[] =>
  bytes.length ? [...pbVarint(field * 8 + 2), ...pbVarint(bytes.length), ...bytes] : [];

/** blockID: number (8 bytes) ‖ sha256(BlockHeader.raw)[8..32]. */
function expectedBlockId(raw: TronHeaderRaw): string {
  const header = Buffer.from([
    ...pbInt(1, raw.timestamp),
    ...pbBytes(2, hex(raw.txTrieRoot)),
    ...pbBytes(3, hex(raw.parentHash)),
    ...pbInt(7, raw.number),
    ...pbBytes(9, hex(raw.witness_address)),
    ...pbInt(10, raw.version),
  ]);
  return raw.number.toString(16).padStart(16, '0') + sha256(header).subarray(8).toString('hex');
}

/** tronweb's generated protobuf classes (core/Tron.proto), which it installs on globalThis. */
interface ProtoMessage {
  serializeBinary(): Uint8Array;
}
interface ProtoTransaction extends ProtoMessage {
  setRawData(raw: ProtoMessage): void;
  setSignatureList(signatures: Uint8Array[]): void;
  setRetList(results: ProtoMessage[]): void;
}
interface ProtoResult extends ProtoMessage {
  setContractret(value: number): void;
}
const TronWebProto = (
  globalThis as unknown as {
    TronWebProto: {
      Transaction: (new () => ProtoTransaction) & {
        raw: { deserializeBinary(bytes: Uint8Array): ProtoMessage };
        Result: (new () => ProtoResult) & { contractResult: Record<string, number> };
      };
    };
  }
).TronWebProto;

/** txTrieRoot: java-tron's Merkle tree over sha256 of each Transaction, built with tronweb's protobuf. */
function expectedTxTrieRoot(transactions: TronTransaction[]): string {
  if (transactions.length === 0) return '0'.repeat(64);
  let level = transactions.map((tx) => {
    const proto = new TronWebProto.Transaction();
    proto.setRawData(TronWebProto.Transaction.raw.deserializeBinary(hex(tx.raw_data_hex)));
    proto.setSignatureList((tx.signature ?? []).map(hex));
    proto.setRetList(
      (tx.ret ?? []).map((ret) => {
        const result = new TronWebProto.Transaction.Result();
        result.setContractret(TronWebProto.Transaction.Result.contractResult[String(ret.contractRet)]!);
        return result;
      }),
    );
    return sha256(proto.serializeBinary());
  });
  while (level.length > 1) {
    const next: Buffer[] = [];
    for (let i = 0; i < level.length; i += 2)
      next.push(i + 1 < level.length ? sha256(Buffer.concat([level[i]!, level[i + 1]!])) : level[i]!);
    level = next;
  }
  return level[0]!.toString('hex');
}

const contractOf = (tx: TronTransaction) => {
  const contract = (tx.raw_data.contract as Json[])[0]!;
  return { type: String(contract.type), value: (contract.parameter as Json).value as Json };
};
const base58 = (hex41: string): string => utils.address.fromHex(hex41);

/**
 * Whether the transaction's signature recovers its owner (viem: Tron accepts high-s signatures,
 * which tronweb's ethers-based ecRecover refuses; java-tron reads r, s, v from the first 65 bytes).
 * Not so when a key of an active permission signs (Permission_id > 0) or the owner permission's
 * key was changed.
 */
async function signedByOwner(tx: TronTransaction): Promise<boolean> {
  const signer = await recoverAddress({
    hash: `0x${tx.txID}`,
    signature: `0x${tx.signature![0]!.slice(0, 130)}`,
  });
  return `41${signer.slice(2).toLowerCase()}` === contractOf(tx).value.owner_address;
}

/** A transaction is real: txID = sha256(raw_data_hex), its JSON says what raw_data_hex says (tronweb's deserializer). */
function expectRealTransaction(tx: TronTransaction) {
  expect(sha256(hex(tx.raw_data_hex)).toString('hex')).toBe(tx.txID);
  const { type, value } = contractOf(tx);
  const decoded = utils.deserializeTx.deserializeTransaction(type, tx.raw_data_hex) as {
    contract: { parameter: { value: Json } }[];
  };
  const fromHex = decoded.contract[0]!.parameter.value;
  for (const key of ['owner_address', 'to_address', 'contract_address', 'data'] as const)
    if (value[key] !== undefined) expect(String(fromHex[key]).toLowerCase()).toBe(value[key]);
  if (value.amount !== undefined) expect(BigInt(String(fromHex.amount))).toBe(BigInt(value.amount as number));
  // java-tron prints a TRC-10 name (`visible` false) as the hex of its ASCII id, as tronweb decodes it.
  if (value.asset_name !== undefined) expect(String(fromHex.asset_name).toLowerCase()).toBe(value.asset_name);
}

/**
 * What a TRC-20 transfer's calldata says, read by tronweb: from, to (base58) and amount. Wallets
 * often write an address argument with Tron's 41 in its word, which the TVM ignores (an address is
 * the word's low 20 bytes) but ethers' decoder refuses: those 12 high bytes are cleared first.
 */
function calldataTransfer(tx: TronTransaction): { from: string; to: string; amount: bigint } | undefined {
  const { type, value } = contractOf(tx);
  const raw = String(value.data ?? '');
  if (type !== 'TriggerSmartContract') return undefined;
  const words = raw.slice(8).match(/.{64}/g) ?? [];
  const data =
    raw.slice(0, 8) +
    words.map((word, i) => (i < words.length - 1 ? `${'0'.repeat(24)}${word.slice(24)}` : word)).join('');
  if (data.startsWith('a9059cbb')) {
    const args = utils.abi.decodeParams(['to', 'amount'], ['address', 'uint256'], `0x${data.slice(8)}`);
    return { from: base58(String(value.owner_address)), to: base58(args.to), amount: args.amount };
  }
  if (data.startsWith('23b872dd')) {
    const args = utils.abi.decodeParams(
      ['from', 'to', 'amount'],
      ['address', 'address', 'uint256'],
      `0x${data.slice(8)}`,
    );
    return { from: base58(args.from), to: base58(args.to), amount: args.amount };
  }
  return undefined;
}

/** What a Transfer log says, read by tronweb. */
function logTransfer(log: Json): { token: string; from: string; to: string; amount: bigint } {
  const topics = log.topics as string[];
  expect(topics[0]).toBe(TRANSFER_TOPIC);
  const word = (topic: string) => utils.abi.decodeParams(['a'], ['address'], `0x${topic}`).a as string;
  const amount = utils.abi.decodeParams(['v'], ['uint256'], `0x${String(log.data)}`).v as bigint;
  return {
    token: base58(`41${String(log.address)}`),
    from: base58(word(topics[1]!)),
    to: base58(word(topics[2]!)),
    amount,
  };
}

const numberOf = (block: TronBlock): number => block.block_header.raw_data.number;

beforeAll(async () => {
  node = await startTronNode();
});
afterAll(() => node.close());

describe('the recorded block 69351239', () => {
  test('is served exactly as recorded: getblockbynum (POST and GET), getnowblock, getblock', async () => {
    const recorded = recordedBlock69351239();
    node.setBlocks([recorded]);
    const file = fixture('wallet-http/getblockbynum-69351239-mainnet.json') as TronBlock;
    expect(await post('/wallet/getblockbynum', { num: RECORDED_BLOCK_NUMBER })).toEqual(file);
    expect((await call(`/wallet/getblockbynum?num=${RECORDED_BLOCK_NUMBER}`)).json).toEqual(file);
    expect(await post('/wallet/getnowblock', {})).toEqual(file);
    expect(
      await post('/wallet/getblock', { id_or_num: String(RECORDED_BLOCK_NUMBER), detail: true }),
    ).toEqual(file);
    // detail false (java-tron ≥ 4.7.x): the header without the transactions.
    const { transactions: _, ...header } = file;
    expect(await post('/wallet/getblock', { id_or_num: RECORDED_BLOCK_ID })).toEqual(header);
    const answer = await call('/wallet/getnowblock');
    expect(answer.status).toBe(200);
    expect(answer.text.endsWith('\n')).toBe(true);
  });

  test('recomputes: blockID from its header, txTrieRoot from all 297 transactions, each one real', async () => {
    const { block } = recordedBlock69351239();
    expect(expectedBlockId(block.block_header.raw_data)).toBe(RECORDED_BLOCK_ID);
    expect(block.transactions).toHaveLength(297);
    expect(expectedTxTrieRoot(block.transactions!)).toBe(block.block_header.raw_data.txTrieRoot);
    const otherSigners: string[] = [];
    for (const tx of block.transactions!) {
      expectRealTransaction(tx);
      const permission = (tx.raw_data.contract as Json[])[0]!.Permission_id;
      if (!permission && !(await signedByOwner(tx))) otherSigners.push(tx.txID);
    }
    // One owner signs with a key that is not its address's: its owner permission was changed.
    expect(otherSigners).toEqual(['ae2a04b7577b6ad7bb801678fd92d7f462d809323b146e6672f92864a028197c']);
  });

  test('its infos: one per transaction in block order, the recorded one unchanged, USDT logs as the calldata and the derived movements say', async () => {
    const { block } = recordedBlock69351239();
    node.setBlocks([{ block, infos: recordedBlock69351239().infos }]);
    const infos = (await post('/wallet/gettransactioninfobyblocknum', {
      num: RECORDED_BLOCK_NUMBER,
    })) as Json[];
    expect(infos.map((info) => info.id)).toEqual(block.transactions!.map((tx) => tx.txID));
    for (const info of infos) {
      expect(info.blockNumber).toBe(RECORDED_BLOCK_NUMBER);
      expect(info.blockTimeStamp).toBe(block.block_header.raw_data.timestamp);
    }
    expect(infos.find((info) => info.id === RECORDED_INFO_TX)).toEqual(
      fixture('wallet-http/gettransactioninfobyid-e1cd4454-mainnet.json'),
    );
    let usdtTransfers = 0;
    for (const [i, tx] of block.transactions!.entries()) {
      const said = calldataTransfer(tx);
      const logs = (infos[i]!.log as Json[] | undefined) ?? [];
      if (!said || contractOf(tx).value.contract_address !== USDT_HEX) {
        expect(logs).toEqual([]);
        continue;
      }
      usdtTransfers++;
      expect(logs.map(logTransfer)).toEqual([{ token: USDT, ...said }]);
    }
    expect(usdtTransfers).toBe(137); // 136 transfer, 1 transferFrom (amount 0)
    const derived = fixture('tron-movements.derived.json') as {
      sources: { file: string; movements: Json[] }[];
    };
    const movements = derived.sources
      .find((source) => source.file === 'wallet-http/getblockbynum-69351239-mainnet.json')!
      .movements.filter((m) => String(m.asset).startsWith('TRC20:'));
    expect(movements).toHaveLength(137);
    for (const movement of movements) {
      const info = infos.find((i) => i.id === movement.txID)!;
      const [log] = (info.log as Json[]).map(logTransfer);
      expect({ token: log!.token, from: log!.from, to: log!.to, amount: String(log!.amount) }).toEqual({
        token: String(movement.asset).slice('TRC20:'.length),
        from: movement.from,
        to: movement.to,
        amount: movement.amount,
      });
    }
  });
});

describe('the assembled chain 69351240…69351245', () => {
  const chain = (): TronBlockFixture[] => [recordedBlock69351239(), ...assembledChain()];

  test('links to block 69351239, each blockID and txTrieRoot recomputes, each transaction is real', async () => {
    node.setBlocks(chain());
    let parent = RECORDED_BLOCK_ID;
    for (let num = RECORDED_BLOCK_NUMBER + 1; num <= RECORDED_BLOCK_NUMBER + 6; num++) {
      const block = (await post('/wallet/getblockbynum', { num })) as TronBlock;
      const raw = block.block_header.raw_data;
      expect(raw.number).toBe(num);
      expect(raw.parentHash).toBe(parent);
      expect(raw.timestamp).toBe(1738705566000 + (num - RECORDED_BLOCK_NUMBER) * 3000);
      expect(block.blockID).toBe(expectedBlockId(raw));
      expect(raw.txTrieRoot).toBe(expectedTxTrieRoot(block.transactions ?? []));
      for (const tx of block.transactions ?? []) {
        expectRealTransaction(tx);
        expect(await signedByOwner(tx)).toBe(true);
      }
      parent = block.blockID;
    }
    const empty = (await post('/wallet/getblockbynum', { num: 69351244 })) as TronBlock;
    expect('transactions' in empty).toBe(false);
    expect(empty.block_header.raw_data.txTrieRoot).toBe('0'.repeat(64));
    expect(await post('/wallet/gettransactioninfobyblocknum', { num: 69351244 })).toEqual([]);
    expect((await post('/wallet/getnowblock', {})) as TronBlock).toMatchObject({ blockID: parent });
  });

  test('infos follow their transactions; recorded infos are unchanged but for blockNumber and blockTimeStamp', async () => {
    node.setBlocks(chain());
    const recordedInfos = fixture('wallet-http/ledger-gettransactioninfobyid-map-mainnet.json') as Record<
      string,
      Json
    >;
    let real = 0;
    for (let num = RECORDED_BLOCK_NUMBER + 1; num <= RECORDED_BLOCK_NUMBER + 6; num++) {
      const block = (await post('/wallet/getblockbynum', { num })) as TronBlock;
      const infos = (await post('/wallet/gettransactioninfobyblocknum', { num })) as Json[];
      const transactions = block.transactions ?? [];
      expect(infos.map((info) => info.id)).toEqual(transactions.map((tx) => tx.txID));
      transactions.forEach((tx, i) => {
        const info = infos[i]!;
        expect([info.blockNumber, info.blockTimeStamp]).toEqual([num, block.block_header.raw_data.timestamp]);
        const recorded = recordedInfos[tx.txID];
        if (recorded) {
          real++;
          expect(info).toEqual({ ...recorded, blockNumber: num, blockTimeStamp: info.blockTimeStamp });
        }
        const said = calldataTransfer(tx);
        const succeeded = tx.ret![0]!.contractRet === 'SUCCESS';
        const own = ((info.log as Json[] | undefined) ?? []).map(logTransfer)[0];
        if (said && succeeded)
          expect(own).toEqual({ token: base58(String(contractOf(tx).value.contract_address)), ...said });
        else expect(own).toBeUndefined();
      });
    }
    expect(real).toBe(13); // 9 USDT transfers, the failed call, 2 TRX and 1 TRC-10 transfer
    const failed = (await post('/wallet/gettransactionbyid', { value: FAILED_USDT_TX })) as TronTransaction;
    expect(failed.ret).toEqual([{ contractRet: 'OUT_OF_ENERGY' }]);
    const failedInfo = (await post('/wallet/gettransactioninfobyid', { value: FAILED_USDT_TX })) as Json;
    expect(failedInfo).toMatchObject({
      result: 'FAILED',
      receipt: { result: 'OUT_OF_ENERGY' },
      blockNumber: 69351242,
    });
    expect(failedInfo.log).toBeUndefined();
  });

  test('the CONSTRUCTED internal transactions and contract-sent USDT transfer, as java-tron prints them', async () => {
    node.setBlocks(chain());
    const info = (await post('/wallet/gettransactioninfobyid', { value: CONSTRUCTED.txId })) as Json;
    const tx = (await post('/wallet/gettransactionbyid', { value: CONSTRUCTED.txId })) as TronTransaction;
    expectRealTransaction(tx);
    expect(await signedByOwner(tx)).toBe(true);
    expect(info.blockNumber).toBe(CONSTRUCTED.blockNumber);
    const contract = String(contractOf(tx).value.contract_address);
    expect(base58(contract)).toBe(CONSTRUCTED.contract);
    const internal = info.internal_transactions as Json[];
    const eight = (n: number) => Buffer.from(BigInt(n).toString(16).padStart(16, '0'), 'hex');
    const toHex = (address: string) => utils.address.toHex(address);
    const expected = [
      {
        to: CONSTRUCTED.trx.to,
        callValueInfo: [{ callValue: CONSTRUCTED.trx.sun }],
        value: CONSTRUCTED.trx.sun,
      },
      {
        to: CONSTRUCTED.trc10.to,
        callValueInfo: [{}, { callValue: CONSTRUCTED.trc10.amount, tokenId: CONSTRUCTED.trc10.tokenId }],
        value: 0,
      },
      {
        to: CONSTRUCTED.rejected.to,
        callValueInfo: [{ callValue: CONSTRUCTED.rejected.sun }],
        value: CONSTRUCTED.rejected.sun,
        rejected: true,
      },
      { to: USDT, callValueInfo: [{}], value: 0 },
    ];
    expect(internal).toHaveLength(expected.length);
    const usdtCalldata = `a9059cbb${utils.abi.encodeParams(['address', 'uint256'], [CONSTRUCTED.usdtFromContract.to, CONSTRUCTED.usdtFromContract.amount]).slice(2)}`;
    expected.forEach((want, i) => {
      const it = internal[i]!;
      expect(it.caller_address).toBe(contract);
      expect(base58(String(it.transferTo_address))).toBe(want.to);
      expect(it.callValueInfo).toEqual(want.callValueInfo);
      expect(Buffer.from(String(it.note), 'hex').toString()).toBe('call');
      expect(it.rejected).toBe(want.rejected);
      const data = want.to === USDT ? hex(usdtCalldata) : Buffer.alloc(0);
      const preimage = Buffer.concat([
        hex(tx.txID),
        hex(toHex(want.to)),
        data,
        eight(want.value),
        eight(i + 1),
      ]);
      expect(it.hash).toBe(utils.ethersUtils.keccak256(preimage).slice(2));
    });
    const transfers = (info.log as Json[]).map(logTransfer);
    expect(transfers).toHaveLength(2);
    expect(transfers[0]).toEqual({ token: CONSTRUCTED.contract, ...calldataTransfer(tx) });
    expect(transfers[1]).toEqual({
      token: USDT,
      from: CONSTRUCTED.contract,
      to: CONSTRUCTED.usdtFromContract.to,
      amount: CONSTRUCTED.usdtFromContract.amount,
    });
    // visible: true prints every address of the info in base58, log addresses included.
    const visible = (await post('/wallet/gettransactioninfobyid', {
      value: CONSTRUCTED.txId,
      visible: true,
    })) as Json;
    expect(visible.contract_address).toBe(CONSTRUCTED.contract);
    expect((visible.log as Json[]).map((log) => log.address)).toEqual([CONSTRUCTED.contract, USDT]);
    expect(
      (visible.internal_transactions as Json[]).map((it) => [it.caller_address, it.transferTo_address]),
    ).toEqual(expected.map((want) => [CONSTRUCTED.contract, want.to]));
  });

  test('visible: true prints base58 addresses and TRC-10 names as text', async () => {
    node.setBlocks(chain());
    const plain = (await post('/wallet/getblockbynum', { num: 69351245 })) as TronBlock;
    const visible = (await post('/wallet/getblockbynum', { num: 69351245, visible: true })) as TronBlock;
    expect(visible.block_header.raw_data.witness_address).toBe(
      base58(plain.block_header.raw_data.witness_address),
    );
    plain.transactions!.forEach((tx, i) => {
      const shown = contractOf(visible.transactions![i]!).value;
      for (const [key, value] of Object.entries(contractOf(tx).value)) {
        if (key.endsWith('address')) expect(shown[key]).toBe(base58(String(value)));
        else if (key === 'asset_name') expect(shown[key]).toBe(Buffer.from(String(value), 'hex').toString());
        else expect(shown[key]).toEqual(value);
      }
    });
    expect(contractOf(visible.transactions![1]!).value.asset_name).toBe('1002814');
    const infos = (await post('/wallet/gettransactioninfobyblocknum', {
      num: 69351245,
      visible: true,
    })) as Json[];
    const usdt = infos.find((info) => info.contract_address === USDT)!;
    expect((usdt.log as Json[])[0]!.address).toBe(USDT);
  });

  test('the replacement branch: another 69351245 on the same parent and a 69351246 after it', async () => {
    const main = chain();
    node.setBlocks(main);
    const [other, next] = replacementBranch();
    const tip = main[main.length - 1]!.block;
    expect(numberOf(other!.block)).toBe(numberOf(tip));
    expect(other!.block.block_header.raw_data.parentHash).toBe(tip.block_header.raw_data.parentHash);
    expect(other!.block.blockID).not.toBe(tip.blockID);
    expect(next!.block.block_header.raw_data.parentHash).toBe(other!.block.blockID);
    for (const { block, infos } of [other!, next!]) {
      expect(block.blockID).toBe(expectedBlockId(block.block_header.raw_data));
      expect(block.block_header.raw_data.txTrieRoot).toBe(expectedTxTrieRoot(block.transactions!));
      expect(infos.map((info) => info.id)).toEqual(block.transactions!.map((tx) => tx.txID));
    }
    const onlyInMain = tip.transactions!.find(
      (tx) => !other!.block.transactions!.some((o) => o.txID === tx.txID),
    )!.txID;
    expect(await post('/wallet/gettransactionbyid', { value: onlyInMain })).toMatchObject({
      txID: onlyInMain,
    });
    node.addBlock(other!);
    expect(await post('/wallet/getnowblock', {})).toMatchObject({ blockID: other!.block.blockID });
    expect(await post('/wallet/getblock', { id_or_num: tip.blockID, detail: true })).toEqual({});
    expect(await post('/wallet/gettransactionbyid', { value: onlyInMain })).toEqual({});
    node.addBlock(next!);
    expect(node.tip).toBe(numberOf(tip) + 1);
    expect(await post('/wallet/getblock', { id_or_num: other!.block.blockID })).toMatchObject({
      blockID: other!.block.blockID,
    });
  });
});

describe("java-tron's answers for what it does not have and for malformed input", () => {
  test('{} beyond the tip and for unknown ids, [] for the infos of a block it does not have, {} for num 0', async () => {
    node.setBlocks([recordedBlock69351239(), ...assembledChain()]);
    const beyond = RECORDED_BLOCK_NUMBER + 7;
    expect(await post('/wallet/getblockbynum', { num: beyond })).toEqual({});
    expect((await call(`/wallet/getblockbynum?num=${beyond}`)).json).toEqual({});
    expect(await post('/wallet/getblock', { id_or_num: String(beyond), detail: true })).toEqual({});
    expect(await post('/wallet/gettransactioninfobyblocknum', { num: beyond })).toEqual([]);
    expect(await post('/wallet/gettransactioninfobyblocknum', { num: 0 })).toEqual({});
    expect(await post('/wallet/gettransactionbyid', { value: '00'.repeat(32) })).toEqual({});
    expect(await post('/wallet/gettransactioninfobyid', { value: '00'.repeat(32) })).toEqual({});
    const nowhere = await call('/wallet/nosuchthing', { body: {} });
    expect(nowhere.status).toBe(404);
  });

  test('malformed input: 200 and {"Error"} as the servlets print exceptions', async () => {
    node.setBlocks([recordedBlock69351239()]);
    const error = async (path: string, options: Parameters<typeof call>[1]) => {
      const answer = await call(path, options);
      expect(answer.status).toBe(200);
      return (answer.json as { Error: string }).Error;
    };
    expect(await error('/wallet/getblockbynum?num=abc', {})).toBe(
      'class java.lang.NumberFormatException : For input string: "abc"',
    );
    expect(await error('/wallet/getblockbynum', { raw: '{"num":"abc"}' })).toBe(
      'class org.tron.core.services.http.JsonFormat$ParseException : 1:8: Couldn\'t parse integer: For input string: ""abc""',
    );
    expect(await error('/wallet/gettransactioninfobyblocknum', {})).toBe(
      'class java.lang.NumberFormatException : null',
    );
    expect(await error('/wallet/gettransactioninfobyblocknum', { raw: '{"num": 1e3}' })).toBe(
      'class org.tron.core.services.http.JsonFormat$ParseException : 1:9: Couldn\'t parse integer: For input string: "1e3"',
    );
    expect(await error('/wallet/getblockbynum', { raw: 'not json' })).toMatch(
      /^class com\.alibaba\.fastjson\.JSONException : /,
    );
    expect(await error('/wallet/getblock', { body: { id_or_num: 'xyz' } })).toBe(
      'id must be legal block hash.',
    );
    expect(await error('/wallet/getblock', { body: { id_or_num: '-1' } })).toBe(
      'num must be non-positive number.',
    );
    expect(await error('/wallet/getblock', { raw: '{"id_or_num": 5}' })).toBe(
      'class org.tron.core.services.http.JsonFormat$ParseException : 1:15: Expected string.',
    );
    expect(await error('/wallet/gettransactionbyid', { raw: '{"value":"zz"}' })).toBe(
      'class org.tron.core.services.http.JsonFormat$ParseException : 1:10: invalidate hex String',
    );
    expect(await error('/wallet/gettransactionbyid?value=zz', {})).toBe(
      'class org.bouncycastle.util.encoders.DecoderException : exception decoding Hex string: invalid characters encountered in Hex string',
    );
  });

  test('recorded single transactions and infos are served by id (POST and GET)', async () => {
    const body = fixture('wallet-http/gettransactionbyid-5a9935a1-trx-mainnet.json') as TronTransaction;
    expect(await post('/wallet/gettransactionbyid', { value: body.txID })).toEqual(body);
    expect((await call(`/wallet/gettransactionbyid?value=${body.txID}`)).json).toEqual(body);
    expect(await post('/wallet/gettransactioninfobyid', { value: body.txID })).toEqual(
      fixture('wallet-http/gettransactioninfobyid-5a9935a1-mainnet.json'),
    );
    const infoOnly = fixture('wallet-http/gettransactioninfobyid-ec7c9584-mainnet.json') as Json;
    expect(await post('/wallet/gettransactioninfobyid', { value: infoOnly.id })).toEqual(infoOnly);
    expect(await post('/wallet/gettransactionbyid', { value: infoOnly.id })).toEqual({});
  });
});

describe('getassetissuebyid and triggerconstantcontract', () => {
  test("TRC-10 records DERIVED from TronGrid's, in java-tron's form; visible prints text", async () => {
    const tronGrid = (fixture('trongrid-v1/assets-1002000-mainnet.json') as { data: Json[] }).data[0]!;
    const record = (await post('/wallet/getassetissuebyid', { value: '1002000' })) as Json;
    expect(record).toEqual({
      owner_address: tronGrid.owner_address,
      name: Buffer.from('BitTorrent').toString('hex'),
      abbr: Buffer.from('BTT').toString('hex'),
      total_supply: 990000000000000000n,
      trx_num: 1,
      precision: 6,
      num: 1,
      start_time: 1548000000000,
      end_time: 1548000001000,
      description: Buffer.from(String(tronGrid.description)).toString('hex'),
      url: Buffer.from(String(tronGrid.url)).toString('hex'),
      id: '1002000',
    });
    expect((await call('/wallet/getassetissuebyid?value=1002000&visible=true')).json).toMatchObject({
      owner_address: base58(String(tronGrid.owner_address)),
      name: 'BitTorrent',
      abbr: 'BTT',
      precision: 6,
    });
    expect(await post('/wallet/getassetissuebyid', { value: '1005065' })).toEqual({});
    node.setAsset('1005065', { name: Buffer.from('X').toString('hex'), precision: 2, id: '1005065' });
    expect(await post('/wallet/getassetissuebyid', { value: '1005065' })).toMatchObject({ precision: 2 });
  });

  test('decimals() answers a 32-byte word and the unsigned constant-call transaction', async () => {
    node.setBlocks([recordedBlock69351239()]);
    const owner = '416e3b44b96104b26f84057974a1f0c9880f7c9b13';
    const answer = (await post('/wallet/triggerconstantcontract', {
      owner_address: owner,
      contract_address: USDT_HEX,
      function_selector: 'decimals()',
    })) as Json;
    expect(answer.result).toEqual({ result: true });
    expect(typeof answer.energy_used).toBe('number');
    const [word] = answer.constant_result as string[];
    expect(word).toHaveLength(64);
    expect(utils.abi.decodeParams(['d'], ['uint8'], `0x${word}`).d).toBe(6n);
    const tx = answer.transaction as TronTransaction;
    expect(tx.visible).toBe(false);
    expect(tx.ret).toEqual([{}]);
    expect(sha256(hex(tx.raw_data_hex)).toString('hex')).toBe(tx.txID);
    const decoded = utils.deserializeTx.deserializeTransaction(
      'TriggerSmartContract',
      tx.raw_data_hex,
    ) as Json & {
      contract: { parameter: { value: Json } }[];
    };
    expect(String(decoded.ref_block_hash).toLowerCase()).toBe(RECORDED_BLOCK_ID.slice(16, 32));
    expect(String(decoded.contract[0]!.parameter.value.data).toLowerCase()).toBe('313ce567');
    expect(contractOf(tx).value).toEqual({
      data: '313ce567',
      owner_address: owner,
      contract_address: USDT_HEX,
    });

    const shown = (await post('/wallet/triggerconstantcontract', {
      owner_address: base58(owner),
      contract_address: USDT,
      function_selector: 'decimals()',
      visible: true,
    })) as Json;
    expect(shown.constant_result).toEqual(answer.constant_result);
    expect(contractOf(shown.transaction as TronTransaction).value.contract_address).toBe(USDT);

    node.setDecimals(CONSTRUCTED.contract, 18);
    const jst = (await post('/wallet/triggerconstantcontract', {
      owner_address: owner,
      contract_address: utils.address.toHex(CONSTRUCTED.contract),
      function_selector: 'decimals()',
    })) as Json;
    expect(utils.abi.decodeParams(['d'], ['uint8'], `0x${(jst.constant_result as string[])[0]}`).d).toBe(18n);
  });

  test('a reverting contract, an unknown one, a missing owner and a GET, as java-tron answers them', async () => {
    node.setBlocks([recordedBlock69351239()]);
    const owner = '416e3b44b96104b26f84057974a1f0c9880f7c9b13';
    const text = (hexText: unknown) => Buffer.from(String(hexText), 'hex').toString();
    node.setDecimals(CONSTRUCTED.contract, 'revert');
    const reverted = (await post('/wallet/triggerconstantcontract', {
      owner_address: owner,
      contract_address: utils.address.toHex(CONSTRUCTED.contract),
      function_selector: 'decimals()',
    })) as Json;
    expect(reverted.result).toEqual({
      result: true,
      message: Buffer.from('REVERT opcode executed').toString('hex'),
    });
    expect((reverted.transaction as Json).ret).toEqual([{ ret: 'FAILED' }]);
    const unknown = (await post('/wallet/triggerconstantcontract', {
      owner_address: owner,
      contract_address: owner,
      function_selector: 'decimals()',
    })) as { result: Json };
    expect(unknown).toEqual({ result: { code: 'CONTRACT_VALIDATE_ERROR', message: unknown.result.message } });
    expect(text(unknown.result.message)).toBe('Smart contract is not exist.');
    const ownerless = (await post('/wallet/triggerconstantcontract', {
      contract_address: USDT_HEX,
      function_selector: 'decimals()',
    })) as { result: Json };
    expect(ownerless.result.code).toBe('OTHER_ERROR');
    expect(text(ownerless.result.message)).toBe(
      "class java.security.InvalidParameterException : owner_address isn't set.",
    );
    const get = await call('/wallet/triggerconstantcontract');
    expect([get.status, get.text]).toEqual([200, '']);
  });
});

describe('controls', () => {
  test('with an API key, a request without TRON-PRO-API-KEY (or with another) answers 401 as TronGrid does', async () => {
    const keyed = await startTronNode({ apiKey: 'k-1', blocks: [recordedBlock69351239()] });
    try {
      const refused = await call('/wallet/getnowblock', { body: {} }, keyed);
      expect([refused.status, refused.json]).toEqual([401, { Error: 'ApiKey not exists' }]);
      const wrong = await call(
        '/wallet/getnowblock',
        { body: {}, headers: { 'TRON-PRO-API-KEY': 'k-2' } },
        keyed,
      );
      expect(wrong.status).toBe(401);
      const served = await call(
        '/wallet/getnowblock',
        { body: {}, headers: { 'TRON-PRO-API-KEY': 'k-1' } },
        keyed,
      );
      expect(served.status).toBe(200);
      expect(keyed.requests.map((r) => r.headers['tron-pro-api-key'])).toEqual([undefined, 'k-2', 'k-1']);
    } finally {
      await keyed.close();
    }
  });

  test('failNext answers the status asked for, dropNext closes the connection, then the node answers again', async () => {
    node.setBlocks([recordedBlock69351239()]);
    node.failNext(2, 503);
    expect((await call('/wallet/getnowblock', { body: {} })).status).toBe(503);
    expect((await call('/wallet/getnowblock', { body: {} })).status).toBe(503);
    expect((await call('/wallet/getnowblock', { body: {} })).status).toBe(200);
    node.dropNext(1);
    await expect(call('/wallet/getnowblock', { body: {} })).rejects.toThrow();
    expect((await call('/wallet/getnowblock', { body: {} })).status).toBe(200);
    const before = node.requests.length;
    await post('/wallet/getblockbynum', { num: 1 });
    expect(node.requests.slice(before)).toMatchObject([
      { method: 'POST', path: '/wallet/getblockbynum', body: '{"num":1}' },
    ]);
  });

  test('lieNext: the next infos answer drops one, swaps two ids, or is cut in half; the one after is true', async () => {
    const chain = [recordedBlock69351239(), ...assembledChain()];
    node.setBlocks(chain);
    const num = 69351240;
    const ids = chain[1]!.block.transactions!.map((tx) => tx.txID);
    const infoIds = async () =>
      ((await post('/wallet/gettransactioninfobyblocknum', { num })) as Json[]).map((i) => i.id);
    node.lieNext({ kind: 'infos-count' });
    // An empty block's answer cannot lie about its infos: the lie waits for one with infos.
    expect(await post('/wallet/gettransactioninfobyblocknum', { num: 69351244 })).toEqual([]);
    expect(await infoIds()).toEqual(ids.slice(0, -1));
    expect(await infoIds()).toEqual(ids);
    node.lieNext({ kind: 'infos-ids' });
    expect(await infoIds()).toEqual([ids[1], ids[0], ...ids.slice(2)]);
    expect(await infoIds()).toEqual(ids);
    node.lieNext({ kind: 'garbage' });
    const garbage = await call('/wallet/gettransactioninfobyblocknum', { body: { num } });
    expect(garbage.status).toBe(200);
    expect(() => JSON.parse(garbage.text)).toThrow();
    expect(await infoIds()).toEqual(ids);
  });

  test(`/walletsolidity serves the blocks at least ${SOLIDITY_LAG} below the tip`, async () => {
    const main = [recordedBlock69351239(), ...assembledChain()];
    const chain = [...main, ...emptyBlocks(main[main.length - 1]!, 20)];
    node.setBlocks(chain);
    const tip = RECORDED_BLOCK_NUMBER + 26;
    const solid = tip - SOLIDITY_LAG;
    expect(node.tip).toBe(tip);
    expect(await post('/wallet/getnowblock', {})).toMatchObject({
      block_header: { raw_data: { number: tip } },
    });
    expect(await post('/walletsolidity/getnowblock', {})).toMatchObject({
      block_header: { raw_data: { number: solid } },
    });
    expect(await post('/walletsolidity/getblockbynum', { num: solid + 1 })).toEqual({});
    expect(await post('/wallet/getblockbynum', { num: solid + 1 })).toMatchObject({
      block_header: { raw_data: { number: solid + 1 } },
    });
    expect(await post('/walletsolidity/gettransactioninfobyblocknum', { num: solid + 1 })).toEqual([]);
    const tipTx = chain[6]!.block.transactions![0]!;
    expect(await post('/walletsolidity/gettransactionbyid', { value: tipTx.txID })).toEqual(tipTx);
    expect(await post('/walletsolidity/gettransactioninfobyid', { value: tipTx.txID })).toEqual(
      chain[6]!.infos[0],
    );
    expect(await post('/walletsolidity/gettransactioninfobyblocknum', { num: 69351245 })).toEqual(
      chain[6]!.infos,
    );
    node.addBlock(emptyBlocks(chain[chain.length - 1]!, 1)[0]!);
    expect(await post('/walletsolidity/getnowblock', {})).toMatchObject({
      block_header: { raw_data: { number: solid + 1 } },
    });
    // With only the 7 blocks of the main chain, the solidified block is not held: {}.
    node.setBlocks(main);
    expect(await post('/walletsolidity/getnowblock', {})).toEqual({});
  });

  test('stop makes the node unreachable, start serves again on the same port', async () => {
    node.setBlocks([recordedBlock69351239()]);
    await node.stop();
    await expect(call('/wallet/getnowblock', { body: {} })).rejects.toThrow();
    await node.start();
    expect((await call('/wallet/getnowblock', { body: {} })).status).toBe(200);
  });
});
