/**
 * Contract event subscriptions (`CONTRACT_LOG_EVENT`) in the end-to-end tests: the EventZoo test
 * contract (test/fixtures/contracts/EventZoo.sol), the events it emits with the values a test
 * chooses, and the topics, data and decoded arguments each must carry, computed here from those
 * values with viem's encoder and keccak256 (never with the service's decoder).
 */
import { Webhook } from 'standardwebhooks';
import {
  type AbiEvent,
  concat,
  encodeAbiParameters,
  encodeFunctionData,
  getAddress,
  type Hex,
  keccak256,
  type Log,
  numberToHex,
  padHex,
  parseAbiParameters,
  stringToHex,
} from 'viem';
import { expect } from 'vitest';
import { type Artifact, artifact } from './anvil.js';
import type { Body, Created, Devnet } from './devnet.js';
import { waitFor } from './process.js';
import type { Receiver } from './receiver.js';

/** The compiled EventZoo (artifacts.json holds it beside the other test contracts). */
export function eventZoo(): Artifact {
  return artifact('EventZoo');
}

/** The JSON ABI fragment of one of EventZoo's events, as a compiler's ABI array holds it. */
export function zooFragment(name: string, inputCount?: number): AbiEvent {
  const found = eventZoo().abi.filter(
    (item): item is AbiEvent =>
      item.type === 'event' &&
      item.name === name &&
      (inputCount === undefined || item.inputs.length === inputCount),
  );
  if (found.length !== 1) throw new Error(`EventZoo has ${found.length} events ${name}/${inputCount}`);
  return found[0]!;
}

/** A gas limit for every EventZoo call, so that nothing is estimated against a mempool. */
export const ZOO_GAS = 1_000_000n;

export async function deployZoo(d: Devnet): Promise<Hex> {
  const { abi, bytecode } = eventZoo();
  const wallet = d.wallets[0]!;
  const hash = await wallet.deployContract({ abi, bytecode, account: wallet.account!, chain: null });
  const receipt = await d.chain.waitForTransactionReceipt({ hash });
  if (receipt.status !== 'success' || !receipt.contractAddress) throw new Error('deploying EventZoo failed');
  return getAddress(receipt.contractAddress);
}

/** Calls an EventZoo function from dev account `from`; returns at once, without waiting for a block. */
export function submitZoo(
  d: Devnet,
  from: number,
  zoo: Hex,
  fn: string,
  args: readonly unknown[],
): Promise<Hex> {
  const wallet = d.wallets[from]!;
  return wallet.writeContract({
    address: zoo,
    abi: eventZoo().abi,
    functionName: fn,
    args,
    account: wallet.account!,
    chain: null,
    gas: ZOO_GAS,
  });
}

/** Calls an EventZoo function and waits until it is mined (successfully). */
export async function callZoo(
  d: Devnet,
  from: number,
  zoo: Hex,
  fn: string,
  args: readonly unknown[],
): Promise<{ hash: Hex; block: bigint }> {
  const hash = await submitZoo(d, from, zoo, fn, args);
  const receipt = await d.chain.waitForTransactionReceipt({ hash });
  expect(receipt.status, `${fn} mined`).toBe('success');
  return { hash, block: receipt.blockNumber };
}

/** The input data of an EventZoo call (for transactions anvil_reorg puts on the new branch). */
export const zooCallData = (fn: string, args: readonly unknown[]): Hex =>
  encodeFunctionData({ abi: eventZoo().abi, functionName: fn, args });

/**
 * Sends the calls one after the other (each awaited until the node accepted it) with automatic
 * mining off, then mines them all into one block; returns their hashes in order and the block.
 */
export async function inOneBlock(
  d: Devnet,
  calls: (() => Promise<Hex>)[],
): Promise<{ hashes: Hex[]; block: bigint }> {
  await d.setAutomine(false);
  const hashes: Hex[] = [];
  try {
    for (const call of calls) hashes.push(await call());
    await d.mine();
  } finally {
    await d.setAutomine(true);
  }
  const receipts = await Promise.all(hashes.map((hash) => d.chain.waitForTransactionReceipt({ hash })));
  const blocks = new Set(receipts.map((r) => r.blockNumber));
  expect(blocks.size, 'all calls in one block').toBe(1);
  for (const r of receipts) expect(r.status).toBe('success');
  return { hashes, block: receipts[0]!.blockNumber };
}

