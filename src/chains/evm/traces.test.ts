import fs from 'node:fs';
import path from 'node:path';
import type { Hex } from 'viem';
import { describe, expect, test } from 'vitest';
import {
  blockInternalTransfers,
  type CallFrame,
  callFrameTransfers,
  type InternalTransfer,
  MAX_TRACE_DEPTH,
  type ParityTrace,
  parityTransfers,
  TraceMismatchError,
} from './traces.js';

// Real traces (geth's tracer test vectors and erigon's expected mainnet responses) and a summary
// of their value frames computed independently of this module: see the README beside them.
const DIR = path.join(import.meta.dirname, '../../../test/fixtures/chains/ethereum/traces');

function readJson(name: string): unknown {
  return JSON.parse(fs.readFileSync(path.join(DIR, name), 'utf8'));
}

interface SummaryFrame {
  path: number[];
  type: string;
  from: string;
  to: string | null;
  value: string;
  error?: string;
}
interface SummaryTx {
  transactionHash: Hex;
  transactionPosition: number;
  topError: string | null;
  succeeded: SummaryFrame[];
  reverted: SummaryFrame[];
  valueFieldButNoTransfer: SummaryFrame[];
}
interface SummaryFile {
  format: string;
  block: number;
  transactionHash?: Hex;
  blockHash?: Hex;
  method?: string;
  top?: { type: string; value: string; error: string | null };
  succeeded?: SummaryFrame[];
  reverted?: SummaryFrame[];
  valueFieldButNoTransfer?: SummaryFrame[];
  transactions?: number;
  traceEntries?: number;
  succeededCount?: number;
  revertedCount?: number;
  valueFieldButNoTransferCount?: number;
  transactionsWithValueFrames?: SummaryTx[];
  succeededSumWei: string;
  revertedSumWei: string;
}

const summary = (readJson('internal-value-summary.derived.json') as { files: Record<string, SummaryFile> })
  .files;
const gethFiles = Object.keys(summary).filter((f) => !f.startsWith('erigon/'));
const erigonFiles = Object.keys(summary).filter((f) => f.startsWith('erigon/'));

interface GethVector {
  input: Hex;
  context: { number: string };
  result: unknown;
}
const geth = (file: string) => readJson(file) as GethVector;
const isFlat = (file: string) => file.startsWith('call_tracer_flat/');
/** An erigon test file: `[{request, response: {result}}]`. */
const erigonResult = (file: string) =>
  (readJson(file) as [{ response: { result: ParityTrace[] } }])[0].response.result;

const byPath = (a: SummaryFrame, b: SummaryFrame) => {
  for (let i = 0; i < Math.min(a.path.length, b.path.length); i++) {
    if (a.path[i] !== b.path[i]) return a.path[i]! - b.path[i]!;
  }
  return a.path.length - b.path.length;
};

/** What the summary says a counted frame moves, in the module's terms, in depth-first order. */
function expected(frames: readonly SummaryFrame[]): InternalTransfer[] {
  return [...frames].sort(byPath).map((f) => ({
    traceAddress: f.path.join('.'),
    frame: f.type.toLowerCase() as InternalTransfer['frame'],
    from: f.from as Hex,
    to: f.to as Hex,
    value: BigInt(f.value),
  }));
}

/** The summary's frames that must not come out: they failed, or move nothing despite a value. */
function notMoved(tx: { reverted?: SummaryFrame[]; valueFieldButNoTransfer?: SummaryFrame[] }): string[] {
  return [...(tx.reverted ?? []), ...(tx.valueFieldButNoTransfer ?? [])].map((f) => f.path.join('.'));
}

const sum = (ts: readonly InternalTransfer[]) => ts.reduce((s, t) => s + t.value, 0n);

function transfersOfGethFile(file: string): InternalTransfer[] {
  const { result } = geth(file);
  return isFlat(file) ? parityTransfers(result as ParityTrace[]) : callFrameTransfers(result as CallFrame);
}

/** A deep copy, for tests that corrupt an answer. */
const clone = <T>(v: T): T => structuredClone(v);

/** The block an erigon trace_block answer is about, built from the answer itself. */
function blockOf(file: string) {
  const entries = erigonResult(file);
  const hashes: Hex[] = [];
  for (const e of entries) {
    if (e.type === 'reward') continue;
    hashes[e.transactionPosition!] = e.transactionHash as Hex;
  }
  const blockHashes = new Set(entries.map((e) => e.blockHash));
  expect(blockHashes.size).toBe(1);
  return {
    hash: [...blockHashes][0] as Hex,
    number: BigInt(summary[file]!.block),
    transactions: hashes.map((hash) => ({ hash })),
  };
}

