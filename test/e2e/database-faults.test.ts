/**
 * The database going away under a running service: a fault-injecting TCP proxy of our own sits
 * between the service and the real PostgreSQL server (which keeps running) and refuses, black-holes
 * or resets connections on command. The service must answer 503 with Retry-After on time, write
 * nothing by halves, and recover by itself once the database is back.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { createWalletClient, getAddress, type Hex, http, parseEther } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import { openStore, type Store } from '../../src/store/db.js';
import { isDatabaseUnavailable } from '../../src/store/unavailable.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { backends, createTestEnvironment, type TestEnvironment } from '../helpers/env.js';
import { type FaultMode, type FaultProxy, startFaultProxy } from '../helpers/fault-proxy.js';
import { waitFor } from '../helpers/process.js';
import { ACK, type Receiver, startReceiver } from '../helpers/receiver.js';
import { sampleRegistryBody } from '../helpers/registry-body.js';

const QUERY_TIMEOUT_MS = 1_000;
const CONNECT_TIMEOUT_MS = 1_000;
const READY_TIMEOUT_MS = 500;
/** Room for a loaded machine (two CPUs shared with other test files) on top of a deadline. */
const MARGIN_MS = 2_500;
/** The longest an API request may take while the database is away: wait for a connection, then a query. */
const API_DEADLINE_MS = CONNECT_TIMEOUT_MS + QUERY_TIMEOUT_MS + MARGIN_MS;

const DATABASE_TIMEOUTS = {
  LEDGERHOOK_DB_QUERY_TIMEOUT: `${QUERY_TIMEOUT_MS}ms`,
  LEDGERHOOK_DB_CONNECT_TIMEOUT: `${CONNECT_TIMEOUT_MS}ms`,
  LEDGERHOOK_READY_TIMEOUT: `${READY_TIMEOUT_MS}ms`,
  // Requests refused by the database come back fast enough to pass the account limit in the
  // loops below; what these tests are about is 503, not 429.
  LEDGERHOOK_RATE_LIMIT: 'off',
};

interface Timed {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
  ms: number;
}

