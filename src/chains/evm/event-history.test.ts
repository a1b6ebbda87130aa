/**
 * The history of a followed contract event (the backfill of a CONTRACT_LOG_EVENT subscription)
 * against a node played here: what `eth_getLogs` is asked (topic0, filtered argument values,
 * contracts in pages, nothing for an empty list), ranges the node refuses as too large halved
 * until they pass (for events and for the address transfers of history.ts), the blocks built as
 * the follower's, and a chain that moves while reading refused.
 */
import {
  createPublicClient,
  custom,
  getAddress,
  type Hex,
  keccak256,
  numberToHex,
  pad,
  stringToHex,
  toEventSelector,
} from 'viem';
import { describe, expect, test } from 'vitest';
import { UpstreamUnavailableError } from '../../errors.js';
import type { Throttle } from '../../shared/throttle.js';
import type { WatchedAddresses } from '../source.js';
import { TRANSFER_TOPIC } from './activity.js';
import { CONTRACTS_PER_QUERY, eventLogTopics, TOPIC_VALUES_PER_QUERY } from './event-history.js';
import type { FollowedEvent } from './followed-event.js';
import { evmHistory } from './history.js';
import { parseFollowedEvent } from './parse-followed-event.js';

const TRANSFER = 'event Transfer(address indexed from, address indexed to, uint256 value)';
const APPROVAL_TOPIC = toEventSelector('Approval(address,address,uint256)');

const addressOf = (n: number): Hex => getAddress(pad(numberToHex(n), { size: 20 }));
const word = (address: Hex): Hex => pad(address.toLowerCase() as Hex, { size: 32 });
const ALICE = addressOf(0xa11ce);
const BOB = addressOf(0xb0b);
const TOKEN_A = addressOf(0xaaaa);
const TOKEN_B = addressOf(0xbbbb);

function followed(event: unknown, filter?: unknown): FollowedEvent {
  const parsed = parseFollowedEvent(event, filter);
  if ('errors' in parsed) throw new Error(JSON.stringify(parsed.errors));
  return parsed.event;
}

describe('eventLogTopics: what of the event the node filters on', () => {
  test('puts topic0 first, then the values of each filtered indexed argument, trailing "any" dropped', () => {
    const plain = followed(TRANSFER);
    expect(eventLogTopics(plain)).toEqual([TRANSFER_TOPIC]);
    const byTo = followed(TRANSFER, { to: [BOB, ALICE, BOB] });
    expect(eventLogTopics(byTo)).toEqual([TRANSFER_TOPIC, null, [word(BOB), word(ALICE)]]);
    const byFrom = followed(TRANSFER, { from: ALICE });
    expect(eventLogTopics(byFrom)).toEqual([TRANSFER_TOPIC, [word(ALICE)]]);
  });

  test('leaves a long list of values to the matcher', () => {
    const many = Array.from({ length: TOPIC_VALUES_PER_QUERY + 1 }, (_, i) => addressOf(i + 1));
    expect(eventLogTopics(followed(TRANSFER, { to: many }))).toEqual([TRANSFER_TOPIC]);
    const enough = many.slice(0, TOPIC_VALUES_PER_QUERY);
    expect(eventLogTopics(followed(TRANSFER, { to: enough, from: many }))).toEqual([
      TRANSFER_TOPIC,
      null,
      enough.map(word),
    ]);
  });

  test('has no topic0 for an anonymous event (its arguments start at topic 0) and only topic0 for a bare one', () => {
    const anon = 'event Note(address indexed who, uint256 indexed n, string text) anonymous';
    expect(eventLogTopics(followed(anon))).toEqual([]);
    expect(eventLogTopics(followed(anon, { n: '7' }))).toEqual([null, [pad(numberToHex(7), { size: 32 })]]);
    const bare = keccak256(stringToHex('Whatever(uint256)'));
    expect(eventLogTopics(followed(bare.toUpperCase().replace('0X', '0x')))).toEqual([bare]);
  });
});

/** A log as the node keeps it. */
interface NodeLog {
  block: number;
  address: Hex;
  topics: Hex[];
  data: Hex;
  txIndex: number;
  logIndex: number;
  removed?: boolean;
}

interface Caps {
  /** Most blocks per eth_getLogs. */
  maxRange?: number;
  /** Most logs per answer. */
  maxResults?: number;
}

/** An error as a node answers it (viem reads code and message). */
const rpcError = (code: number, message: string) => Object.assign(new Error(message), { code });

