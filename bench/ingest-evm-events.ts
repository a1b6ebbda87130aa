// The contract events pass of bench:ingest (issue 30, bench/README.md): what 10,000 contract
// event subscriptions (CONTRACT_LOG_EVENT) add to a block's match. The EVM matcher (evmMatcher, as the
// follower wires it) runs over synthetic EVM blocks shaped like the EVM pass's (by default 100 blocks
// of 200 transfers, half native, half token) but with the logs of a real chain: every token transfer
// is a log of one of 2,000 token contracts, and swaps (Uniswap V2 and V3 pools), WETH deposits,
// approvals, ERC-721 transfers and a long tail of other events sit beside them. The index holds
// 1,000,000 watched addresses as in the EVM pass. Each block is matched by the matcher with the
// 10,000 subscriptions applied, and by the same matcher on a view of the same index that follows no
// event (the path of a network where nobody follows one: today's match, the reference), one after
// the other, block by block, so that both see the same machine.
//
// The blocks are built in this process, not on anvil: the match is CPU work on a block already read,
// anvil's chain holds one token contract and one event, and this pass needs the topic0 buckets, the
// contracts and the hits of a real chain. They go through the follower's own extraction (rpcTransfers,
// rpcPayments, rpcLogs) from receipts shaped as nodes answer them.
import { type Hex, toEventSelector } from 'viem';
import {
  type RpcBlock,
  type RpcLog,
  type RpcReceipt,
  type RpcTransaction,
  rpcLogs,
  rpcPayments,
  rpcTransfers,
} from '../src/chains/evm/activity.js';
import { decodeFollowedLog } from '../src/chains/evm/event-decode.js';
import { passesFilter } from '../src/chains/evm/event-filter.js';
import type { EvmBlockActivity, TokenInfo } from '../src/chains/evm/types.js';
import { loadNetworks, type Network, type NetworkCatalog } from '../src/chains/networks.js';
import type { FieldError } from '../src/errors.js';
import { validateEventCreate } from '../src/subscriptions/event-validation.js';
import type { ContractEventSpec, SubscriptionChange } from '../src/subscriptions/events.js';
import type { BlockMatch, BlockMatcher } from '../src/watch/follower/commit.js';
import { type AddressIndex, createAddressIndex } from '../src/watch/matching/address-index.js';
import { CONTRACT_LOG } from '../src/watch/notifications/contract-events.js';
import { evmMatcher } from '../src/watch/notifications/evm.js';
import { buildIndex, NETWORK } from './evm-index.js';
import { fixed, formatTable, gc, grouped, profiled, quantile } from './lib.js';

export interface EvmEventsPassOptions {
  blocks: number;
  transfersPerBlock: number;
  watched: number;
  /** Share of transfers to a watched address (address notifications), as in the EVM pass. */
  hitRate: number;
  /** Event subscriptions applied (10,000 by default). */
  eventSubscriptions: number;
  /** Share of the logs of followed events made to match a subscription, one case per value. */
  eventHitRates: number[];
  /** Block matches timed per matcher and case, at least (rounds over the blocks). */
  matchSamples: number;
  profileDir: string | undefined;
}

/** Distinct watched addresses the address hits go to (one subscription each), as in the EVM pass. */
const HIT_POOL = 100;
/** Unmeasured rounds over the blocks first: the JIT, and the token cache's first answers. */
const WARM_UP_ROUNDS = 3;
/** Rounds over the blocks for at least `samples` block matches. */
const roundsFor = (blocks: readonly unknown[], samples: number) =>
  Math.max(1, Math.ceil(samples / blocks.length));
/** The seed of the subscriptions' plan (the same plan measured for memory and applied). */
const PLAN_SEED = 12;
/** Blocks whose event matches are checked against every subscription tested one by one. */
const CHECKED_BLOCKS = 3;

// ---------------------------------------------------------------------------------------------
// Events

const EVENTS = {
  transfer: 'event Transfer(address indexed from, address indexed to, uint256 value)',
  approval: 'event Approval(address indexed owner, address indexed spender, uint256 value)',
} as const;

/** The topic0 of the events the blocks emit: ERC-20, Uniswap V2 and V3 pools, WETH. */
const TOPIC = {
  transfer: toEventSelector('Transfer(address,address,uint256)'),
  approval: toEventSelector('Approval(address,address,uint256)'),
  swapV2: toEventSelector('Swap(address,uint256,uint256,uint256,uint256,address)'),
  sync: toEventSelector('Sync(uint112,uint112)'),
  swapV3: toEventSelector('Swap(address,address,int256,int256,uint160,uint128,int24)'),
  deposit: toEventSelector('Deposit(address,uint256)'),
};

/** Anonymous events, one per topic count: such a log is told apart only by its contract. */
const ANONYMOUS = [
  'event Marked(address indexed who, uint256 amount) anonymous',
  'event Noted(uint256 indexed a, uint256 indexed b) anonymous',
  'event Moved(address indexed from, address indexed to, uint256 indexed id, uint256 amount) anonymous',
];

