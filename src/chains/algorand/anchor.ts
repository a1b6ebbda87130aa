/**
 * The Algorand anchor chain (anchor/chain.ts, docs/anchoring.md): the payload rides in the note of
 * a zero-amount payment from the anchor account to itself, signed with algosdk, sent through algod.
 * Relied on in algod (go-algorand daemon/algod/api/server/v2, data/pools): the fee is max(min-fee,
 * fee × size), as algosdk computes it with `flatFee` false; a transaction already committed in its
 * window or already pooled is refused "transaction already in ledger" (no other message), which is
 * success here; `/v2/transactions/pending/{txid}` knows only the pool and the last MaxTxnLife
 * (1000) rounds, which also bounds lastValid − firstValid. Blocks are final: `finalDepth` is 1.
 */
import algosdk from 'algosdk';
import { ConfigError, LedgerhookError, UpstreamUnavailableError } from '../../errors.js';
import type { AnchorChain, AnchorInclusion, SignedAnchorTx } from '../anchor-chain.js';
import { nodeRequest } from '../node-http.js';
import { isAlgorandTxId } from './lookup.js';
import { type AlgorandBlockSource, createAlgodSource, endpoint } from './source.js';

export interface AlgorandAnchorOptions {
  algodUrl: string;
  /** `X-Algo-API-Token`; one in the URL's user or password part serves too. */
  algodToken?: string;
  /** The anchor account: its 25-word mnemonic, or its 64-byte secret key (seed ‖ public key) in base64. */
  key: string;
  /** Per request, default 10 s. */
  timeoutMs?: number;
  /** lastValid − firstValid of each transaction, 1…1000; default 1000. */
  validityRounds?: number;
}

export interface AlgorandAnchorChain extends AnchorChain {
  /** The anchor account's address: sender and receiver of every anchor transaction. */
  readonly address: string;
}

/** algod refused the transaction for a reason other than already having it. */
export class AlgorandTxRejectedError extends LedgerhookError {
  constructor(
    readonly txId: string,
    readonly nodeMessage: string,
  ) {
    super(`The Algorand node refused transaction ${txId}: ${nodeMessage}`);
  }
}

const KEY_VARIABLE = 'LEDGERHOOK_ANCHOR_KEY';
/** The protocol's MaxTxnLife: the widest validity window algod accepts. */
const MAX_TXN_LIFE = 1000;
/** algod's text for a transaction it already has, in its pool or in its recent ledger. */
const ALREADY_HAVE = 'transaction already in ledger';

/**
 * The anchor account from its mnemonic or base64 secret key. The error never carries the key, nor
 * algosdk's message about it.
 */
export function anchorAccount(key: string): algosdk.Account {
  const text = key.trim();
  const words = text.split(/\s+/);
  const problem =
    'is neither a 25-word Algorand mnemonic nor a base64 64-byte ed25519 secret key (seed ‖ public key)';
  if (words.length === 25) {
    try {
      return algosdk.mnemonicToSecretKey(words.join(' ').toLowerCase());
    } catch {
      throw new ConfigError(KEY_VARIABLE, `${problem}: its words or checksum are not a valid mnemonic`);
    }
  }
  const bytes = /^[A-Za-z0-9+/]+={0,2}$/.test(text) ? Buffer.from(text, 'base64') : Buffer.alloc(0);
  if (bytes.length !== 64) throw new ConfigError(KEY_VARIABLE, problem);
  // The public half must be the seed's: the mnemonic round trip rederives it from the seed.
  const account = algosdk.mnemonicToSecretKey(algosdk.secretKeyToMnemonic(bytes));
  if (!Buffer.from(account.sk).equals(bytes))
    throw new ConfigError(KEY_VARIABLE, `${problem}: its public key is not its seed's`);
  return account;
}

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** A bigint field as a round number; undefined when absent, negative or beyond 2^53. */
function roundField(body: Json, key: string): number | undefined {
  const value = body[key];
  return typeof value === 'bigint' && value >= 0n && value <= BigInt(Number.MAX_SAFE_INTEGER)
    ? Number(value)
    : undefined;
}

interface TransactionParams {
  fee: bigint;
  minFee: bigint;
  lastRound: number;
  genesisId: string;
  /** Base64. */
  genesisHash: string;
}