/** POST /api/v1/subscription with type CONTRACT_LOG_EVENT on DEVNET; expects 201. */
export async function subscribeEvent(
  d: Devnet,
  attr: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): Promise<Created> {
  const res = await d.t.request('POST', '/api/v1/subscription', {
    body: { type: 'CONTRACT_LOG_EVENT', attr: { chain: 'DEVNET', url: d.receiver.url, ...attr }, ...extra },
  });
  expect(res.status, res.text).toBe(201);
  const created = res.body as Created;
  expect(created).toEqual({
    id: expect.any(String),
    callbackToken: expect.any(String),
    secret: expect.stringMatching(/^whsec_/),
  });
  return created;
}

/** A webhook as the receiver got it: parsed body, its event type header, its raw text. */
export interface Delivery {
  body: Body;
  eventType: string;
  text: string;
}

/**
 * Every webhook the receiver got for `sub` so far, oldest first, each checked: the callback token
 * as bearer, the Standard Webhooks signature under the subscription's secret, `id` = `webhook-id`.
 */
export function deliveries(receiver: Receiver, sub: Created): Delivery[] {
  const out: Delivery[] = [];
  for (const r of receiver.requests) {
    const body = JSON.parse(r.body) as Body;
    if (body.subscriptionId !== sub.id) continue;
    expect(r.headers.authorization).toBe(`Bearer ${sub.callbackToken}`);
    expect(r.headers['content-type']).toMatch(/^application\/json/);
    new Webhook(sub.secret).verify(r.body, {
      'webhook-id': r.headers['webhook-id'] as string,
      'webhook-timestamp': r.headers['webhook-timestamp'] as string,
      'webhook-signature': r.headers['webhook-signature'] as string,
    });
    expect(body.id).toBe(r.headers['webhook-id']);
    out.push({ body, eventType: String(r.headers['ledgerhook-event-type']), text: r.body });
  }
  return out;
}

/** Waits until at least `count` webhooks for `sub` (of those `which` keeps) arrived; all of them. */
export function deliveredAtLeast(
  receiver: Receiver,
  sub: Created,
  count: number,
  which: (body: Body) => boolean = () => true,
  what = `${count} webhooks for subscription ${sub.id}`,
): Promise<Delivery[]> {
  return waitFor(() => {
    const got = deliveries(receiver, sub).filter((x) => which(x.body));
    return got.length >= count ? got : undefined;
  }, what);
}

/** What one of EventZoo's events is: how to emit it, and what its log and body must hold. */
export interface EventCase {
  /** What the case shows, for messages. */
  label: string;
  /** The EventZoo function that emits it, and its arguments. */
  fn: string;
  args: readonly unknown[];
  /** The event as a human-readable ABI signature, as a subscription sends it. */
  event: string;
  /** The JSON ABI fragment of the same event. */
  fragment: AbiEvent;
  /** Body `event` and `signature` (canonical). */
  name: string;
  signature: string;
  /** The log's topics and data, computed from `args`. */
  topics: Hex[];
  data: Hex;
  /** Body `args`, computed from `args`. */
  decoded: Record<string, unknown>;
}

/** keccak256 of an event's canonical signature: its topic0. */
export const topic0 = (signature: string): Hex => keccak256(stringToHex(signature));

/** One 32-byte word of the ABI encoding of a static value (an indexed argument's topic). */
export const word = (type: string, value: unknown): Hex =>
  encodeAbiParameters([{ type }], [value] as readonly unknown[] as never);

/** The ABI encoding of the non-indexed arguments (a log's data). */
const encode = (params: string, values: readonly unknown[]): Hex =>
  encodeAbiParameters(parseAbiParameters(params), values as never);

/** Right-pads bytes to a multiple of 32 (as an indexed struct's string member is encoded). */
const padTo32 = (hex: Hex): Hex => {
  const bytes = (hex.length - 2) / 2;
  const size = Math.ceil(bytes / 32) * 32;
  return size === 0 ? '0x' : padHex(hex, { size, dir: 'right' });
};

/** The largest value of uintN. */
export const maxUint = (bits: number): bigint => (1n << BigInt(bits)) - 1n;
export const MAX_UINT256 = maxUint(256);