const mismatch = (f: () => unknown) => expect(f).toThrow(TraceMismatchError);

describe('geth tracer test vectors', () => {
  test.each(gethFiles)('%s: the transfers the summary counts, and nothing else', (file) => {
    const s = summary[file]!;
    const got = transfersOfGethFile(file);
    expect(got).toEqual(expected(s.succeeded!));
    expect(sum(got)).toBe(BigInt(s.succeededSumWei));
    const out = new Set(got.map((t) => t.traceAddress));
    for (const p of notMoved(s)) expect(out.has(p)).toBe(false);
  });

  test('has the cases the issue names: a selfdestruct, a reverted frame, a frame with value but no transfer', () => {
    // Guards the data-driven test above against a summary that lost its interesting cases.
    const all = gethFiles.map((f) => summary[f]!);
    expect(all.flatMap((s) => s.succeeded!).some((f) => f.type === 'SELFDESTRUCT')).toBe(true);
    expect(all.flatMap((s) => s.reverted!).length).toBeGreaterThanOrEqual(3);
    const shown = all.flatMap((s) => s.valueFieldButNoTransfer!).map((f) => f.type);
    expect(shown).toEqual(expect.arrayContaining(['CALLCODE', 'DELEGATECALL']));
  });

  test.each(['simple.json', 'inner_throw_outer_revert.json'])(
    '%s: callTracer and flat forms of one transaction give the same transfers',
    (name) => {
      const nested = geth(`call_tracer/${name}`).result as CallFrame;
      const flat = geth(`call_tracer_flat/${name}`).result as ParityTrace[];
      expect(callFrameTransfers(nested)).toEqual(parityTransfers(flat));
      // With every error removed, the frames behind the errors count too, equally in both forms:
      // the two walks agree on every frame, not only where errors decide.
      const nestedOk = clone(nested);
      const stack: CallFrame[] = [nestedOk];
      while (stack.length > 0) {
        const f = stack.pop()!;
        delete f.error;
        stack.push(...(f.calls ?? []));
      }
      const flatOk = clone(flat).map((e) => {
        delete e.error;
        return e;
      });
      expect(callFrameTransfers(nestedOk)).toEqual(parityTransfers(flatOk));
    },
  );

  test('parity entries may come in any order', () => {
    const flat = geth('call_tracer_flat/simple.json').result as ParityTrace[];
    expect(parityTransfers([...flat].reverse())).toEqual(parityTransfers(flat));
  });

  test('a CREATE2 with value pays the created contract (real trace, value set)', () => {
    const flat = clone(geth('call_tracer_flat/nested_create2_action_gas.json').result as ParityTrace[]);
    const inner = flat.find((e) => e.traceAddress.length === 1)!;
    expect(inner.action.creationMethod).toBe('create2');
    inner.action.value = '0x1';
    expect(parityTransfers(flat)).toEqual([
      {
        traceAddress: '0',
        frame: 'create2',
        from: inner.action.from,
        to: (inner.result as { address: string }).address,
        value: 1n,
      },
    ]);
  });

  test('the flat suicide moves its balance to the refund address (real trace, balance set)', () => {
    const flat = clone(geth('call_tracer_flat/selfdestruct.json').result as ParityTrace[]);
    const suicide = flat.find((e) => e.type === 'suicide')!;
    suicide.action.balance = '0x2a';
    expect(parityTransfers(flat)).toEqual([
      {
        traceAddress: suicide.traceAddress.join('.'),
        frame: 'selfdestruct',
        from: suicide.action.address,
        to: suicide.action.refundAddress,
        value: 42n,
      },
    ]);
  });

  test('addresses come out in lower case', () => {
    const top = clone(geth('call_tracer/simple.json').result as CallFrame);
    const inner = top.calls![0]!;
    inner.from = inner.from.toUpperCase().replace('0X', '0x');
    inner.to = inner.to!.toUpperCase().replace('0X', '0x');
    const [t] = callFrameTransfers(top);
    expect(t!.from).toBe(inner.from.toLowerCase());
    expect(t!.to).toBe(inner.to.toLowerCase());
  });
});

