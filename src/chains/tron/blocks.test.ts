import { TronWeb, utils } from 'tronweb';
import { describe, expect, test } from 'vitest';
import {
  assembledChain,
  CONSTRUCTED,
  FAILED_USDT_TX,
  readTronFixture,
  recordedBlock69351239,
  USDT,
} from '../../../test/helpers/tron-node.js';
import { TRX } from './activity.js';
import { MalformedTronBlock, tronActivity, tronHeader } from './blocks.js';

type Json = Record<string, unknown>;

interface Movement {
  txID: string;
  asset: string;
  from: string;
  to: string;
  amount: string;
}

/** The value movements of block 69351239 as the fixtures' own script derived them (not our code). */
function derivedMovements(): Movement[] {
  const derived = readTronFixture<{ sources: { file: string; movements: Movement[] }[] }>(
    'tron-movements.derived.json',
  );
  return derived.sources.find((s) => s.file === 'wallet-http/getblockbynum-69351239-mainnet.json')!.movements;
}

const clone = <T>(value: T): T => structuredClone(value);

/**
 * A `transfer(address,uint256)` call's arguments for an ABI decoder. Some wallets write the
 * recipient's word with its 0x41 prefix; the TVM reads the word's low 20 bytes, so the decoder
 * (which refuses dirty high bytes) is given those.
 */
function calldataWords(data: string): string {
  const to = data.slice(8, 72);
  return `0x${'0'.repeat(24)}${to.slice(24)}${data.slice(72, 136)}`;
}

describe('a real Tron block (69351239) with its transaction infos', () => {
  const { block, infos } = recordedBlock69351239();
  const header = tronHeader(block)!;
  const activity = tronActivity(block as Json, infos, header);

  test('its header links it: height, id and parent as recorded', () => {
    expect(header).toMatchObject({
      height: 69351239,
      hash: block.blockID,
      parentHash: block.block_header.raw_data.parentHash,
    });
    expect(activity).toHaveLength(297);
  });

  test('every TRX, TRC-10 and USDT movement of the block, exactly, and nothing else', () => {
    const ours = activity.flatMap((tx) =>
      tx.transfers.map((t) => ({
        txID: tx.txId,
        asset: t.kind === 'trx' ? TRX : t.asset,
        from: t.from,
        to: t.to,
        amount: t.amount.toString(),
      })),
    );
    const expected = derivedMovements()
      .filter((m) => m.amount !== '0')
      .map((m) => ({ ...m, asset: m.asset.replace(/^TRC(10|20):/, '') }))
      .map(({ txID, asset, from, to, amount }) => ({ txID, asset, from, to, amount }));
    const key = (m: Movement) => `${m.txID}:${m.asset}:${m.from}:${m.to}:${m.amount}`;
    expect(ours.map(key).sort()).toEqual(expected.map(key).sort());
    expect(new Set(ours.map((m) => m.asset))).toEqual(new Set([TRX, USDT, '1003134', '1002992', '1005047']));
  });

  test('USDT amounts agree with the calldata as TronWeb decodes it', () => {
    const usdtCalls = block.transactions!.filter((tx) => {
      const contract = (tx.raw_data.contract as Json[])[0]!;
      const value = (contract.parameter as Json).value as Json;
      return contract.type === 'TriggerSmartContract' && String(value.data).startsWith('a9059cbb');
    });
    expect(usdtCalls.length).toBeGreaterThan(100);
    for (const call of usdtCalls) {
      const value = ((call.raw_data.contract as Json[])[0]!.parameter as Json).value as Json;
      const [to, amount] = utils.abi.decodeParams(
        [],
        ['address', 'uint256'],
        calldataWords(String(value.data)),
        true,
      ) as [string, bigint];
      const tx = activity.find((t) => t.txId === call.txID)!;
      const transfer = tx.transfers.find((t) => t.kind === 'trc20')!;
      expect(transfer.to).toBe(TronWeb.address.fromHex(to));
      expect(transfer.from).toBe(TronWeb.address.fromHex(String(value.owner_address)));
      expect(transfer.amount).toBe(BigInt(amount.toString()));
    }
  });

  test('staking and resource transactions move nothing; the one recorded info’s fee is kept', () => {
    const staking = activity.filter((tx) => /Delegate|UnDelegate/.test(tx.contractType));
    expect(staking).toHaveLength(86);
    for (const tx of staking) expect(tx.transfers).toEqual([]);
    const recorded = readTronFixture<Json>('wallet-http/gettransactioninfobyid-e1cd4454-mainnet.json');
    const tx = activity.find((t) => t.txId === recorded.id)!;
    expect(tx.fee).toBe(BigInt(String(recorded.fee)));
  });

  test('infos that do not match the transactions refuse the block whole', () => {
    expect(() => tronActivity(block as Json, infos.slice(1), header)).toThrow(MalformedTronBlock);
    const swapped = clone(infos);
    swapped[5] = { ...swapped[5]!, id: 'ab'.repeat(32) };
    expect(() => tronActivity(block as Json, swapped, header)).toThrow(
      /has no transaction info in its place/,
    );
    expect(() => tronActivity(block as Json, { Error: 'x' }, header)).toThrow(MalformedTronBlock);
    const otherHeight = clone(block);
    otherHeight.block_header.raw_data.number += 1;
    expect(() => tronHeader(otherHeight)).toThrow(/is not that of block/);
  });
});