const blockHash = (height: number, branch = 0): Hex => pad(numberToHex(height * 16 + branch), { size: 32 });

/** A node holding `logs` in blocks 0…`tip`, with caps on eth_getLogs; it records what it is asked. */
function fakeNode(logs: NodeLog[], tip: number, caps: Caps = {}) {
  const asked: { method: string; params: unknown[] }[] = [];
  const refused: { from: number; to: number }[] = [];
  const state = { branch: 0, fail: undefined as Error | undefined };
  const matches = (log: NodeLog, filter: { topics?: (Hex | Hex[] | null)[]; address?: Hex[] }) => {
    if (filter.address && !filter.address.includes(log.address.toLowerCase() as Hex)) return false;
    return (filter.topics ?? []).every((want, i) => {
      if (want === null || (Array.isArray(want) && want.length === 0)) return true;
      const topic = log.topics[i];
      return topic !== undefined && (Array.isArray(want) ? want.includes(topic) : want === topic);
    });
  };
  const request = async ({ method, params }: { method: string; params: unknown[] }) => {
    asked.push({ method, params });
    if (method === 'eth_blockNumber') return numberToHex(tip);
    if (method === 'eth_getBlockByNumber') {
      const height = Number(params[0]);
      if (height > tip) return null;
      return {
        number: numberToHex(height),
        hash: blockHash(height, state.branch),
        parentHash: height === 0 ? pad('0x0', { size: 32 }) : blockHash(height - 1, state.branch),
        timestamp: numberToHex(1_700_000_000 + height * 12),
        transactions: [],
      };
    }
    if (method === 'eth_getLogs') {
      const filter = params[0] as {
        fromBlock: Hex;
        toBlock: Hex;
        topics?: (Hex | Hex[] | null)[];
        address?: Hex[];
      };
      const from = Number(filter.fromBlock);
      const to = Number(filter.toBlock);
      if (state.fail) throw state.fail;
      if (caps.maxRange !== undefined && to - from + 1 > caps.maxRange) {
        refused.push({ from, to });
        throw rpcError(-32602, `block range is too wide (maximum ${caps.maxRange})`);
      }
      const found = logs.filter((l) => l.block >= from && l.block <= to && matches(l, filter));
      if (caps.maxResults !== undefined && found.length > caps.maxResults) {
        refused.push({ from, to });
        throw rpcError(-32005, `query returned more than ${caps.maxResults} results`);
      }
      return found.map((l) => ({
        address: l.address.toLowerCase(),
        topics: l.topics,
        data: l.data,
        blockNumber: numberToHex(l.block),
        blockHash: blockHash(l.block),
        transactionHash: pad(numberToHex(l.block * 1000 + l.txIndex), { size: 32 }),
        transactionIndex: numberToHex(l.txIndex),
        logIndex: numberToHex(l.logIndex),
        removed: l.removed ?? false,
      }));
    }
    throw rpcError(-32601, `the method ${method} does not exist`);
  };
  const client = createPublicClient({
    transport: custom({ request: request as never }, { retryCount: 0 }),
    cacheTime: 0,
  });
  const getLogs = () =>
    asked
      .filter((a) => a.method === 'eth_getLogs')
      .map((a) => a.params[0] as { fromBlock: Hex; toBlock: Hex; topics: unknown[]; address?: Hex[] });
  return { client, asked, refused, state, getLogs };
}

const noThrottle: Throttle = { perSecond: 0, take: async () => {} };

const watching = (addresses: Hex[]): WatchedAddresses => ({
  count: addresses.length,
  async *pages(size) {
    for (let i = 0; i < addresses.length; i += size) yield addresses.slice(i, i + size);
  },
  async among(candidates) {
    const wanted = new Set(candidates.map((c) => c.toLowerCase()));
    return addresses.filter((a) => wanted.has(a.toLowerCase()));
  },
});

/** A Transfer log of `token` from alice to `to`, `value` in its data. */
function transferLog(block: number, logIndex: number, token: Hex, to: Hex, value: number): NodeLog {
  return {
    block,
    address: token,
    topics: [TRANSFER_TOPIC, word(ALICE), word(to)],
    data: pad(numberToHex(value), { size: 32 }),
    txIndex: logIndex,
    logIndex,
  };
}

