/**
 * `ledgerhook verify`: receipts checked against a node named on the command line, with no
 * service, database or configuration of ours, so that a receipt's holder need not trust us.
 */
import { ANCHOR_FAMILY, networkReader, readOnce } from '../anchor/reader.js';
import { parseReceipt } from '../anchor/receipt-schema.js';
import { verifyReceipt } from '../anchor/verify.js';
import type { Network } from '../chains/networks.js';
import { ConfigError } from '../errors.js';
import { readRegularFile } from '../shared/regular-file.js';
import { UsageError } from './usage.js';

/** A receipt is a few KB; its content (a registry) at most the API's 1 MB body and its JSON around it. */
const MAX_FILE_BYTES = 16 * 1024 * 1024;

/** A file's JSON: the object itself, or the `data` of an API answer that wraps it. */
function readJson(file: string, what: string): unknown {
  let text: string;
  try {
    text = readRegularFile(file, what, MAX_FILE_BYTES);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message);
    throw err;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UsageError(`${what} ${file} is not JSON`);
  }
  const wrapped = value as { data?: unknown } | null;
  return wrapped !== null && typeof wrapped === 'object' && 'data' in wrapped && !('type' in wrapped)
    ? wrapped.data
    : value;
}

function nodeNetwork(
  name: string,
  family: Network['family'],
  rpc: string,
  indexer: string | undefined,
): Network {
  return {
    name,
    aliases: [],
    family,
    symbol: '',
    decimals: 0,
    rpcUrls: [rpc],
    wsUrls: [],
    indexerUrls: indexer ? [indexer] : [],
    addressFormat: '',
    defaultConfirmations: 1,
  };
}

export async function runVerify(
  files: string[],
  options: { rpc?: string; indexer?: string; content?: string },
  out: (line: string) => void,
): Promise<number> {
  if (!options.rpc) throw new UsageError("verify needs --rpc URL: a node of the receipt's network");
  try {
    new URL(options.rpc);
  } catch {
    throw new UsageError(`--rpc ${options.rpc} is not a URL`);
  }
  if (options.content !== undefined && files.length > 1) {
    throw new UsageError('--content checks one receipt: give a single RECEIPT.json with it');
  }
  const content = options.content === undefined ? undefined : readJson(options.content, 'content');
  let failed = 0;
  // One reader per network named by the receipts, each reading a transaction once for the run.
  const readers = new Map<string, ReturnType<typeof readOnce>>();
  for (const file of files) {
    const parsed = parseReceipt(readJson(file, 'receipt'));
    if ('errors' in parsed) {
      failed++;
      out(
        `FAILED    ${file}: not a receipt: ${parsed.errors.map((e) => `${e.pointer} ${e.detail}`).join('; ')}`,
      );
      continue;
    }
    const { receipt } = parsed;
    const anchor = receipt.anchors[0]!;
    const key = `${anchor.type}:${anchor.network}`;
    let reader = readers.get(key);
    if (!reader) {
      const network = nodeNetwork(anchor.network, ANCHOR_FAMILY[anchor.type], options.rpc, options.indexer);
      reader = readOnce(networkReader(network));
      readers.set(key, reader);
    }
    const result = await verifyReceipt(receipt, content, reader);
    if (result.verified) {
      const checked = result.checks.content ? ', content matches' : '';
      out(
        `verified  ${receipt.registryId}: root in ${anchor.network} transaction ${anchor.sourceId}, block ${result.blockNumber}, ${result.confirmations} confirmations${checked}`,
      );
    } else {
      failed++;
      out(`FAILED    ${receipt.registryId}: ${result.problems.join('; ')}`);
    }
  }
  return failed === 0 ? 0 : 1;
}