describe('the assembled chain: internal transactions, a contract’s USDT transfer, a failed call', () => {
  const chain = assembledChain();
  const all = chain.flatMap(({ block, infos }) => tronActivity(block as Json, infos, tronHeader(block)!));

  test('internal TRX and TRC-10 are read, a rejected one is not; the contract’s USDT Transfer is', () => {
    const tx = all.find((t) => t.txId === CONSTRUCTED.txId)!;
    const internal = tx.transfers.filter((t) => t.traceAddress !== undefined);
    expect(internal.map(({ kind, asset, from, to, amount }) => ({ kind, asset, from, to, amount }))).toEqual([
      {
        kind: 'trx',
        asset: TRX,
        from: CONSTRUCTED.contract,
        to: CONSTRUCTED.trx.to,
        amount: BigInt(CONSTRUCTED.trx.sun),
      },
      {
        kind: 'trc10',
        asset: CONSTRUCTED.trc10.tokenId,
        from: CONSTRUCTED.contract,
        to: CONSTRUCTED.trc10.to,
        amount: BigInt(CONSTRUCTED.trc10.amount),
      },
    ]);
    expect(tx.transfers.some((t) => t.to === CONSTRUCTED.rejected.to)).toBe(false);
    expect(
      tx.transfers.find(
        (t) =>
          t.asset === USDT && t.from === CONSTRUCTED.contract && t.to === CONSTRUCTED.usdtFromContract.to,
      )?.amount,
    ).toBe(CONSTRUCTED.usdtFromContract.amount);
  });

  test('the call that ran out of energy failed and moved nothing; its fee is its info’s', () => {
    const tx = all.find((t) => t.txId === FAILED_USDT_TX)!;
    expect(tx).toMatchObject({ failed: true, transfers: [] });
    expect(tx.result).toBe('OUT_OF_ENERGY');
    // Its energy and bandwidth came from staked TRX: the real info has no fee, so none was burned.
    const info = readTronFixture<Record<string, Json>>(
      'wallet-http/ledger-gettransactioninfobyid-map-mainnet.json',
    )[FAILED_USDT_TX]!;
    expect(info.fee).toBeUndefined();
    expect(tx.fee).toBe(0n);
  });

  test('each block links to the one before it', () => {
    for (let i = 1; i < chain.length; i++) {
      expect(tronHeader(chain[i]!.block)!.parentHash).toBe(tronHeader(chain[i - 1]!.block)!.hash);
    }
  });
});
