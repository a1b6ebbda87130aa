/**
 * The decimals of Tron tokens, read once per token and kept: a TRC-10 token's `precision` from its
 * issue record, a TRC-20 contract's `decimals()` through a constant call. A token whose decimals
 * cannot be had (no such token, a call that reverts, a value past 255) is null: its amounts stay
 * in base units. A node that fails is not remembered: the next block asks again.
 */
import { TRX, TRX_DECIMALS, type TronTransferKind } from './activity.js';
import { tronToHex } from './address.js';
import { createTronApi, type TronApiOptions } from './http-api.js';

export interface TronTokenDecimals {
  decimals(kind: TronTransferKind, asset: string): Promise<number | null>;
}

/** Any address may ask a constant call; this one owns nothing. */
const CALLER = `41${'0'.repeat(40)}`;
const DECIMALS_SELECTOR = 'decimals()';

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

export function createTronTokenDecimals(options: TronApiOptions): TronTokenDecimals {
  const api = createTronApi(options);
  const known = new Map<string, Promise<number | null>>();

  async function trc10(id: string): Promise<number | null> {
    const record = await api.call('/wallet/getassetissuebyid', { value: id });
    if (!isObject(record) || record.id === undefined) return null;
    const precision = Number(record.precision ?? 0);
    return Number.isInteger(precision) && precision >= 0 && precision <= 255 ? precision : null;
  }

  async function trc20(contract: string): Promise<number | null> {
    const answer = await api.call('/wallet/triggerconstantcontract', {
      owner_address: CALLER,
      contract_address: tronToHex(contract),
      function_selector: DECIMALS_SELECTOR,
      parameter: '',
    });
    if (!isObject(answer) || !isObject(answer.result) || answer.result.result !== true) return null;
    const word = Array.isArray(answer.constant_result) ? answer.constant_result[0] : undefined;
    if (typeof word !== 'string' || !/^[0-9a-fA-F]{64}/.test(word)) return null;
    const value = BigInt(`0x${word.slice(0, 64)}`);
    return value <= 255n ? Number(value) : null;
  }

  return {
    decimals(kind, asset) {
      if (kind === 'trx') return Promise.resolve(asset === TRX ? TRX_DECIMALS : null);
      const key = `${kind}:${asset}`;
      let pending = known.get(key);
      if (!pending) {
        pending = kind === 'trc10' ? trc10(asset) : trc20(asset);
        known.set(key, pending);
        pending.catch(() => {
          if (known.get(key) === pending) known.delete(key);
        });
      }
      return pending;
    },
  };
}
