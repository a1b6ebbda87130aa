/**
 * A loopback Algorand node of our own: a real HTTP server on 127.0.0.1 speaking the algod paths
 * the block source uses (`/v2/status`, `/v2/status/wait-for-block-after/{round}` as a real long
 * poll, `/v2/blocks/{round}?format=msgpack`, `/v2/blocks/{round}/hash`, `/v2/transactions/params`,
 * `/v2/assets/{id}`) and the indexer's (`/health`, `/v2/blocks/{round}` with `header-only`,
 * `/v2/assets/{id}`, `/v2/accounts/{address}/transactions`), over the rounds it is given; and the algod paths an anchor uses to send a
 * transaction and follow it (`POST /v2/transactions`, `/v2/transactions/pending/{txid}`).
 *
 * A round is held in both forms: algod's msgpack `{block, cert}` and the indexer's JSON. The real
 * round 24099447 is served from its recorded bytes and JSON (test/fixtures/chains/algorand/blocks).
 * Other rounds are ASSEMBLED (see that folder's README): the recorded round's header and
 * transactions with another round number and previous-block hash, so that their hashes are
 * computed, not real. A round given only in indexer form (real indexer transactions that were
 * never recorded as msgpack) answers algod with 500.
 *
 * An account's transactions are the held rounds' indexer transactions it takes part in (sender,
 * receiver, close-to, clawback target, in the transaction or one of its inner transactions; the
 * top-level transaction is answered, as the indexer does), within `min-round`/`max-round`, newest
 * round first, `limit` a page; the `next-token` is ours (the indexer's is opaque too), given with
 * every non-empty page as the indexer does.
 *
 * SYNTHESIZED, not recorded (no answer of these was ever recorded): `/v2/status`,
 * `/v2/transactions/params` (the genesis is the recorded round's, testnet's, unless set; `fee` 0
 * and `min-fee` 1000 are what algod answers with an idle pool), and the transaction pool. The pool
 * follows go-algorand's handlers (daemon/algod/api/server/v2/handlers.go, node/node.go,
 * data/pools/transactionPool.go): `POST /v2/transactions` answers 200 `{"txId"}`, or 400
 * `{"message"}` with algod's texts for a bad signature ("At least one signature didn't pass
 * verification"), a transaction outside its validity window ("TransactionPool.Remember: txn dead:
 * round R outside of F--L") and one it already has, pending or committed ("TransactionPool.Remember:
 * transaction already in ledger: TXID"). Unlike algod it takes one single-signature transaction per
 * POST (no groups, multisig or logic signatures), and checks no fee or balance.
 * `/v2/transactions/pending/{txid}` (JSON only) answers `{"pool-error", "txn"}` while pending,
 * plus `confirmed-round` and the apply data algod adds (zero amounts and rewards) once the test
 * confirms it, and 404 with algod's text for an id it does not know or that was committed more than
 * 1000 rounds before the tip. A confirmed transaction is not in the block the node serves for its
 * round: only its pending answer says it was committed.
 */
import { createPublicKey, verify } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import algosdk from 'algosdk';
import { stringify } from 'lossless-json';
import { base32, blockFromIndexer } from '../../src/chains/algorand/blocks.js';
import { isAlgorandTxId } from '../../src/chains/algorand/lookup.js';
import { parseExactJson } from '../../src/chains/node-http.js';
import { fixturePath } from './fixture-node.js';
import { listenOnLoopback, type RestartableNode } from './loopback-server.js';

type Json = Record<string, unknown>;

export const RECORDED_ROUND = 24099447;
export const RECORDED_HASH = 'PKZ7LQO6KNISFUVXN3HFZQKF4GJV7XKFHFZNNKC6DAHUEZZM3IQQ';
export const TESTNET = {
  genesisId: 'testnet-v1.0',
  genesisHash: 'SGO1GKSzyE7IEPItTxCByw9x8FmnrCDexi9/cOUJOiI=',
};
export const MAINNET = {
  genesisId: 'mainnet-v1.0',
  genesisHash: 'wGHE2Pwdvd7S12BL5FaOP20EGYesN73ktiC1qzkkit8=',
};

const blockFile = (name: string) => fixturePath('chains/algorand/blocks', name);

/** The recorded algod answer for round 24099447 (msgpack bytes). */
export const recordedAlgodBlock = (): Uint8Array =>
  new Uint8Array(fs.readFileSync(blockFile('algod-block-24099447-testnet.msgpack')));