/** Events no block of the bench emits (their topic0 is never seen): a lookup each, and nothing more. */
const NEVER_EMITTED: { event: string; filter?: (r: Random) => Record<string, unknown> }[] = [
  {
    event: 'event ProposalCreated(uint256 indexed proposalId, address indexed proposer, string description)',
  },
  {
    event:
      'event OrderFilled(bytes32 indexed orderHash, address indexed maker, address indexed taker, uint256 amount)',
    filter: (r) => ({ maker: r.address() }),
  },
  { event: 'event RoleGranted(bytes32 indexed role, address indexed account, address indexed sender)' },
  {
    event: 'event OwnershipTransferred(address indexed previousOwner, address indexed newOwner)',
    filter: (r) => ({ newOwner: [r.address(), r.address()] }),
  },
  { event: 'event Deposit(address indexed sender, uint256 indexed id, uint256 amount)' },
  {
    event: 'event MessageSent(bytes32 indexed id, string indexed channel, bytes payload)',
    filter: (r) => ({ channel: `channel-${r.int(100)}` }),
  },
  { event: 'event Upgraded(address indexed implementation)' },
  { event: 'event Paused(address account)' },
];

// ---------------------------------------------------------------------------------------------
// Seeded randomness: both cases' blocks have the same shape, only the hits differ.

class Random {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  /** mulberry32 */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(list: readonly T[]): T {
    return list[this.int(list.length)]!;
  }
  hex(bytes: number): Hex {
    let s = '0x';
    for (let i = 0; i < bytes; i++) s += this.int(256).toString(16).padStart(2, '0');
    return s as Hex;
  }
  address(): Hex {
    return this.hex(20);
  }
  /** Index into a list ranked by popularity: the first few take most draws, as USDT and USDC do. */
  popular(n: number): number {
    return Math.floor(n * this.next() ** 3);
  }
  /** `count` distinct items of `list` drawn by `draw`. */
  distinct<T>(count: number, draw: () => T): T[] {
    const out = new Set<T>();
    for (let tries = 0; out.size < count && tries < count * 20; tries++) out.add(draw());
    return [...out];
  }
}

const addresses = (r: Random, n: number): Hex[] => Array.from({ length: n }, () => r.address());

/** The contracts and accounts of the synthetic chain. */
interface Universe {
  senders: Hex[];
  /** ERC-20 contracts by popularity: the first carry most transfers. tokens[1] is WETH. */
  tokens: Hex[];
  /** Tokens followed unfiltered by some subscriptions, in blocks only when a hit is drawn. */
  followedTokens: Hex[];
  pairsV2: Hex[];
  poolsV3: Hex[];
  /** Pairs followed by bare-topic0 subscriptions, in blocks only when a hit is drawn. */
  followedPairs: Hex[];
  nfts: Hex[];
  routers: Hex[];
  otherContracts: Hex[];
  otherTopics: Hex[];
  /** Contracts of the anonymous-event subscriptions, each with its event's topic count. */
  anonymous: { contract: Hex; topics: number }[];
  /** Addresses watched in the address index (HIT_POOL), the address hits' recipients. */
  hitAddresses: Hex[];
}

function universe(r: Random): Universe {
  return {
    senders: addresses(r, 2_000),
    tokens: addresses(r, 2_000),
    followedTokens: addresses(r, 400),
    pairsV2: addresses(r, 300),
    poolsV3: addresses(r, 100),
    followedPairs: addresses(r, 100),
    nfts: addresses(r, 100),
    routers: addresses(r, 20),
    otherContracts: addresses(r, 1_000),
    otherTopics: Array.from({ length: 200 }, () => r.hex(32)),
    anonymous: [],
    hitAddresses: addresses(r, HIT_POOL),
  };
}

// ---------------------------------------------------------------------------------------------
// The 10,000 subscriptions

/** Filter values the blocks draw their hits from: any-contract subscriptions, so a hit always matches. */
interface HitValues {
  transferTo: Hex[];
  transferFrom: Hex[];
  approvalOwner: Hex[];
}

/** A subscription as a create request gives it: its event, filter and contracts (none: any). */
interface Planned {
  event: string;
  filter?: Record<string, unknown>;
  contracts?: Hex[];
}

type Category = { kind: string; share: number; make: (r: Random, u: Universe, hits: HitValues) => Planned };

const some = (r: Random, min: number, max: number, draw: () => Hex): Hex[] =>
  r.distinct(min + r.int(max - min + 1), draw);
const remember = (list: Hex[], values: Hex[]): Hex[] => {
  list.push(...values);
  return values;
};

