import { afterAll, describe, expect, test } from 'vitest';
import { TEST_SERVICE_ENV } from '../helpers/app.js';
import { backends, createTestEnvironment, type TestEnvironment } from '../helpers/env.js';
import { runCli, type ServiceProcess, startServiceProcess } from '../helpers/process.js';

// Authenticated principals are cached for a minute here, far longer than the second a revocation
// may take: only the revocation itself (in-process, or by NOTIFY) can make these tests pass.
const CACHED_FOR_A_MINUTE = { LEDGERHOOK_AUTH_CACHE_TTL: '1m' };
const MASTER_KEY = 'ab'.repeat(32);

const environments: TestEnvironment[] = [];
const services: ServiceProcess[] = [];
afterAll(async () => {
  for (const s of services) await s.stop('SIGKILL');
  for (const e of environments) await e.cleanup();
});

function serviceEnv(environment: TestEnvironment, extra: Record<string, string> = {}) {
  const { PORT: _port, LOG_LEVEL: _level, ...rest } = TEST_SERVICE_ENV;
  return { ...environment.env, ...rest, LOG_LEVEL: 'info', ...CACHED_FOR_A_MINUTE, ...extra };
}

async function statusOf(service: ServiceProcess, token: string): Promise<number> {
  const response = await fetch(`${service.url}/api/v1/folder`, {
    headers: { authorization: `Bearer ${token}` },
  });
  await response.arrayBuffer();
  return response.status;
}

async function createToken(env: Record<string, string>, account: string) {
  const created = await runCli(['token', 'create', '--account', account], env);
  expect(created.code, created.stderr).toBe(0);
  const id = /Created token ([0-9a-f-]{36})/.exec(created.stdout)?.[1];
  const token = /lh_[A-Za-z0-9_-]{32}/.exec(created.stdout)?.[0];
  expect(id && token, created.stdout).toBeTruthy();
  return { id: id!, token: token! };
}

/**
 * Revokes through the CLI, then asks every service until it refuses the token. Resolves with how
 * long after the revocation each one sent the first request it refused: the time the revocation
 * took to reach it, whatever the requests themselves take on a loaded machine.
 */
async function revokeAndTimeRefusals(
  env: Record<string, string>,
  id: string,
  token: string,
  on: ServiceProcess[],
) {
  const revoked = await runCli(['token', 'revoke', id], env);
  expect(revoked.code, revoked.stderr).toBe(0);
  const at = Date.now();
  return Promise.all(
    on.map(async (service) => {
      for (;;) {
        const sentAfterMs = Date.now() - at;
        if ((await statusOf(service, token)) === 401) return sentAfterMs;
        if (sentAfterMs > 10_000) throw new Error(`${service.url} still accepts the revoked token`);
      }
    }),
  );
}

describe.each(backends)('a revoked token on %s', (backend) => {
  test('is refused within a second by every process, though each had it cached for a minute', async () => {
    const environment = await createTestEnvironment(backend);
    environments.push(environment);
    const env = serviceEnv(environment, { LEDGERHOOK_MASTER_KEY: MASTER_KEY });
    // PGlite admits one process (the CLI revokes through its admin endpoint); PostgreSQL, two API
    // processes, and the CLI writes the revocation to the database itself.
    const first = await startServiceProcess(env);
    services.push(first);
    const processes = [first];
    if (backend === 'postgres') {
      const second = await startServiceProcess(env);
      services.push(second);
      processes.push(second);
    }
    const revoked = await createToken(env, 'revocation');
    const kept = await createToken(env, 'revocation');
    for (const service of processes) {
      for (const { token } of [revoked, kept]) expect(await statusOf(service, token)).toBe(200);
    }

    const refusedAfterMs = await revokeAndTimeRefusals(env, revoked.id, revoked.token, processes);
    for (const ms of refusedAfterMs) expect(ms).toBeLessThan(1_000);
    for (const service of processes) expect(await statusOf(service, kept.token)).toBe(200);

    // Revoking again changes nothing and breaks nothing.
    const again = await runCli(['token', 'revoke', revoked.id], env);
    expect(again.code, again.stderr).toBe(0);
    for (const service of processes) {
      expect(await statusOf(service, revoked.token)).toBe(401);
      expect(await statusOf(service, kept.token)).toBe(200);
    }
  });
});
