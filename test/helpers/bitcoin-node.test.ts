/**
 * The loopback Bitcoin node is no looser than the real ones: its answers are compared with the
 * recorded answers of Bitcoin Core and Esplora in test/fixtures/chains/bitcoin (provenance in the
 * README there) — field by field where the value can be derived from the block's bytes, and by
 * keys and JSON types where it cannot (confirmations depend on the chain's tip then and now).
 */
import fs from 'node:fs';
import zlib from 'node:zlib';
import { Block, networks, Transaction } from 'bitcoinjs-lib';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { btcToSatoshi } from '../../src/chains/bitcoin/lookup.js';
import { parseExactJson } from '../../src/chains/node-http.js';
import { BTCD_MAIN, BTCD_SIDE, block702861, btcdBlock, mainnetRun } from './bitcoin-blocks.js';
import { type BitcoinNode, startBitcoinNode } from './bitcoin-node.js';
import { esploraOutput } from './bitcoin-render.js';
import { fixturePath } from './fixture-node.js';

type Json = Record<string, unknown>;
const recorded = (name: string): string => {
  const file = fixturePath('chains/bitcoin', name);
  return name.endsWith('.gz')
    ? zlib.gunzipSync(fs.readFileSync(file)).toString('utf8')
    : fs.readFileSync(file, 'utf8');
};

const BLOCK_170 = '00000000d1145790a8694403d4063f323d499e655c83426834d4ce2f8dd4a2ee';
const HAL = 'f4184fc596403b9d638783cf57adfe4c75c605f6356fbc91338530e9831e9e16';

let node: BitcoinNode;
beforeAll(async () => {
  node = await startBitcoinNode();
});
afterAll(() => node.close());
beforeEach(() => {
  node.configure({ verbosity3: true, txindex: true, unheldPrevouts: 'omit', mempoolSequence: true });
  node.setMempool([]);
});

/** One JSON-RPC call, its result parsed exactly (8-decimal amounts stay text, integers bigint). */
async function rpc(method: string, params: unknown[]): Promise<Json> {
  const res = await request(node.url, {
    method: 'POST',
    body: JSON.stringify([{ jsonrpc: '1.0', id: 0, method, params }]),
  });
  const [answer] = parseExactJson(await res.body.text()) as Json[];
  return answer!;
}

async function get(path: string): Promise<unknown> {
  const res = await request(`${node.url}${path}`);
  return JSON.parse(await res.body.text());
}

/** The keys and JSON types of a value, array elements merged (their keys' union). */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) {
    const merged: Json = {};
    for (const element of value.map(shape)) {
      if (typeof element !== 'object' || element === null) return [element];
      Object.assign(merged, element);
    }
    return [merged];
  }
  if (typeof value === 'object' && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shape(v)]));
  return value === null ? 'null' : typeof value;
}

/** The value with the named top-level keys' values replaced by their JSON type. */
function typesOnly(value: Json, keys: string[]): Json {
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, keys.includes(k) ? typeof v : v]));
}

/** Block 200000 rebuilt from its recorded getblock answer: the header fields and every tx's hex. */
function rebuild(answer: Json): Buffer {
  const block = new Block();
  block.version = Number(answer.version);
  block.prevHash = Buffer.from(String(answer.previousblockhash), 'hex').reverse();
  block.merkleRoot = Buffer.from(String(answer.merkleroot), 'hex').reverse();
  block.timestamp = Number(answer.time);
  block.bits = Number.parseInt(String(answer.bits), 16);
  block.nonce = Number(answer.nonce);
  block.transactions = (answer.tx as Json[]).map((tx) => Transaction.fromHex(String(tx.hex)));
  return Buffer.from(block.toBuffer());
}