/** The mix, per 10,000: what an instance serving many users' event subscriptions might hold. */
const CATEGORIES: Category[] = [
  {
    kind: 'Transfer, to = one address, any contract',
    share: 2_500,
    make: (r, _u, hits) => ({
      event: EVENTS.transfer,
      filter: { to: remember(hits.transferTo, [r.address()])[0] },
    }),
  },
  {
    kind: 'Transfer, from = one address, any contract',
    share: 1_000,
    make: (r, _u, hits) => ({
      event: EVENTS.transfer,
      filter: { from: remember(hits.transferFrom, [r.address()])[0] },
    }),
  },
  {
    kind: 'Transfer, to = 2-20 addresses, any contract',
    share: 500,
    make: (r, _u, hits) => ({
      event: EVENTS.transfer,
      filter: {
        to: remember(
          hits.transferTo,
          some(r, 2, 20, () => r.address()),
        ),
      },
    }),
  },
  {
    kind: 'Transfer, to = 1-10 addresses, on one token (by popularity)',
    share: 1_000,
    make: (r, u) => ({
      event: EVENTS.transfer,
      filter: { to: some(r, 1, 10, () => r.address()) },
      contracts: [u.tokens[r.popular(u.tokens.length)]!],
    }),
  },
  {
    kind: 'Transfer, from = one address, on one token (by popularity)',
    share: 500,
    make: (r, u) => ({
      event: EVENTS.transfer,
      filter: { from: r.address() },
      contracts: [u.tokens[r.popular(u.tokens.length)]!],
    }),
  },
  {
    kind: 'Transfer, to = one address, on a list of 2-50 tokens (by popularity)',
    share: 500,
    make: (r, u) => ({
      event: EVENTS.transfer,
      filter: { to: r.address() },
      contracts: some(r, 2, 50, () => u.tokens[r.popular(u.tokens.length)]!),
    }),
  },
  {
    kind: 'Transfer unfiltered, on one followed token',
    share: 1_500,
    make: (r, u) => ({ event: EVENTS.transfer, contracts: [r.pick(u.followedTokens)] }),
  },
  {
    kind: 'Transfer unfiltered, on a list of 2-10 followed tokens',
    share: 500,
    make: (r, u) => ({
      event: EVENTS.transfer,
      contracts: some(r, 2, 10, () => r.pick(u.followedTokens)),
    }),
  },
  {
    kind: 'Approval, owner = one address, any contract',
    share: 600,
    make: (r, _u, hits) => ({
      event: EVENTS.approval,
      filter: { owner: remember(hits.approvalOwner, [r.address()])[0] },
    }),
  },
  {
    kind: 'Approval, spender = 1-5 addresses, on one token (by popularity)',
    share: 400,
    make: (r, u) => ({
      event: EVENTS.approval,
      filter: { spender: some(r, 1, 5, () => r.address()) },
      contracts: [u.tokens[r.popular(u.tokens.length)]!],
    }),
  },
  {
    kind: 'bare topic0 (Tatum): Swap (V2) on one followed pair',
    share: 200,
    make: (r, u) => ({ event: TOPIC.swapV2, contracts: [r.pick(u.followedPairs)] }),
  },
  {
    kind: 'bare topic0 (Tatum): Sync on one followed pair',
    share: 100,
    make: (r, u) => ({ event: TOPIC.sync, contracts: [r.pick(u.followedPairs)] }),
  },
  {
    kind: 'bare topic0 (Tatum) never emitted, any contract',
    share: 100,
    make: (r) => ({ event: r.hex(32) }),
  },
  {
    kind: 'anonymous (1, 2 or 3 topics), on one contract of its own',
    share: 200,
    make: (r, u) => {
      const at = r.int(ANONYMOUS.length);
      const contract = r.address();
      u.anonymous.push({ contract, topics: at + 1 });
      return { event: ANONYMOUS[at]!, contracts: [contract] };
    },
  },
  {
    kind: 'events never emitted (governance, orders, roles, ...), any contract or one, some filtered',
    share: 400,
    make: (r, u) => {
      const never = r.pick(NEVER_EMITTED);
      return {
        event: never.event,
        ...(never.filter ? { filter: never.filter(r) } : {}),
        ...(r.next() < 0.5 ? { contracts: [r.pick(u.otherContracts)] } : {}),
      };
    },
  },
];

interface PlannedSubscriptions {
  changes: SubscriptionChange[];
  /** Per category: its description and count. */
  mix: { kind: string; count: number }[];
  hits: HitValues;
  /** For the check: each subscription's event and contracts. */
  specs: { id: string; spec: ContractEventSpec; contracts: Set<string> }[];
  /** Contracts named in all (lists counted in full). */
  contracts: number;
  /** Time to validate them as the API does (viem parses each event and compiles its filter). */
  validateMs: number;
}

/** The subscriptions as the API makes them: validated (validateEventCreate), then the change it applies. */
function planSubscriptions(
  r: Random,
  u: Universe,
  networks: NetworkCatalog,
  total: number,
): PlannedSubscriptions {
  const hits: HitValues = { transferTo: [], transferFrom: [], approvalOwner: [] };
  const changes: SubscriptionChange[] = [];
  const specs: PlannedSubscriptions['specs'] = [];
  const mix: PlannedSubscriptions['mix'] = [];
  let contracts = 0;
  const t0 = performance.now();
  let n = 0;
  for (const category of CATEGORIES) {
    const count = Math.round((total * category.share) / 10_000);
    mix.push({ kind: category.kind, count });
    for (let i = 0; i < count; i++) {
      const planned = category.make(r, u, hits);
      const errors: FieldError[] = [];
      const valid = validateEventCreate(
        networks,
        {
          type: 'CONTRACT_LOG_EVENT',
          attr: {
            chain: NETWORK,
            url: 'http://127.0.0.1:9/hook',
            event: planned.event,
            ...(planned.filter ? { filter: planned.filter } : {}),
            ...(planned.contracts?.length === 1 ? { contractAddress: planned.contracts[0] } : {}),
            ...((planned.contracts?.length ?? 0) > 1 ? { addresses: planned.contracts } : {}),
          },
        },
        errors,
        { count: 0 },
      );
      if (!valid) throw new Error(`${category.kind}: ${JSON.stringify(errors)}`);
      const id = `0190a8e4-5b1c-7000-9000-${(n++).toString(16).padStart(12, '0')}`;
      const subscription = {
        id,
        accountId: '0190a8e4-5b1c-7000-8000-000000000000',
        network: NETWORK,
        confirmations: 1,
        mempool: false,
        fees: false,
        contractEvent: valid.spec,
      };
      // As creation.ts reports it: one contract as the subscription's address, a list as addresses.
      changes.push(
        valid.single === undefined
          ? { type: 'upsert', subscription, addresses: valid.contracts }
          : { type: 'upsert', subscription: { ...subscription, address: valid.single } },
      );
      contracts += valid.contracts.length;
      specs.push({ id, spec: valid.spec, contracts: new Set(valid.contracts.map((c) => c.toLowerCase())) });
    }
  }
  return { changes, mix, hits, specs, contracts, validateMs: performance.now() - t0 };
}