/** The recorded indexer answer for round 24099447, integers as bigint. */
export const recordedIndexerBlock = (): Json =>
  parseExactJson(fs.readFileSync(blockFile('indexer-block-24099447-testnet.json'), 'utf8')) as Json;

/** One round as the node serves it. */
export interface AlgorandRound {
  /** algod's `/v2/blocks/{round}?format=msgpack` body; absent: algod cannot serve it (500). */
  algod?: Uint8Array;
  /** The indexer's `/v2/blocks/{round}` body. */
  indexer: Json;
}

export interface AssembleOptions {
  round: number;
  /** Previous-block hash, base32 (as the source reports hashes). */
  parentHash: string;
  /** Indexer transactions to carry instead of the recorded round's: the round then has no algod form. */
  indexerTransactions?: Json[];
  genesis?: { genesisId: string; genesisHash: string };
}

const fromBase32 = (text: string): Uint8Array => {
  const bits = [...text]
    .map((c) => 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'.indexOf(c).toString(2).padStart(5, '0'))
    .join('');
  const out = new Uint8Array(Math.floor(bits.length / 8));
  for (let i = 0; i < out.length; i++) out[i] = Number.parseInt(bits.slice(i * 8, i * 8 + 8), 2);
  return out;
};

/**
 * An ASSEMBLED round: the recorded round 24099447 with another round number, previous-block hash
 * and, optionally, genesis or transactions. Both forms get the same header fields, so both APIs
 * compute the same (not real) hash for it.
 */
export function assembleRound(options: AssembleOptions): AlgorandRound {
  const prev = fromBase32(options.parentHash);
  const indexer = recordedIndexerBlock();
  indexer.round = BigInt(options.round);
  indexer['previous-block-hash'] = Buffer.from(prev).toString('base64');
  if (options.genesis) {
    indexer['genesis-id'] = options.genesis.genesisId;
    indexer['genesis-hash'] = options.genesis.genesisHash;
  }
  if (options.indexerTransactions) {
    indexer.transactions = options.indexerTransactions.map((tx) => ({
      ...tx,
      'confirmed-round': BigInt(options.round),
    }));
    return { indexer };
  }
  for (const tx of indexer.transactions as Json[]) tx['confirmed-round'] = BigInt(options.round);
  const response = algosdk.decodeMsgpack(recordedAlgodBlock(), algosdk.modelsv2.BlockResponse);
  response.block.header.round = BigInt(options.round);
  response.block.header.branch = prev;
  if (options.genesis) {
    response.block.header.genesisID = options.genesis.genesisId;
    response.block.header.genesisHash = new Uint8Array(Buffer.from(options.genesis.genesisHash, 'base64'));
  }
  return { algod: algosdk.encodeMsgpack(response), indexer };
}

/** `count` consecutive assembled rounds from `first`, each linked to the one before. */
export function assembleRun(
  first: number,
  count: number,
  parentHash = base32(new Uint8Array(32)),
): AlgorandRound[] {
  const rounds: AlgorandRound[] = [];
  let parent = parentHash;
  for (let round = first; round < first + count; round++) {
    const assembled = assembleRound({ round, parentHash: parent });
    rounds.push(assembled);
    parent = blockFromIndexer(assembled.indexer).hash;
  }
  return rounds;
}

export interface AlgorandNodeRequest {
  method: string;
  path: string;
  query: string;
  headers: http.IncomingHttpHeaders;
}

export interface AlgorandNode extends RestartableNode {
  /** `http://127.0.0.1:<port>`: algod's and the indexer's base URL alike. */
  readonly url: string;
  readonly requests: AlgorandNodeRequest[];
  /** Present these rounds (the last is the tip), replacing the ones held; wakes long polls. */
  setRounds(rounds: AlgorandRound[]): void;
  /** Adds a round after the tip; wakes long polls. */
  addRound(round: AlgorandRound): void;
  /** The genesis `/v2/transactions/params` reports (default testnet's). */
  setGenesis(genesis: { genesisId: string; genesisHash: string }): void;
  /** ASA parameters served by `/v2/assets/{id}`. */
  setAsset(id: string, params: Json): void;
  /** The next `count` requests answer `status` (default 500). */
  failNext(count: number, status?: number): void;
  /** The next `count` requests get no answer: their connection is closed. */
  dropNext(count: number): void;
  /** Every body POSTed to `/v2/transactions`, as received, accepted or not. */
  readonly posted: Uint8Array[];
  /** The pool's transactions by id, in the order they were accepted. */
  readonly pool: ReadonlyMap<string, PooledTransaction>;
  /** Commits a pooled transaction in `round`, a round the node holds (for its hash). */
  confirm(txId: string, round: number): void;
  /** The pool drops a pending transaction; its pending answer carries `poolError`. */
  evict(txId: string, poolError: string): void;
  /** How long a wait-for-block-after waits for a new round before answering the status as is. */
  setWaitTimeout(ms: number): void;
}

export interface PooledTransaction {
  signed: algosdk.SignedTransaction;
  /** The bytes as POSTed. */
  bytes: Uint8Array;
  /** "" while pending or once committed. */
  poolError: string;
  confirmedRound?: number;
}

interface Reply {
  status: number;
  type: string;
  body: string | Uint8Array;
}

const json = (value: unknown, status = 200): Reply => ({
  status,
  type: 'application/json',
  body: stringify(value) ?? 'null',
});
const notFound = (message: string): Reply => json({ message }, 404);
/** algod's error body: `{"message"}` (daemon/algod/api/server/v2/utils.go, returnError). */
const rejected = (message: string): Reply => json({ message }, 400);

/** algod's `errFailedLookingUpLedger`, its 404 text for a round it does not have. */
const NO_SUCH_ROUND = 'failed to retrieve information from the ledger';
/** algod's `errTransactionNotFound`. */
const TX_NOT_FOUND =
  'could not find the transaction in the transaction pool or in the last 1000 confirmed rounds';
/** MaxTxnLife: how many rounds back algod looks for a committed transaction. */
const MAX_TXN_LIFE = 1000;

/** JSON objects with their keys sorted, as algod's canonical JSON writes them. */
function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((k) => [k, sortKeys((value as Json)[k])]),
  );
}

