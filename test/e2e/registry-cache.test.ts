import { afterAll, describe, expect, test } from 'vitest';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import { anchoringEnv, anvilNetworksFile, type RegistryData } from '../helpers/anchoring.js';
import { TEST_SERVICE_ENV } from '../helpers/app.js';
import { backends, createTestEnvironment, type TestEnvironment } from '../helpers/env.js';
import { runCli, type ServiceProcess, startServiceProcess, waitFor } from '../helpers/process.js';
import { passBody } from '../helpers/registry-body.js';

// Registries read by id are kept for a minute here, far longer than the second a change may take
// to be seen: only the change's NOTIFY (or, in the revoking process, the revocation itself) can
// make these tests pass.
const KEPT_FOR_A_MINUTE = { LEDGERHOOK_REGISTRY_CACHE_TTL: '1m' };
const MASTER_KEY = 'cd'.repeat(32);

const environments: TestEnvironment[] = [];
const services: ServiceProcess[] = [];
const anvils: Anvil[] = [];
afterAll(async () => {
  for (const s of services) await s.stop('SIGKILL');
  for (const e of environments) await e.cleanup();
  for (const a of anvils) await a.stop();
});

async function anvilCall(anvil: Anvil, method: string, params: unknown[]): Promise<void> {
  const response = await fetch(anvil.rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = (await response.json()) as { error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
}

async function readRegistry(service: ServiceProcess, token: string, id: string): Promise<RegistryData> {
  const response = await fetch(`${service.url}/api/v1/registry/${id}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { data: RegistryData }).data;
}

/** How long after `since` the first read of `service` that showed `shown` was sent. */
async function shownAfterMs(
  since: number,
  read: () => Promise<RegistryData>,
  shown: (r: RegistryData) => boolean,
  what: string,
): Promise<number> {
  for (;;) {
    const sentAfterMs = Date.now() - since;
    if (shown(await read())) return sentAfterMs;
    if (sentAfterMs > 10_000) throw new Error(`${what}: not shown after 10 s`);
  }
}

describe.each(backends)('registries kept in memory on %s', (backend) => {
  test('an anchoring and a revocation made by another process show within a second, though kept for a minute', async () => {
    const anvil = await startAnvil();
    anvils.push(anvil);
    const environment = await createTestEnvironment(backend);
    environments.push(environment);
    const { PORT: _port, LOG_LEVEL: _level, ...rest } = TEST_SERVICE_ENV;
    const base = { ...environment.env, ...rest, LOG_LEVEL: 'info', LEDGERHOOK_MASTER_KEY: MASTER_KEY };
    const anchoring = anchoringEnv(anvilNetworksFile({ DEVNET: anvil }), anvil.accounts[9]!.privateKey, {
      LEDGERHOOK_ANCHOR_INTERVAL: '300ms',
      ...KEPT_FOR_A_MINUTE,
    });
    // The writer anchors (watcher role) and revokes; on PostgreSQL the reader is another process
    // serving the API alone. PGlite admits one process, which is then both.
    const writer = await startServiceProcess({ ...base, ...anchoring });
    services.push(writer);
    const reader =
      backend === 'postgres'
        ? await startServiceProcess({ ...base, ...anchoring, LEDGERHOOK_ROLES: 'api' })
        : writer;
    if (reader !== writer) services.push(reader);
    const created = await runCli(['token', 'create', '--account', 'kept'], { ...base, ...anchoring });
    expect(created.code, created.stderr).toBe(0);
    const token = /lh_[A-Za-z0-9_-]{32}/.exec(created.stdout)![0];

    // Nothing is mined until the reader has kept the registry as pending: on a busy machine the
    // anchorer's next cut (300 ms) could otherwise be mined between the create and the reads.
    await anvilCall(anvil, 'evm_setAutomine', [false]);
    const response = await fetch(`${writer.url}/api/v1/registry/create`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(passBody()),
    });
    expect(response.status).toBe(201);
    const { id } = ((await response.json()) as { data: { id: string } }).data;
    // Read at once, before the anchorer's next cut, twice: kept (from the second read) as pending,
    // valid.
    await readRegistry(reader, token, id);
    const first = await readRegistry(reader, token, id);
    expect(first.anchor?.status).toBe('pending');
    expect(first.revoked_at).toBeNull();
    await anvilCall(anvil, 'evm_setAutomine', [true]);
    await anvilCall(anvil, 'evm_mine', []);

    const anchored = await waitFor(async () => {
      const r = await readRegistry(writer, token, id);
      return r.anchor?.status === 'anchored' ? r : undefined;
    }, 'the writer showing the registry anchored');
    const anchoredSeenAfterMs = await shownAfterMs(
      Date.now(),
      () => readRegistry(reader, token, id),
      (r) => r.anchor?.txId === anchored.anchor!.txId,
      'the anchoring on the reader',
    );
    expect(anchoredSeenAfterMs).toBeLessThan(1_000);
    expect(await readRegistry(reader, token, id)).toEqual(anchored);

    const revoked = await fetch(`${writer.url}/api/v1/registry/${id}/revoke`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(revoked.status).toBe(200);
    const revokedAt = ((await revoked.json()) as { data: { revoked_at: string } }).data.revoked_at;
    const revokedSeenAfterMs = await shownAfterMs(
      Date.now(),
      () => readRegistry(reader, token, id),
      (r) => r.revoked_at === revokedAt,
      'the revocation on the reader',
    );
    expect(revokedSeenAfterMs).toBeLessThan(1_000);
    expect(await readRegistry(reader, token, id)).toMatchObject({ ...anchored, revoked_at: revokedAt });
  }, 60_000);
});
