import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { comparableBody, runBackfills, storedBodies } from '../helpers/backfill.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver } from '../helpers/receiver.js';
import {
  FAILED_PAYER,
  KIN_ACCOUNT,
  KIN_FEE_PAYER,
  KIN_RECEIVER,
  LATER_RECEIVER,
  LATER_SENDER,
  RECEIVER,
  SENDER,
  SLOT,
  SLOT_HASH,
  TX,
} from '../helpers/solana-blocks.js';
import {
  assembleBlock,
  blockhashOf,
  recordedSlot,
  recordedTransactions,
  type SolanaNode,
  skippedSlot,
  startSolanaNode,
} from '../helpers/solana-node.js';

type View = { state: string; found: number; method: string };

const R = SLOT;
/** A real KIN transfer of the slot to a token account of KIN_OWNER (see solana-watch.test.ts). */
const KIN_TO_OWNER =
  'FEQuCuZ3PRsMnH7xrAk8VpmhASxxoUQEHwvdS52R9x1HWGpbkvR4X5YTHA8BcQtA4fi4FDaPoLwtAyUstHBFucz';
const KIN_OWNER = '6EqVQjUfE4aoz4aiuMcXzHxmBXrs7HHzNVnMXm4i9a71';
/**
 * Payers and payees of SOL, a token account and its counterparty, a wallet whose token account
 * alone moves (found only through its token accounts), a fee-only payer and a failed one.
 */
const WATCHED = [
  SENDER,
  RECEIVER,
  KIN_ACCOUNT,
  KIN_RECEIVER,
  KIN_OWNER,
  LATER_SENDER,
  LATER_RECEIVER,
  KIN_FEE_PAYER,
  FAILED_PAYER,
];
const FIRST = R + 1;
const LAST = R + 5;

describe.each(backends)('backfill on Solana on %s', (backend) => {
  let node: SolanaNode;
  let t: TestApp;
  let receiver: Receiver;
  const live: string[] = [];

  const subscribe = async (address: string, path: string) => {
    const res = await t.request('POST', '/api/v1/subscription', {
      body: { type: 'ADDRESS_TRANSACTION', attr: { chain: 'SOL', address, url: `${receiver.url}${path}` } },
    });
    expect(res.status, res.text).toBe(201);
    return (res.body as { id: string }).id;
  };
  const bodiesOf = (ids: string[]) => storedBodies(t.app.store.db, ids);
  const comparable = comparableBody;
  const backfill = (ids: string[]) => runBackfills<View>(t, ids, { from: FIRST, to: LAST });
  const height = async () => {
    const ready = (await (await fetch(`${t.app.url}/readyz`)).json()) as {
      networks: { network: string; height: number | null }[];
    };
    return ready.networks.find((n) => n.network === 'SOL')?.height;
  };

  beforeAll(async () => {
    node = await startSolanaNode();
    node.setSlots([recordedSlot(R)]);
    receiver = await startReceiver();
    t = await startTestApp(backend, {
      LEDGERHOOK_ROLES: 'all',
      LEDGERHOOK_RPC_SOL: node.url,
      LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms',
      LEDGERHOOK_BACKFILL_RPS: '0',
      LEDGERHOOK_BACKFILL_BLOCKS: '2',
    });
    for (const address of WATCHED) live.push(await subscribe(address, '/live'));
    await waitFor(async () => ((await height()) === R ? true : undefined), 'the recorded slot');
    const withSol = assembleBlock({
      slot: R + 2,
      parentSlot: R,
      previousBlockhash: SLOT_HASH,
      transactions: recordedTransactions(R, [TX.sol, TX.kin, TX.failed]),
    });
    const later = assembleBlock({
      slot: R + 3,
      parentSlot: R + 2,
      previousBlockhash: blockhashOf(withSol),
      transactions: recordedTransactions(R, [TX.later]),
    });
    node.addSlots(
      skippedSlot(R + 1),
      withSol,
      later,
      skippedSlot(R + 4),
      assembleBlock({
        slot: R + 5,
        parentSlot: R + 3,
        previousBlockhash: blockhashOf(later),
        transactions: recordedTransactions(R, [KIN_TO_OWNER]),
      }),
    );
    await waitFor(async () => ((await height()) === LAST ? true : undefined), `slot ${LAST}`, 20_000);
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
    await node?.close();
  });

  test('a backfill of the slots on fresh subscriptions notifies exactly what the follower did', async () => {
    const liveBodies = await bodiesOf(live);
    // SOL both ways twice, KIN both ways, KIN to an owner; fee-only and failed nothing.
    expect(liveBodies.map((b) => `${b.txId}:${b.watchedAddress}`).sort()).toEqual(
      [
        `${TX.sol}:${SENDER}`,
        `${TX.sol}:${RECEIVER}`,
        `${TX.kin}:${KIN_ACCOUNT}`,
        `${TX.kin}:${KIN_RECEIVER}`,
        `${TX.later}:${LATER_SENDER}`,
        `${TX.later}:${LATER_RECEIVER}`,
        `${KIN_TO_OWNER}:${KIN_OWNER}`,
      ].sort(),
    );

    const fresh: string[] = [];
    for (const address of WATCHED) fresh.push(await subscribe(address, '/fresh'));
    const before = node.requests.length;
    const views = await backfill(fresh);
    for (const v of views) expect(v.state).toBe('done');
    expect(views[0]!.method).toMatch(/getSignaturesForAddress/);
    const asked = node.requests.slice(before).map((r) => r.method);
    expect(asked).toContain('getSignaturesForAddress');
    expect(asked).toContain('getTokenAccountsByOwner');
    // The failed transaction is not fetched: it moves nothing to notify.
    const fetched = node.requests.slice(before).filter((r) => r.method === 'getTransaction');
    expect(fetched.some((r) => r.params[0] === TX.failed)).toBe(false);

    const backfilled = await bodiesOf(fresh);
    expect(backfilled.every((b) => b.backfill === true)).toBe(true);
    expect(views.reduce((n, v) => n + v.found, 0)).toBe(backfilled.length);
    expect(backfilled.map(comparable).sort()).toEqual(liveBodies.map(comparable).sort());
  }, 40_000);

  test('on the subscriptions the follower already notified, a backfill adds nothing', async () => {
    const views = await backfill(live);
    for (const v of views) expect(v).toMatchObject({ state: 'done', found: 0 });
    const after = await bodiesOf(live);
    expect(after).toHaveLength(7);
    expect(after.some((b) => b.backfill === true)).toBe(false);
  }, 40_000);
});
