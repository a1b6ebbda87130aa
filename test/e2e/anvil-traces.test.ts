/**
 * What anvil (the pinned @foundry-rs/anvil 1.7.1) answers for the two block-trace methods, on
 * transactions that move ether inside the call tree ("internal transfers"):
 * `debug_traceBlockByNumber(n, {tracer: 'callTracer'})` (geth's nested frames) and `trace_block(n)`
 * (parity's flat list with traceAddress). It documents the answers for the code that reads them.
 *
 * The rule the expectations follow: an internal transfer is a CALL, CREATE, CREATE2 or SELFDESTRUCT
 * frame with value > 0 below the top-level call, with no error in it or in any ancestor; DELEGATECALL,
 * CALLCODE and STATICCALL never count. Its identity is its traceAddress: child indexes from the top
 * call joined by dots ("0.2.1"), every child frame counted, static and delegate calls included.
 *
 * One anvil; the contracts (test/fixtures/contracts/InternalTransfers.sol, MiniAccount.sol) deployed
 * one block each, then every case sent with mining off and mined together into one block.
 */
import {
  encodeFunctionData,
  getContractAddress,
  type Hex,
  numberToHex,
  type PublicClient,
  pad,
  parseEther,
} from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import { blockInternalTransfers } from '../../src/chains/evm/traces.js';
import {
  anvilClients,
  artifact,
  type ContractName,
  type DevWallet,
  deploy,
  mined,
} from '../helpers/anvil.js';

/** A frame of `debug_traceBlockByNumber` with the callTracer, as anvil answers it. */
interface CallFrame {
  type: string;
  from: Hex;
  to?: Hex;
  /** Absent on STATICCALL frames. */
  value?: Hex;
  gas: Hex;
  gasUsed: Hex;
  input: Hex;
  /** Absent when empty. */
  output?: Hex;
  error?: string;
  revertReason?: string;
  calls?: CallFrame[];
}

interface DebugTrace {
  txHash: Hex;
  result: CallFrame;
}

/** An entry of `trace_block`, as anvil answers it. */
interface ParityTrace {
  type: 'call' | 'create' | 'suicide' | 'reward';
  action: {
    from?: Hex;
    to?: Hex;
    callType?: string;
    creationMethod?: string;
    value?: Hex;
    gas?: Hex;
    input?: Hex;
    init?: Hex;
    address?: Hex;
    refundAddress?: Hex;
    balance?: Hex;
  };
  result: { gasUsed: Hex; output?: Hex; address?: Hex; code?: Hex } | null;
  error?: string;
  subtraces: number;
  traceAddress: number[];
  transactionHash: Hex;
  transactionPosition: number;
  blockHash: Hex;
  blockNumber: number;
}

/** A frame of either format in the terms of internal transfers. */
interface Frame {
  traceAddress: string;
  /** callTracer's spelling: CALL, STATICCALL, DELEGATECALL, CALLCODE, CREATE, CREATE2, SELFDESTRUCT. */
  type: string;
  from: Hex;
  to: Hex | null;
  value: bigint;
  /** The frame itself failed (reverted, out of gas, insufficient balance...). */
  errored: boolean;
}

/** The frames of a callTracer tree, depth first, parents before children (as trace_block lists them). */
function debugFrames(top: CallFrame): Frame[] {
  const frames: Frame[] = [];
  const walk = (frame: CallFrame, path: number[]) => {
    frames.push({
      traceAddress: path.join('.'),
      type: frame.type,
      from: frame.from,
      to: frame.to ?? null,
      value: BigInt(frame.value ?? '0x0'),
      errored: frame.error !== undefined,
    });
    for (const [i, child] of (frame.calls ?? []).entries()) walk(child, [...path, i]);
  };
  walk(top, []);
  return frames;
}

