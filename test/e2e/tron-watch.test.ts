/**
 * Watching Tron end to end: the real service follows a loopback java-tron node of our own
 * (test/helpers/tron-node.ts) that wants an API key, serving the recorded mainnet block 69351239
 * and blocks ASSEMBLED from real transactions with their real (or synthesized) infos, one carrying
 * CONSTRUCTED internal transactions (test/fixtures/chains/tron/README.md), then a replaced tip.
 * Every notification is checked against one computed here from the node's answers with TronWeb,
 * and every delivery's signature with standardwebhooks.
 */
import { BigNumber, TronWeb } from 'tronweb';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { runBackfills } from '../helpers/backfill.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver, verifiedBodies } from '../helpers/receiver.js';
import {
  assembledChain,
  CONSTRUCTED,
  FAILED_USDT_TX,
  type Json,
  recordedBlock69351239,
  replacementBranch,
  startTronNode,
  TRANSFER_TOPIC,
  type TronBlockFixture,
  type TronNode,
  USDT,
} from '../helpers/tron-node.js';

type Body = Record<string, unknown>;
type Status = { network: string; height: number | null; healthy: boolean; lastError: string | null };

const API_KEY = 'test-key-0123456789';
/** The Ledger account of the recorded infos: sender of TRX, receiver of TRC-10 and TRC-20, one failed call. */
const LEDGER_ACCOUNT = 'TL24LCps5FKwp3PoU1MvrYrwhi5LU1tHre';
const SUNDOG = 'TXL6rJbvmjD46zeN1JssfgxvSo99qC8MRT';
const WIN = 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7';
const JST = CONSTRUCTED.contract;

const fromHex = (hex: string) => TronWeb.address.fromHex(hex.length === 40 ? `41${hex}` : hex);
const display = (amount: bigint, decimals: number | null) =>
  new BigNumber(amount.toString()).shiftedBy(-(decimals ?? 0)).toFixed();

/** Decimals as the node's records give them: TRC-10 precision, TRC-20 decimals() set below. */
const DECIMALS = new Map<string, number | null>([
  ['TRX', 6],
  [USDT, 6],
  [SUNDOG, 18],
  [JST, 18],
  [WIN, null],
  ['1002000', 6],
  ['1002798', 6],
  ['1002814', 6],
  ['1005065', null],
  // The recorded block's TRC-10 tokens, whose issue records the node does not hold.
  ['1003134', null],
  ['1002992', null],
  ['1005047', null],
]);

interface Movement {
  txId: string;
  asset: string;
  kind: 'native' | 'token';
  from: string;
  to: string;
  amount: bigint;
  traceAddress?: string;
}

/** What the blocks moved, read here with TronWeb from the node's own answers. */
function movementsOf(blocks: TronBlockFixture[]): { block: number; m: Movement }[] {
  const out: { block: number; m: Movement }[] = [];
  for (const { block, infos } of blocks) {
    const height = block.block_header.raw_data.number;
    for (const tx of block.transactions ?? []) {
      if (tx.ret?.[0]?.contractRet !== 'SUCCESS') continue;
      const contract = (tx.raw_data.contract as Json[])[0]!;
      const value = (contract.parameter as Json).value as Json;
      const info = infos.find((i) => i.id === tx.txID)!;
      const push = (m: Omit<Movement, 'txId'>) => out.push({ block: height, m: { txId: tx.txID, ...m } });
      const owner = fromHex(String(value.owner_address));
      if (contract.type === 'TransferContract')
        push({
          asset: 'TRX',
          kind: 'native',
          from: owner,
          to: fromHex(String(value.to_address)),
          amount: BigInt(String(value.amount)),
        });
      if (contract.type === 'TransferAssetContract')
        push({
          asset: Buffer.from(String(value.asset_name), 'hex').toString(),
          kind: 'token',
          from: owner,
          to: fromHex(String(value.to_address)),
          amount: BigInt(String(value.amount)),
        });
      ((info.internal_transactions ?? []) as Json[]).forEach((internal, index) => {
        if (internal.rejected) return;
        for (const v of (internal.callValueInfo ?? []) as Json[]) {
          if (!v.callValue) continue;
          push({
            asset: (v.tokenId as string | undefined) ?? 'TRX',
            kind: v.tokenId ? 'token' : 'native',
            from: fromHex(String(internal.caller_address)),
            to: fromHex(String(internal.transferTo_address)),
            amount: BigInt(String(v.callValue)),
            traceAddress: String(index),
          });
        }
      });
      for (const log of (info.log ?? []) as Json[]) {
        const topics = log.topics as string[];
        if (topics.length !== 3 || topics[0] !== TRANSFER_TOPIC) continue;
        push({
          asset: fromHex(String(log.address)),
          kind: 'token',
          from: fromHex(topics[1]!.slice(24)),
          to: fromHex(topics[2]!.slice(24)),
          amount: BigInt(`0x${log.data}`),
        });
      }
    }
  }
  return out;
}

