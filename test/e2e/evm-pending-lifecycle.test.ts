import { eq } from 'drizzle-orm';
import { type Hex, keccak256, parseEther, parseGwei } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { pendingAnnouncements } from '../../src/watch/schema.js';
import { type Body, type Devnet, startDevnet } from '../helpers/devnet.js';
import { backends } from '../helpers/env.js';
import { waitFor } from '../helpers/process.js';

/**
 * Pending EVM transactions that never arrive, on a real anvil chain with mining paused: a pending
 * announcement is withdrawn (`dropped: true`) when its nonce is mined by another transaction
 * (`replacedBy`), or when it has left the pool for LEDGERHOOK_MEMPOOL_DROP_AFTER; a mined
 * transaction is never withdrawn this way.
 */

const FEES = { maxFeePerGas: parseGwei('20'), maxPriorityFeePerGas: parseGwei('1') };
/** Enough above FEES for anvil's pool to take the replacement (it wants at least 10% more). */
const HIGHER_FEES = { maxFeePerGas: parseGwei('40'), maxPriorityFeePerGas: parseGwei('2') };

/** Signs a native transfer from dev account `from` with fixed fields; returns the raw bytes. */
async function signed(
  d: Devnet,
  from: number,
  fields: { to: Hex; value: bigint; nonce: number; fees: typeof FEES },
): Promise<Hex> {
  const wallet = d.wallets[from]!;
  return wallet.account!.signTransaction!({
    chainId: d.anvil.chainId,
    type: 'eip1559',
    to: fields.to,
    value: fields.value,
    nonce: fields.nonce,
    gas: 21_000n,
    ...fields.fees,
  });
}

async function broadcast(d: Devnet, raw: Hex): Promise<Hex> {
  return (await d.chain.request({ method: 'eth_sendRawTransaction', params: [raw] })) as Hex;
}

/** The dev account's next nonce, counting what waits in the pool. */
async function nextNonce(d: Devnet, from: number): Promise<number> {
  return d.chain.getTransactionCount({ address: d.addresses[from]!, blockTag: 'pending' });
}

describe.each(backends)('pending EVM transactions replaced on %s', (backend) => {
  let d: Devnet;
  // alice (1) is watched with mempool notifications; carol (3) and dave (4) are not watched.
  const who = () => {
    const [, alice, , carol, dave] = d.addresses as [Hex, Hex, Hex, Hex, Hex];
    return { alice, carol, dave };
  };

  beforeAll(async () => {
    d = await startDevnet(backend);
    d.subs.set(who().alice, await d.subscribe(who().alice, { mempool: true }));
    await d.setAutomine(false);
  });

  afterAll(async () => {
    await d?.close();
  });

  /** Announces a pending transfer from alice to carol; returns its hash and its pending body. */
  async function announced(value: bigint): Promise<{ hash: Hex; nonce: number; pending: Body }> {
    const nonce = await nextNonce(d, 1);
    const hash = await broadcast(d, await signed(d, 1, { to: who().carol, value, nonce, fees: FEES }));
    const [pending] = await d.receivedAtLeast(hash, 1);
    expect(pending).toMatchObject({ mempool: true, txId: hash, amount: `-${Number(value) / 1e18}` });
    return { hash, nonce, pending: pending! };
  }

  test('sped up to another address: the pending one is withdrawn with dropped: true and replacedBy', async () => {
    const { alice, dave } = who();
    const first = await announced(parseEther('1'));
    const replacement = await broadcast(
      d,
      await signed(d, 1, { to: dave, value: parseEther('0.9'), nonce: first.nonce, fees: HIGHER_FEES }),
    );
    await d.receivedAtLeast(replacement, 1); // announced as pending too: alice is its sender
    await d.mine();

    const [, dropped] = await d.receivedAtLeast(first.hash, 2);
    expect(dropped).toEqual({ ...first.pending, id: dropped!.id, dropped: true, replacedBy: replacement });
    expect(dropped!.id).not.toBe(first.pending.id);
    // The replacement is notified mined as usual; the replaced one never is.
    const minedBodies = await d.receivedAtLeast(replacement, 2);
    expect(minedBodies.find((b) => b.mempool === false)).toMatchObject({
      amount: '-0.9',
      counterAddress: dave,
    });
    const log = (await d.logged(d.subs.get(alice)!.id)).filter((n) => n.payload.txId === first.hash);
    expect(log.map((n) => n.eventType)).toEqual([
      'address.transaction.pending',
      'address.transaction.dropped',
    ]);
    expect(d.received(first.hash)).toHaveLength(2);
  });

  test('cancelled (same nonce, nothing to oneself): withdrawn, replacedBy the cancellation', async () => {
    const { alice } = who();
    const first = await announced(parseEther('2'));
    const cancel = await broadcast(
      d,
      await signed(d, 1, { to: alice, value: 0n, nonce: first.nonce, fees: HIGHER_FEES }),
    );
    await d.mine();
    const [, dropped] = await d.receivedAtLeast(first.hash, 2);
    expect(dropped).toEqual({ ...first.pending, id: dropped!.id, dropped: true, replacedBy: cancel });
    // A transfer of nothing notifies nothing, pending or mined.
    const receipt = await d.chain.getTransactionReceipt({ hash: cancel });
    await d.processed(receipt.blockNumber);
    expect(d.received(cancel)).toEqual([]);
  });

  test('mined as announced: never withdrawn', async () => {
    const first = await announced(parseEther('0.5'));
    await d.mine();
    const bodies = await d.receivedAtLeast(first.hash, 2);
    expect(bodies[1]).toMatchObject({ mempool: false, txId: first.hash });
    // A later block using the next nonce does not touch it.
    await broadcast(
      d,
      await signed(d, 1, { to: who().carol, value: 1n, nonce: first.nonce + 1, fees: FEES }),
    );
    await d.mine();
    await d.processed(await d.chain.getBlockNumber());
    expect(d.received(first.hash).filter((b) => b.dropped)).toEqual([]);
  });
});