function parityFrame(entry: ParityTrace): Frame {
  const { action } = entry;
  const traceAddress = entry.traceAddress.join('.');
  const errored = entry.error !== undefined;
  switch (entry.type) {
    case 'call':
      return {
        traceAddress,
        type: action.callType!.toUpperCase(),
        from: action.from!,
        to: action.to!,
        value: BigInt(action.value!),
        errored,
      };
    case 'create':
      return {
        traceAddress,
        type: action.creationMethod!.toUpperCase(),
        from: action.from!,
        to: entry.result?.address ?? null,
        value: BigInt(action.value!),
        errored,
      };
    case 'suicide':
      return {
        traceAddress,
        type: 'SELFDESTRUCT',
        from: action.address!,
        to: action.refundAddress!,
        value: BigInt(action.balance!),
        errored,
      };
    default:
      throw new Error(`unexpected trace_block entry of type ${entry.type}`);
  }
}

const MOVING = new Set(['CALL', 'CREATE', 'CREATE2', 'SELFDESTRUCT']);

/** The internal transfers among a transaction's frames, by the rule above. */
function internalTransfers(frames: Frame[]): Frame[] {
  const failed = frames.filter((f) => f.errored).map((f) => f.traceAddress);
  const within = (at: string, ancestor: string) =>
    ancestor === '' || at === ancestor || at.startsWith(`${ancestor}.`);
  return frames.filter(
    (f) =>
      f.traceAddress !== '' &&
      MOVING.has(f.type) &&
      f.value > 0n &&
      !failed.some((ancestor) => within(f.traceAddress, ancestor)),
  );
}

const frame = (
  traceAddress: string,
  type: string,
  from: Hex,
  to: Hex | null,
  value: bigint,
  errored = false,
): Frame => ({ traceAddress, type, from: lower(from), to: to && lower(to), value, errored });

const lower = (address: Hex) => address.toLowerCase() as Hex;

/** Fresh recipients, empty at genesis: 0x…beef01, 0x…beef02, … */
const recipient = (n: number) => pad(numberToHex(0xbeef00 + n), { size: 20 });

const CASES = [
  'forward',
  'batch',
  'batch reverted',
  'relay',
  'swallow',
  'create',
  'selfdestruct',
  'delegate',
  'account',
  'misfire',
] as const;
type CaseName = (typeof CASES)[number];

interface Case {
  hash: Hex;
  /** Every frame, the top-level one first, as both formats must give them. */
  frames: Frame[];
  /** The internal transfers among them. */
  transfers: Frame[];
}