/** A request that gives up after 15 s, so a service that hangs fails the test instead of stalling it. */
async function timed(
  t: TestApp,
  method: string,
  route: string,
  options: { body?: unknown; token?: string | null } = {},
): Promise<Timed> {
  const token = options.token === undefined ? t.token : options.token;
  const started = Date.now();
  const response = await fetch(`${t.app.url}${route}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await response.text();
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // not JSON
  }
  return { status: response.status, headers: response.headers, body, ms: Date.now() - started };
}

function expectDatabaseUnavailable(response: Timed): void {
  expect(response.status, JSON.stringify(response.body)).toBe(503);
  expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(response.body).toMatchObject({
    type: 'urn:ledgerhook:problem:database_unavailable',
    title: 'Service Unavailable',
    status: 503,
  });
  // The client learns the database is away, not where it lives.
  expect(JSON.stringify(response.body)).not.toMatch(/127\.0\.0\.1|5432|postgres:/);
}

async function waitUntilReady(t: TestApp): Promise<void> {
  await waitFor(
    async () => ((await timed(t, 'GET', '/readyz', { token: null })).status === 200 ? true : undefined),
    'the service to be ready again',
    20_000,
  );
}

function serverTarget(): { host: string; port: number } {
  const url = new URL(process.env.TEST_DATABASE_URL!);
  return { host: url.hostname, port: Number(url.port || 5432) };
}

describe('readiness on the embedded database (PGlite)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp('pglite', DATABASE_TIMEOUTS);
  });
  afterAll(async () => {
    await t?.close();
  });

  test('/readyz answers 503 within its deadline while the database is held busy, and 200 after', async () => {
    // The embedded database runs one transaction at a time: one held open makes every query wait.
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const transaction = t.app.store.db.transaction(async (tx) => {
      await tx.execute('SELECT 1');
      await held;
    });
    try {
      const ready = await timed(t, 'GET', '/readyz', { token: null });
      expect(ready.status).toBe(503);
      expect(ready.ms).toBeLessThan(READY_TIMEOUT_MS + MARGIN_MS);
      expect(ready.body).toMatchObject({ type: 'urn:ledgerhook:problem:not_ready', status: 503 });
    } finally {
      release();
      await transaction;
    }
    expect((await timed(t, 'GET', '/readyz', { token: null })).status).toBe(200);
  });
});

describe.each(backends.filter((b) => b === 'postgres'))('the store on %s behind the proxy', (backend) => {
  let proxy: FaultProxy;
  let environment: TestEnvironment;
  let store: Store;
  const QUERY_MS = 500;

  beforeAll(async () => {
    proxy = await startFaultProxy(serverTarget());
    environment = await createTestEnvironment(backend);
    store = await openStore({
      databaseUrl: proxy.through(environment.databaseUrl!),
      queryTimeoutMs: QUERY_MS,
      connectTimeoutMs: QUERY_MS,
      onError: () => {},
    });
  });
  afterAll(async () => {
    await proxy?.setMode('pass');
    await store?.close();
    await environment?.cleanup();
    await proxy?.close();
  });

  /** The error `work` fails with, and how long it took. */
  async function failure(work: () => Promise<unknown>): Promise<{ err: unknown; ms: number }> {
    const started = Date.now();
    try {
      await work();
    } catch (err) {
      return { err, ms: Date.now() - started };
    }
    throw new Error('expected the database work to fail');
  }

  test.each<FaultMode>(['black-hole', 'refuse', 'reset'])(
    '%s: queries and transactions fail on time as "database unavailable"; the pool is whole afterwards',
    async (mode) => {
      // Every pooled connection open and idle, then the outage: transactions meet it on each of them.
      await Promise.all(Array.from({ length: 10 }, () => store.db.execute(sql`SELECT pg_sleep(0.05)`)));
      await proxy.setMode(mode);
      try {
        const failures = await Promise.all([
          ...Array.from({ length: 12 }, () =>
            failure(() => store.db.transaction((tx) => tx.execute(sql`SELECT 1`))),
          ),
          failure(() => store.db.execute(sql`SELECT 1`)),
          failure(() => store.ping()),
        ]);
        for (const { err, ms } of failures) {
          expect(isDatabaseUnavailable(err), String(err)).toBe(true);
          expect(ms).toBeLessThan(2 * QUERY_MS + MARGIN_MS);
        }
      } finally {
        await proxy.setMode('pass');
      }
      // No connection was lost to the outage: a full pool's worth of transactions runs at once.
      await waitFor(
        () =>
          store.ping().then(
            () => true,
            () => undefined,
          ),
        'the database to answer again',
        10_000,
      );
      const results = await Promise.all(
        Array.from({ length: 10 }, () =>
          store.db.transaction((tx) => tx.execute(sql`SELECT pg_sleep(0.05)`)),
        ),
      );
      expect(results).toHaveLength(10);
    },
  );

  test('a statement running past the deadline is stopped and reported as unavailable', async () => {
    const { err, ms } = await failure(() => store.db.execute(sql`SELECT pg_sleep(5)`));
    expect(isDatabaseUnavailable(err), String(err)).toBe(true);
    expect(ms).toBeLessThan(QUERY_MS + MARGIN_MS);
  });

  test('a connection terminated by the server (administrator command) is unavailable, then replaced', async () => {
    const { err } = await failure(() =>
      store.db.transaction(async (tx) => {
        const result = (await tx.execute(sql`SELECT pg_backend_pid() AS pid`)) as unknown as {
          rows: { pid: number }[];
        };
        const [row] = result.rows;
        const admin = new pg.Client({ connectionString: environment.databaseUrl });
        await admin.connect();
        try {
          // Waits until that backend has gone, so the next statement certainly meets the termination.
          await admin.query('SELECT pg_terminate_backend($1, 5000)', [row!.pid]);
        } finally {
          await admin.end();
        }
        await tx.execute(sql`SELECT 1`);
      }),
    );
    expect(isDatabaseUnavailable(err), String(err)).toBe(true);
    await waitFor(
      () =>
        store.ping().then(
          () => true,
          () => undefined,
        ),
      'a fresh connection',
      10_000,
    );
  });

  test('what a client gets wrong is not "database unavailable"', async () => {
    const mistakes = await Promise.all([
      failure(() => store.db.execute(sql`SELECT * FROM no_such_table`)),
      failure(() => store.db.execute(sql`SELECT 'a' || ${'\u0000'}::text`)),
      failure(() => store.db.execute(sql`SELECT 1/0`)),
    ]);
    for (const { err } of mistakes) expect(isDatabaseUnavailable(err), String(err)).toBe(false);
  });
});

describe.each(backends.filter((b) => b === 'postgres'))('the API while %s goes away', (backend) => {
  let proxy: FaultProxy;
  let t: TestApp;
  let receiver: Receiver;

  beforeAll(async () => {
    proxy = await startFaultProxy(serverTarget());
    receiver = await startReceiver();
    t = await startTestApp(backend, (environment) => ({
      DATABASE_URL: proxy.through(environment.databaseUrl!),
      ...DATABASE_TIMEOUTS,
    }));
  });
  afterAll(async () => {
    await proxy?.setMode('pass');
    await t?.close();
    await receiver?.close();
    await proxy?.close();
  });

  test('/readyz answers 503 within its deadline while the database is black-holed, then 200 by itself', async () => {
    expect((await timed(t, 'GET', '/readyz', { token: null })).status).toBe(200);
    await proxy.setMode('black-hole');
    try {
      for (let i = 0; i < 3; i++) {
        const ready = await timed(t, 'GET', '/readyz', { token: null });
        expect(ready.status).toBe(503);
        expect(ready.ms).toBeLessThan(READY_TIMEOUT_MS + MARGIN_MS);
      }
    } finally {
      await proxy.setMode('pass');
    }
    await waitUntilReady(t);
  });

  test.each<FaultMode>(['black-hole', 'refuse', 'reset'])(
    '%s: API requests answer 503 with Retry-After within the deadline; afterwards the API works without a restart',
    async (mode) => {
      const folder = `outage-${mode}`;
      // More requests at once than the pool has connections: every pooled connection is open and used.
      const burst = () => Promise.all(Array.from({ length: 12 }, () => timed(t, 'GET', '/api/v1/folder')));
      for (const response of await burst()) expect(response.status).toBe(200);
      await proxy.setMode(mode);
      try {
        // Transactions meeting the outage on every pooled connection must not use the pool up.
        const creates = await Promise.all(
          Array.from({ length: 12 }, () =>
            timed(t, 'POST', '/api/v1/registry/create', { body: sampleRegistryBody({ folder_id: folder }) }),
          ),
        );
        for (const response of creates) {
          expectDatabaseUnavailable(response);
          expect(response.ms).toBeLessThan(API_DEADLINE_MS);
        }
        for (const [method, route, body] of [
          ['GET', '/api/v1/folder', undefined],
          ['POST', '/api/v1/registry/create', sampleRegistryBody({ folder_id: folder })],
          ['GET', '/api/v1/subscription', undefined],
        ] as const) {
          const response = await timed(t, method, route, { body });
          expectDatabaseUnavailable(response);
          expect(response.ms).toBeLessThan(API_DEADLINE_MS);
        }
        // What a client gets wrong is still its own mistake, not the database's.
        expect((await timed(t, 'GET', '/api/v1/folder', { token: null })).status).toBe(401);
      } finally {
        await proxy.setMode('pass');
      }
      await waitUntilReady(t);
      const created = await timed(t, 'POST', '/api/v1/registry/create', {
        body: sampleRegistryBody({ folder_id: folder }),
      });
      expect(created.status).toBe(201);
      const folders = await timed(t, 'GET', '/api/v1/folder?limit=100');
      expect(folders.status).toBe(200);
      for (const response of await burst()) expect(response.status).toBe(200);
      // The creates refused during the outage left nothing behind: one registry, the one made after.
      expect(
        (folders.body.data as { folder_id: string; registry_count: number }[]).find(
          (f) => f.folder_id === folder,
        ),
      ).toMatchObject({ registry_count: 1 });
    },
  );

  test('registries created while the database comes and goes are all there or not at all', async () => {
    const folder = 'flapping';
    const outcomes: { title: string; status: number; id?: string }[] = [];
    let running = true;
    let n = 0;
    // Four clients create registries (each with a callback endpoint and a queued event, all in one
    // transaction) back to back while the database is reset, black-holed and refused under them.
    const clients = Array.from({ length: 4 }, async () => {
      while (running) {
        const title = `record ${n++}`;
        const response = await timed(t, 'POST', '/api/v1/registry/create', {
          body: sampleRegistryBody({ title, folder_id: folder, callback_url: receiver.url }),
        });
        outcomes.push({ title, status: response.status, id: (response.body.data as { id?: string })?.id });
      }
    });
    const createdSoFar = () => outcomes.filter((o) => o.status === 201).length;
    try {
      for (const mode of ['reset', 'black-hole', 'refuse', 'reset'] as const) {
        const before = createdSoFar();
        await waitFor(() => (createdSoFar() >= before + 3 ? true : undefined), 'creates to succeed', 20_000);
        await proxy.setMode(mode);
        await new Promise((resolve) => setTimeout(resolve, 1_500)); // an outage of 1.5 s
        await proxy.setMode('pass');
      }
      await waitFor(() => (createdSoFar() >= 3 ? true : undefined), 'creates to succeed again', 20_000);
    } finally {
      running = false;
      await proxy.setMode('pass');
      await Promise.all(clients);
    }

    // Every answer was a success or a 503: never a 500, never a hang (timed() gives up after 15 s).
    expect(new Set(outcomes.map((o) => o.status))).toEqual(new Set([201, 503]));

    // Read the truth straight from the database, not through the proxy.
    const direct = new pg.Client({ connectionString: t.environment.databaseUrl });
    await direct.connect();
    try {
      const { rows } = await direct.query<{
        id: string;
        title: string;
        metadata: unknown;
        endpoints: number;
        events: number;
      }>(
        `SELECT r.id, r.title, r.metadata,
           (SELECT count(*)::int FROM subscriptions s WHERE s.registry_id = r.id) AS endpoints,
           (SELECT count(*)::int FROM notifications n JOIN subscriptions s ON s.id = n.subscription_id
             WHERE s.registry_id = r.id AND n.event_type = 'registry.created') AS events
         FROM registries r WHERE r.folder_id = $1`,
        [folder],
      );
      const { rows: orphans } = await direct.query(
        `SELECT s.id FROM subscriptions s LEFT JOIN registries r ON r.id = s.registry_id
         WHERE s.type = 'REGISTRY_EVENTS' AND r.id IS NULL`,
      );
      expect(orphans).toEqual([]);
      const byTitle = new Map(rows.map((r) => [r.title, r]));
      expect(byTitle.size).toBe(rows.length); // no registry written twice
      for (const row of rows) {
        expect(row.metadata).toEqual(sampleRegistryBody().metadata);
        expect([row.endpoints, row.events]).toEqual([1, 1]);
      }
      // Every 201 is there; a 503 may or may not have committed (the answer was lost), never in part.
      for (const outcome of outcomes.filter((o) => o.status === 201)) {
        expect(byTitle.get(outcome.title)?.id).toBe(outcome.id);
      }
    } finally {
      await direct.end();
    }
    const folders = await timed(t, 'GET', '/api/v1/folder?limit=100');
    expect(
      (folders.body.data as { folder_id: string; registry_count: number }[]).find(
        (f) => f.folder_id === folder,
      )?.registry_count,
    ).toBeGreaterThanOrEqual(createdSoFar());
  });
});

describe.each(backends.filter((b) => b === 'postgres'))('background work while %s goes away', (backend) => {
  let proxy: FaultProxy;
  let anvil: Anvil;
  let receiver: Receiver;
  let t: TestApp;
  let configDir: string;
  let watched: Hex;
  let subscription: { id: string };

  beforeAll(async () => {
    proxy = await startFaultProxy(serverTarget());
    anvil = await startAnvil();
    receiver = await startReceiver();
    configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-faults-'));
    const configFile = path.join(configDir, 'ledgerhook.json');
    fs.writeFileSync(
      configFile,
      JSON.stringify({
        networks: { DEVNET: { family: 'evm', chainId: anvil.chainId, symbol: 'ETH', rpc: [anvil.rpcUrl] } },
      }),
    );
    t = await startTestApp(
      backend,
      (environment) => ({
        DATABASE_URL: proxy.through(environment.databaseUrl!),
        ...DATABASE_TIMEOUTS,
        LEDGERHOOK_ROLES: 'all',
        LEDGERHOOK_CONFIG: configFile,
        LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms',
        // Dispatchers are woken by LISTEN/NOTIFY; polling this rarely shows whether that still works.
        LEDGERHOOK_POLL_INTERVAL: '60s',
        LEDGERHOOK_RETRY_SCHEDULE: '2s,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms',
      }),
      { alwaysFollow: ['DEVNET'] },
    );
    watched = getAddress(anvil.accounts[1]!.address);
    const created = await timed(t, 'POST', '/api/v1/subscription', {
      body: { type: 'ADDRESS_TRANSACTION', attr: { address: watched, chain: 'DEVNET', url: receiver.url } },
    });
    expect(created.status).toBe(201);
    subscription = created.body as { id: string };
  });
  afterAll(async () => {
    await proxy?.setMode('pass');
    await t?.close();
    await receiver?.close();
    await anvil?.stop();
    await proxy?.close();
    if (configDir) fs.rmSync(configDir, { recursive: true, force: true });
  });

  const requestsFor = (notificationId: string) =>
    receiver.requests.filter((r) => r.headers['webhook-id'] === notificationId);

  test('a notification whose retry falls due during an outage is delivered once the database is back', async () => {
    receiver.respond(() => ({ status: 500 }));
    const sent = await timed(t, 'POST', `/api/v1/subscription/${subscription.id}/test`);
    expect(sent.status).toBe(202);
    const id = (sent.body as { notificationId: string }).notificationId;
    // The first attempt fails and its retry is recorded for 2 s later...
    await waitFor(async () => {
      const log = await timed(t, 'GET', `/api/v1/subscription/${subscription.id}/notifications`);
      const entry = (log.body.data as { id: string; attemptCount: number; state: string }[]).find(
        (n) => n.id === id,
      );
      return entry?.attemptCount === 1 && entry.state === 'pending' ? true : undefined;
    }, 'the first attempt to be recorded');
    receiver.respond(() => ACK);
    // ...and falls due while the database is away.
    await proxy.setMode('reset');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await proxy.setMode('refuse');
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(requestsFor(id)).toHaveLength(1);
    await proxy.setMode('pass');
    const back = Date.now();
    await waitFor(
      () => (requestsFor(id).length >= 2 ? true : undefined),
      'the retry after the outage',
      15_000,
    );
    expect(Date.now() - back).toBeLessThan(10_000);
    expect(requestsFor(id)).toHaveLength(2);
    await waitUntilReady(t);
  });

  test('after an outage, new notifications are delivered at once again (LISTEN/NOTIFY reconnected)', async () => {
    receiver.respond(() => ACK);
    await proxy.setMode('reset');
    await proxy.setMode('refuse');
    // Longer than the listener's first reconnection attempt.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    await proxy.setMode('pass');
    await waitUntilReady(t);
    const sent = await timed(t, 'POST', `/api/v1/subscription/${subscription.id}/test`);
    expect(sent.status).toBe(202);
    const id = (sent.body as { notificationId: string }).notificationId;
    // Polling comes every 60 s here: only a NOTIFY brings the dispatcher this soon.
    await waitFor(() => (requestsFor(id).length > 0 ? true : undefined), 'the test notification', 10_000);
  });

  test('a transfer mined while the database is black-holed is notified once it is back, exactly once', async () => {
    receiver.respond(() => ACK);
    const wallet = createWalletClient({
      account: privateKeyToAccount(anvil.accounts[1]!.privateKey),
      transport: http(anvil.rpcUrl),
    });
    await proxy.setMode('black-hole');
    let hash: Hex;
    try {
      hash = await wallet.sendTransaction({
        to: getAddress(anvil.accounts[2]!.address),
        value: parseEther('0.25'),
        chain: null,
      });
      // The follower meets the outage (its node is fine) and must neither wedge nor skip the block.
      await new Promise((resolve) => setTimeout(resolve, 3_000));
    } finally {
      await proxy.setMode('pass');
    }
    const bodies = () =>
      receiver.requests
        .map((r) => JSON.parse(r.body) as Record<string, unknown>)
        .filter((b) => b.txId === hash);
    const included = () => bodies().filter((b) => b.mempool === false);
    await waitFor(() => (included().length > 0 ? true : undefined), 'the transfer notification', 30_000);
    expect(included()[0]).toMatchObject({ txId: hash, amount: '-0.25', watchedAddress: watched });
    // The follower carries on healthy, past the block, with the block notified once.
    const mined = await waitFor(async () => {
      const ready = await timed(t, 'GET', '/readyz', { token: null });
      const devnet = (
        ready.body.networks as { network: string; healthy: boolean; height: number }[] | undefined
      )?.find((n) => n.network === 'DEVNET');
      return devnet?.healthy ? devnet : undefined;
    }, 'the follower to be healthy');
    expect(mined.height).toBeGreaterThanOrEqual(Number(included()[0]!.blockNumber));
    expect(included()).toHaveLength(1);
  });
});