/** Fixed test values: four bytes32 and a few addresses that are nobody's account (checksummed). */
export const H1 = keccak256(stringToHex('one'));
export const H2 = keccak256(stringToHex('two'));
export const H3 = keccak256(stringToHex('three'));
export const H4 = keccak256(stringToHex('four'));
export const OTHER_1 = getAddress('0x00000000000000000000000000000000000000a1');
export const OTHER_2 = getAddress('0xfb6916095ca1df60bb79ce92ce3ea74c37c5d359');
export const UNICODE = 'héllo wörld — ✓ 日本語 🚀';

/** The Unsigned events: four of eight widths each, every width 8…256 at its largest value. */
function uintCases(): EventCase[] {
  const cases: EventCase[] = [];
  for (const [i, suffix] of ['A', 'B', 'C', 'D'].entries()) {
    const widths = Array.from({ length: 8 }, (_, j) => 8 * (i * 8 + j + 1));
    const values = widths.map(maxUint);
    const name = `Uints${suffix}`;
    const params = widths.map((w) => `uint${w} u${w}`).join(', ');
    const signature = `${name}(${widths.map((w) => `uint${w}`).join(',')})`;
    cases.push({
      label: `uint${widths[0]}…uint${widths[7]} at their largest`,
      fn: `emit${name}`,
      args: values,
      event: `event ${name}(${params})`,
      fragment: zooFragment(name),
      name,
      signature,
      topics: [topic0(signature)],
      data: encode(params, values),
      decoded: Object.fromEntries(widths.map((w, j) => [`u${w}`, values[j]!.toString()])),
    });
  }
  return cases;
}

