/**
 * Watching Solana end to end: the real service follows a loopback Solana node of our own
 * (test/helpers/solana-node.ts) serving the recorded mainnet block 110360000 and blocks ASSEMBLED
 * from its real transactions (test/fixtures/chains/solana/README.md), with skipped slots and a
 * block replaced at `confirmed`, and delivers signed notifications to a real receiver. Polling is
 * all but off: slotSubscribe is what wakes the follower.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';
import { type Receiver, startReceiver, verifiedBodies } from '../helpers/receiver.js';
import {
  FAILED_PAYER,
  KIN,
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
  assembledHash,
  blockhashOf,
  recordedSlot,
  recordedTransactions,
  type SolanaNode,
  skippedSlot,
  startSolanaNode,
} from '../helpers/solana-node.js';

type Body = Record<string, unknown>;
type Status = { network: string; height: number | null; healthy: boolean; lastError: string | null };

const R = SLOT;
const FEE_PAYER = KIN_FEE_PAYER;
/** Another real KIN transfer of the slot: 0.01309 KIN from Auj8GY… to KIN_OWNER. */
const KIN_TO_OWNER =
  'FEQuCuZ3PRsMnH7xrAk8VpmhASxxoUQEHwvdS52R9x1HWGpbkvR4X5YTHA8BcQtA4fi4FDaPoLwtAyUstHBFucz';
const KIN_OWNER = '6EqVQjUfE4aoz4aiuMcXzHxmBXrs7HHzNVnMXm4i9a71';
/** The hash assembleBlock gave a slot (no fork label). */
const assembledHashOf = (slot: number) => assembledHash(`${slot} `);

