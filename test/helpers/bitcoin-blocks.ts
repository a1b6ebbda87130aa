/**
 * The recorded Bitcoin blocks in test/fixtures/chains/bitcoin/blocks (provenance in the README
 * there), read as raw bytes for the loopback node and the tests' own bitcoinjs-lib computations.
 */
import fs from 'node:fs';
import { fixturePath } from './fixture-node.js';

const blocksPath = (...segments: string[]) => fixturePath('chains/bitcoin/blocks', ...segments);

/** btcd's reorganisation chain: the real mainnet genesis, then private blocks 1–4 and 3A–5A. */
export type BtcdBlock = '0' | '1' | '2' | '3' | '4' | '3A' | '4A' | '5A';

export function btcdBlock(name: BtcdBlock): Buffer {
  return Buffer.from(fs.readFileSync(blocksPath('btcd-reorg', `blk_${name}.hex`), 'utf8').trim(), 'hex');
}

/** Main branch 0–4 and, after the reorganisation, 0–2 then 3A–5A. */
export const BTCD_MAIN: BtcdBlock[] = ['0', '1', '2', '3', '4'];
export const BTCD_SIDE: BtcdBlock[] = ['0', '1', '2', '3A', '4A', '5A'];

/** Mainnet blocks 0–255: btcd's blk_0 is the real genesis block, then the recorded run 1–255. */
export function mainnetRun(): Buffer[] {
  const run = JSON.parse(
    fs.readFileSync(blocksPath('mainnet-1-255', 'mainnet-blocks-1-255.json'), 'utf8'),
  ) as {
    firstHeight: number;
    blocks: { height: number; hex: string }[];
  };
  return [btcdBlock('0'), ...run.blocks.map((b) => Buffer.from(b.hex, 'hex'))];
}

export const BLOCK_702861_HASH = '000000000000000000000c835b2adcaedc20fdf6ee440009c249452c726dafae';

/** Mainnet block 702861 (2,500 transactions; P2PKH, P2SH, P2WPKH, P2WSH and OP_RETURN outputs). */
export function block702861(): Buffer {
  return fs.readFileSync(blocksPath(`mainnet_block_${BLOCK_702861_HASH}.raw`));
}