describe('anvil call traces: debug_traceBlockByNumber (callTracer) and trace_block', () => {
  let anvil: Anvil;
  let publicClient: PublicClient;
  const cases = new Map<CaseName, Case>();
  let blockNumber: bigint;
  let blockHash: Hex;
  let hashes: Hex[];
  let debug: DebugTrace[];
  let parity: ParityTrace[];
  const addresses: Record<string, Hex> = {};
  /** What the smart account should hold after paying out. */
  let accountLeft: bigint;

  const request = (method: string, params: unknown[]) =>
    publicClient.request({ method, params } as never) as Promise<unknown>;
  const parityOf = (hash: Hex) => parity.filter((e) => e.transactionHash === hash);
  const debugOf = (hash: Hex) => debug.find((t) => t.txHash === hash)!.result;

  beforeAll(async () => {
    anvil = await startAnvil();
    const clients = anvilClients(anvil);
    publicClient = clients.publicClient;
    const wallet: DevWallet = clients.wallets[0]!;
    const sender = lower(wallet.account.address);

    const deployed = async (name: ContractName, args?: readonly unknown[]) =>
      lower((await deploy(publicClient, wallet, name, { args })).address);
    const forwarder = await deployed('Forwarder');
    const batchPayer = await deployed('BatchPayer');
    const relayA = await deployed('RelayA');
    const relayB = await deployed('RelayB');
    const relayC = await deployed('RelayC');
    const reverter = await deployed('Reverter');
    const swallower = await deployed('Swallower');
    const childFactory = await deployed('ChildFactory');
    const doomedFactory = await deployed('DoomedFactory');
    const impl = await deployed('DelegateImpl');
    const keeper = await deployed('DelegateKeeper');
    const entryPoint = await deployed('MiniEntryPoint');
    const account = await deployed('MiniAccount', [entryPoint]);
    const misfirer = await deployed('Misfirer');
    const accountFunds = parseEther('2');
    await mined(publicClient, wallet.sendTransaction({ to: account, value: accountFunds }));
    const stake = (await publicClient.readContract({
      address: reverter,
      abi: artifact('Reverter').abi,
      functionName: 'stake',
    })) as bigint;

    // Every case into one block: mining off, explicit nonces, and gas given (no estimate, which
    // would refuse the transaction meant to revert).
    await request('evm_setAutomine', [false]);
    let nonce = await publicClient.getTransactionCount({ address: sender });
    const send = (
      address: Hex,
      name: ContractName,
      functionName: string,
      args: readonly unknown[],
      value: bigint,
    ) =>
      wallet.sendTransaction({
        to: address,
        data: encodeFunctionData({ abi: artifact(name).abi, functionName, args }),
        value,
        nonce: nonce++,
        gas: 1_000_000n,
      });
    const top = (to: Hex, value: bigint, errored = false) => frame('', 'CALL', sender, to, value, errored);
    const sent: [CaseName, Hex, Frame[], Frame[]][] = [];

    {
      const value = parseEther('1.1');
      const pay = frame('0', 'CALL', forwarder, recipient(1), value);
      const hash = await send(forwarder, 'Forwarder', 'forward', [recipient(1)], value);
      sent.push(['forward', hash, [top(forwarder, value), pay], [pay]]);
    }
    {
      const to = [recipient(2), recipient(3), recipient(4)];
      const amounts = [1n, 2n, 3n];
      const pays = to.map((r, i) => frame(String(i), 'CALL', batchPayer, r, amounts[i]!));
      const hash = await send(batchPayer, 'BatchPayer', 'pay', [to, amounts], 6n);
      sent.push(['batch', hash, [top(batchPayer, 6n), ...pays], pays]);
      // The same payments with a wrong total: paid, then "wrong total" reverts the whole transaction.
      // The payment frames show no error of their own: only the top call's error voids them.
      const reverted = await send(batchPayer, 'BatchPayer', 'pay', [to, amounts], 7n);
      sent.push(['batch reverted', reverted, [top(batchPayer, 7n, true), ...pays], []]);
    }
    {
      const value = 500n;
      const frames = [
        top(relayA, value),
        frame('0', 'CALL', relayA, relayB, value),
        frame('0.0', 'CALL', relayB, relayC, value),
        frame('0.0.0', 'CALL', relayC, recipient(5), value),
      ];
      const hash = await send(relayA, 'RelayA', 'relay', [relayB, relayC, recipient(5)], value);
      sent.push(['relay', hash, frames, frames.slice(1)]);
    }
    {
      const value = parseEther('0.75');
      const pay = frame('2', 'CALL', swallower, recipient(6), value);
      const frames = [
        top(swallower, value),
        frame('0', 'STATICCALL', swallower, reverter, 0n),
        frame('1', 'CALL', swallower, reverter, stake, true),
        // Succeeds in itself, but under the reverted "1": moves nothing.
        frame('1.0', 'CALL', reverter, swallower, stake),
        pay,
      ];
      const hash = await send(swallower, 'Swallower', 'payAndSwallow', [recipient(6), reverter], value);
      sent.push(['swallow', hash, frames, [pay]]);
    }
    {
      const createValue = 400n;
      const create2Value = 600n;
      const salt = pad('0x5a17');
      // A contract's nonce starts at 1 (EIP-161); CREATE2's address depends on the salt and init code.
      const child = getContractAddress({ from: childFactory, nonce: 1n });
      const child2 = getContractAddress({
        opcode: 'CREATE2',
        from: childFactory,
        salt,
        bytecode: artifact('ValueChild').bytecode,
      });
      addresses.child = lower(child);
      addresses.child2 = lower(child2);
      const created = [
        frame('0', 'CREATE', childFactory, child, createValue),
        frame('1', 'CREATE2', childFactory, child2, create2Value),
      ];
      const value = createValue + create2Value;
      const hash = await send(childFactory, 'ChildFactory', 'createBoth', [createValue, salt], value);
      sent.push(['create', hash, [top(childFactory, value), ...created], created]);
    }
    {
      const value = 900n;
      const doomed = getContractAddress({ from: doomedFactory, nonce: 1n });
      addresses.doomed = lower(doomed);
      const moved = [
        frame('0', 'CREATE', doomedFactory, doomed, value),
        frame('0.0', 'SELFDESTRUCT', doomed, recipient(7), value),
      ];
      const hash = await send(doomedFactory, 'DoomedFactory', 'createDoomed', [recipient(7)], value);
      sent.push(['selfdestruct', hash, [top(doomedFactory, value), ...moved], moved]);
    }
    {
      const value = 330n;
      // Both frames show the caller's value; neither moves it (CALLCODE sends it to the caller itself).
      const frames = [
        top(keeper, value),
        frame('0', 'DELEGATECALL', keeper, impl, value),
        frame('1', 'CALLCODE', keeper, impl, value),
      ];
      addresses.keeper = keeper;
      addresses.impl = impl;
      const hash = await send(keeper, 'DelegateKeeper', 'keep', [impl], value);
      sent.push(['delegate', hash, frames, []]);
    }
    {
      const value = 450n;
      const pay = frame('0.0', 'CALL', account, recipient(8), value);
      const frames = [top(entryPoint, 0n), frame('0', 'CALL', entryPoint, account, 0n), pay];
      addresses.account = account;
      accountLeft = accountFunds - value;
      const hash = await send(
        entryPoint,
        'MiniEntryPoint',
        'handleOp',
        [account, recipient(8), value, '0x'],
        0n,
      );
      sent.push(['account', hash, frames, [pay]]);
    }
    {
      const value = 77n;
      const pay = frame('2', 'CALL', misfirer, recipient(9), value);
      const frames = [
        top(misfirer, value),
        // Asks for the whole balance (msg.value) plus 1 wei: refused before the callee runs.
        frame('0', 'CALL', misfirer, recipient(9), value + 1n, true),
        // 1 wei with the 2,300 gas stipend into a storage write: out of gas.
        frame('1', 'CALL', misfirer, impl, 1n, true),
        pay,
      ];
      const hash = await send(misfirer, 'Misfirer', 'misfire', [impl, recipient(9)], value);
      sent.push(['misfire', hash, frames, [pay]]);
    }

    await request('evm_mine', []);
    const receipts = await Promise.all(sent.map(([, hash]) => mined(publicClient, hash)));
    await request('evm_setAutomine', [true]);
    blockNumber = receipts[0]!.blockNumber;
    blockHash = receipts[0]!.blockHash;
    expect(receipts.map((r) => [r.blockNumber, r.transactionIndex, r.status])).toEqual(
      sent.map(([name], i) => [blockNumber, i, name === 'batch reverted' ? 'reverted' : 'success']),
    );
    hashes = sent.map(([, hash]) => hash);
    for (const [name, hash, frames, transfers] of sent) cases.set(name, { hash, frames, transfers });

    const block = numberToHex(blockNumber);
    debug = (await request('debug_traceBlockByNumber', [block, { tracer: 'callTracer' }])) as DebugTrace[];
    parity = (await request('trace_block', [block])) as ParityTrace[];
  });

  afterAll(async () => {
    await anvil?.stop();
  });

  test.each(CASES)('%s: the frames and the internal transfers, the same in both formats', (name) => {
    const c = cases.get(name)!;
    const fromDebug = debugFrames(debugOf(c.hash));
    const fromParity = parityOf(c.hash).map(parityFrame);
    expect(fromDebug).toEqual(c.frames);
    expect(fromParity).toEqual(c.frames);
    expect(internalTransfers(fromDebug)).toEqual(c.transfers);
    expect(internalTransfers(fromParity)).toEqual(c.transfers);
  });

  test('the service’s extractor (blockInternalTransfers) gives these transfers from either answer', async () => {
    const block = await publicClient.getBlock({ blockNumber });
    expect(block.hash).toBe(blockHash);
    const target = { hash: block.hash, number: blockNumber, transactions: hashes.map((hash) => ({ hash })) };
    for (const format of ['debug', 'parity'] as const) {
      const perTx = blockInternalTransfers(format, format === 'debug' ? debug : parity, target);
      expect(perTx).toHaveLength(CASES.length);
      perTx.forEach((moved, i) => {
        const expected = cases.get(CASES[i]!)!.transfers;
        expect(
          moved.map((m) => ({ traceAddress: m.traceAddress, from: m.from, to: m.to, value: m.value })),
          `${format}: ${CASES[i]}`,
        ).toEqual(
          expected.map((t) => ({ traceAddress: t.traceAddress, from: t.from, to: t.to, value: t.value })),
        );
      });
    }
  });

  test('the counted transfers are exactly what the balances show', async () => {
    // Everything here was empty before the block and received only internal transfers.
    const transfers = CASES.flatMap((name) => cases.get(name)!.transfers);
    const accounts = [
      ...[1, 2, 3, 4, 5, 6, 7, 8, 9].map(recipient),
      addresses.child!,
      addresses.child2!,
      addresses.doomed!,
    ];
    for (const address of accounts) {
      const net = transfers.reduce(
        (sum, t) => sum + (t.to === address ? t.value : 0n) - (t.from === address ? t.value : 0n),
        0n,
      );
      expect([address, await publicClient.getBalance({ address })]).toEqual([address, net]);
    }
    // The payer of the account case is the account, out of its own balance.
    expect(await publicClient.getBalance({ address: addresses.account! })).toBe(accountLeft);
    // The delegate case moved nothing: the keeper holds the top-level value, the implementation none.
    expect(await publicClient.getBalance({ address: addresses.keeper! })).toBe(330n);
    expect(await publicClient.getBalance({ address: addresses.impl! })).toBe(0n);
    // EIP-6780: destroyed in its creating transaction, the account is gone (no code, no balance).
    expect(await publicClient.getCode({ address: addresses.doomed! })).toBeUndefined();
  });

  test('debug_traceBlockByNumber: [{txHash, result}] per transaction in block order; frame fields', () => {
    expect(debug.map((t) => Object.keys(t).sort())).toEqual(hashes.map(() => ['result', 'txHash']));
    expect(debug.map((t) => t.txHash)).toEqual(hashes);
    // A plain CALL frame: value always present (top-level too, "0x0" included), output and calls
    // only when not empty.
    const forward = debugOf(cases.get('forward')!.hash);
    expect(Object.keys(forward).sort()).toEqual([
      'calls',
      'from',
      'gas',
      'gasUsed',
      'input',
      'to',
      'type',
      'value',
    ]);
    expect(forward.calls![0]).toEqual({
      from: cases.get('forward')!.frames[1]!.from,
      to: recipient(1),
      type: 'CALL',
      value: numberToHex(parseEther('1.1')),
      gas: expect.stringMatching(/^0x[0-9a-f]+$/),
      gasUsed: '0x0',
      input: '0x',
    });
    expect(debugOf(cases.get('account')!.hash).value).toBe('0x0');
  });

  test('trace_block: a flat list of entries, transaction by transaction, parents first; no reward entries', async () => {
    // One entry per frame of the callTracer answer, nothing else: no block or uncle rewards.
    const frameCount = debug.reduce((n, t) => n + debugFrames(t.result).length, 0);
    expect(parity).toHaveLength(frameCount);
    expect(new Set(parity.map((e) => e.type))).toEqual(new Set(['call', 'create', 'suicide']));
    expect(parity.map((e) => e.transactionHash)).toEqual(
      hashes.flatMap((hash) => debugFrames(debugOf(hash)).map(() => hash)),
    );
    for (const entry of parity) {
      expect(entry.transactionPosition).toBe(hashes.indexOf(entry.transactionHash));
      expect(entry.blockHash).toBe(blockHash);
      // A JSON number, not a hex quantity.
      expect(entry.blockNumber).toBe(Number(blockNumber));
    }
    const forward = parityOf(cases.get('forward')!.hash);
    expect(forward[1]).toEqual({
      type: 'call',
      action: {
        from: cases.get('forward')!.frames[1]!.from,
        to: recipient(1),
        callType: 'call',
        value: numberToHex(parseEther('1.1')),
        gas: expect.stringMatching(/^0x[0-9a-f]+$/),
        input: '0x',
      },
      result: { gasUsed: '0x0', output: '0x' },
      subtraces: 0,
      traceAddress: [0],
      transactionHash: cases.get('forward')!.hash,
      transactionPosition: hashes.indexOf(cases.get('forward')!.hash),
      blockHash,
      blockNumber: Number(blockNumber),
    });
    // The genesis block: an empty list (no reward entry either).
    expect(await request('trace_block', ['0x0'])).toEqual([]);
  });

  test('traceAddress and subtraces of trace_block agree with the callTracer nesting for every frame', () => {
    for (const hash of hashes) {
      const nested: { traceAddress: number[]; subtraces: number }[] = [];
      const walk = (f: CallFrame, path: number[]) => {
        nested.push({ traceAddress: path, subtraces: f.calls?.length ?? 0 });
        for (const [i, child] of (f.calls ?? []).entries()) walk(child, [...path, i]);
      };
      walk(debugOf(hash), []);
      expect(parityOf(hash).map(({ traceAddress, subtraces }) => ({ traceAddress, subtraces }))).toEqual(
        nested,
      );
    }
  });

  test('errors: callTracer `error` (+ `revertReason`); trace_block `error`, result kept only on revert', () => {
    // Only the presence of `error` marks a failed frame: the texts differ by format and by failure.
    const batch = debugOf(cases.get('batch reverted')!.hash);
    expect(batch).toMatchObject({ error: 'execution reverted', revertReason: 'wrong total' });
    expect(batch.output).toMatch(/^0x08c379a0/); // Error(string)
    expect(batch.calls!.map((c) => c.error)).toEqual([undefined, undefined, undefined]);
    const swallowed = debugOf(cases.get('swallow')!.hash).calls![1]!;
    expect(swallowed).toMatchObject({ error: 'execution reverted', revertReason: 'taken back' });
    const [tooMuch, starved] = debugOf(cases.get('misfire')!.hash).calls!;
    expect(tooMuch).toMatchObject({ error: 'insufficient balance for transfer', gasUsed: '0x0' });
    expect(starved).toMatchObject({ error: 'out of gas: not enough gas for reentrancy sentry' });
    expect(tooMuch!.revertReason).toBeUndefined();
    expect(tooMuch!.output).toBeUndefined();

    // trace_block: "Reverted" keeps the result (gasUsed, output with the revert data); other
    // failures have result null.
    const [batchTop, ...batchPays] = parityOf(cases.get('batch reverted')!.hash);
    expect(batchTop).toMatchObject({
      error: 'Reverted',
      result: { gasUsed: expect.any(String), output: batch.output },
    });
    expect(batchPays.map((e) => e.error)).toEqual([undefined, undefined, undefined]);
    expect(parityOf(cases.get('swallow')!.hash)[2]).toMatchObject({
      traceAddress: [1],
      error: 'Reverted',
      result: { output: swallowed.output },
    });
    const misfire = parityOf(cases.get('misfire')!.hash);
    expect(misfire[1]).toMatchObject({
      traceAddress: [0],
      error: 'Insufficient balance for transfer',
      result: null,
    });
    expect(misfire[2]).toMatchObject({ traceAddress: [1], error: 'Out of gas', result: null });
    // No "error" key at all on frames that did not fail.
    expect('error' in misfire[3]!).toBe(false);
  });

  test('SELFDESTRUCT: a callTracer frame with value; a trace_block "suicide" with balance and refundAddress', () => {
    const c = cases.get('selfdestruct')!;
    const doomed = addresses.doomed!;
    const create = debugOf(c.hash).calls![0]!;
    expect(create.calls).toEqual([
      {
        type: 'SELFDESTRUCT',
        from: doomed,
        to: recipient(7),
        value: '0x384',
        gas: '0x0',
        gasUsed: '0x0',
        input: '0x',
      },
    ]);
    // Destroyed in its constructor: the CREATE frame's output (the runtime code) is empty, so absent.
    expect(create.output).toBeUndefined();
    const [, createEntry, suicide] = parityOf(c.hash);
    expect(suicide).toMatchObject({
      type: 'suicide',
      action: { address: doomed, refundAddress: recipient(7), balance: '0x384' },
      result: null,
      subtraces: 0,
      traceAddress: [0, 0],
    });
    expect(Object.keys(suicide!.action).sort()).toEqual(['address', 'balance', 'refundAddress']);
    expect('error' in suicide!).toBe(false);
    expect(createEntry!.result).toMatchObject({ address: doomed, code: '0x' });
  });

  test('CREATE and CREATE2: callTracer types with `to` the new address; trace_block "create" with creationMethod', () => {
    const c = cases.get('create')!;
    const { bytecode } = artifact('ValueChild');
    const [create, create2] = debugOf(c.hash).calls!;
    for (const [f, type, address, value] of [
      [create, 'CREATE', addresses.child, '0x190'],
      [create2, 'CREATE2', addresses.child2, '0x258'],
    ] as const) {
      // input: the init code; output: the deployed code.
      expect(f).toMatchObject({ type, to: address, value, input: bytecode });
      expect(f!.output).toMatch(/^0x[0-9a-f]+$/);
      expect(Object.keys(f!).sort()).toEqual([
        'from',
        'gas',
        'gasUsed',
        'input',
        'output',
        'to',
        'type',
        'value',
      ]);
    }
    const [, createEntry, create2Entry] = parityOf(c.hash);
    for (const [entry, method, address, value, code] of [
      [createEntry, 'create', addresses.child, '0x190', create!.output],
      [create2Entry, 'create2', addresses.child2, '0x258', create2!.output],
    ] as const) {
      // No `to` in the action: the new address is result.address.
      expect(entry).toMatchObject({
        type: 'create',
        action: { from: c.frames[0]!.to, value, init: bytecode, creationMethod: method },
        result: { address, code },
      });
      expect(Object.keys(entry!.action).sort()).toEqual(['creationMethod', 'from', 'gas', 'init', 'value']);
      expect(Object.keys(entry!.result!).sort()).toEqual(['address', 'code', 'gasUsed']);
    }
  });

  test('DELEGATECALL and CALLCODE show the caller`s value in both formats; STATICCALL shows none or 0x0', () => {
    const [delegate, callcode] = debugOf(cases.get('delegate')!.hash).calls!;
    expect(delegate).toMatchObject({ type: 'DELEGATECALL', value: '0x14a' });
    expect(callcode).toMatchObject({ type: 'CALLCODE', value: '0x14a' });
    const [, delegateEntry, callcodeEntry] = parityOf(cases.get('delegate')!.hash);
    expect(delegateEntry!.action).toMatchObject({ callType: 'delegatecall', value: '0x14a' });
    expect(callcodeEntry!.action).toMatchObject({ callType: 'callcode', value: '0x14a' });

    // STATICCALL: no `value` key in the callTracer frame; "0x0" in trace_block.
    const staticCall = debugOf(cases.get('swallow')!.hash).calls![0]!;
    expect(staticCall.type).toBe('STATICCALL');
    expect('value' in staticCall).toBe(false);
    expect(parityOf(cases.get('swallow')!.hash)[1]!.action).toMatchObject({
      callType: 'staticcall',
      value: '0x0',
    });
  });
});