// ---------------------------------------------------------------------------------------------
// The blocks

const word = (value: bigint): string => (value & ((1n << 256n) - 1n)).toString(16).padStart(64, '0');
const data = (...values: bigint[]): Hex => `0x${values.map(word).join('')}`;
const addressTopic = (address: Hex): Hex => `0x${address.slice(2).padStart(64, '0')}`;
const quantity = (n: number | bigint) => `0x${n.toString(16)}` as Hex;

/** One block being built: its transactions and receipts, as a node answers them. */
class BlockBuilder {
  readonly transactions: RpcTransaction[] = [];
  readonly receipts: RpcReceipt[] = [];
  private logIndex = 0;
  constructor(
    private readonly r: Random,
    readonly hash: Hex,
  ) {}
  tx(from: Hex, to: Hex, value: bigint, logs: Omit<RpcLog, 'logIndex'>[]): void {
    const hash = this.r.hex(32);
    const index = this.transactions.length;
    this.transactions.push({ hash, from, to, value: quantity(value), gasPrice: quantity(20_000_000_000n) });
    this.receipts.push({
      transactionHash: hash,
      transactionIndex: quantity(index),
      blockHash: this.hash,
      status: '0x1',
      contractAddress: null,
      gasUsed: quantity(21_000 + 30_000 * logs.length),
      effectiveGasPrice: quantity(20_000_000_000n),
      logs: logs.map((log) => ({ ...log, logIndex: quantity(this.logIndex++) })),
    });
  }
}

/** What a block's logs are drawn from, and how often a log is made to match a subscription. */
interface Draws {
  r: Random;
  u: Universe;
  hits: HitValues;
  eventHitRate: number;
  /** Address hits: every 1/hitRate-th recipient is a watched address, as in the EVM pass. */
  addressHit: () => Hex | undefined;
}

function transferLog(d: Draws, token: Hex, from: Hex, to: Hex, value: bigint): Omit<RpcLog, 'logIndex'> {
  const { r, u, hits } = d;
  if (r.next() < d.eventHitRate) {
    // A followed transfer: to or from an address an any-contract filter allows, or of a followed token.
    const route = r.next();
    if (route < 0.5) to = r.pick(hits.transferTo);
    else if (route < 0.8) from = r.pick(hits.transferFrom);
    else token = r.pick(u.followedTokens);
  }
  return {
    address: token,
    topics: [TOPIC.transfer, addressTopic(from), addressTopic(to)],
    data: data(value),
  };
}

function popularToken(d: Draws): Hex {
  return d.u.tokens[d.r.popular(d.u.tokens.length)]!;
}

function pairOf(d: Draws, pairs: Hex[]): Hex {
  return d.r.next() < d.eventHitRate ? d.r.pick(d.u.followedPairs) : d.r.pick(pairs);
}

/** A token-moving transaction: a plain transfer, a V2 or V3 swap, an NFT, or a WETH deposit; its transfer count. */
function tokenTransaction(b: BlockBuilder, d: Draws, room: number): number {
  const { r, u } = d;
  const user = r.pick(u.senders);
  const amount = BigInt(1 + r.int(1e9)) * 10n ** 9n;
  const kind = r.next();
  if (kind < 0.55 || room < 2) {
    const to = d.addressHit() ?? r.address();
    const token = popularToken(d);
    b.tx(user, token, 0n, [transferLog(d, token, user, to, amount)]);
    return 1;
  }
  if (kind < 0.7) {
    const pair = pairOf(d, u.pairsV2);
    b.tx(user, r.pick(u.routers), 0n, [
      transferLog(d, popularToken(d), user, pair, amount),
      transferLog(d, popularToken(d), pair, user, amount / 3n),
      { address: pair, topics: [TOPIC.sync], data: data(amount * 1000n, amount * 3000n) },
      {
        address: pair,
        topics: [TOPIC.swapV2, addressTopic(r.pick(u.routers)), addressTopic(user)],
        data: data(amount, 0n, 0n, amount / 3n),
      },
    ]);
    return 2;
  }
  if (kind < 0.85) {
    const pool = r.pick(u.poolsV3);
    b.tx(user, r.pick(u.routers), 0n, [
      transferLog(d, popularToken(d), pool, user, amount / 3n),
      transferLog(d, popularToken(d), user, pool, amount),
      {
        address: pool,
        topics: [TOPIC.swapV3, addressTopic(r.pick(u.routers)), addressTopic(user)],
        data: data(-(amount / 3n), amount, 2n ** 96n, 10n ** 18n, BigInt(-200_000 + r.int(400_000))),
      },
    ]);
    return 2;
  }
  if (kind < 0.92) {
    // ERC-721: Transfer's topic0 with the token id as a fourth topic (not the ERC-20 event).
    const nft = r.pick(u.nfts);
    const log = transferLog(d, nft, user, r.address(), 0n);
    b.tx(user, nft, 0n, [{ address: nft, topics: [...log.topics, data(BigInt(r.int(10_000)))], data: '0x' }]);
    return 1;
  }
  const weth = u.tokens[1]!;
  b.tx(user, weth, amount, [
    { address: weth, topics: [TOPIC.deposit, addressTopic(user)], data: data(amount) },
    transferLog(d, weth, user, r.pick(u.pairsV2), amount),
  ]);
  return 2;
}

