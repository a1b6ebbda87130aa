/**
 * The two recorded mainnet `getBlock` answers (test/fixtures/chains/solana/blocks, see its
 * README), read once per process: the raw envelope text and its `result`, integers exact.
 */
import fs from 'node:fs';
import zlib from 'node:zlib';
import { parseExactJson } from '../../src/chains/node-http.js';
import { fixturePath } from './fixture-node.js';

export const RECORDED_SLOTS = [110130000, 110360000] as const;
export type RecordedSlot = (typeof RECORDED_SLOTS)[number];

type Json = Record<string, unknown>;
const texts = new Map<number, string>();
const parsed = new Map<number, Json>();

/** The recorded answer's text, as the node sent it (re-serialised by Python; see the README). */
export function recordedBlockText(slot: RecordedSlot): string {
  let text = texts.get(slot);
  if (text === undefined) {
    const file = fixturePath('chains/solana/blocks', `getBlock-jsonParsed-${slot}-mainnet.json.gz`);
    text = zlib.gunzipSync(fs.readFileSync(file)).toString('utf8');
    texts.set(slot, text);
  }
  return text;
}

/** The recorded `result`, integers as bigint: a fresh copy each time, free to edit. */
export function recordedBlock(slot: RecordedSlot): Json {
  let result = parsed.get(slot);
  if (!result) {
    result = (parseExactJson(recordedBlockText(slot)) as Json).result as Json;
    parsed.set(slot, result);
  }
  return structuredClone(result);
}

// Named transactions and accounts of slot 110360000, worked out by hand from the recorded balances
// in src/chains/solana/activity.test.ts.
export const SLOT = 110360000;
export const SLOT_HASH = 'Dts3MwZrz3DdABfEMtCnEPV8mcGiqvdwEW53YcpuVCEF';
export const SLOT_PARENT_HASH = 'FvLzwtSqp5td7tmq6KbMmK5p9vo8DdsPWxUjWypHCyai';
export const TX = {
  /** 0.05 SOL from SENDER to RECEIVER; SENDER pays the 5000-lamport fee. */
  sol: '5kQSE8yKLY9eNNXrxLpFTWgEaXnb9yNBNhCa7m3ZnVa27UmaSAoociV3873bXndVRSt2nF9cnySvhvUCvWVrKbcq',
  /** 1 KIN from KIN_ACCOUNT (owner KIN_SENDER) to KIN_RECEIVER's self-owned account; KIN_FEE_PAYER pays. */
  kin: '2P7vbmZhjPoyPN51q37T2w8vkKaFTbiS3tAPVE1hjkpc6bp5f7iJp9ssps61WYEJgUTTXR2P3wtzUEN2tXqvVjVY',
  /** Failed ({InstructionError: [0, {Custom: 0}]}): FAILED_PAYER paid 5000 lamports, nothing else. */
  failed: '5MB1QyhmxNbQf5J1aPCLdS8c9cPwCNKezxj6HhqymXd5unmUMzASp76igP1fJhQdqYHdjvozsjbwvoZetQ7zYGee',
  /** 0.0213 SOL from LATER_SENDER to LATER_RECEIVER. */
  later: 'YDAVum38BgUjj3KmQUVjAjwTa6VseqBAofjD72UW75FdoqGez6niToiscB6sDguDpHzu8GNLPYgNBdVVGPdCuB4',
};
export const SENDER = '9ud9oY4WLP3jb9LkJ7CqR7an7GQoenAUgLigYCFNfHP6';
export const RECEIVER = 'GJ7sYR315wBMmFkSbvAbZai216sA8Mpf58JBmRHZP4eL';
export const KIN = 'kinXdEcpDQeHPEuQnqmUgtYykqKGVFq6CeVX5iAHJq6';
export const KIN_ACCOUNT = '68pjdf2E4JvhQymcaFi7ZGgm5Tnrnt6Aa2c2r13sgV6s';
export const KIN_SENDER = '8yPnD6FCpfVQTPxuxVh6NSwzxuMfkRMNiMAvWTVx5oX9';
export const KIN_RECEIVER = '5WuYxq75GcEv7YUwWrUR7HayZgqgDyjsrVNz5LJuEG1d';
export const KIN_FEE_PAYER = 'agsWhfJ5PPGjmzMieWY8BR5o1XRVszUBQ5uFz4CtDiJ';
export const FAILED_PAYER = 'CHaH4FPhSKqH59E77R3GkpUGnHeLfXnT5wFCpLNw6JWH';
export const LATER_SENDER = 'AobVSwdW9BbpMdJvTqeCN4hPAmh4rHm7vwLnQ5ATSyrS';
export const LATER_RECEIVER = '2WN3BG1HnJnidQyaQp2xCqxsDynGTDCAqxzunqgpBVZb';