/** Whether an ed25519 single signature verifies over "TX" ‖ the transaction's msgpack. */
function signatureVerifies(signed: algosdk.SignedTransaction): boolean {
  if (!signed.sig || signed.msig || signed.lsig || signed.sgnr) return false;
  const key = createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(signed.txn.sender.publicKey).toString('base64url') },
    format: 'jwk',
  });
  return verify(null, signed.txn.bytesToSign(), key, signed.sig);
}

export async function startAlgorandNode(): Promise<AlgorandNode> {
  const requests: AlgorandNodeRequest[] = [];
  let rounds = new Map<number, AlgorandRound>();
  let tip = 0;
  let genesis = { ...TESTNET };
  const assets = new Map<string, Json>();
  let failures = { count: 0, status: 500 };
  let drops = 0;
  const posted: Uint8Array[] = [];
  const pool = new Map<string, PooledTransaction>();
  let waitTimeoutMs = 1000;
  let waiters: (() => void)[] = [];

  const wake = () => {
    const woken = waiters;
    waiters = [];
    for (const w of woken) w();
  };

  function status(): Json {
    return {
      'catchup-time': 0n,
      'last-round': BigInt(tip),
      'last-version':
        'https://github.com/algorandfoundation/specs/tree/433d8e9a7274b6fca703d91213e05c7e6a589e69',
      'next-version':
        'https://github.com/algorandfoundation/specs/tree/433d8e9a7274b6fca703d91213e05c7e6a589e69',
      'next-version-round': BigInt(tip + 1),
      'next-version-supported': true,
      'stopped-at-unsupported-round': false,
      'time-since-last-round': 0n,
    };
  }

  /** Resolves once a round after `round` is held, or after the wait timeout. */
  function waitAfter(round: number): Promise<void> {
    if (tip > round) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, waitTimeoutMs);
      waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  async function algod(path: string, query: URLSearchParams): Promise<Reply | undefined> {
    if (path === '/v2/status') return json(status());
    let m = /^\/v2\/status\/wait-for-block-after\/(\d+)$/.exec(path);
    if (m) {
      await waitAfter(Number(m[1]));
      return json(status());
    }
    if (path === '/v2/transactions/params')
      return json({
        'consensus-version': status()['last-version'],
        fee: 0n,
        'genesis-hash': genesis.genesisHash,
        'genesis-id': genesis.genesisId,
        'last-round': BigInt(tip),
        'min-fee': 1000n,
      });
    m = /^\/v2\/blocks\/(\d+)\/hash$/.exec(path);
    if (m) {
      const held = rounds.get(Number(m[1]));
      return held ? json({ blockHash: blockFromIndexer(held.indexer).hash }) : notFound(NO_SUCH_ROUND);
    }
    m = /^\/v2\/blocks\/(\d+)$/.exec(path);
    if (m && query.get('format') === 'msgpack') {
      const held = rounds.get(Number(m[1]));
      if (!held) return notFound(NO_SUCH_ROUND);
      if (!held.algod) return json({ message: 'this round was assembled for the indexer only' }, 500);
      return { status: 200, type: 'application/msgpack', body: held.algod };
    }
    return undefined;
  }

  /** `POST /v2/transactions`: the checks algod makes, in its order, for one transaction. */
  function submit(body: Uint8Array): Reply {
    posted.push(body);
    if (body.length === 0) return rejected('empty txgroup');
    let signed: algosdk.SignedTransaction;
    try {
      signed = algosdk.decodeSignedTransaction(body);
    } catch (err) {
      return rejected(`msgpack decode error: ${(err as Error).message}`);
    }
    if (!Buffer.from(algosdk.encodeMsgpack(signed)).equals(Buffer.from(body)))
      return rejected('this loopback node takes one canonically encoded transaction per POST');
    const txn = signed.txn;
    if (Buffer.from(txn.genesisHash ?? []).toString('base64') !== genesis.genesisHash)
      return rejected(`transaction genesis hash does not match ${genesis.genesisHash}`);
    if (!signatureVerifies(signed)) return rejected("At least one signature didn't pass verification");
    const txId = txn.txID();
    // The pool evaluates it for the next round: a window that excludes it is "dead" (early or late).
    const next = tip + 1;
    if (Number(txn.lastValid) < next || Number(txn.firstValid) > next)
      return rejected(
        `TransactionPool.Remember: txn dead: round ${next} outside of ${txn.firstValid}--${txn.lastValid}`,
      );
    const held = pool.get(txId);
    if (held && held.poolError === '')
      return rejected(`TransactionPool.Remember: transaction already in ledger: ${txId}`);
    pool.set(txId, { signed, bytes: body, poolError: '' });
    return json({ txId });
  }

  /** `GET /v2/transactions/pending/{txid}` as algod's PendingTransactionInformation answers it. */
  function pending(txId: string, query: URLSearchParams): Reply {
    if (!isAlgorandTxId(txId)) return rejected('no valid transaction ID was specified');
    const format = query.get('format') ?? 'json';
    if (format !== 'json') return rejected(`this loopback node answers format=json only, not ${format}`);
    const held = pool.get(txId);
    if (!held) return notFound(TX_NOT_FOUND);
    const txn = parseExactJson(algosdk.encodeJSON(held.signed));
    if (held.confirmedRound === undefined) return json(sortKeys({ 'pool-error': held.poolError, txn }));
    if (held.confirmedRound < Math.max(1, tip - MAX_TXN_LIFE)) return notFound(TX_NOT_FOUND);
    // Committed: algod adds the apply data, zero for a payment that closes nothing.
    return json(
      sortKeys({
        'asset-closing-amount': 0n,
        'close-rewards': 0n,
        'closing-amount': 0n,
        'confirmed-round': BigInt(held.confirmedRound),
        'pool-error': '',
        'receiver-rewards': 0n,
        'sender-rewards': 0n,
        txn,
      }),
    );
  }

  function transactions(
    method: string,
    path: string,
    query: URLSearchParams,
    body: Uint8Array,
  ): Reply | undefined {
    if (path === '/v2/transactions' && method === 'POST') return submit(body);
    const m = /^\/v2\/transactions\/pending\/([^/]+)$/.exec(path);
    return m ? pending(m[1]!, query) : undefined;
  }

  /** The accounts a transaction of the indexer's model, or one of its inner ones, names as a party. */
  function parties(tx: Json, into = new Set<string>()): Set<string> {
    const pay = tx['payment-transaction'] as Json | undefined;
    const axfer = tx['asset-transfer-transaction'] as Json | undefined;
    for (const a of [
      tx.sender,
      pay?.receiver,
      pay?.['close-remainder-to'],
      axfer?.receiver,
      axfer?.['close-to'],
      axfer?.sender,
    ])
      if (typeof a === 'string') into.add(a);
    for (const inner of (tx['inner-txns'] as Json[] | undefined) ?? []) parties(inner, into);
    return into;
  }

  function accountTransactions(address: string, query: URLSearchParams): Reply {
    const min = Number(query.get('min-round') ?? 0);
    const max = Number(query.get('max-round') ?? tip);
    const limit = Math.min(Number(query.get('limit') ?? 1000), 1000);
    const skip = Number(query.get('next') ?? 0);
    const all: Json[] = [];
    for (const round of [...rounds.keys()].sort((a, b) => b - a)) {
      if (round < min || round > max) continue;
      for (const tx of (rounds.get(round)!.indexer.transactions as Json[]) ?? [])
        if (parties(tx).has(address)) all.push(tx);
    }
    const page = all.slice(skip, skip + limit);
    return json({
      'current-round': BigInt(tip),
      ...(page.length > 0 ? { 'next-token': String(skip + page.length) } : {}),
      transactions: page,
    });
  }

  function indexer(path: string, query: URLSearchParams): Reply | undefined {
    if (path === '/health')
      return json({
        'db-available': true,
        'is-migrating': false,
        message: String(tip),
        round: BigInt(tip),
        version: '3.9.0',
      });
    const account = /^\/v2\/accounts\/([A-Z2-7]{58})\/transactions$/.exec(path);
    if (account) return accountTransactions(account[1]!, query);
    const m = /^\/v2\/blocks\/(\d+)$/.exec(path);
    if (!m) return undefined;
    const held = rounds.get(Number(m[1]));
    if (!held) return notFound(`error while looking up block for round '${m[1]}': block not found`);
    if (query.get('header-only') !== 'true') return json(held.indexer);
    const { transactions: _, ...header } = held.indexer;
    return json(header);
  }

  function asset(path: string, query: URLSearchParams): Reply | undefined {
    const m = /^\/v2\/assets\/(\d+)$/.exec(path);
    if (!m) return undefined;
    const params = assets.get(m[1]!);
    if (!params) return notFound('asset does not exist');
    const body = { index: BigInt(m[1]!), params };
    // The indexer wraps it (and takes include-all); algod answers the asset itself.
    return json(query.has('include-all') ? { asset: body, 'current-round': BigInt(tip) } : body);
  }

  async function answer(
    method: string,
    path: string,
    query: URLSearchParams,
    body: Uint8Array,
  ): Promise<Reply> {
    if (failures.count > 0) {
      failures = { ...failures, count: failures.count - 1 };
      return json({ message: 'injected failure' }, failures.status);
    }
    return (
      transactions(method, path, query, body) ??
      (await algod(path, query)) ??
      indexer(path, query) ??
      asset(path, query) ??
      notFound('Not Found')
    );
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://node.invalid');
    const method = req.method ?? 'GET';
    requests.push({ method, path: url.pathname, query: url.search, headers: req.headers });
    if (drops > 0) {
      drops--;
      req.socket.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void answer(method, url.pathname, url.searchParams, new Uint8Array(Buffer.concat(chunks))).then(
        (reply) => {
          res.writeHead(reply.status, { 'content-type': reply.type });
          res.end(reply.body);
        },
      );
    });
  });
  server.keepAliveTimeout = 1000;

  const { port, start, stop } = await listenOnLoopback(server, wake);

  function roundOf(held: AlgorandRound): number {
    return Number(held.indexer.round);
  }

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    setRounds(next) {
      rounds = new Map(next.map((r) => [roundOf(r), r]));
      tip = next.length > 0 ? roundOf(next[next.length - 1]!) : 0;
      wake();
    },
    addRound(round) {
      rounds.set(roundOf(round), round);
      tip = roundOf(round);
      wake();
    },
    setGenesis(next) {
      genesis = { ...next };
    },
    setAsset(id, params) {
      assets.set(id, params);
    },
    failNext(count, status = 500) {
      failures = { count, status };
    },
    dropNext(count) {
      drops = count;
    },
    posted,
    pool,
    confirm(txId, round) {
      const held = pool.get(txId);
      if (!held) throw new Error(`The loopback node's pool has no transaction ${txId}`);
      if (!rounds.has(round))
        throw new Error(`The loopback node holds no round ${round} to confirm ${txId} in`);
      held.confirmedRound = round;
      held.poolError = '';
    },
    evict(txId, poolError) {
      const held = pool.get(txId);
      if (!held || held.confirmedRound !== undefined)
        throw new Error(`The loopback node's pool has no pending transaction ${txId}`);
      held.poolError = poolError;
    },
    setWaitTimeout(ms) {
      waitTimeoutMs = ms;
    },
    stop,
    start,
    close: stop,
  };
}

/** Parses an indexer JSON file of test/fixtures/chains/algorand exactly (integers as bigint). */
export function readIndexerJson(name: string): Json {
  return parseExactJson(fs.readFileSync(fixturePath('chains/algorand', name), 'utf8')) as Json;
}