/** One case of every kind of argument EventZoo's events have; `a` are dev accounts. */
export function zooCases(a: Hex[]): EventCase[] {
  const [alice, bob, carol] = [a[1]!, a[2]!, a[3]!];
  const ints = [
    -128n,
    32_767n,
    -1n,
    -(2n ** 63n),
    170_141_183_460_469_231_731_687_303_715_884_105_727n,
    -(2n ** 255n),
  ];
  const intParams = 'int8 i8, int16 i16, int32 i32, int64 i64, int128 i128, int256 i256';
  const basicParams = 'address who, bool flag, bytes32 hash, bytes blob, string text';
  const b16 = '0x00112233445566778899aabbccddeeff' as Hex;
  const b31 = padHex('0x01', { size: 31, dir: 'right' });
  const fixedNums = [1n, MAX_UINT256, 0n] as const;
  const words = ['', UNICODE, 'a'.repeat(70)];
  const pairs = [
    [H1, H2],
    [H3, H4],
  ] as const;
  const arrayParams = 'uint256[3] fixedNums, address[] addrs, string[] words, bytes32[2][] pairs';
  const outer = {
    owner: alice,
    inner: { id: maxUint(64), label: 'inner ✓' },
    values: [3n, MAX_UINT256],
    children: [
      { id: 1n, label: 'first child' },
      { id: 2n, label: '' },
    ],
    ok: true,
  };
  const outerType =
    '(address owner, (uint64 id, string label) inner, uint256[] values, (uint64 id, string label)[] children, bool ok)';
  const indexedText = 'indexed ünïcode ✓';
  const indexedBlob = '0x0102030405' as Hex;
  const nums = [1n, 2n, MAX_UINT256];
  const inner = { id: 5n, label: 'a label longer than thirty-two bytes, to take two words' };
  const pair = [true, false] as const;
  const key = keccak256(stringToHex('key'));
  const cases: EventCase[] = [
    ...uintCases(),
    {
      label: 'signed integers, negative ones and int256 at its smallest',
      fn: 'emitInts',
      args: ints,
      event: `event Ints(${intParams})`,
      fragment: zooFragment('Ints'),
      name: 'Ints',
      signature: 'Ints(int8,int16,int32,int64,int128,int256)',
      topics: [topic0('Ints(int8,int16,int32,int64,int128,int256)')],
      data: encode(intParams, ints),
      decoded: {
        i8: '-128',
        i16: '32767',
        i32: '-1',
        i64: '-9223372036854775808',
        i128: '170141183460469231731687303715884105727',
        i256: '-57896044618658097711785492504343953926634992332820282019728792003956564819968',
      },
    },
    {
      label: 'address (lower case in, checksummed out), bool, bytes32, bytes, a Unicode string',
      fn: 'emitBasics',
      args: [OTHER_2.toLowerCase(), true, H1, '0xdeadbeef00', UNICODE],
      event: `event Basics(${basicParams})`,
      fragment: zooFragment('Basics'),
      name: 'Basics',
      signature: 'Basics(address,bool,bytes32,bytes,string)',
      topics: [topic0('Basics(address,bool,bytes32,bytes,string)')],
      data: encode(basicParams, [OTHER_2, true, H1, '0xdeadbeef00', UNICODE]),
      decoded: { who: OTHER_2, flag: true, hash: H1, blob: '0xdeadbeef00', text: UNICODE },
    },
    {
      label: 'the zero address, false, a zero bytes32, empty bytes and an empty string',
      fn: 'emitBasics',
      args: [`0x${'0'.repeat(40)}`, false, `0x${'0'.repeat(64)}`, '0x', ''],
      event: `event Basics(${basicParams})`,
      fragment: zooFragment('Basics'),
      name: 'Basics',
      signature: 'Basics(address,bool,bytes32,bytes,string)',
      topics: [topic0('Basics(address,bool,bytes32,bytes,string)')],
      data: encode(basicParams, [`0x${'0'.repeat(40)}`, false, `0x${'0'.repeat(64)}`, '0x', '']),
      decoded: {
        who: '0x0000000000000000000000000000000000000000',
        flag: false,
        hash: `0x${'0'.repeat(64)}`,
        blob: '0x',
        text: '',
      },
    },
    {
      label: 'bytes1, bytes4, bytes16, bytes31',
      fn: 'emitFixedBytes',
      args: ['0xab', '0xdeadbeef', b16, b31],
      event: 'event FixedBytes(bytes1 b1, bytes4 b4, bytes16 b16, bytes31 b31)',
      fragment: zooFragment('FixedBytes'),
      name: 'FixedBytes',
      signature: 'FixedBytes(bytes1,bytes4,bytes16,bytes31)',
      topics: [topic0('FixedBytes(bytes1,bytes4,bytes16,bytes31)')],
      data: encode('bytes1 b1, bytes4 b4, bytes16 b16, bytes31 b31', ['0xab', '0xdeadbeef', b16, b31]),
      decoded: { b1: '0xab', b4: '0xdeadbeef', b16, b31 },
    },
    {
      label: 'a fixed array, a dynamic array, an array of strings, an array of fixed arrays',
      fn: 'emitArrays',
      args: [fixedNums, [bob.toLowerCase(), carol], words, pairs],
      event: `event Arrays(${arrayParams})`,
      fragment: zooFragment('Arrays'),
      name: 'Arrays',
      signature: 'Arrays(uint256[3],address[],string[],bytes32[2][])',
      topics: [topic0('Arrays(uint256[3],address[],string[],bytes32[2][])')],
      data: encode(arrayParams, [fixedNums, [bob, carol], words, pairs]),
      decoded: {
        fixedNums: ['1', MAX_UINT256.toString(), '0'],
        addrs: [bob, carol],
        words,
        pairs: [
          [H1, H2],
          [H3, H4],
        ],
      },
    },
    {
      label: 'nested tuples: a struct holding a struct, an array and an array of structs',
      fn: 'emitNested',
      args: [42n, outer],
      event: `event Nested(uint256 indexed tag, ${outerType} outer)`,
      fragment: zooFragment('Nested'),
      name: 'Nested',
      signature: 'Nested(uint256,(address,(uint64,string),uint256[],(uint64,string)[],bool))',
      topics: [
        topic0('Nested(uint256,(address,(uint64,string),uint256[],(uint64,string)[],bool))'),
        word('uint256', 42n),
      ],
      data: encode(`${outerType} outer`, [outer]),
      decoded: {
        tag: '42',
        outer: {
          owner: alice,
          inner: { id: maxUint(64).toString(), label: 'inner ✓' },
          values: ['3', MAX_UINT256.toString()],
          children: [
            { id: '1', label: 'first child' },
            { id: '2', label: '' },
          ],
          ok: true,
        },
      },
    },
    {
      label: 'indexed string and bytes: their hashes',
      fn: 'emitIndexedDynamic',
      args: [indexedText, indexedBlob, UNICODE],
      event: 'event IndexedDynamic(string indexed text, bytes indexed blob, string plain)',
      fragment: zooFragment('IndexedDynamic'),
      name: 'IndexedDynamic',
      signature: 'IndexedDynamic(string,bytes,string)',
      topics: [
        topic0('IndexedDynamic(string,bytes,string)'),
        keccak256(stringToHex(indexedText)),
        keccak256(indexedBlob),
      ],
      data: encode('string plain', [UNICODE]),
      decoded: { text: keccak256(stringToHex(indexedText)), blob: keccak256(indexedBlob), plain: UNICODE },
    },
    (() => {
      // An indexed array or struct is hashed over its elements' in-place encoding, each padded to
      // 32 bytes (a struct's string member too), without offsets or lengths.
      const numsHash = keccak256(concat(nums.map((n) => numberToHex(n, { size: 32 }))));
      const innerHash = keccak256(
        concat([numberToHex(inner.id, { size: 32 }), padTo32(stringToHex(inner.label))]),
      );
      const pairHash = keccak256(concat([word('bool', true), word('bool', false)]));
      const signature = 'IndexedComposite(uint256[],(uint64,string),bool[2])';
      return {
        label: 'an indexed array, struct and fixed array: their hashes',
        fn: 'emitIndexedComposite',
        args: [nums, inner, pair],
        event:
          'event IndexedComposite(uint256[] indexed nums, (uint64 id, string label) indexed inner, bool[2] indexed pair)',
        fragment: zooFragment('IndexedComposite'),
        name: 'IndexedComposite',
        signature,
        topics: [topic0(signature), numsHash, innerHash, pairHash],
        data: '0x',
        decoded: { nums: numsHash, inner: innerHash, pair: pairHash },
      } satisfies EventCase;
    })(),
    pingCase(alice, MAX_UINT256, UNICODE),
    flaggedCase(true, key, -5n),
    {
      label: 'Overloaded(uint256)',
      fn: 'emitOverloadedValue',
      args: [7n],
      event: 'event Overloaded(uint256 value)',
      fragment: zooFragment('Overloaded', 1),
      name: 'Overloaded',
      signature: 'Overloaded(uint256)',
      topics: [topic0('Overloaded(uint256)')],
      data: word('uint256', 7n),
      decoded: { value: '7' },
    },
    overloadedTextCase(bob, 'the other Overloaded'),
    {
      label: 'parameters without names: arg0, arg1, arg3 by position',
      fn: 'emitUnnamed',
      args: [carol, 5n, 'named', true],
      event: 'event Unnamed(address indexed, uint256, string label, bool)',
      fragment: zooFragment('Unnamed'),
      name: 'Unnamed',
      signature: 'Unnamed(address,uint256,string,bool)',
      topics: [topic0('Unnamed(address,uint256,string,bool)'), word('address', carol)],
      data: encode('uint256, string, bool', [5n, 'named', true]),
      decoded: { arg0: carol, arg1: '5', label: 'named', arg3: true },
    },
  ];
  return cases;
}

