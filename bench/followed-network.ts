// What the non-EVM passes of bench:ingest share: one subscription per watched address (through the
// subscription service, which puts it in the matcher's index), and a cursor put back before the
// measured blocks for each run. Their fresh store per backend is lib.ts's withFreshStore.
import crypto from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import pino from 'pino';
import { createAccounts } from '../src/accounts/service.js';
import type { Network, NetworkCatalog } from '../src/chains/networks.js';
import type { BlockSource } from '../src/chains/source.js';
import { createIdempotency } from '../src/idempotency/service.js';
import { notifications } from '../src/notify/schema.js';
import { createEnvelope } from '../src/secrets/envelope.js';
import type { Db, Store } from '../src/store/db.js';
import { createSubscriptions } from '../src/subscriptions/service.js';
import { type BlockMatcher, createFollower } from '../src/watch/follower/follower.js';
import type { AddressIndex } from '../src/watch/matching/address-index.js';
import { chainCursors, chainHeaders } from '../src/watch/schema.js';
import { followUntil, medianSeconds } from './lib.js';

/**
 * Migrates the store, makes the default account and subscribes each address on `chain` (one
 * subscription each, confirmations 1). Returns a function that takes them out of the index again.
 */
export async function subscribeWatched(
  store: Store,
  networks: NetworkCatalog,
  chain: string,
  index: AddressIndex,
  addresses: string[],
): Promise<() => void> {
  const { db } = store;
  await store.migrate();
  const issued = await createAccounts({ db }).bootstrap();
  if (!issued) throw new Error(`${chain}: the database already had accounts`);
  const envelope = createEnvelope(crypto.randomBytes(32));
  const subscriptions = createSubscriptions({
    db,
    envelope,
    idempotency: createIdempotency({ db, envelope }),
    networks,
    urls: { checkUrl: async () => {} },
    onChange: (change) => index.apply(change),
  });
  const created: string[] = [];
  const remove = () => {
    for (const id of created) index.apply({ type: 'remove', id });
  };
  try {
    for (const address of addresses) {
      const sub = await subscriptions.create(issued.info.accountId, {
        type: 'ADDRESS_TRANSACTION',
        attr: { address, chain, url: 'http://127.0.0.1:9/hook' },
        confirmations: 1,
      });
      created.push(sub.body.id);
    }
  } catch (err) {
    remove();
    throw err;
  }
  return remove;
}

/** Forgets what an earlier run wrote for the network and puts its cursor on the block before. */
export async function restartBefore(db: Db, network: string, height: number, hash: string): Promise<void> {
  await db.delete(notifications).where(eq(notifications.chain, network));
  await db.delete(chainHeaders).where(eq(chainHeaders.network, network));
  await db.delete(chainCursors).where(eq(chainCursors.network, network));
  await db.insert(chainCursors).values({ network, height, hash, updatedAt: new Date() });
  await db.insert(chainHeaders).values({ network, height, hash, parentHash: '' });
}

/** Fails unless the run wrote exactly the notifications expected. */
export async function expectNotifications(
  db: Db,
  network: string,
  expected: number,
  label: string,
): Promise<void> {
  const [row] = await db
    .select({ n: sql<number>`count(*)::int` })
    .from(notifications)
    .where(eq(notifications.chain, network));
  if (row?.n !== expected) throw new Error(`${label}: ${row?.n} notifications written, ${expected} expected`);
}

export interface FollowingRun<Activity> {
  store: Store;
  network: Network;
  source: BlockSource<Activity>;
  match: BlockMatcher<Activity>;
  /** The block before the first measured one, where each run starts. */
  from: { height: number; hash: string };
  /** The last measured block. */
  to: number;
  expected: number;
  runs: number;
  label: string;
  logLevel: string;
}

/** The median seconds the follower takes from `from` to `to`, each run writing what is expected. */
export function measureFollowing<Activity>(run: FollowingRun<Activity>): Promise<number> {
  const { store, network } = run;
  return medianSeconds(run.runs, async () => {
    await restartBefore(store.db, network.name, run.from.height, run.from.hash);
    const follower = createFollower({
      db: store.db,
      network,
      source: run.source,
      match: run.match,
      logger: pino({ level: run.logLevel }),
      pollIntervalMs: 1_000,
    });
    await followUntil(follower, run.to, run.label);
    await expectNotifications(store.db, network.name, run.expected, run.label);
  });
}
