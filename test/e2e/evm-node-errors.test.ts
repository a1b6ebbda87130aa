import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createTokenInfoCache } from '../../src/chains/evm/activity.js';
import type { Network } from '../../src/chains/networks.js';
import { createAddressIndex } from '../../src/watch/matching/address-index.js';
import { createEvmMempoolWatcher } from '../../src/watch/mempool/evm-mempool.js';
import { createPendingLifecycle } from '../../src/watch/mempool/pending-lifecycle.js';
import { evmClient } from '../../src/watch/watcher.js';
import { startTestApp, type TestApp } from '../helpers/app.js';
import { closedPort } from '../helpers/loopback-server.js';
import { waitFor } from '../helpers/process.js';

interface NetworkStatus {
  network: string;
  healthy: boolean;
  lastError: string | null;
}

/**
 * What an operator reads in /readyz while a node fails: which node (host and port) and how (the
 * connection refused, an HTTP status), not viem's "HTTP request failed.".
 */
describe('the last error of a watcher whose node fails', () => {
  let t: TestApp;
  let dir: string;
  let busy: http.Server;
  let refusedHost: string;
  let busyHost: string;

  beforeAll(async () => {
    busy = http.createServer((_req, res) => {
      res.writeHead(503, { 'content-type': 'text/plain' }).end('overloaded');
    });
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    busyHost = `127.0.0.1:${(busy.address() as net.AddressInfo).port}`;
    refusedHost = `127.0.0.1:${await closedPort()}`;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-node-errors-'));
    const configFile = path.join(dir, 'ledgerhook.json');
    const network = (chainId: number, host: string) => ({
      family: 'evm',
      chainId,
      symbol: 'ETH',
      // A path and query as a provider's API key would be: never shown.
      rpc: [`http://${host}/v2/secret-key?apikey=hidden`],
    });
    fs.writeFileSync(
      configFile,
      JSON.stringify({
        networks: { REFUSED: network(999_001, refusedHost), BUSY: network(999_002, busyHost) },
      }),
    );
    t = await startTestApp(
      'pglite',
      { LEDGERHOOK_CONFIG: configFile, LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms', LEDGERHOOK_ROLES: 'all' },
      { alwaysFollow: ['REFUSED', 'BUSY'] },
    );
  });

  afterAll(async () => {
    await t?.close();
    busy?.closeAllConnections();
    await new Promise<void>((resolve) => (busy ? busy.close(() => resolve()) : resolve()));
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  async function followerStatus(network: string): Promise<NetworkStatus> {
    return waitFor(async () => {
      const ready = await t.request('GET', '/readyz', { token: null });
      const status = (ready.body as { networks: NetworkStatus[] }).networks.find(
        (n) => n.network === network,
      );
      return status?.lastError ? status : undefined;
    }, `${network} reported failing`);
  }

  test('a refused connection: the follower names the refusal and the host', async () => {
    const status = await followerStatus('REFUSED');
    expect(status.healthy).toBe(false);
    expect(status.lastError).toBe(`The node at ${refusedHost} refused the connection (ECONNREFUSED)`);
  });

  test('an HTTP error status: the follower names the status and the host', async () => {
    const status = await followerStatus('BUSY');
    expect(status.healthy).toBe(false);
    expect(status.lastError).toBe(`The node at ${busyHost} answered HTTP 503`);
  });

  test('the mempool watcher names them the same way', async () => {
    const index = createAddressIndex(() => 'evm');
    for (const name of ['REFUSED', 'BUSY']) {
      index.apply({
        type: 'upsert',
        subscription: {
          id: `sub-${name}`,
          accountId: 'account',
          network: name,
          address: '0x000000000000000000000000000000000000dEaD',
          confirmations: 1,
          mempool: true,
        },
      });
    }
    const expected = {
      REFUSED: `The node at ${refusedHost} refused the connection (ECONNREFUSED)`,
      BUSY: `The node at ${busyHost} answered HTTP 503`,
    };
    for (const [name, lastError] of Object.entries(expected)) {
      const host = name === 'REFUSED' ? refusedHost : busyHost;
      const rpcUrl = `http://${host}/v2/secret-key`;
      const network: Network = {
        name,
        aliases: [],
        family: 'evm',
        chainId: 999_000,
        symbol: 'ETH',
        decimals: 18,
        rpcUrls: [rpcUrl],
        wsUrls: [],
        indexerUrls: [],
        addressFormat: 'EIP-55',
        defaultConfirmations: 1,
      };
      const client = evmClient([rpcUrl]);
      const watcher = createEvmMempoolWatcher({
        db: t.app.store.db,
        network,
        client,
        index,
        tokens: createTokenInfoCache(client),
        logger: pino({ level: 'silent' }),
        pollIntervalMs: 50,
        lifecycle: createPendingLifecycle({
          db: t.app.store.db,
          network: name,
          logger: pino({ level: 'silent' }),
        }),
        dropAfterMs: 3_600_000,
      });
      watcher.start();
      try {
        const status = await waitFor(() => {
          const now = watcher.status();
          return now.lastError ? now : undefined;
        }, `the ${name} mempool watcher reported failing`);
        expect(status).toMatchObject({ active: true, healthy: false, lastError });
      } finally {
        await watcher.stop();
      }
    }
  });
});