/** The notifications `watched` should get for the blocks (ids aside), per the spec. */
function expectedBodies(blocks: TronBlockFixture[], watched: Map<string, string>, fees: Set<string>): Body[] {
  const bodies: Body[] = [];
  const common = (address: string) => ({
    subscriptionId: watched.get(address),
    chain: 'TRON',
    watchedAddress: address,
    confirmations: 1,
  });
  for (const { block, m } of movementsOf(blocks)) {
    for (const address of new Set([m.from, m.to])) {
      if (!watched.has(address)) continue;
      const decimals = DECIMALS.get(m.asset);
      if (decimals === undefined) throw new Error(`no decimals for ${m.asset}`);
      const other = address === m.from ? m.to : m.from;
      bodies.push({
        address,
        txId: m.txId,
        type: m.kind,
        blockNumber: block,
        asset: m.asset,
        amount: display(address === m.to ? m.amount : -m.amount, decimals),
        ...(decimals === null ? { decimalsUnknown: true } : {}),
        counterAddress: other,
        ...(m.traceAddress === undefined ? {} : { internal: true, traceAddress: m.traceAddress }),
        ...common(address),
      });
    }
  }
  for (const { block, infos } of blocks) {
    for (const tx of block.transactions ?? []) {
      const value = ((tx.raw_data.contract as Json[])[0]!.parameter as Json).value as Json;
      const owner = fromHex(String(value.owner_address));
      const info = infos.find((i) => i.id === tx.txID)!;
      const failed = tx.ret?.[0]?.contractRet !== 'SUCCESS';
      const fee = BigInt(String(info.fee ?? 0));
      if (!fees.has(owner) || (fee === 0n && !failed)) continue;
      bodies.push({
        address: owner,
        txId: tx.txID,
        type: 'fee',
        blockNumber: block.block_header.raw_data.number,
        asset: 'TRX',
        amount: display(-fee, 6),
        ...(failed ? { failed: true } : {}),
        ...common(owner),
      });
    }
  }
  return bodies;
}

const sortKey = (b: Body) =>
  `${b.blockNumber}:${b.txId}:${b.type}:${b.watchedAddress}:${b.asset}:${b.traceAddress}:${b.amount}`;
const withoutId = (b: Body) => {
  const { id: _, ...rest } = b;
  return rest;
};