describe('erigon mainnet traces', () => {
  test.each(erigonFiles)(
    '%s: the transfers the summary counts, per transaction, and nothing else',
    (file) => {
      const s = summary[file]!;
      const entries = erigonResult(file);
      expect(entries.length).toBe(s.traceEntries);
      // Transactions by hash, as the answer gives them (trace_transaction: a single one).
      const txHashes = [
        ...new Set(entries.filter((e) => e.type !== 'reward').map((e) => e.transactionHash!)),
      ];
      expect(txHashes.length).toBe(s.transactions);
      const summarized = new Map(s.transactionsWithValueFrames!.map((t) => [t.transactionHash, t]));
      let counted = 0;
      let total = 0n;
      for (const hash of txHashes) {
        const got = parityTransfers(entries.filter((e) => e.transactionHash === hash));
        const tx = summarized.get(hash as Hex);
        expect(got).toEqual(expected(tx?.succeeded ?? []));
        const out = new Set(got.map((t) => t.traceAddress));
        for (const p of notMoved(tx ?? {})) expect(out.has(p)).toBe(false);
        counted += got.length;
        total += sum(got);
      }
      expect(counted).toBe(s.succeededCount);
      expect(total).toBe(BigInt(s.succeededSumWei));
    },
  );

  test('block 17073191: 53 calls in 24 transactions counted; 3 reverted and 12 delegatecalls with value left out', () => {
    const file = 'erigon/trace_block-mainnet-17073191.json';
    const s = summary[file]!;
    const txs = s.transactionsWithValueFrames!;
    // The summary says what the fixture README says (a summary edited since would show here).
    expect([s.succeededCount, s.revertedCount, s.valueFieldButNoTransferCount]).toEqual([53, 3, 12]);
    expect(txs.filter((t) => t.succeeded.length > 0).length).toBe(24);

    const got = blockInternalTransfers('parity', erigonResult(file), blockOf(file));
    expect(got.length).toBe(s.transactions);
    expect(got.flat().length).toBe(s.succeededCount);
    expect(sum(got.flat())).toBe(BigInt(s.succeededSumWei));
    expect(got.filter((t) => t.length > 0).length).toBe(txs.filter((t) => t.succeeded.length > 0).length);
    const reverted = txs.flatMap((t) => t.reverted.map((f) => ({ t, f })));
    expect(reverted.length).toBe(s.revertedCount);
    expect(reverted.reduce((a, { f }) => a + BigInt(f.value), 0n)).toBe(BigInt(s.revertedSumWei));
    const delegated = txs.flatMap((t) => t.valueFieldButNoTransfer.map((f) => ({ t, f })));
    expect(delegated.length).toBe(s.valueFieldButNoTransferCount);
    for (const { t, f } of [...reverted, ...delegated]) {
      expect(got[t.transactionPosition]!.map((x) => x.traceAddress)).not.toContain(f.path.join('.'));
    }
    for (const t of txs) expect(got[t.transactionPosition]).toEqual(expected(t.succeeded));
  });
});