describe('Bitcoin Core answers', () => {
  test('getblock 170 2 equals the recorded answer field by field (an old node: addresses, no prevouts)', async () => {
    node.setChain(mainnetRun());
    node.configure({ verbosity3: false });
    const theirs = parseExactJson(recorded('getblock-170-verbosity2.json')) as Json;
    const ours = (await rpc('getblock', [BLOCK_170, 2])).result as Json;
    expect(Object.keys(ours)).toEqual(Object.keys(theirs));
    // confirmations counts to the recorder's tip; everything else is the block's own, or its neighbours'.
    expect(typesOnly(ours, ['confirmations'])).toEqual(typesOnly(theirs, ['confirmations']));
    // An old node answers verbosity 3 as 2.
    expect((await rpc('getblock', [BLOCK_170, 3])).result).toEqual(ours);
  });

  test('getblock 200000 2 equals the recorded answer for all 388 transactions (asm, addresses, lexemes)', async () => {
    const theirs = parseExactJson(recorded('getblock-200000-verbosity2.json.gz')) as Json;
    const raw = rebuild(theirs);
    node.setChain([raw], 200000);
    node.configure({ verbosity3: false });
    const ours = (await rpc('getblock', [theirs.hash, 2])).result as Json;
    // Not derivable from one block: its depth, its chain's work and median time, its successor.
    const chainDependent = ['confirmations', 'chainwork', 'mediantime'];
    const { nextblockhash, ...theirsHere } = theirs;
    expect(typeof nextblockhash).toBe('string'); // the node holds no block 200001
    expect(typesOnly(ours, chainDependent)).toEqual(typesOnly(theirsHere, chainDependent));
    expect(Object.keys(ours)).toEqual(Object.keys(theirsHere));
  });

  test('getblock … 3 on a current node adds each input’s prevout and the fee', async () => {
    node.setChain(mainnetRun());
    const block = (await rpc('getblock', [BLOCK_170, 3])).result as Json;
    const [coinbase, hal] = block.tx as Json[];
    expect((coinbase!.vin as Json[])[0]).toEqual({ coinbase: '04ffff001d0102', sequence: 4294967295n });
    expect(coinbase!.fee).toBeUndefined();
    const input = (hal!.vin as Json[])[0]!;
    expect(Object.keys(input)).toEqual(['txid', 'vout', 'scriptSig', 'prevout', 'sequence']);
    // Block 9's coinbase output: 50 BTC to pubkey 0411db93…, created at height 9 by a coinbase.
    const pubkey =
      '0411db93e1dcdb8a016b49840f8c53bc1eb68a382e97b1482ecad7b148a6909a5cb2e0eaddfb84ccf9744464f82e160bfa9b8b64f9d4c03f999b8643f656b412a3';
    expect(input.prevout).toEqual({
      generated: true,
      height: 9n,
      value: '50.00000000',
      scriptPubKey: { asm: `${pubkey} OP_CHECKSIG`, hex: `41${pubkey}ac`, type: 'pubkey' },
    });
    expect(hal!.fee).toBe('0.00000000'); // 50 in, 10 + 40 out
    // The current field set: one `address` where there is one, never `addresses`/`reqSigs`.
    node.setChain([block702861()], 702861);
    const big = (
      await rpc('getblock', ['000000000000000000000c835b2adcaedc20fdf6ee440009c249452c726dafae', 2])
    ).result as Json;
    const keys = new Set(
      (big.tx as Json[]).flatMap((tx) =>
        (tx.vout as Json[]).flatMap((o) => Object.keys(o.scriptPubKey as Json)),
      ),
    );
    expect([...keys].sort()).toEqual(['address', 'asm', 'hex', 'type']);
  });

  test('getrawtransaction f4184fc5 true matches the recorded answer', async () => {
    node.setChain(mainnetRun());
    node.configure({ verbosity3: false });
    const theirs = parseExactJson(recorded('getrawtransaction-f4184fc5-verbose.json')) as Json;
    const ours = (await rpc('getrawtransaction', [HAL, true])).result as Json;
    expect(Object.keys(ours)).toEqual(Object.keys(theirs));
    // The recording re-serialised 10.00000000 as 10 (see the README): compare amounts in satoshi.
    const amounts = (tx: Json) => (tx.vout as Json[]).map((o) => btcToSatoshi(o.value));
    expect(amounts(ours)).toEqual(amounts(theirs));
    expect((ours.vout as Json[]).map((o) => o.value)).toEqual(['10.00000000', '40.00000000']);
    const withoutAmounts = (tx: Json) => ({
      ...typesOnly(tx, ['confirmations']),
      vout: (tx.vout as Json[]).map(({ value: _value, ...rest }) => rest),
    });
    expect(withoutAmounts(ours)).toEqual(withoutAmounts(theirs));
  });

  test('answers as real nodes do when something is not there', async () => {
    node.setChain(mainnetRun());
    expect((await rpc('getblockhash', [256])).error).toEqual({
      code: -8n,
      message: 'Block height out of range',
    });
    expect((await rpc('getblock', ['00'.repeat(32), 1])).error).toMatchObject({ code: -5n });
    node.configure({ txindex: false });
    expect((await rpc('getrawtransaction', [HAL, true])).error).toMatchObject({
      code: -5n,
      message: /-txindex/,
    });
  });
});