describe.each(backends)('watching Tron on %s', (backend) => {
  let node: TronNode;
  let t: TestApp;
  let receiver: Receiver;
  const secrets = new Map<string, string>();
  const subscriptionOf = new Map<string, string>();
  const recorded = recordedBlock69351239();
  const chain = assembledChain();
  const watched = [
    LEDGER_ACCOUNT,
    // Also the receiver of many of the assembled tip's transfers, on both branches of it.
    CONSTRUCTED.trx.to,
    CONSTRUCTED.trc10.to,
    CONSTRUCTED.rejected.to,
    CONSTRUCTED.usdtFromContract.to,
  ];
  const fees = new Set([LEDGER_ACCOUNT]);

  const status = async (): Promise<Status | undefined> => {
    const ready = (await (await fetch(`${t.app.url}/readyz`)).json()) as { networks: Status[] };
    return ready.networks.find((n) => n.network === 'TRON');
  };
  const atHeight = (height: number) => async () => ((await status())?.height === height ? true : undefined);
  /** Every delivery, its signature verified with its subscription's secret. */
  const bodies = (): Body[] => verifiedBodies(receiver.requests, secrets);

  beforeAll(async () => {
    node = await startTronNode({ apiKey: API_KEY, blocks: [recorded] });
    node.setDecimals(SUNDOG, 18);
    node.setDecimals(JST, 18);
    node.setDecimals(WIN, 'revert');
    receiver = await startReceiver();
    t = await startTestApp(backend, {
      LEDGERHOOK_ROLES: 'all',
      LEDGERHOOK_RPC_TRON: node.url,
      LEDGERHOOK_HEADERS_TRON: JSON.stringify({ 'TRON-PRO-API-KEY': API_KEY }),
      LEDGERHOOK_WATCH_POLL_INTERVAL: '100ms',
    });
    for (const address of watched) {
      // The Ledger account is subscribed by its hex form: stored, and notified, as base58.
      const given = address === LEDGER_ACCOUNT ? TronWeb.address.toHex(address) : address;
      const res = await t.request('POST', '/api/v1/subscription', {
        body: {
          type: 'ADDRESS_TRANSACTION',
          attr: {
            chain: 'TRON',
            address: given,
            url: receiver.url,
            ...(fees.has(address) ? { fees: true } : {}),
          },
        },
      });
      expect(res.status, res.text).toBe(201);
      const { id, secret } = res.body as { id: string; secret: string };
      secrets.set(id, secret);
      subscriptionOf.set(address, id);
    }
    await waitFor(atHeight(recorded.block.block_header.raw_data.number), 'the recorded block');
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
    await node?.close();
  });

  test('a hex address is stored as base58; a bad checksum, mempool and a bad txid are 400s', async () => {
    const view = await t.request('GET', `/api/v1/subscription/${subscriptionOf.get(LEDGER_ACCOUNT)}`);
    expect((view.body as { attr: Body }).attr).toMatchObject({
      chain: 'TRON',
      address: LEDGER_ACCOUNT,
      fees: true,
    });
    const badChecksum = `${LEDGER_ACCOUNT.slice(0, -1)}${LEDGER_ACCOUNT.endsWith('e') ? 'f' : 'e'}`;
    for (const [body, pointer] of [
      [{ attr: { chain: 'TRON', address: badChecksum, url: receiver.url } }, '#/attr/address'],
      [
        { attr: { chain: 'TRON', address: LEDGER_ACCOUNT, url: 'http://127.0.0.1:9/x' }, mempool: true },
        '#/mempool',
      ],
    ] as const) {
      const res = await t.request('POST', '/api/v1/subscription', {
        body: { type: 'ADDRESS_TRANSACTION', ...body },
      });
      expect(res.status, res.text).toBe(400);
      expect(JSON.stringify(res.body)).toContain(pointer);
    }
    const lookup = await t.request('GET', '/api/v1/transaction/TRON/0x1234');
    expect(lookup.status).toBe(400);
    // Refused before any node was asked (the follower keeps asking for heads meanwhile).
    expect(node.requests.some((r) => /byid$/.test(r.path))).toBe(false);
  });

  test('six blocks, after a lying and a failing answer: TRX, TRC-10, TRC-20, internal transfers and fees, each once', async () => {
    // The node lies about the first block's infos once, then fails once: the block is read again,
    // never applied in part, and nothing is notified twice.
    node.lieNext({ kind: 'infos-count' });
    node.failNext(1);
    node.setBlocks([recorded, ...chain]);
    const expected = expectedBodies(chain, subscriptionOf, fees);
    expect(expected.length).toBeGreaterThan(15);
    await waitFor(atHeight(chain.at(-1)!.block.block_header.raw_data.number), 'the assembled tip', 30_000);
    await receiver.waitForRequests(expected.length, 20_000);
    const got = bodies().map(withoutId);
    expect(got.sort((a, b) => sortKey(a).localeCompare(sortKey(b)))).toEqual(
      expected.sort((a, b) => sortKey(a).localeCompare(sortKey(b))),
    );
    // What the expectation rests on, said outright.
    const internal = got.filter((b) => b.internal === true);
    expect(internal.map((b) => b.watchedAddress).sort()).toEqual(
      [CONSTRUCTED.trc10.to, CONSTRUCTED.trx.to].sort(),
    );
    expect(
      got.filter((b) => b.watchedAddress === CONSTRUCTED.rejected.to && b.txId === CONSTRUCTED.txId),
    ).toEqual([]);
    expect(
      got.find((b) => b.watchedAddress === CONSTRUCTED.usdtFromContract.to && b.txId === CONSTRUCTED.txId),
    ).toMatchObject({
      asset: USDT,
      amount: '5',
      counterAddress: JST,
    });
    expect(got.filter((b) => b.txId === FAILED_USDT_TX)).toEqual([
      expect.objectContaining({ type: 'fee', failed: true, amount: '0', address: LEDGER_ACCOUNT }),
    ]);
    expect(got.find((b) => b.asset === WIN)).toMatchObject({ decimalsUnknown: true });
    expect(got.find((b) => b.asset === SUNDOG)).toMatchObject({ amount: '13.409316' });
    // Every request carried the network's API key (the node refuses any other).
    expect(node.requests.every((r) => r.headers['tron-pro-api-key'] === API_KEY)).toBe(true);
  });

  test('a replaced tip: what left is withdrawn, what is new is notified, what stayed is not resent', async () => {
    const before = receiver.requests.length;
    const replacement = replacementBranch();
    node.setBlocks([recorded, ...chain.slice(0, -1), ...replacement]);
    const tip = chain.at(-1)!.block.block_header.raw_data.number;
    await waitFor(atHeight(tip + 1), 'the new branch', 30_000);
    const oldTip = expectedBodies([chain.at(-1)!], subscriptionOf, fees);
    const newTip = expectedBodies(replacement, subscriptionOf, fees);
    const key = (b: Body) => `${b.txId}:${b.watchedAddress}:${b.asset}:${b.traceAddress}`;
    const stayed = new Set(newTip.filter((b) => b.blockNumber === tip).map(key));
    const withdrawn = oldTip.filter((b) => !stayed.has(key(b))).map((b) => ({ ...b, reorg: true }));
    const added = newTip.filter((b) => !oldTip.some((o) => key(o) === key(b)));
    expect(withdrawn.length).toBeGreaterThan(0);
    expect(added.length).toBeGreaterThan(0);
    expect(stayed.size).toBeGreaterThan(0);
    await receiver.waitForRequests(before + withdrawn.length + added.length, 20_000);
    const got = bodies().slice(before).map(withoutId);
    expect(got.sort((a, b) => sortKey(a).localeCompare(sortKey(b)))).toEqual(
      [...withdrawn, ...added].sort((a, b) => sortKey(a).localeCompare(sortKey(b))),
    );
  });

  test('the lookup: a real USDT transfer in the one shape; unknown 404; node down 503', async () => {
    const { block, infos } = chain[0]!;
    const tx = block.transactions![0]!;
    const info = infos.find((i) => i.id === tx.txID)!;
    const value = ((tx.raw_data.contract as Json[])[0]!.parameter as Json).value as Json;
    const res = await t.request('GET', `/api/v1/transaction/TRON/${tx.txID.toUpperCase()}`);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({
      id: tx.txID,
      txType: 'TriggerSmartContract',
      sender: TronWeb.address.fromHex(String(value.owner_address)),
      confirmedRound: info.blockNumber,
      roundTime: Math.floor(Number(info.blockTimeStamp) / 1000),
      fee: Number(info.fee),
      signature: tx.signature![0],
    });
    const unknown = await t.request('GET', `/api/v1/transaction/TRON/${'ab'.repeat(32)}`);
    expect(unknown.status).toBe(404);
    await node.stop();
    try {
      const down = await t.request('GET', `/api/v1/transaction/TRON/${'cd'.repeat(32)}`);
      expect(down.status).toBe(503);
    } finally {
      await node.start();
    }
  });
  test('a backfill of the real block 69351239: both sides of a TRX, a TRC-10 and a USDT transfer', async () => {
    const movements = movementsOf([recorded]).map(({ m }) => m);
    const picked = ['TRX', '1003134', USDT].map((asset) => movements.find((m) => m.asset === asset)!);
    const parties = [...new Set(picked.flatMap((m) => [m.from, m.to]))];
    const subscribed = new Map<string, string>();
    for (const address of parties) {
      const res = await t.request('POST', '/api/v1/subscription', {
        body: { type: 'ADDRESS_TRANSACTION', attr: { chain: 'TRON', address, url: receiver.url } },
      });
      expect(res.status, res.text).toBe(201);
      const { id, secret } = res.body as { id: string; secret: string };
      secrets.set(id, secret);
      subscribed.set(address, id);
    }
    const before = receiver.requests.length;
    const height = recorded.block.block_header.raw_data.number;
    const views = await runBackfills<{ state: string }>(t, [...subscribed.values()], {
      from: height,
      to: height,
    });
    expect(views.map((v) => v.state)).toEqual(parties.map(() => 'done'));
    const expected = expectedBodies([recorded], subscribed, new Set()).map((b) => ({ ...b, backfill: true }));
    expect(expected.length).toBeGreaterThanOrEqual(parties.length);
    await receiver.waitForRequests(before + expected.length, 20_000);
    const got = bodies().slice(before).map(withoutId);
    expect(got.sort((a, b) => sortKey(a).localeCompare(sortKey(b)))).toEqual(
      expected.sort((a, b) => sortKey(a).localeCompare(sortKey(b))),
    );
  });
});