describe.each(backends)('pending EVM transactions gone from the pool on %s', (backend) => {
  let d: Devnet;
  const who = () => {
    const [, alice, , carol] = d.addresses as [Hex, Hex, Hex, Hex];
    return { alice, carol };
  };

  beforeAll(async () => {
    d = await startDevnet(backend, { proxy: true, env: { LEDGERHOOK_MEMPOOL_DROP_AFTER: '300ms' } });
    d.subs.set(who().alice, await d.subscribe(who().alice, { mempool: true }));
    await d.setAutomine(false);
  });

  afterAll(async () => {
    await d?.close();
  });

  test('dropped by the node: withdrawn after the timeout, without replacedBy; broadcast again and mined: notified, not withdrawn again', async () => {
    const { carol } = who();
    const nonce = await nextNonce(d, 1);
    const raw = await signed(d, 1, { to: carol, value: parseEther('3'), nonce, fees: FEES });
    const hash = await broadcast(d, raw);
    expect(hash).toBe(keccak256(raw));
    const [pending] = await d.receivedAtLeast(hash, 1);

    await d.chain.request({ method: 'anvil_dropTransaction' as never, params: [hash] as never });
    const [, dropped] = await d.receivedAtLeast(hash, 2);
    expect(dropped).toEqual({ ...pending, id: dropped!.id, dropped: true });
    expect(Object.keys(dropped!)).not.toContain('replacedBy');

    // The same signed transaction again, mined this time: the mined notification, nothing more.
    expect(await broadcast(d, raw)).toBe(hash);
    await d.mine();
    const bodies = await d.receivedAtLeast(hash, 3);
    expect(bodies[2]).toMatchObject({ mempool: false, txId: hash, amount: '-3' });
    const height = (await d.chain.getTransactionReceipt({ hash })).blockNumber;
    await d.processed(height);
    // Nothing is left to withdraw, and the withdrawal came once.
    const left = await d.t.app.store.db
      .select()
      .from(pendingAnnouncements)
      .where(eq(pendingAnnouncements.txId, hash));
    expect(left).toEqual([]);
    expect(d.received(hash).filter((b) => b.dropped)).toHaveLength(1);
  });

  test('still in the pool past the timeout: not withdrawn', async () => {
    const { carol } = who();
    const nonce = await nextNonce(d, 1);
    const raw = await signed(d, 1, { to: carol, value: 7n, nonce, fees: FEES });
    // The service's questions about it, as its node (the proxy) sees them.
    const asked: number[] = [];
    d.proxy!.intercept((request) => {
      if (request.method === 'eth_getTransactionByHash' && request.params?.[0] === keccak256(raw))
        asked.push(Date.now());
      return undefined;
    });
    const hash = await broadcast(d, raw);
    await d.receivedAtLeast(hash, 1);
    // Asked about it for more than twice the drop timeout: pending at the node, it stays announced.
    await waitFor(
      () => (asked.length > 2 && asked[asked.length - 1]! - asked[0]! > 600 ? true : undefined),
      'drop checks spanning twice the timeout',
    );
    expect(d.received(hash)).toHaveLength(1);
    await d.mine();
    await d.receivedAtLeast(hash, 2);
    expect(d.received(hash).filter((b) => b.dropped)).toEqual([]);
  });
});