describe('blockInternalTransfers, parity (trace_block)', () => {
  const file = 'erigon/trace_block-mainnet-4417196.json';
  const answer = () => clone(erigonResult(file));

  test('a block that matches passes; its reward entries are ignored', () => {
    const entries = answer();
    expect(entries.filter((e) => e.type === 'reward').length).toBe(2);
    const block = blockOf(file);
    const got = blockInternalTransfers('parity', entries, block);
    expect(got.length).toBe(block.transactions.length);
    const s = summary[file]!;
    const want = got.map(() => [] as InternalTransfer[]);
    for (const t of s.transactionsWithValueFrames!) want[t.transactionPosition] = expected(t.succeeded);
    expect(got).toEqual(want);
    // Without the rewards: the same.
    expect(
      blockInternalTransfers(
        'parity',
        entries.filter((e) => e.type !== 'reward'),
        block,
      ),
    ).toEqual(got);
  });

  test('an empty block is an empty array', () => {
    const block = { hash: `0x${'11'.repeat(32)}` as Hex, number: 1n, transactions: [] };
    expect(blockInternalTransfers('parity', [], block)).toEqual([]);
    expect(blockInternalTransfers('debug', [], block)).toEqual([]);
  });

  test('not an array', () => {
    mismatch(() => blockInternalTransfers('parity', { result: answer() }, blockOf(file)));
    mismatch(() => blockInternalTransfers('parity', null, blockOf(file)));
  });

  test('a block with a transaction more or less', () => {
    const block = blockOf(file);
    mismatch(() =>
      blockInternalTransfers('parity', answer(), {
        ...block,
        transactions: [...block.transactions, { hash: `0x${'ab'.repeat(32)}` }],
      }),
    );
    mismatch(() =>
      blockInternalTransfers('parity', answer(), { ...block, transactions: block.transactions.slice(0, -1) }),
    );
  });

  test('a transaction hash that is not the block one at that position', () => {
    const block = blockOf(file);
    const swapped = [...block.transactions];
    [swapped[3], swapped[4]] = [swapped[4]!, swapped[3]!];
    mismatch(() => blockInternalTransfers('parity', answer(), { ...block, transactions: swapped }));
    const unknown = [...block.transactions];
    unknown[5] = { hash: `0x${'cd'.repeat(32)}` };
    mismatch(() => blockInternalTransfers('parity', answer(), { ...block, transactions: unknown }));
  });

  test("another block's hash or number", () => {
    const block = blockOf(file);
    mismatch(() => blockInternalTransfers('parity', answer(), { ...block, hash: `0x${'ee'.repeat(32)}` }));
    mismatch(() => blockInternalTransfers('parity', answer(), { ...block, number: block.number + 1n }));
    const oneEntry = answer();
    oneEntry[7]!.blockHash = `0x${'ee'.repeat(32)}`;
    mismatch(() => blockInternalTransfers('parity', oneEntry, block));
    const oneNumber = answer();
    oneNumber[7]!.blockNumber = Number(block.number) - 1;
    mismatch(() => blockInternalTransfers('parity', oneNumber, block));
    const reward = answer();
    reward.at(-1)!.blockHash = `0x${'ee'.repeat(32)}`;
    mismatch(() => blockInternalTransfers('parity', reward, block));
  });

  test('entries of one transaction not together, or with two positions', () => {
    const block = blockOf(file);
    const entries = answer();
    // Move transaction 1's entry [0] after transaction 2's entries.
    const i = entries.findIndex((e) => e.transactionPosition === 1 && e.traceAddress.length > 0);
    const [moved] = entries.splice(i, 1);
    const j = entries.findIndex((e) => e.transactionPosition === 3);
    entries.splice(j, 0, moved!);
    mismatch(() => blockInternalTransfers('parity', entries, block));
    const position = answer();
    position[i]!.transactionPosition = 2;
    mismatch(() => blockInternalTransfers('parity', position, block));
  });

  test('malformed entries', () => {
    const block = blockOf(file);
    const corrupt = (change: (e: ParityTrace) => void) => {
      const entries = answer();
      const e = entries.find((x) => x.transactionPosition === 9 && x.traceAddress.length === 1)!;
      change(e);
      return () => blockInternalTransfers('parity', entries, block);
    };
    expect(corrupt(() => {})).not.toThrow();
    mismatch(
      corrupt((e) => {
        delete e.action.from;
      }),
    );
    mismatch(
      corrupt((e) => {
        e.action.value = 'zz';
      }),
    );
    mismatch(
      corrupt((e) => {
        e.action.value = '0x00';
      }),
    );
    mismatch(
      corrupt((e) => {
        delete (e as Partial<ParityTrace>).type;
      }),
    );
    mismatch(
      corrupt((e) => {
        e.action.callType = 'teleport';
      }),
    );
    mismatch(
      corrupt((e) => {
        e.error = null as unknown as string;
      }),
    );
    mismatch(
      corrupt((e) => {
        e.traceAddress = 'x' as unknown as number[];
      }),
    );
    mismatch(
      corrupt((e) => {
        e.transactionHash = null;
      }),
    );
  });

  test('traceAddress not consistent with subtraces', () => {
    const block = blockOf(file);
    const tx16 = (entries: ParityTrace[]) => entries.filter((e) => e.transactionPosition === 16);
    // Transaction 16: a top entry with 3 subtraces: [0], [1] (with [1,0] below it) and [2].
    expect(tx16(answer()).map((e) => [e.traceAddress.join('.'), e.subtraces])).toEqual([
      ['', 3],
      ['0', 0],
      ['1', 1],
      ['1.0', 0],
      ['2', 0],
    ]);
    const cases: ((tx: ParityTrace[]) => void)[] = [
      (tx) => {
        tx[0]!.subtraces = 4; // a child missing
      },
      (tx) => {
        tx[0]!.subtraces = 2; // a child too many
      },
      (tx) => {
        tx[2]!.subtraces = 0; // [1,0] below an entry without subtraces
      },
      (tx) => {
        tx[4]!.traceAddress = [3]; // a gap
      },
      (tx) => {
        tx[4]!.traceAddress = [0]; // twice the same
      },
      (tx) => {
        tx[4]!.traceAddress = [0, 0]; // below an entry without subtraces
      },
      (tx) => {
        tx[3]!.traceAddress = [5, 0]; // no entry above it
      },
      (tx) => {
        tx[0]!.traceAddress = [7]; // no top entry
      },
      (tx) => {
        tx[1]!.traceAddress = []; // two top entries
      },
      (tx) => {
        tx[2]!.subtraces = -1;
      },
      (tx) => {
        tx[2]!.traceAddress = [1.5];
      },
    ];
    for (const change of cases) {
      const entries = answer();
      change(tx16(entries));
      mismatch(() => blockInternalTransfers('parity', entries, block));
    }
  });

  test('a reward entry inside a transaction trace, or a trace entry of a transaction in parityTransfers', () => {
    const entries = answer();
    const reward = entries.find((e) => e.type === 'reward')!;
    mismatch(() => parityTransfers([entries[0]!, reward]));
    const tagged = clone(reward);
    tagged.transactionHash = entries[0]!.transactionHash!;
    mismatch(() => blockInternalTransfers('parity', [...entries.slice(0, -2), tagged], blockOf(file)));
  });
});