export const PING = 'event Ping(address indexed from, uint256 indexed n, string note)';
export const PING_SIGNATURE = 'Ping(address,uint256,string)';

export function pingCase(from: Hex, n: bigint, note: string): EventCase {
  return {
    label: `Ping(${from}, ${n})`,
    fn: 'emitPing',
    args: [from, n, note],
    event: PING,
    fragment: zooFragment('Ping'),
    name: 'Ping',
    signature: PING_SIGNATURE,
    topics: [topic0(PING_SIGNATURE), word('address', from), word('uint256', n)],
    data: encode('string note', [note]),
    decoded: { from: getAddress(from), n: n.toString(), note },
  };
}

export const FLAGGED = 'event Flagged(bool indexed flag, bytes32 indexed key, int256 indexed delta)';

export function flaggedCase(flag: boolean, key: Hex, delta: bigint): EventCase {
  const signature = 'Flagged(bool,bytes32,int256)';
  return {
    label: `Flagged(${flag}, ${key}, ${delta})`,
    fn: 'emitFlagged',
    args: [flag, key, delta],
    event: FLAGGED,
    fragment: zooFragment('Flagged'),
    name: 'Flagged',
    signature,
    topics: [topic0(signature), word('bool', flag), key, word('int256', delta)],
    data: '0x',
    decoded: { flag, key, delta: delta.toString() },
  };
}