/** An approval: owner a user, or (a hit) one an any-contract subscription follows; spender a router. */
function approvalTransaction(b: BlockBuilder, d: Draws): void {
  const { r, u, hits } = d;
  const token = popularToken(d);
  const owner = r.next() < d.eventHitRate ? r.pick(hits.approvalOwner) : r.pick(u.senders);
  b.tx(owner, token, 0n, [
    {
      address: token,
      topics: [TOPIC.approval, addressTopic(owner), addressTopic(r.pick(u.routers))],
      data: data(2n ** 256n - 1n),
    },
  ]);
}

/** The long tail: two events of other contracts (1-4 topics, 0-4 words), or (a hit) an anonymous one. */
function otherTransaction(b: BlockBuilder, d: Draws): void {
  const { r, u } = d;
  const other = (): Omit<RpcLog, 'logIndex'> => {
    if (r.next() < d.eventHitRate && u.anonymous.length > 0) {
      const { contract, topics } = r.pick(u.anonymous);
      return {
        address: contract,
        topics: Array.from({ length: topics }, () => data(BigInt(r.int(1e6)))),
        data: data(7n),
      };
    }
    const topics = 1 + r.int(4);
    return {
      address: r.pick(u.otherContracts),
      topics: [r.pick(u.otherTopics), ...Array.from({ length: topics - 1 }, () => r.hex(32))],
      data: data(...Array.from({ length: r.int(5) }, () => BigInt(r.int(1e9)))),
    };
  };
  b.tx(r.pick(u.senders), r.pick(u.otherContracts), 0n, [other(), other()]);
}

/**
 * The blocks of one case, from the same seed as the other case: half native transfers, half token
 * transfers in plain transfers and swaps, approvals (12% of the token transfers), and as many
 * transactions of other contracts' events as 30% of them; then extracted as the follower does.
 */
function buildBlocks(
  options: EvmEventsPassOptions,
  u: Universe,
  hits: HitValues,
  eventHitRate: number,
): EvmBlockActivity[] {
  const r = new Random(30);
  let credit = 0;
  let hitCount = 0;
  const addressHit = (): Hex | undefined => {
    credit += options.hitRate;
    if (credit < 1) return undefined;
    credit -= 1;
    return u.hitAddresses[hitCount++ % HIT_POOL]!;
  };
  const d: Draws = { r, u, hits, eventHitRate, addressHit };
  const native = Math.ceil(options.transfersPerBlock / 2);
  const tokenTransfers = options.transfersPerBlock - native;
  const blocks: EvmBlockActivity[] = [];
  for (let n = 0; n < options.blocks; n++) {
    const b = new BlockBuilder(r, r.hex(32));
    for (let i = 0; i < native; i++)
      b.tx(r.pick(u.senders), addressHit() ?? r.address(), BigInt(1 + r.int(1e9)) * 10n ** 6n, []);
    for (let moved = 0; moved < tokenTransfers; ) moved += tokenTransaction(b, d, tokenTransfers - moved);
    for (let i = 0; i < Math.round(tokenTransfers * 0.12); i++) approvalTransaction(b, d);
    for (let i = 0; i < Math.round(tokenTransfers * 0.3); i++) otherTransaction(b, d);
    // Through JSON, as a node's answers come: flat strings, as JSON.parse makes them (the ones
    // built here are concatenations, slower to read).
    const block = JSON.parse(
      JSON.stringify({
        number: quantity(1_000 + n),
        hash: b.hash,
        parentHash: blocks.at(-1)?.hash ?? r.hex(32),
        timestamp: quantity(1_700_000_000 + 12 * n),
        transactions: b.transactions,
      }),
    ) as RpcBlock & { hash: Hex };
    const receipts = JSON.parse(JSON.stringify(b.receipts)) as RpcReceipt[];
    blocks.push({
      number: BigInt(1_000 + n),
      hash: block.hash,
      parentHash: block.parentHash,
      timestamp: BigInt(block.timestamp),
      transfers: rpcTransfers(block, receipts),
      payments: rpcPayments(block, receipts),
      logs: rpcLogs(receipts),
    });
  }
  return blocks;
}

