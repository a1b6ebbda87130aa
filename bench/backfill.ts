/**
 * bench:backfill — EVM backfill speed over 2,000 anvil blocks of transfers (native and ERC-20 to
 * and from a watched address): the real runner (history source, the follower's matcher, outbox
 * commits on embedded PGlite) beside the reference, the same node requests alone (transfer logs
 * with the address in the topics, and every block with its transactions), in the same run.
 */
import { eq } from 'drizzle-orm';
import pino from 'pino';
import {
  createPublicClient,
  createWalletClient,
  encodeFunctionData,
  type Hex,
  http,
  numberToHex,
  pad,
  parseEther,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { accounts } from '../src/accounts/schema.js';
import { backfillFamily } from '../src/backfill/families.js';
import { createBackfillRunner } from '../src/backfill/runner.js';
import { backfills } from '../src/backfill/schema.js';
import { TRANSFER_TOPIC } from '../src/chains/evm/activity.js';
import { startAnvil } from '../src/chains/evm/anvil.js';
import { loadNetworks } from '../src/chains/networks.js';
import { createThrottle } from '../src/shared/throttle.js';
import { openStore } from '../src/store/db.js';
import { subscriptionAddresses, subscriptions } from '../src/subscriptions/schema.js';
import { artifact } from '../test/helpers/anvil.js';
import { machineLine, makeTempDir, onCleanup, runMain } from './lib.js';

const BLOCKS = 2_000;
const ACTIVE_EVERY = 10;
const CHUNK = 100;

runMain('bench:backfill', async () => {
  const anvil = await startAnvil();
  onCleanup(() => anvil.stop());
  const [a0, a1] = anvil.accounts as [{ address: Hex; privateKey: Hex }, { address: Hex; privateKey: Hex }];
  const wallet = createWalletClient({
    account: privateKeyToAccount(a0.privateKey),
    transport: http(anvil.rpcUrl),
  });
  const chain = createPublicClient({ transport: http(anvil.rpcUrl), pollingInterval: 50 });
  const rpc = (method: string, params: unknown[]) =>
    chain.request({ method: method as never, params: params as never });
  const watched = a1.address;

  const { abi, bytecode } = artifact('TestToken');
  const deployed = await chain.waitForTransactionReceipt({
    hash: await wallet.deployContract({ abi, bytecode, chain: null }),
  });
  const token = deployed.contractAddress!;
  await rpc('evm_setAutomine', [false]);
  const first = Number(await chain.getBlockNumber()) + 1;
  let nonce = await chain.getTransactionCount({ address: a0.address, blockTag: 'pending' });
  process.stdout.write(`building ${BLOCKS} blocks…\n`);
  for (let i = 0; i < BLOCKS / ACTIVE_EVERY; i++) {
    // Ten transfers of each kind to the watched address in one block, then empty blocks.
    for (let k = 0; k < 10; k++) {
      await wallet.sendTransaction({
        to: watched,
        value: parseEther('0.001'),
        nonce: nonce++,
        gas: 21_000n,
        chain: null,
      });
      await wallet.sendTransaction({
        to: token,
        data: encodeFunctionData({ abi, functionName: 'mint', args: [watched, 1_000n] }),
        nonce: nonce++,
        gas: 100_000n,
        chain: null,
      });
    }
    await rpc('evm_mine', []);
    await rpc('anvil_mine', [numberToHex(ACTIVE_EVERY - 1)]);
  }
  const last = first + BLOCKS - 1;

  // Reference: the same requests alone, chunk by chunk, blocks 4 in flight.
  const t0 = performance.now();
  const topic = pad(watched.toLowerCase() as Hex, { size: 32 });
  for (let from = first; from <= last; from += CHUNK) {
    const to = Math.min(last, from + CHUNK - 1);
    const range = { fromBlock: numberToHex(from), toBlock: numberToHex(to) };
    await Promise.all([
      rpc('eth_getLogs', [{ ...range, topics: [TRANSFER_TOPIC, [topic]] }]),
      rpc('eth_getLogs', [{ ...range, topics: [TRANSFER_TOPIC, null, [topic]] }]),
    ]);
    let next = from;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next <= to) await rpc('eth_getBlockByNumber', [numberToHex(next++), true]);
      }),
    );
  }
  const referenceMs = performance.now() - t0;

  // The backfill: the runner on embedded PGlite, no throttle.
  const store = await openStore({ pgliteDir: makeTempDir('ledgerhook-bench-backfill-') });
  onCleanup(() => store.close());
  await store.migrate();
  const now = new Date();
  const accountId = '01900000-0000-7000-8000-000000000001';
  const subscriptionId = '01900000-0000-7000-8000-000000000002';
  await store.db.insert(accounts).values({ id: accountId, name: 'bench', createdAt: now });
  const sealed = { v: 1 } as never;
  await store.db.insert(subscriptions).values({
    id: subscriptionId,
    accountId,
    type: 'ADDRESS_TRANSACTION',
    network: 'DEVNET',
    address: watched,
    url: 'http://127.0.0.1:9/',
    secret: sealed,
    callbackToken: sealed,
    createdAt: now,
  });
  await store.db
    .insert(subscriptionAddresses)
    .values({ subscriptionId, network: 'DEVNET', address: watched, createdAt: now });
  const networks = loadNetworks({}, [
    {
      name: 'DEVNET',
      aliases: [],
      family: 'evm',
      chainId: anvil.chainId,
      symbol: 'ETH',
      decimals: 18,
      rpcUrls: [anvil.rpcUrl],
      wsUrls: [],
      indexerUrls: [],
    },
  ]);
  const family = backfillFamily(networks.find('DEVNET')!, { throttle: createThrottle(0), chunk: CHUNK });
  const id = '01900000-0000-7000-8000-000000000003';
  await store.db.insert(backfills).values({
    id,
    accountId,
    subscriptionId,
    network: 'DEVNET',
    fromHeight: first,
    toHeight: last,
    position: first - 1,
    state: 'running',
    requestedFrom: String(first),
    createdAt: now,
    updatedAt: now,
  });
  const t1 = performance.now();
  const runner = createBackfillRunner({
    db: store.db,
    family: () => family,
    logger: pino({ level: 'silent' }),
    pollIntervalMs: 5,
  });
  runner.start();
  let row: typeof backfills.$inferSelect | undefined;
  for (;;) {
    [row] = await store.db.select().from(backfills).where(eq(backfills.id, id));
    if (row?.state !== 'running') break;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const backfillMs = performance.now() - t1;
  await runner.stop();
  if (row?.state !== 'done') throw new Error(`backfill ended ${row?.state}: ${row?.error}`);

  const perSecond = (ms: number) => ((BLOCKS * 1000) / ms).toFixed(0);
  process.stdout.write(
    [
      '',
      machineLine(),
      `EVM backfill over ${BLOCKS} anvil blocks (${row.found} notifications, ${BLOCKS / ACTIVE_EVERY} blocks with 20 transfers each)`,
      `  reference (logs + blocks fetched alone): ${referenceMs.toFixed(0)} ms, ${perSecond(referenceMs)} blocks/s`,
      `  backfill (fetch, match, commit):         ${backfillMs.toFixed(0)} ms, ${perSecond(backfillMs)} blocks/s`,
      `  ratio backfill/reference speed: ${(referenceMs / backfillMs).toFixed(2)}`,
      '',
    ].join('\n'),
  );
});