describe.each(backends)('watching Solana on %s', (backend) => {
  let node: SolanaNode;
  let t: TestApp;
  let receiver: Receiver;
  const secrets = new Map<string, string>();
  const subscriptionOf = new Map<string, string>();

  const status = async (): Promise<Status | undefined> => {
    const ready = (await (await fetch(`${t.app.url}/readyz`)).json()) as { networks: Status[] };
    return ready.networks.find((n) => n.network === 'SOL');
  };
  /** Every delivery, its signature verified with its subscription's secret. */
  const bodies = (): Body[] => verifiedBodies(receiver.requests, secrets);
  const expected = (watched: string, fields: Body): Body => ({
    address: watched,
    type: 'native',
    asset: 'SOL',
    ...fields,
    subscriptionId: subscriptionOf.get(watched),
    chain: 'SOL',
    watchedAddress: watched,
    confirmations: 1,
  });

  /** One subscription per address, to the one receiver; its secret kept to verify deliveries. */
  async function subscribe(address: string): Promise<void> {
    const res = await t.request('POST', '/api/v1/subscription', {
      body: { type: 'ADDRESS_TRANSACTION', attr: { chain: 'SOL', address, url: receiver.url } },
    });
    expect(res.status, res.text).toBe(201);
    const { id, secret } = res.body as { id: string; secret: string };
    secrets.set(id, secret);
    subscriptionOf.set(address, id);
  }

  beforeAll(async () => {
    node = await startSolanaNode();
    node.setSlots([recordedSlot(R)]);
    receiver = await startReceiver();
    t = await startTestApp(backend, {
      LEDGERHOOK_ROLES: 'all',
      LEDGERHOOK_RPC_SOL: node.url,
      LEDGERHOOK_WS_SOL: node.wsUrl,
      LEDGERHOOK_WATCH_POLL_INTERVAL: '600s',
    });
    for (const address of [RECEIVER, KIN_ACCOUNT, FEE_PAYER, FAILED_PAYER, LATER_RECEIVER])
      await subscribe(address);
    await waitFor(async () => ((await status())?.height === R ? true : undefined), 'the recorded slot');
    await waitFor(() => (node.subscribers() > 0 ? true : undefined), 'slotSubscribe');
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
    await node?.close();
  });

  const first = assembleBlock({
    slot: R + 3,
    parentSlot: R,
    previousBlockhash: SLOT_HASH,
    transactions: recordedTransactions(R, [TX.sol, TX.kin, TX.failed]),
  });

  test('two skipped slots, then a block: a SOL receipt and a token account’s debit; fee-only and failed nothing', async () => {
    node.addSlots(skippedSlot(R + 1), skippedSlot(R + 2), first);
    await receiver.waitForRequests(2, 10_000);
    await waitFor(async () => ((await status())?.height === R + 3 ? true : undefined), 'slot R+3 processed');
    const got = bodies();
    expect(
      got
        .map(({ id: _, ...rest }) => rest)
        .sort((a, b) => String(a.address).localeCompare(String(b.address))),
    ).toEqual([
      expected(KIN_ACCOUNT, {
        txId: TX.kin,
        type: 'token',
        blockNumber: R + 3,
        asset: KIN,
        amount: '-1',
        counterAddress: KIN_RECEIVER,
      }),
      expected(RECEIVER, { txId: TX.sol, blockNumber: R + 3, amount: '0.05', counterAddress: SENDER }),
    ]);
    for (const r of receiver.requests) expect(r.headers['webhook-id']).toBe(JSON.parse(r.body).id);
  });

  test('the block replaced at `confirmed` without the KIN transfer: it is withdrawn, the SOL receipt left alone', async () => {
    const replacement = assembleBlock({
      slot: R + 3,
      parentSlot: R,
      previousBlockhash: SLOT_HASH,
      transactions: recordedTransactions(R, [TX.sol]),
      fork: 'b',
    });
    const before = bodies();
    node.replace(replacement);
    await receiver.waitForRequests(3, 10_000);
    const withdrawal = bodies().find((b) => b.reorg === true)!;
    const original = before.find((b) => b.txId === TX.kin)!;
    expect(withdrawal).toEqual({ ...original, id: withdrawal.id, reorg: true });

    // The next real block links to the replacement through a skipped slot.
    node.addSlots(
      skippedSlot(R + 4),
      assembleBlock({
        slot: R + 5,
        parentSlot: R + 3,
        previousBlockhash: blockhashOf(replacement),
        transactions: recordedTransactions(R, [TX.later]),
      }),
    );
    await receiver.waitForRequests(4, 10_000);
    const all = bodies();
    const { id: _, ...latest } = all.find((b) => b.txId === TX.later)!;
    expect(latest).toEqual(
      expected(LATER_RECEIVER, {
        txId: TX.later,
        blockNumber: R + 5,
        amount: '0.0213',
        counterAddress: LATER_SENDER,
      }),
    );
    // Nothing else: the SOL receipt was not notified again, the fee payer and failed payer never.
    expect(all).toHaveLength(4);
    expect(all.filter((b) => b.watchedAddress === FEE_PAYER || b.watchedAddress === FAILED_PAYER)).toEqual(
      [],
    );
    await waitFor(async () => {
      const s = await status();
      return s?.height === R + 5 && s.healthy ? s : undefined;
    }, 'slot R+5 processed');
  });
  test('the node down: /readyz shows it at once (the dropped socket wakes the follower); back, a token receipt per owner', async () => {
    await subscribe(KIN_OWNER);

    await node.stop();
    const down = await waitFor(
      async () => {
        const s = await status();
        return s?.lastError ? s : undefined;
      },
      'the outage in /readyz',
      10_000,
    );
    expect(down.lastError).toContain(new URL(node.url).host);
    await node.start();
    await waitFor(() => (node.subscribers() > 0 ? true : undefined), 'slotSubscribe again', 15_000);
    node.addSlots(
      assembleBlock({
        slot: R + 6,
        parentSlot: R + 5,
        previousBlockhash: assembledHashOf(R + 5),
        transactions: recordedTransactions(R, [KIN_TO_OWNER]),
      }),
    );
    await receiver.waitForRequests(5, 15_000);
    const { id: _, ...got } = bodies().find((b) => b.txId === KIN_TO_OWNER)!;
    // Token account 3, owner 6EqVQj…: 900000 → 901309 (5 decimals); owner Auj8GY… the other way.
    expect(got).toEqual(
      expected(KIN_OWNER, {
        txId: KIN_TO_OWNER,
        type: 'token',
        blockNumber: R + 6,
        asset: KIN,
        amount: '0.01309',
        counterAddress: 'Auj8GYGqHgoTwTTowQft7WWZafzNnMkGaKc4pPafiN8K',
      }),
    );
    await waitFor(async () => ((await status())?.healthy ? true : undefined), 'healthy again');
  });
});
