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