describe('blockInternalTransfers, debug (callTracer)', () => {
  // A "block" of three real transactions (of different networks: only count and order matter here).
  const files = [
    'call_tracer/simple.json',
    'call_tracer_withLog/multi_contracts.json',
    'call_tracer/oog.json',
  ];
  const block = {
    hash: `0x${'12'.repeat(32)}` as Hex,
    number: 1n,
    transactions: files.map((f) => ({ hash: summary[f]!.transactionHash! })),
  };
  const answer = () =>
    files.map((f) => ({ txHash: summary[f]!.transactionHash as string, result: geth(f).result }));

  test.each(gethFiles.filter((f) => !isFlat(f)))('%s as a one-transaction block', (file) => {
    const hash = summary[file]!.transactionHash!;
    const got = blockInternalTransfers('debug', [{ txHash: hash, result: geth(file).result }], {
      hash: `0x${'34'.repeat(32)}`,
      number: BigInt(geth(file).context.number),
      transactions: [{ hash }],
    });
    expect(got).toEqual([expected(summary[file]!.succeeded!)]);
  });

  test('a block that matches passes, in block order', () => {
    expect(blockInternalTransfers('debug', answer(), block)).toEqual(
      files.map((f) => expected(summary[f]!.succeeded!)),
    );
  });

  test('older geth without txHash: count and order only', () => {
    const bare = answer().map(({ result }) => ({ result }));
    expect(blockInternalTransfers('debug', bare, block)).toEqual(
      blockInternalTransfers('debug', answer(), block),
    );
  });

  test('a transaction more or less, a swapped or unknown hash, not an array', () => {
    mismatch(() => blockInternalTransfers('debug', answer().slice(0, 2), block));
    mismatch(() => blockInternalTransfers('debug', [...answer(), answer()[0]], block));
    const swapped = answer();
    [swapped[0], swapped[1]] = [swapped[1]!, swapped[0]!];
    mismatch(() => blockInternalTransfers('debug', swapped, block));
    const unknown = answer();
    unknown[2]!.txHash = `0x${'cd'.repeat(32)}`;
    mismatch(() => blockInternalTransfers('debug', unknown, block));
    const notHash = answer();
    notHash[2]!.txHash = 'oog';
    mismatch(() => blockInternalTransfers('debug', notHash, block));
    mismatch(() => blockInternalTransfers('debug', { 0: answer()[0] }, block));
  });

  test('a per-transaction tracer error', () => {
    const failed: unknown[] = answer();
    failed[1] = { txHash: block.transactions[1]!.hash, error: 'execution timeout' };
    mismatch(() => blockInternalTransfers('debug', failed, block));
    const neither: unknown[] = answer();
    neither[1] = { txHash: block.transactions[1]!.hash };
    mismatch(() => blockInternalTransfers('debug', neither, block));
  });

  test('malformed frames', () => {
    const corrupt = (change: (inner: CallFrame, top: CallFrame) => void) => {
      const a = answer();
      const top = a[0]!.result as CallFrame;
      change(top.calls![0]!, top);
      return () => blockInternalTransfers('debug', a, block);
    };
    expect(corrupt(() => {})).not.toThrow();
    const cases: ((inner: CallFrame, top: CallFrame) => void)[] = [
      (f) => {
        delete (f as Partial<CallFrame>).from;
      },
      (f) => {
        f.value = 'zz';
      },
      (f) => {
        f.value = '0X6F05B59D3B20000';
      },
      (f) => {
        f.value = `0x1${'0'.repeat(64)}`; // more than 256 bits
      },
      (f) => {
        f.calls = {} as CallFrame[];
      },
      (f) => {
        delete (f as Partial<CallFrame>).type;
      },
      (f) => {
        f.type = 'TELEPORT';
      },
      (f) => {
        delete f.to; // a CALL always has a callee
      },
      (f) => {
        f.from = '0x1234';
      },
      (_, top) => {
        top.type = 'DELEGATECALL'; // not something a transaction can be
      },
      (f) => {
        f.calls = [null as unknown as CallFrame];
      },
    ];
    for (const change of cases) mismatch(corrupt(change));
  });

  test('a failed CREATE has no `to` and is accepted; it moves nothing', () => {
    const top = geth('call_tracer/inner_create_oog_outer_throw.json').result as CallFrame;
    const create = top.calls![0]!;
    expect(create.type).toBe('CREATE');
    expect(create.to).toBeUndefined();
    expect(create.error).toBeDefined();
    expect(callFrameTransfers(top)).toEqual([]);
    // The same without the error: a creation that succeeded must name its contract.
    const ok = clone(top);
    delete ok.error;
    delete ok.calls![0]!.error;
    mismatch(() => callFrameTransfers(ok));
  });
});

