import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { closedPort } from '../helpers/loopback-server.js';
import { waitFor } from '../helpers/process.js';

describe('a network whose node cannot be reached', () => {
  let t: TestApp;
  let dir: string;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-dead-'));
    const configFile = path.join(dir, 'ledgerhook.json');
    fs.writeFileSync(
      configFile,
      JSON.stringify({
        networks: {
          DEAD: {
            family: 'evm',
            chainId: 999_999,
            symbol: 'ETH',
            rpc: [`http://127.0.0.1:${await closedPort()}`],
          },
        },
      }),
    );
    t = await startTestApp(
      'pglite',
      { LEDGERHOOK_CONFIG: configFile, LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms', LEDGERHOOK_ROLES: 'all' },
      { alwaysFollow: ['DEAD'] },
    );
  });
  afterAll(async () => {
    await t?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('is retried and shown in /readyz, and the service keeps serving', async () => {
    const status = await waitFor(async () => {
      const ready = await t.request('GET', '/readyz', { token: null });
      const dead = (
        ready.body as { networks: { network: string; healthy: boolean; lastError: string | null }[] }
      ).networks.find((n) => n.network === 'DEAD');
      return ready.status === 200 && dead && !dead.healthy && dead.lastError ? dead : undefined;
    }, 'the DEAD network reported unhealthy');
    expect(status.lastError).toBeTruthy();
    // Subscriptions on it are still accepted, and the rest of the API works.
    const created = await t.request('POST', '/api/v1/subscription', {
      body: {
        type: 'ADDRESS_TRANSACTION',
        attr: {
          address: '0x000000000000000000000000000000000000dEaD',
          chain: 'DEAD',
          url: 'http://127.0.0.1:9/hook',
        },
      },
    });
    expect(created.status).toBe(201);
    expect((await t.request('GET', '/api/v1/folder')).status).toBe(200);
  });
});