// ---------------------------------------------------------------------------------------------
// Measuring

type Matcher = BlockMatcher<EvmBlockActivity>;

const chainBlock = (activity: EvmBlockActivity) => ({
  height: Number(activity.number),
  hash: activity.hash,
  parentHash: activity.parentHash,
  activity,
});

/**
 * Each block matched by every matcher, one right after the other (the order rotating from block
 * to block), `rounds` times over the blocks; per matcher, the per-block microseconds.
 */
async function interleaved(
  blocks: EvmBlockActivity[],
  matchers: Matcher[],
  rounds: number,
): Promise<number[][]> {
  const timings = matchers.map((): number[] => []);
  const chained = blocks.map(chainBlock);
  for (let round = 0; round < rounds; round++) {
    for (const [i, block] of chained.entries()) {
      for (let k = 0; k < matchers.length; k++) {
        const m = (round + i + k) % matchers.length;
        const t = performance.now();
        await matchers[m]!(block);
        timings[m]!.push((performance.now() - t) * 1000);
      }
    }
  }
  return timings;
}

async function alone(blocks: EvmBlockActivity[], matcher: Matcher, rounds: number): Promise<number[]> {
  const out: number[] = [];
  const chained = blocks.map(chainBlock);
  for (let round = 0; round < rounds; round++) {
    for (const block of chained) {
      const t = performance.now();
      await matcher(block);
      out.push((performance.now() - t) * 1000);
    }
  }
  return out;
}

interface Stats {
  median: number;
  p90: number;
  mean: number;
}

function stats(samples: number[]): Stats {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    median: quantile(sorted, 0.5),
    p90: quantile(sorted, 0.9),
    mean: sorted.reduce((s, x) => s + x, 0) / sorted.length,
  };
}

/** A block's notifications by kind, and the event ones checked against every subscription tested one by one. */
async function countMatches(blocks: EvmBlockActivity[], matcher: Matcher) {
  let transfers = 0;
  let events = 0;
  for (const block of blocks) {
    const matches: BlockMatch[] = await matcher(chainBlock(block));
    for (const m of matches) {
      if (m.eventType === CONTRACT_LOG) events++;
      else transfers++;
    }
  }
  return { transfers: transfers / blocks.length, events: events / blocks.length };
}

/** The event notifications of a block found without the index: each subscription tested on each log. */
function bruteForce(block: EvmBlockActivity, specs: PlannedSubscriptions['specs']): number {
  let found = 0;
  for (const log of block.logs) {
    for (const { spec, contracts } of specs) {
      const { event } = spec;
      const keyed = event.topic0
        ? log.topics[0]?.toLowerCase() === event.topic0.toLowerCase()
        : log.topics.length === event.topicCount;
      if (!keyed || (!spec.anyContract && !contracts.has(log.address.toLowerCase()))) continue;
      if (!passesFilter(event, log.topics)) continue;
      if (event.abi === null || decodeFollowedLog(event, log)) found++;
    }
  }
  return found;
}

/** The blocks' shape, as printed. */
function describeBlocks(blocks: EvmBlockActivity[]) {
  const per = (f: (b: EvmBlockActivity) => number) => blocks.reduce((s, b) => s + f(b), 0) / blocks.length;
  const topic0s = new Set<string>();
  const contracts = new Set<string>();
  for (const b of blocks)
    for (const log of b.logs) {
      topic0s.add(log.topics[0] ?? '');
      contracts.add(log.address);
    }
  const transferLogs = per((b) => b.logs.filter((l) => l.topics[0] === TOPIC.transfer).length);
  return {
    transfers: per((b) => b.transfers.length),
    transactions: per((b) => b.payments.length),
    logs: per((b) => b.logs.length),
    transferLogs,
    topic0s: topic0s.size,
    contracts: contracts.size,
  };
}

interface CaseResult {
  eventHitRate: number;
  pure: Stats;
  reference: Stats;
  withEvents: Stats;
  /** The event index's lookups alone (matchLog on each log), nothing decoded or built. */
  lookups: Stats;
  samples: number;
  notifications: { transfers: number; events: number };
  mismatches: number;
  blocks: ReturnType<typeof describeBlocks>;
}

// ---------------------------------------------------------------------------------------------
// The pass

/** The reference's view of the index: the same tables, no event followed (today's path). */
function withoutEvents(
  index: AddressIndex,
): Pick<AddressIndex, 'lookup' | 'watchesFees' | 'followsEvents' | 'matchLog'> {
  return {
    lookup: index.lookup,
    watchesFees: index.watchesFees,
    followsEvents: () => false,
    matchLog: index.matchLog,
  };
}

const tokenInfo: Promise<TokenInfo> = Promise.resolve({ symbol: 'TKN', decimals: 18 } as TokenInfo);
/** Token decimals as the follower's cache answers them once warm: no node here. */
const tokens = { get: () => tokenInfo };