export const INDEXED_DYNAMIC = 'event IndexedDynamic(string indexed text, bytes indexed blob, string plain)';

export function indexedDynamicCase(text: string, blob: Hex, plain: string): EventCase {
  const signature = 'IndexedDynamic(string,bytes,string)';
  return {
    label: `IndexedDynamic(${text})`,
    fn: 'emitIndexedDynamic',
    args: [text, blob, plain],
    event: INDEXED_DYNAMIC,
    fragment: zooFragment('IndexedDynamic'),
    name: 'IndexedDynamic',
    signature,
    topics: [topic0(signature), keccak256(stringToHex(text)), keccak256(blob)],
    data: encode('string plain', [plain]),
    decoded: { text: keccak256(stringToHex(text)), blob: keccak256(blob), plain },
  };
}

export function overloadedTextCase(who: Hex, text: string): EventCase {
  return {
    label: 'Overloaded(address,string)',
    fn: 'emitOverloadedText',
    args: [who, text],
    event: 'event Overloaded(address indexed who, string text)',
    fragment: zooFragment('Overloaded', 2),
    name: 'Overloaded',
    signature: 'Overloaded(address,string)',
    topics: [topic0('Overloaded(address,string)'), word('address', who)],
    data: encode('string text', [text]),
    decoded: { who: getAddress(who), text },
  };
}

/** Anonymous: no topic0, only the indexed arguments. */
export function anonCase(who: Hex, n: bigint, note: string): EventCase {
  return {
    label: `Anon(${who}, ${n})`,
    fn: 'emitAnon',
    args: [who, n, note],
    event: 'event Anon(address indexed who, uint256 indexed n, string note) anonymous',
    fragment: zooFragment('Anon'),
    name: 'Anon',
    signature: 'Anon(address,uint256,string)',
    topics: [word('address', who), word('uint256', n)],
    data: encode('string note', [note]),
    decoded: { who: getAddress(who), n: n.toString(), note },
  };
}

/** The log a transaction emitted at `logIndex`, as the node reports it. */
export async function logOf(d: Devnet, txHash: Hex, logIndex: number): Promise<Log> {
  const receipt = await d.chain.getTransactionReceipt({ hash: txHash });
  const log = receipt.logs.find((l) => l.logIndex === logIndex);
  if (!log) throw new Error(`no log ${logIndex} in ${txHash}`);
  return log;
}

/** The logs of a mined transaction. */
export async function logsOf(d: Devnet, txHash: Hex): Promise<Log[]> {
  return (await d.chain.getTransactionReceipt({ hash: txHash })).logs;
}

/**
 * The body a contract event notification must have, keys in the documented order: from the log
 * (where it is: block, transaction, index) and from the case (what it holds); `decoded` false for
 * a topic0-only subscription (no event, signature or args).
 */
export function expectedBody(
  log: Log,
  c: Pick<EventCase, 'name' | 'signature' | 'topics' | 'data' | 'decoded'>,
  sub: Created,
  id: unknown,
  options: { decoded?: boolean; confirmations?: number } = {},
): Body {
  const decoded = options.decoded ?? true;
  return {
    chain: 'DEVNET',
    contractAddress: getAddress(log.address),
    txId: log.transactionHash,
    blockNumber: Number(log.blockNumber),
    blockHash: log.blockHash,
    logIndex: log.logIndex,
    ...(decoded ? { event: c.name, signature: c.signature } : {}),
    topics: c.topics.map((t) => t.toLowerCase()),
    data: c.data.toLowerCase(),
    ...(decoded ? { args: c.decoded } : {}),
    id,
    subscriptionId: sub.id,
    confirmations: options.confirmations ?? 1,
  };
}

/** Checks a delivery against its expected body: every field, the key order, the event type. */
export function expectDelivery(got: Delivery, want: Body, eventType = 'contract.log'): void {
  expect(got.body, got.text).toEqual(want);
  expect(Object.keys(got.body)).toEqual(Object.keys(want));
  expect(got.eventType).toBe(eventType);
}
