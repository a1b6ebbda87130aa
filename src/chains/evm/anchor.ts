/**
 * Anchoring on an EVM chain: a zero-value transaction from the anchor key to itself whose input
 * data is the payload, signed locally through viem and sent raw. A stuck transaction is replaced
 * by one with the same nonce and fees raised by a quarter (nodes want at least a tenth), so at most
 * one of them can ever be included.
 */
import {
  BaseError,
  createPublicClient,
  type Hex,
  keccak256,
  type PublicClient,
  TransactionReceiptNotFoundError,
  toHex,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { ConfigError, LedgerhookError, UpstreamUnavailableError } from '../../errors.js';
import type { AnchorChain, AnchorInclusion, SignedAnchorTx } from '../anchor-chain.js';
import { jsonRpcHttp } from './rpc-transport.js';

/** Depth after which an EVM anchor is no longer watched for reorganisations. */
export const EVM_ANCHOR_FINAL_DEPTH = 64;

/** A node refused a transaction for good (nonce taken, underpriced): a new one must be signed. */
export class AnchorTxRejectedError extends LedgerhookError {}

export function parseEvmAnchorKey(key: string): Hex {
  const trimmed = key.trim();
  if (!/^0x[0-9a-fA-F]{64}$/.test(trimmed)) {
    throw new ConfigError(
      'LEDGERHOOK_ANCHOR_KEY',
      'must be an EVM private key: 0x followed by 64 hex characters',
    );
  }
  return trimmed as Hex;
}

const bump = (value: bigint) => (value * 5n + 3n) / 4n;
const maxOf = (a: bigint, b: bigint) => (a > b ? a : b);

function nodeFailure(err: unknown): Error {
  if (err instanceof AnchorTxRejectedError) return err;
  const message = err instanceof BaseError ? err.shortMessage : (err as Error)?.message;
  return new UpstreamUnavailableError(`the node failed: ${message ?? String(err)}`);
}

function detailsOf(err: unknown): string {
  const parts: string[] = [];
  let e: unknown = err;
  while (e instanceof Error) {
    parts.push(e.message, (e as { details?: string }).details ?? '');
    e = e.cause;
  }
  return parts.join(' ').toLowerCase();
}

export function evmAnchorChain(options: {
  rpcUrl: string;
  key: string;
  timeoutMs?: number;
  finalDepth?: number;
  client?: PublicClient;
}): AnchorChain {
  const account = privateKeyToAccount(parseEvmAnchorKey(options.key));
  const client =
    options.client ??
    createPublicClient({
      transport: jsonRpcHttp(options.rpcUrl, { timeoutMs: options.timeoutMs ?? 10_000 }),
      cacheTime: 0,
    });
  let chainId: number | undefined;

  async function readChainId(): Promise<number> {
    chainId ??= await client.getChainId();
    return chainId;
  }

  /** EIP-1559 fees where the chain has a base fee, else a legacy gas price. */
  async function currentFees(): Promise<Record<string, bigint>> {
    const block = await client.getBlock({ blockTag: 'latest' });
    if (block.baseFeePerGas === null || block.baseFeePerGas === undefined) {
      return { gasPrice: await client.getGasPrice() };
    }
    const fees = await client.estimateFeesPerGas({ type: 'eip1559', chain: null });
    return { maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas };
  }

  return {
    kind: 'evm-input',
    finalDepth: options.finalDepth ?? EVM_ANCHOR_FINAL_DEPTH,

    async chainIdentity() {
      try {
        // As transaction lookup's genesisId names an EVM chain (CAIP-2).
        return `eip155:${await readChainId()}`;
      } catch (err) {
        throw nodeFailure(err);
      }
    },

    async sign(payload, replacing) {
      try {
        const id = await readChainId();
        const data = toHex(payload);
        const nonce =
          replacing !== undefined
            ? Number(replacing.details.nonce)
            : await client.getTransactionCount({ address: account.address, blockTag: 'pending' });
        const fees = await currentFees();
        if (replacing !== undefined) {
          // A replacement must outbid the transaction it replaces, whatever the market did since.
          for (const name of Object.keys(fees)) {
            const before = replacing.details[name];
            if (before !== undefined) fees[name] = maxOf(fees[name]!, bump(BigInt(before)));
          }
        }
        const gas = await client.estimateGas({
          account: account.address,
          to: account.address,
          value: 0n,
          data,
        });
        const common = { chainId: id, to: account.address, value: 0n, data, nonce, gas };
        const raw =
          fees.gasPrice !== undefined
            ? await account.signTransaction({ ...common, type: 'legacy', gasPrice: fees.gasPrice })
            : await account.signTransaction({
                ...common,
                type: 'eip1559',
                maxFeePerGas: maxOf(fees.maxFeePerGas!, fees.maxPriorityFeePerGas!),
                maxPriorityFeePerGas: fees.maxPriorityFeePerGas!,
              });
        const details: Record<string, string | number> = { nonce, gas: gas.toString() };
        for (const [name, value] of Object.entries(fees)) details[name] = value.toString();
        return { txId: keccak256(raw), raw, details };
      } catch (err) {
        throw nodeFailure(err);
      }
    },

    async broadcast(tx: SignedAnchorTx) {
      try {
        await client.request({ method: 'eth_sendRawTransaction', params: [tx.raw as Hex] });
      } catch (err) {
        const text = detailsOf(err);
        if (text.includes('already known') || text.includes('already imported')) return;
        if (/nonce too low|nonce has already been used|underpriced|replacement/.test(text)) {
          // Taken by a transaction of ours already in a block? Then this one is not needed anyway.
          if ((await this.inclusion(tx.txId)) !== undefined) return;
          throw new AnchorTxRejectedError(
            `the node refused anchor transaction ${tx.txId}: ${text.slice(0, 200)}`,
          );
        }
        throw nodeFailure(err);
      }
    },

    async inclusion(txId): Promise<AnchorInclusion | undefined> {
      try {
        const receipt = await client.getTransactionReceipt({ hash: txId as Hex });
        return {
          blockNumber: Number(receipt.blockNumber),
          blockHash: receipt.blockHash,
          success: receipt.status === 'success',
        };
      } catch (err) {
        if (err instanceof TransactionReceiptNotFoundError) return undefined;
        throw nodeFailure(err);
      }
    },

    async tip() {
      try {
        return Number(await client.getBlockNumber({ cacheTime: 0 }));
      } catch (err) {
        throw nodeFailure(err);
      }
    },

    async hashAt(height) {
      try {
        const block = await client.getBlock({ blockNumber: BigInt(height) });
        return block.hash ?? undefined;
      } catch (err) {
        if ((err as Error)?.name === 'BlockNotFoundError') return undefined;
        throw nodeFailure(err);
      }
    },

    mayReplace: () => true,
  };
}