function networkCatalog(): { networks: NetworkCatalog; network: Network } {
  const networks = loadNetworks({}, [
    {
      name: NETWORK,
      aliases: [],
      family: 'evm',
      chainId: 31337,
      symbol: 'ETH',
      decimals: 18,
      rpcUrls: ['http://127.0.0.1:9'],
      wsUrls: [],
      indexerUrls: [],
    },
  ]);
  return { networks, network: networks.find(NETWORK)! };
}

async function measureCase(
  options: EvmEventsPassOptions,
  blocks: EvmBlockActivity[],
  index: AddressIndex,
  network: Network,
  pure: number[],
  planned: PlannedSubscriptions,
  eventHitRate: number,
): Promise<CaseResult> {
  let mismatches = 0;
  const reference = evmMatcher({ network, index: withoutEvents(index), tokens });
  const counting = evmMatcher({ network, index, tokens, onMismatch: () => mismatches++ });
  const withEvents = evmMatcher({ network, index, tokens });
  // The index's matches are those of every subscription tested one by one, on a few blocks.
  for (const block of blocks.slice(0, CHECKED_BLOCKS)) {
    const found = (await withEvents(chainBlock(block))).filter((m) => m.eventType === CONTRACT_LOG).length;
    const expected = bruteForce(block, planned.specs);
    if (found !== expected)
      throw new Error(
        `block ${block.number}: the matcher found ${found} event notifications, ${expected} expected`,
      );
  }
  const notifications = await countMatches(blocks, counting);
  // The index alone: each log of the block looked up, nothing decoded or built.
  const lookups: Matcher = async (block) => {
    for (const log of block.activity.logs) index.matchLog(NETWORK, log);
    return [];
  };
  const rounds = roundsFor(blocks, options.matchSamples);
  await interleaved(blocks, [reference, withEvents, lookups], WARM_UP_ROUNDS);
  const [referenceTimes, withTimes] = await interleaved(blocks, [reference, withEvents], rounds);
  // Apart, beside the reference as well (a third matcher in turn would change what the first two
  // find in the caches): what the index's lookups take of the difference.
  const [, lookupTimes] = await interleaved(blocks, [reference, lookups], Math.ceil(rounds / 2));
  if (options.profileDir)
    await profiled(options.profileDir, `evm-events-${eventHitRate}`, () => alone(blocks, withEvents, rounds));
  return {
    eventHitRate,
    pure: stats(pure),
    reference: stats(referenceTimes!),
    withEvents: stats(withTimes!),
    lookups: stats(lookupTimes!),
    samples: withTimes!.length,
    notifications,
    mismatches: mismatches / blocks.length,
    blocks: describeBlocks(blocks),
  };
}

const MB = 1024 * 1024;

function report(
  options: EvmEventsPassOptions,
  results: CaseResult[],
  planned: PlannedSubscriptions,
  applied: { ms: number; heapBytes: number },
  indexLine: string,
): string[] {
  const us = (x: number) => fixed(x, 0);
  const rows: string[][] = [];
  for (const c of results) {
    const ratio = (f: (s: Stats) => number) => fixed(f(c.withEvents) / f(c.reference), 2);
    const label = `event hit rate ${c.eventHitRate}`;
    rows.push([
      `${label}: no event subscription, before any was applied`,
      us(c.pure.median),
      us(c.pure.p90),
      us(c.pure.mean),
      '',
      '',
      '',
      '',
    ]);
    rows.push([
      `${label}: no event followed (reference)`,
      us(c.reference.median),
      us(c.reference.p90),
      us(c.reference.mean),
      '1.00',
      '1.00',
      '1.00',
      fixed(c.notifications.transfers, 1),
    ]);
    rows.push([
      `${label}: ${grouped(planned.changes.length)} event subscriptions`,
      us(c.withEvents.median),
      us(c.withEvents.p90),
      us(c.withEvents.mean),
      ratio((s) => s.median),
      ratio((s) => s.p90),
      ratio((s) => s.mean),
      `${fixed(c.notifications.transfers, 1)} + ${fixed(c.notifications.events, 1)} contract.log`,
    ]);
    rows.push([
      `${label}: of which the event index's lookups (matchLog on every log)`,
      us(c.lookups.median),
      us(c.lookups.p90),
      us(c.lookups.mean),
      '',
      '',
      '',
      '',
    ]);
  }
  const shape = results[0]!.blocks;
  return [
    '',
    `contract events (evm-events): ${options.blocks} synthetic blocks of ${fixed(shape.transactions, 0)} transactions, ` +
      `${fixed(shape.transfers, 0)} transfers and ${fixed(shape.logs, 0)} logs (${fixed(shape.transferLogs, 0)} Transfer) on average; ` +
      `${grouped(shape.topic0s)} topic0s and ${grouped(shape.contracts)} contracts over the blocks; address hit rate ${options.hitRate}`,
    indexLine,
    `event subscriptions: ${grouped(planned.changes.length)} (${grouped(planned.contracts)} contracts named) applied in ` +
      `${fixed(applied.ms, 1)} ms (${fixed((applied.ms * 1000) / planned.changes.length, 1)} µs each; validating them as the API ` +
      `does took ${fixed(planned.validateMs, 0)} ms); heap + array buffers +${fixed(applied.heapBytes / MB, 1)} MB ` +
      `(${grouped(applied.heapBytes / planned.changes.length)} bytes/subscription)`,
    ...planned.mix.map((m) => `  ${String(m.count).padStart(6)}  ${m.kind}`),
    formatTable(
      [
        "a block's match (evmMatcher)",
        'µs median',
        'µs p90',
        'µs mean',
        'ratio median',
        'ratio p90',
        'ratio mean',
        'notifications/block',
      ],
      rows,
    ),
    ...results.map((c) => {
      const added = c.withEvents.median - c.reference.median;
      return (
        `event hit rate ${c.eventHitRate}: the subscriptions add ${us(added)} µs to a block's median match: the index's lookups ` +
        `${us(c.lookups.median)} µs (${fixed((c.lookups.median * 1000) / c.blocks.logs, 0)} ns a log), decoding the logs that match ` +
        `and building their ${fixed(c.notifications.events, 1)} notifications the rest; ${fixed(c.mismatches, 1)} logs per block ` +
        `matched a topic0 and filter but not the ABI (ERC-721 Transfer against ERC-20's)`
      );
    }),
    `method: ${grouped(results[0]!.samples)} block matches per matcher and case after ${WARM_UP_ROUNDS} unmeasured rounds over ` +
      'the blocks; each block matched by the reference and with the subscriptions one right after the other (which first ' +
      'alternates), then in a second run by the reference and the lookups alone; the row before any was applied is the ' +
      'same matcher with no event subscription at all, timed alone.',
    `target (bench/README.md): with ${grouped(planned.changes.length)} event subscriptions a block's match at most 2x slower than without; ` +
      `the event matches were checked against every subscription tested one by one on ${CHECKED_BLOCKS} blocks of each case.`,
    '',
  ];
}