describe('hostile answers', () => {
  const A = `0x${'aa'.repeat(20)}`;
  const B = `0x${'bb'.repeat(20)}`;

  /** A chain of CALL frames `levels` deep below the top, each sending 1 wei, built without recursion. */
  function chain(levels: number): CallFrame {
    const top: CallFrame = { type: 'CALL', from: A, to: B, value: '0x0' };
    let f = top;
    for (let i = 0; i < levels; i++) {
      const child: CallFrame = { type: 'CALL', from: B, to: A, value: '0x1' };
      f.calls = [child];
      f = child;
    }
    return top;
  }

  test('10,000 nested frames: refused as deeper than the EVM allows, no stack overflow', () => {
    let error: unknown;
    try {
      callFrameTransfers(chain(10_000));
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(TraceMismatchError);
  });

  test('the deepest trace the EVM can make is read', () => {
    const got = callFrameTransfers(chain(MAX_TRACE_DEPTH));
    expect(got.length).toBe(MAX_TRACE_DEPTH);
    expect(got.at(-1)!.traceAddress).toBe(Array(MAX_TRACE_DEPTH).fill('0').join('.'));
    mismatch(() => callFrameTransfers(chain(MAX_TRACE_DEPTH + 1)));
  });

  test('a parity traceAddress deeper than the EVM allows', () => {
    const top: ParityTrace = {
      type: 'call',
      action: { callType: 'call', from: A, to: B, value: '0x0' },
      subtraces: 1,
      traceAddress: [],
    };
    const deep: ParityTrace = { ...top, subtraces: 0, traceAddress: Array(10_000).fill(0) };
    mismatch(() => parityTransfers([top, deep]));
  });

  test('200,000 sibling frames, in order; the same in parity form in reverse order', () => {
    const n = 200_000;
    const calls: CallFrame[] = [];
    for (let i = 0; i < n; i++)
      calls.push({ type: 'CALL', from: B, to: A, value: `0x${(i + 1).toString(16)}` });
    const got = callFrameTransfers({ type: 'CALL', from: A, to: B, value: '0x0', calls });
    expect(got.length).toBe(n);
    expect(got[0]).toEqual({ traceAddress: '0', frame: 'call', from: B, to: A, value: 1n });
    expect(got[10]!.traceAddress).toBe('10');
    expect(got.at(-1)!.traceAddress).toBe(String(n - 1));

    const entries: ParityTrace[] = [
      {
        type: 'call',
        action: { callType: 'call', from: A, to: B, value: '0x0' },
        subtraces: n,
        traceAddress: [],
      },
    ];
    for (let i = 0; i < n; i++) {
      entries.push({
        type: 'call',
        action: { callType: 'call', from: B, to: A, value: `0x${(i + 1).toString(16)}` },
        subtraces: 0,
        traceAddress: [i],
      });
    }
    expect(parityTransfers(entries.reverse())).toEqual(got);
  });
});
