/**
 * Tron transaction lookup (docs/transaction-lookup.md) over java-tron's HTTP API: the transaction
 * (`gettransactionbyid`) and its info (`gettransactioninfobyid`), and whether the solidified chain
 * has it yet (`/walletsolidity/gettransactioninfobyid`): only then is the answer final. The
 * genesis block's id, read once, names the chain: `tron:0x` and its last four bytes, the chain id
 * java-tron's JSON-RPC reports (mainnet tron:0x2b6653dc).
 */
import { UpstreamUnavailableError, ValidationError } from '../../errors.js';
import { emptyView, type TransactionLookup } from '../transaction-view.js';
import { tronFromHex } from './address.js';
import { tronHeader } from './blocks.js';
import { createTronApi, type TronApiOptions } from './http-api.js';

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const TX_ID = /^[0-9a-fA-F]{64}$/;

export function isTronTxId(id: string): boolean {
  return TX_ID.test(id);
}

const integer = (value: unknown): bigint | null =>
  typeof value === 'bigint'
    ? value
    : typeof value === 'number' && Number.isInteger(value)
      ? BigInt(value)
      : null;

export function createTronLookup(options: TronApiOptions): TransactionLookup {
  const api = createTronApi(options);
  const unexpected = (what: string) =>
    new UpstreamUnavailableError(`The node at ${api.host} answered ${what}`);
  // Read once and kept; a failed answer is forgotten so the next lookup asks again. A node that
  // has no block 0 (a lite full node starts from a snapshot) leaves the chain's fields null.
  let genesis: Promise<string | null> | undefined;
  const genesisHash = (): Promise<string | null> => {
    genesis ??= api
      .call('/wallet/getblock', { id_or_num: '0', detail: false })
      .then((answer) => tronHeader(answer)?.hash ?? null)
      .catch((err: unknown) => {
        genesis = undefined;
        throw err;
      });
    return genesis;
  };
  return async (rawId) => {
    if (!isTronTxId(rawId))
      throw new ValidationError('Not a Tron transaction id', [
        { parameter: 'txId', detail: 'must be 64 hex characters' },
      ]);
    const value = rawId.toLowerCase();
    const [tx, info, genesisId] = await Promise.all([
      api.call('/wallet/gettransactionbyid', { value }, { exact: true }),
      api.call('/wallet/gettransactioninfobyid', { value }, { exact: true }),
      genesisHash(),
    ]);
    if (!isObject(tx) || !isObject(info)) throw unexpected('a transaction lookup with an unexpected shape');
    if (tx.txID === undefined) return undefined;
    if (tx.txID !== value) throw unexpected(`transaction ${String(tx.txID)} when asked for ${value}`);
    const raw = isObject(tx.raw_data) ? tx.raw_data : {};
    const contract = Array.isArray(raw.contract) && isObject(raw.contract[0]) ? raw.contract[0] : {};
    const parameter =
      isObject(contract.parameter) && isObject(contract.parameter.value) ? contract.parameter.value : {};
    const view = emptyView(value);
    view.txType = typeof contract.type === 'string' ? contract.type : null;
    view.sender = typeof parameter.owner_address === 'string' ? tronFromHex(parameter.owner_address) : null;
    view.signature =
      Array.isArray(tx.signature) && typeof tx.signature[0] === 'string' ? tx.signature[0] : null;
    view.genesisHash = genesisId;
    view.genesisId = genesisId === null ? null : `tron:0x${genesisId.slice(-8)}`;
    view.note = typeof raw.data === 'string' ? Buffer.from(raw.data, 'hex').toString('base64') : null;
    const mined = info.blockNumber !== undefined;
    if (mined) {
      view.confirmedRound = integer(info.blockNumber);
      const time = integer(info.blockTimeStamp);
      view.roundTime = time === null ? null : time / 1000n;
      view.fee = integer(info.fee) ?? 0n;
    }
    const solid = mined
      ? await api.call('/walletsolidity/gettransactioninfobyid', { value }, { exact: true })
      : undefined;
    return { view, final: isObject(solid) && solid.blockNumber !== undefined };
  };
}