/**
 * What the subscriptions take in memory: planned and applied to an index of their own (the event
 * index keeps its own tables, so they take the same beside a million addresses), after a full GC
 * before and after, the changes dropped: the parsed events, filters, contract lists and buckets.
 */
function subscriptionsHeap(u: Universe, networks: NetworkCatalog, total: number): number {
  const index = createAddressIndex((name) => networks.find(name)?.family);
  gc();
  const before = process.memoryUsage();
  let changes: SubscriptionChange[] | undefined = planSubscriptions(
    new Random(PLAN_SEED),
    { ...u, anonymous: [] },
    networks,
    total,
  ).changes;
  for (const change of changes) index.apply(change);
  changes = undefined;
  gc();
  const after = process.memoryUsage();
  if (index.eventSubscriptions() !== total) throw new Error('the subscriptions were not all indexed');
  return after.heapUsed + after.arrayBuffers - (before.heapUsed + before.arrayBuffers);
}

/** The pass: the index, the blocks of each case, the subscriptions applied, each case measured. */
export async function evmEventsPass(options: EvmEventsPassOptions): Promise<string[]> {
  const { networks, network } = networkCatalog();
  const u = universe(new Random(11));
  process.stdout.write(`  evm-events: indexing ${grouped(options.watched)} watched addresses... `);
  const built = buildIndex({ networks }, options.watched);
  for (const [i, address] of u.hitAddresses.entries())
    built.index.apply({
      type: 'upsert',
      subscription: {
        id: `0190a8e4-5b1c-7000-a000-${i.toString(16).padStart(12, '0')}`,
        accountId: 'bench',
        network: NETWORK,
        address,
        confirmations: 1,
        mempool: false,
      },
    });
  process.stdout.write(`${fixed(built.applySeconds, 1)} s\n`);
  const indexLine =
    `matcher: ${grouped(built.addresses)} watched addresses (plus ${HIT_POOL} the address hits go to) indexed in ` +
    `${fixed(built.applySeconds, 2)} s; heap + array buffers +${fixed(built.heapBytes / MB, 0)} MB`;
  const heapBytes = subscriptionsHeap(u, networks, options.eventSubscriptions);

  const planned = planSubscriptions(new Random(PLAN_SEED), u, networks, options.eventSubscriptions);
  const cases = options.eventHitRates.map((rate) => ({
    rate,
    blocks: buildBlocks(options, u, planned.hits, rate),
  }));
  // Before any event subscription: the matcher as on a network where nobody follows an event.
  const pure = new Map<number, number[]>();
  const plain = evmMatcher({ network, index: built.index, tokens });
  for (const c of cases) {
    await alone(c.blocks, plain, WARM_UP_ROUNDS);
    pure.set(c.rate, await alone(c.blocks, plain, Math.ceil(roundsFor(c.blocks, options.matchSamples) / 2)));
  }

  const t0 = performance.now();
  for (const change of planned.changes) built.index.apply(change);
  const ms = performance.now() - t0;
  if (built.index.eventSubscriptions() !== planned.changes.length)
    throw new Error(
      `${built.index.eventSubscriptions()} event subscriptions indexed, ${planned.changes.length} applied`,
    );

  const results: CaseResult[] = [];
  for (const c of cases) {
    process.stdout.write(`  evm-events: event hit rate ${c.rate}, matching ${c.blocks.length} blocks...\n`);
    results.push(
      await measureCase(options, c.blocks, built.index, network, pure.get(c.rate)!, planned, c.rate),
    );
  }
  return report(options, results, planned, { ms, heapBytes }, indexLine);
}