/** The validity window kept in a signed transaction's details. */
function lastValidOf(tx: SignedAnchorTx): number {
  const lastValid = Number(tx.details.lastValid);
  if (!Number.isSafeInteger(lastValid)) throw new RangeError(`Transaction ${tx.txId} has no lastValid`);
  return lastValid;
}

/** algod as the anchor chain talks to it. */
interface AnchorAlgod {
  base: string;
  headers: Record<string, string>;
  timeoutMs: number | undefined;
  /** Block hashes by round. */
  blocks: AlgorandBlockSource;
  /** The error for a node that answered amiss: what it did. */
  unexpected(detail: string): UpstreamUnavailableError;
  /** A GET of `path`, with the answer's status and its JSON object, if it is one. */
  get(path: string): Promise<{ status: number; body: Json | undefined }>;
}

function anchorAlgod(options: AlgorandAnchorOptions): AnchorAlgod {
  const { base, host, headers } = endpoint(
    { url: options.algodUrl, token: options.algodToken },
    'X-Algo-API-Token',
  );
  const { timeoutMs } = options;
  const blocks = createAlgodSource({ url: options.algodUrl, token: options.algodToken, timeoutMs });
  const unexpected = (detail: string) =>
    new UpstreamUnavailableError(`The Algorand node at ${host} ${detail}`);
  const get = async (path: string): Promise<{ status: number; body: Json | undefined }> => {
    const res = await nodeRequest(`${base}${path}`, { headers, timeoutMs });
    return { status: res.status, body: isObject(res.json) ? res.json : undefined };
  };
  return { base, headers, timeoutMs, blocks, unexpected, get };
}

async function transactionParams({ get, unexpected }: AnchorAlgod): Promise<TransactionParams> {
  const path = '/v2/transactions/params';
  const { status, body } = await get(path);
  const lastRound = body && roundField(body, 'last-round');
  const fee = body?.fee;
  const minFee = body?.['min-fee'];
  const genesisId = body?.['genesis-id'];
  const genesisHash = body?.['genesis-hash'];
  if (
    status !== 200 ||
    lastRound === undefined ||
    typeof fee !== 'bigint' ||
    typeof minFee !== 'bigint' ||
    typeof genesisId !== 'string' ||
    typeof genesisHash !== 'string' ||
    Buffer.from(genesisHash, 'base64').length !== 32
  )
    throw unexpected(`answered ${status} to GET ${path} without the parameters of a transaction`);
  return { fee, minFee, lastRound, genesisId, genesisHash };
}

/** What signing an anchor transaction takes. */
interface AnchorSigner {
  algod: AnchorAlgod;
  account: algosdk.Account;
  validityRounds: number;
  /** The genesis hash the node was on when first asked. */
  chainIdentity(): Promise<string>;
}

async function signAnchor(
  { algod, account, validityRounds, chainIdentity }: AnchorSigner,
  payload: Buffer,
  replacing?: SignedAnchorTx,
): Promise<SignedAnchorTx> {
  const expectedGenesis = await chainIdentity();
  const p = await transactionParams(algod);
  // A node switched to another network would have us sign for that network.
  if (p.genesisHash !== expectedGenesis)
    throw algod.unexpected(`is now on genesis ${p.genesisHash}, not ${expectedGenesis} as before`);
  // Two different transactions that can both still be committed would both anchor.
  if (replacing && p.lastRound <= lastValidOf(replacing))
    throw new Error(
      `Transaction ${replacing.txId} can still be committed until round ${lastValidOf(replacing)} ` +
        `(the node is at ${p.lastRound}); it may not be replaced yet`,
    );
  const firstValid = p.lastRound;
  const lastValid = firstValid + validityRounds;
  const txn = algosdk.makePaymentTxnWithSuggestedParamsFromObject({
    sender: account.addr,
    receiver: account.addr,
    amount: 0,
    note: new Uint8Array(payload),
    suggestedParams: {
      flatFee: false,
      fee: p.fee,
      minFee: p.minFee,
      firstValid,
      lastValid,
      genesisID: p.genesisId,
      genesisHash: new Uint8Array(Buffer.from(p.genesisHash, 'base64')),
    },
  });
  const signed = algosdk.signTransaction(txn, account.sk);
  return {
    txId: signed.txID,
    raw: Buffer.from(signed.blob).toString('base64'),
    details: { firstValid, lastValid },
  };
}