describe('the history of an event (evmHistory().events)', () => {
  const logs: NodeLog[] = [
    transferLog(3, 0, TOKEN_A, BOB, 1),
    transferLog(3, 1, TOKEN_B, BOB, 2),
    { ...transferLog(3, 2, TOKEN_A, BOB, 3), topics: [APPROVAL_TOPIC, word(ALICE), word(BOB)] },
    transferLog(7, 4, TOKEN_A, ALICE, 4),
    transferLog(7, 1, TOKEN_A, BOB, 5),
    { ...transferLog(9, 0, TOKEN_A, BOB, 6), removed: true },
    transferLog(15, 0, TOKEN_B, ALICE, 7),
  ];
  const history = (node: ReturnType<typeof fakeNode>, chunk = 20) =>
    evmHistory({ client: node.client, throttle: noThrottle, chunk });

  test('on any contract: topic0 alone, no address; the blocks with the event, each as the follower reads it', async () => {
    const node = fakeNode(logs, 20);
    const scan = await history(node).events.scan(0, 20, { event: followed(TRANSFER) });
    expect(node.getLogs()).toEqual([{ fromBlock: '0x0', toBlock: '0x14', topics: [TRANSFER_TOPIC] }]);
    expect(scan.watched).toEqual([]);
    expect(scan.blocks.map((b) => b.height)).toEqual([3, 7, 15]);
    const [three, seven] = scan.blocks;
    expect(three).toMatchObject({ hash: blockHash(3), parentHash: blockHash(2) });
    expect(three!.activity).toMatchObject({
      number: 3n,
      hash: blockHash(3),
      parentHash: blockHash(2),
      timestamp: BigInt(1_700_000_000 + 36),
      transfers: [],
      payments: [],
    });
    expect(three!.activity.logs).toEqual([
      {
        txHash: pad(numberToHex(3000), { size: 32 }),
        txIndex: 0,
        logIndex: 0,
        address: TOKEN_A.toLowerCase(),
        topics: [TRANSFER_TOPIC, word(ALICE), word(BOB)],
        data: pad(numberToHex(1), { size: 32 }),
      },
      expect.objectContaining({ logIndex: 1, address: TOKEN_B.toLowerCase() }),
    ]);
    // In block order, whatever order the node answered in.
    expect(seven!.activity.logs.map((l) => l.logIndex)).toEqual([1, 4]);
    // A header for each block with events, none for the others.
    const headers = node.asked.filter((a) => a.method === 'eth_getBlockByNumber').map((a) => a.params);
    expect(headers.sort()).toEqual([
      ['0x3', false],
      ['0x7', false],
      ['0xf', false],
    ]);
  });

  test('with a filter: the allowed values in their topic', async () => {
    const node = fakeNode(logs, 20);
    const scan = await history(node).events.scan(0, 20, { event: followed(TRANSFER, { to: ALICE }) });
    expect(node.getLogs()[0]!.topics).toEqual([TRANSFER_TOPIC, null, [word(ALICE)]]);
    expect(scan.blocks.map((b) => b.height)).toEqual([7, 15]);
  });

  test(`on a list of contracts: ${CONTRACTS_PER_QUERY} a request, what they emitted, the contracts found as stored`, async () => {
    const many = [
      ...Array.from({ length: 2 * CONTRACTS_PER_QUERY + 500 }, (_, i) => addressOf(0x100000 + i)),
      TOKEN_A,
    ];
    const node = fakeNode(logs, 20);
    const scan = await history(node).events.scan(0, 20, {
      event: followed(TRANSFER),
      contracts: watching(many),
    });
    const asked = node.getLogs();
    expect(asked.map((a) => a.address!.length)).toEqual([CONTRACTS_PER_QUERY, CONTRACTS_PER_QUERY, 501]);
    expect(asked.flatMap((a) => a.address)).toEqual(many.map((a) => a.toLowerCase()));
    for (const a of asked) expect(a.topics).toEqual([TRANSFER_TOPIC]);
    expect(scan.watched).toEqual([TOKEN_A]);
    expect(scan.blocks.flatMap((b) => b.activity.logs.map((l) => `${b.height}:${l.logIndex}`))).toEqual([
      '3:0',
      '7:1',
      '7:4',
    ]);
  });

  test('asks nothing for an empty list of contracts (an empty address list is every contract to a node)', async () => {
    const node = fakeNode(logs, 20);
    const scan = await history(node).events.scan(0, 20, {
      event: followed(TRANSFER),
      contracts: watching([]),
    });
    expect(node.asked).toEqual([]);
    expect(scan).toEqual({ blocks: [], watched: [] });
  });

  test('halves a range the node refuses as too large until it passes: everything found, once', async () => {
    // A log in every block, three in some: more than the node returns for most ranges.
    const dense: NodeLog[] = [];
    for (let block = 0; block <= 40; block++) {
      dense.push(transferLog(block, 0, TOKEN_A, BOB, block));
      if (block % 5 === 0)
        dense.push(transferLog(block, 1, TOKEN_B, BOB, block), transferLog(block, 2, TOKEN_A, ALICE, block));
    }
    for (const caps of [{ maxResults: 4 }, { maxRange: 3 }, { maxRange: 8, maxResults: 5 }]) {
      const node = fakeNode(dense, 40, caps);
      const scan = await history(node, 41).events.scan(0, 40, { event: followed(TRANSFER) });
      const found = scan.blocks.flatMap((b) => b.activity.logs.map((l) => `${b.height}:${l.logIndex}`));
      expect(found, JSON.stringify(caps)).toEqual(dense.map((l) => `${l.block}:${l.logIndex}`));
      expect(node.refused.length, JSON.stringify(caps)).toBeGreaterThan(0);
      // What passed covers the range once, without gaps or overlaps.
      const passed = node
        .getLogs()
        .map((a) => [Number(a.fromBlock), Number(a.toBlock)] as const)
        .filter(([from, to]) => !node.refused.some((r) => r.from === from && r.to === to));
      let next = 0;
      for (const [from, to] of passed.sort((a, b) => a[0] - b[0])) {
        expect(from).toBe(next);
        next = to + 1;
      }
      expect(next).toBe(41);
    }
  });

  test('gives up on a single block the node still refuses, and never splits on other errors', async () => {
    const crowded = [0, 1, 2, 3].map((i) => transferLog(5, i, TOKEN_A, BOB, i));
    const node = fakeNode(crowded, 10, { maxResults: 3 });
    await expect(history(node).events.scan(0, 10, { event: followed(TRANSFER) })).rejects.toThrow(
      /more than 3 results/,
    );
    expect(node.getLogs().at(-1)).toMatchObject({ fromBlock: '0x5', toBlock: '0x5' });

    const down = fakeNode(logs, 20);
    down.state.fail = rpcError(-32000, 'header not found');
    await expect(history(down).events.scan(0, 20, { event: followed(TRANSFER) })).rejects.toThrow(
      /header not found/,
    );
    expect(down.getLogs()).toHaveLength(1);
    // Rate limits are not a range's size: a smaller range would not pass either.
    const limited = fakeNode(logs, 20);
    limited.state.fail = rpcError(-32005, 'daily request count exceeded, request rate limited');
    await expect(history(limited).events.scan(0, 20, { event: followed(TRANSFER) })).rejects.toThrow();
    expect(limited.getLogs()).toHaveLength(1);
  });

  test('refuses a chunk whose logs are of a block no longer at their height', async () => {
    const node = fakeNode(logs, 20);
    node.state.branch = 1;
    const scanning = history(node).events.scan(0, 20, { event: followed(TRANSFER) });
    await expect(scanning).rejects.toBeInstanceOf(UpstreamUnavailableError);
    await expect(scanning).rejects.toThrow(/the chain changed while reading/);
  });

  test('says how it reads in the backfill view', () => {
    const node = fakeNode(logs, 20);
    const described = evmHistory({
      client: node.client,
      throttle: { perSecond: 7, take: async () => {} },
      chunk: 5,
    }).events.describe;
    expect(described).toContain('eth_getLogs');
    expect(described).toContain('1,000 a query');
    expect(described).toContain('7 requests/s');
  });
});

describe('the transfers of watched addresses (evmHistory().scan) on a node capping eth_getLogs', () => {
  test('halves the ranges it refuses, and finds each transfer once', async () => {
    const transfers: NodeLog[] = [];
    for (let block = 0; block <= 30; block += 2)
      transfers.push(transferLog(block, 0, TOKEN_A, BOB, block + 1));
    const node = fakeNode(transfers, 30, { maxRange: 4 });
    const scan = await evmHistory({ client: node.client, throttle: noThrottle, chunk: 31 }).scan(
      0,
      30,
      watching([BOB]),
    );
    expect(node.refused.length).toBeGreaterThan(0);
    expect(scan.watched).toEqual([BOB]);
    expect(scan.blocks.map((b) => b.height)).toEqual(transfers.map((t) => t.block));
    expect(scan.blocks.map((b) => b.activity.transfers.map((t) => t.value))).toEqual(
      transfers.map((t) => [BigInt(t.block + 1)]),
    );
  });
});