describe('Esplora answers', () => {
  const esploraTxs = JSON.parse(
    recorded('esplora-address-txs-bc1qvhykeqcpdzu0pdvy99xnh9ckhwzcfskct6h6l2.json'),
  ) as Json[];

  test('renders the recorded transactions’ scripts exactly as Esplora did (asm, type, address)', () => {
    for (const tx of esploraTxs) {
      const outputs = [...(tx.vout as Json[]), ...(tx.vin as Json[]).map((i) => i.prevout as Json)];
      for (const o of outputs) {
        const script = Buffer.from(String(o.scriptpubkey), 'hex');
        expect(esploraOutput(script, BigInt(Number(o.value)), networks.bitcoin)).toEqual(o);
      }
    }
  });

  test('serves /tx and /block/:hash/txs with the recorded keys and types', async () => {
    const raw = block702861();
    node.setChain([raw], 702861);
    // A transaction like the recorded ones: witness inputs whose spent outputs the node holds
    // (they are in this block), and outputs that all pay addresses.
    const block = Block.fromBuffer(raw);
    const txids = new Set(block.transactions!.map((t) => t.getId()));
    const chosen = block.transactions!.find(
      (t) =>
        !t.isCoinbase() &&
        t.ins.every(
          (i) => i.witness.length > 0 && txids.has(Buffer.from(i.hash).reverse().toString('hex')),
        ) &&
        t.outs.every((o) => o.script[0] !== 0x6a),
    );
    expect(chosen).toBeDefined();
    const ours = (await get(`/tx/${chosen!.getId()}`)) as Json;
    expect(shape([ours])).toEqual(shape(esploraTxs));
    const index = block.transactions!.indexOf(chosen!);
    const page = (await get(`/block/${block.getId()}/txs/${index - (index % 25)}`)) as Json[];
    expect(page[index % 25]).toEqual(ours);
    expect(ours.status).toEqual({
      confirmed: true,
      block_height: 702861,
      block_hash: block.getId(),
      block_time: block.timestamp,
    });
  });

  test('serves an address’s confirmed history with the recorded address answer’s keys and types, paged', async () => {
    const raw = block702861();
    node.setChain([raw], 702861);
    const block = Block.fromBuffer(raw);
    // An output address of a transaction whose inputs the node holds, as the recorded answer's.
    const txids = new Set(block.transactions!.map((t) => t.getId()));
    const chosen = block.transactions!.find(
      (t) =>
        !t.isCoinbase() &&
        t.ins.every((i) => txids.has(Buffer.from(i.hash).reverse().toString('hex'))) &&
        t.outs.every((o) => o.script[0] !== 0x6a),
    )!;
    const ours = (await get(`/tx/${chosen.getId()}`)) as Json;
    const address = (ours.vout as Json[])[0]!.scriptpubkey_address as string;
    const history = (await get(`/address/${address}/txs/chain`)) as Json[];
    expect(history.map((t) => t.txid)).toContain(chosen.getId());
    expect(shape(history)).toEqual(shape(esploraTxs));
    // Paging after the last txid seen: past the end, an empty page.
    const last = history[history.length - 1]!.txid as string;
    expect(await get(`/address/${address}/txs/chain/${last}`)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// The pool

const txidOf = (hash: Uint8Array) => Buffer.from(hash).reverse().toString('hex');
const spendsOf = (tx: Transaction) => tx.ins.map((i) => `${txidOf(i.hash)}:${i.index}`);
const rbf = (name: 'parent' | 'original' | 'replacement') =>
  Transaction.fromHex(
    fs.readFileSync(fixturePath('chains/bitcoin/constructed', `rbf-702861-${name}.hex`), 'utf8'),
  );
const txIn = (block: Buffer, prefix: string) =>
  Block.fromBuffer(block).transactions!.find((t) => t.getId().startsWith(prefix))!;

/** btcd's block 3 spend that block 3A double-spends, and the 40 BTC output of block 2 it spends. */
const DOUBLE_SPENT = '29c25cf0ca03c7b3a0c001bd02e479c2d50f60119463c81d5bd24bdeaaca477f:0';

describe('fixtures of pending transactions', () => {
  test('btcd blocks 3 and 3A hold a real double spend of 29c25cf0…:0', () => {
    const first = txIn(btcdBlock('3'), '509866fa');
    const second = txIn(btcdBlock('3A'), 'c4d85354');
    expect(spendsOf(first)).toEqual([DOUBLE_SPENT]);
    expect(spendsOf(second)).toEqual([DOUBLE_SPENT]);
    // No other transaction of either branch spends it.
    const all = [...BTCD_MAIN, ...BTCD_SIDE].flatMap(
      (name) => Block.fromBuffer(btcdBlock(name)).transactions!,
    );
    const spenders = new Set(all.filter((t) => spendsOf(t).includes(DOUBLE_SPENT)).map((t) => t.getId()));
    expect([...spenders].sort()).toEqual([first.getId(), second.getId()].sort());
  });

  test('the RBF pair: parent and original cut unchanged from block 702861, the replacement assembled from the original', () => {
    const block = Block.fromBuffer(block702861());
    const [parent, original, replacement] = [rbf('parent'), rbf('original'), rbf('replacement')];
    const inBlock = (t: Transaction) => block.transactions!.find((b) => b.getId() === t.getId())!.toHex();
    expect(inBlock(parent)).toBe(parent.toHex());
    expect(inBlock(original)).toBe(original.toHex());
    expect(spendsOf(original)).toEqual([`${parent.getId()}:0`]);
    expect(original.ins[0]!.sequence).toBe(0xfffffffd); // BIP125 opt-in
    // Assembled: the original with output 0 lowered by 2,000 sat and output 1 paying 1KhQjp9… instead.
    const rebuilt = original.clone();
    rebuilt.outs[0]!.value -= 2_000n;
    rebuilt.outs[1]!.script = Buffer.from(
      txIn(block702861(), '2c7aa655').outs[0]!.script, // 1KhQjp9BsJEumZNFJxDeJXBvaRUzxrSXRa, a real output of the block
    );
    expect(replacement.toHex()).toBe(rebuilt.toHex());
    expect(replacement.getId()).toBe('0a7da5ae9c7a8ecf69de52dcd58288ece733ce1ebd3a77bdff406a39a1aa0b3e');
    expect(spendsOf(replacement)).toEqual(spendsOf(original));
    const paid = (t: Transaction) => t.outs.reduce((sum, o) => sum + o.value, 0n);
    expect(parent.outs[0]!.value - paid(original)).toBe(659n);
    expect(parent.outs[0]!.value - paid(replacement)).toBe(2_659n);
    expect(replacement.virtualSize()).toBe(original.virtualSize());
  });
});

describe('the pool, as Esplora serves it', () => {
  test('lists the pool and serves a pool transaction unconfirmed, with prevouts and fee', async () => {
    node.setChain(BTCD_MAIN.slice(0, 3).map(btcdBlock));
    const pending = txIn(btcdBlock('3'), '509866fa');
    node.setMempool([pending.toHex()]);
    expect(await get('/mempool/txids')).toEqual([pending.getId()]);
    const ours = (await get(`/tx/${pending.getId()}`)) as Json;
    expect(ours.status).toEqual({ confirmed: false });
    // Block 2's 29c25cf0…:0, 10 BTC to 1KXFNh…; all of it goes to the outputs here.
    const [input] = ours.vin as Json[];
    expect(input!.prevout).toMatchObject({
      scriptpubkey_address: '1KXFNhNtrRMfgbdiQeuJqnfD7dR4PhniyJ',
      value: 1e9,
    });
    expect(ours.fee).toBe(Number(10n * 100_000_000n - pending.outs.reduce((s, o) => s + o.value, 0n)));
  });

  test('derives a prevout from another pool transaction, and follows unheldPrevouts for the rest', async () => {
    node.setChain(BTCD_MAIN.slice(0, 3).map(btcdBlock));
    const [parent, original] = [rbf('parent'), rbf('original')];
    node.setMempool([parent.toBuffer(), original.toHex()]);
    const child = (await get(`/tx/${original.getId()}`)) as Json;
    expect((child.vin as Json[])[0]!.prevout).toMatchObject({
      scriptpubkey_address: 'bc1q6v9jmpf2t5dhcs7ld6jyzpdcnaulzwphhsqkh5',
      value: 186_259,
    });
    expect(child.fee).toBe(659);
    // A witness spend like the recorded ones: the same keys and types, but for the status.
    const theirs = JSON.parse(
      recorded('esplora-address-txs-bc1qvhykeqcpdzu0pdvy99xnh9ckhwzcfskct6h6l2.json'),
    ) as Json[];
    const { status: _ours, ...rest } = child;
    expect(shape([rest])).toEqual(shape(theirs.map(({ status: _theirs, ...tx }) => tx)));
    expect(((await get(`/tx/${parent.getId()}`)) as Json).vin).toMatchObject([{ prevout: null }]);
    node.configure({ unheldPrevouts: 'placeholder' });
    expect(((await get(`/tx/${parent.getId()}`)) as Json).vin).toMatchObject([
      { prevout: { scriptpubkey: '', value: 0 } },
    ]);
  });
});

describe('the pool, as Bitcoin Core serves it', () => {
  const pending = txIn(btcdBlock('3'), '509866fa');
  beforeEach(() => {
    node.setChain(BTCD_MAIN.slice(0, 3).map(btcdBlock));
    node.setMempool([pending.toHex()]);
  });

  test('getrawmempool: a list, with mempool_sequence on request (Core 21+), refusing verbose with it', async () => {
    expect((await rpc('getrawmempool', [])).result).toEqual([pending.getId()]);
    const before = node.mempool().sequence;
    expect((await rpc('getrawmempool', [false, true])).result).toEqual({
      txids: [pending.getId()],
      mempool_sequence: BigInt(before),
    });
    expect((await rpc('getrawmempool', [true, true])).error).toEqual({
      code: -8n,
      message: 'Verbose results cannot contain mempool sequence values.',
    });
    // One removal and one addition: two steps, as Core counts them.
    node.setMempool([rbf('parent').toHex()]);
    expect(node.mempool().sequence).toBe(before + 2);
  });

  test('getrawmempool before Core 21: the second argument is refused with error -1 and the help text', async () => {
    node.configure({ mempoolSequence: false });
    const refused = (await rpc('getrawmempool', [false, true])).error as Json;
    expect(refused.code).toBe(-1n);
    expect(String(refused.message)).toMatch(/^getrawmempool \( verbose \)\n/);
    expect((await rpc('getrawmempool', [false])).result).toEqual([pending.getId()]);
  });

  test('getrawtransaction of a pool transaction: found without txindex, no block fields', async () => {
    node.configure({ txindex: false });
    const tx = (await rpc('getrawtransaction', [pending.getId(), true])).result as Json;
    expect(Object.keys(tx)).toEqual([
      'txid',
      'hash',
      'version',
      'size',
      'vsize',
      'weight',
      'locktime',
      'vin',
      'vout',
      'hex',
    ]);
    expect(tx.hex).toBe(pending.toHex());
    expect((await rpc('getrawtransaction', [pending.getId(), false])).result).toBe(pending.toHex());
  });

  test('gettxout: the held chain’s unspent outputs, less what the pool spends unless asked without it', async () => {
    const [txid, n] = DOUBLE_SPENT.split(':') as [string, string];
    // Spent by the pool transaction: gone with include_mempool (the default), there without it.
    expect((await rpc('gettxout', [txid, Number(n)])).result).toBeNull();
    const coin = (await rpc('gettxout', [txid, Number(n), false])).result as Json;
    const tip = Block.fromBuffer(btcdBlock('2')).getId();
    expect(coin).toEqual({
      bestblock: tip,
      confirmations: 1n, // created in block 2, the tip
      value: '10.00000000',
      scriptPubKey: {
        asm: expect.stringMatching(/^OP_DUP OP_HASH160 [0-9a-f]{40} OP_EQUALVERIFY OP_CHECKSIG$/),
        hex: expect.stringMatching(/^76a914[0-9a-f]{40}88ac$/),
        address: '1KXFNhNtrRMfgbdiQeuJqnfD7dR4PhniyJ',
        type: 'pubkeyhash',
      },
      coinbase: false,
    });
    // Block 1's coinbase output, spent by 29c25cf0… in block 2: not in the UTXO set.
    const spentCoinbase = txidOf(txIn(btcdBlock('2'), '29c25cf0').ins[0]!.hash);
    expect((await rpc('gettxout', [spentCoinbase, 0, false])).result).toBeNull();
    // The pool transaction's own outputs: 0 confirmations, only with include_mempool.
    expect((await rpc('gettxout', [pending.getId(), 0])).result).toMatchObject({
      confirmations: 0n,
      coinbase: false,
    });
    expect((await rpc('gettxout', [pending.getId(), 0, false])).result).toBeNull();
    expect((await rpc('gettxout', ['00'.repeat(32), 0, false])).result).toBeNull();
    // An old Core's field set.
    node.configure({ verbosity3: false });
    const old = (await rpc('gettxout', [txid, Number(n), false])).result as Json;
    expect(Object.keys(old.scriptPubKey as Json)).toEqual(['asm', 'hex', 'reqSigs', 'type', 'addresses']);
  });

  test('drops what the held chain mines or double-spends, as a node does on a block', async () => {
    const before = node.mempool().sequence;
    node.setChain(BTCD_SIDE.map(btcdBlock)); // 3A's c4d85354… spends 29c25cf0…:0 too
    expect(node.mempool()).toEqual({ txids: [], sequence: before + 1 });
    node.setChain(BTCD_MAIN.map(btcdBlock));
    node.setMempool([pending.toHex()]); // mined in block 3: never enters
    expect(node.mempool().txids).toEqual([]);
    expect((await get(`/tx/${pending.getId()}`)) as Json).toMatchObject({
      status: { confirmed: true, block_height: 3 },
    });
  });
});