async function broadcastAnchor(
  { base, headers, timeoutMs, unexpected }: AnchorAlgod,
  tx: SignedAnchorTx,
): Promise<void> {
  const path = '/v2/transactions';
  const res = await nodeRequest(`${base}${path}`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/x-binary' },
    body: Buffer.from(tx.raw, 'base64'),
    timeoutMs,
  });
  const body = isObject(res.json) ? res.json : undefined;
  if (res.status === 200) {
    if (body?.txId !== tx.txId)
      throw unexpected(`answered POST ${path} of ${tx.txId} with txId ${String(body?.txId)}`);
    return;
  }
  const message = typeof body?.message === 'string' ? body.message : res.text.slice(0, 500);
  if (res.status === 400 && message.includes(ALREADY_HAVE)) return;
  if (res.status >= 400 && res.status < 500) throw new AlgorandTxRejectedError(tx.txId, message);
  throw unexpected(`answered ${res.status} to POST ${path}`);
}

/**
 * Where the transaction was committed, from algod's pending-transaction lookup. algod forgets a
 * committed transaction 1000 rounds after it (404 → undefined): the anchorer asks while the
 * transaction is recent, from its broadcast until it is seen committed, and mayReplace holds the
 * replacement back until its validity window has passed. Only an anchorer away for about 1000
 * rounds (some 45 minutes) right after a commit would miss it and anchor the root a second time.
 */
async function inclusionOf(
  { get, unexpected, blocks }: AnchorAlgod,
  txId: string,
): Promise<AnchorInclusion | undefined> {
  if (!isAlgorandTxId(txId)) throw new RangeError(`Not an Algorand transaction id: ${txId}`);
  const path = `/v2/transactions/pending/${txId}?format=json`;
  const { status, body } = await get(path);
  if (status === 404) return undefined;
  if (status !== 200 || !body || typeof body['pool-error'] !== 'string')
    throw unexpected(`answered ${status} to GET ${path} without a pending transaction`);
  const round = roundField(body, 'confirmed-round');
  if (round === undefined || round === 0) return undefined; // still pending, or dropped (pool-error)
  const blockHash = await blocks.hashAt(round);
  if (!blockHash) throw unexpected(`says ${txId} was committed in round ${round} but has no such block`);
  return { blockNumber: round, blockHash, success: true };
}

async function tipOf({ get, unexpected }: AnchorAlgod): Promise<number> {
  const { status, body } = await get('/v2/status');
  const round = body && roundField(body, 'last-round');
  if (status !== 200 || round === undefined) throw unexpected(`answered ${status} to GET /v2/status`);
  return round;
}

export function algorandAnchorChain(options: AlgorandAnchorOptions): AlgorandAnchorChain {
  const account = anchorAccount(options.key);
  const address = account.addr.toString();
  const validityRounds = options.validityRounds ?? MAX_TXN_LIFE;
  if (!Number.isInteger(validityRounds) || validityRounds < 1 || validityRounds > MAX_TXN_LIFE)
    throw new RangeError(
      `validityRounds must be an integer from 1 to ${MAX_TXN_LIFE}, not ${validityRounds}`,
    );

  const algod = anchorAlgod(options);
  const { blocks } = algod;

  // Read once; a failed read is tried again next time.
  let identity: Promise<string> | undefined;
  function chainIdentity(): Promise<string> {
    identity ??= transactionParams(algod).then(
      (p) => p.genesisHash,
      (err) => {
        identity = undefined;
        throw err;
      },
    );
    return identity;
  }
  const signer: AnchorSigner = { algod, account, validityRounds, chainIdentity };

  return {
    kind: 'algorand-note',
    address,
    finalDepth: 1,
    chainIdentity,
    sign: (payload, replacing) => signAnchor(signer, payload, replacing),
    broadcast: (tx) => broadcastAnchor(algod, tx),
    inclusion: (txId) => inclusionOf(algod, txId),
    tip: () => tipOf(algod),
    hashAt: (height) => blocks.hashAt(height),
    // Until its last valid round has passed, the transaction can still be committed.
    mayReplace: (tx, tipRound) => tipRound > lastValidOf(tx),
  };
}
