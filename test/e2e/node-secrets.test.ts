/**
 * Hosted node providers put their API key in the node's URL (its path, its query, its user and
 * password). An API client must never learn it, and the log must not keep it at `info`: every
 * route that can reach a node is made to fail here, against nodes whose URLs carry all four kinds
 * of secret and which, worse, echo their request line and credentials back in their errors. Then
 * every answer, the console's followers view and every log line is searched for each secret.
 *
 * The nodes: an EVM node that knows its head but fails every other call with a JSON-RPC error
 * quoting its URL (LIAR), an EVM node that refuses connections (DEADETH), and Bitcoin, Algorand and
 * Solana nodes answering 503 with a body quoting their URL.
 */
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { devAccounts } from '../../src/chains/evm/anvil.js';
import { startTestApp, type TestApp, type TestResponse } from '../helpers/app.js';
import { launchChromium } from '../helpers/browser.js';
import { backends } from '../helpers/env.js';
import { closedPort } from '../helpers/loopback-server.js';
import { waitFor } from '../helpers/process.js';

/** Every part of a node URL that is a secret, per network: user, password, path key, query key. */
const SECRETS = {
  LIAR: ['liaruser1', 'liarpass1', 'LIARPATHKEY01', 'LIARQUERYKEY01'],
  DEADETH: ['deaduser2', 'deadpass2', 'DEADPATHKEY02', 'DEADQUERYKEY02', 'DEADWSKEY002'],
  BTC: ['btcuser03', 'btcpass03', 'BTCPATHKEY03', 'BTCQUERYKEY03'],
  ALGO: ['algouser4', 'algopass4', 'ALGOPATHKEY04', 'ALGOQUERYKEY04', 'ALGOIDXKEY04', 'ALGOIDXQUERY04'],
  SOL: ['soluser05', 'solpass05', 'SOLPATHKEY05', 'SOLQUERYKEY05'],
} as const;
/** And each user and password as HTTP Basic credentials, the form a node may quote them back in. */
const ALL_SECRETS: string[] = Object.values(SECRETS).flatMap(([user, password, ...keys]) => [
  user,
  password,
  ...keys,
  Buffer.from(`${user}:${password}`).toString('base64'),
]);
const NETWORKS = Object.keys(SECRETS);

/** The request's line and credentials, as a careless node or proxy quotes them in an error. */
function echo(req: http.IncomingMessage): string {
  const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1];
  const who = basic ? Buffer.from(basic, 'base64').toString() : 'anonymous';
  return `cannot serve ${req.method} ${req.url} for ${who} (Authorization: ${req.headers.authorization ?? '-'})`;
}

/** One loopback server for the lying nodes, told apart by their path. */
async function startLiars(): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      if (req.url?.startsWith('/v3/LIARPATHKEY01')) {
        // An EVM node that knows its head (so a backfill starts) and fails everything else.
        let calls: { id: unknown; method: string }[];
        try {
          const parsed = JSON.parse(body);
          calls = Array.isArray(parsed) ? parsed : [parsed];
        } catch {
          calls = [];
        }
        const answers = calls.map(({ id, method }) =>
          method === 'eth_blockNumber'
            ? { jsonrpc: '2.0', id, result: '0x20' }
            : method === 'eth_chainId'
              ? { jsonrpc: '2.0', id, result: '0x1b1b1' }
              : { jsonrpc: '2.0', id, error: { code: -32000, message: echo(req) } },
        );
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answers.length === 1 ? answers[0] : answers));
        return;
      }
      res.writeHead(503, { 'content-type': 'text/plain' }).end(echo(req));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface FollowerView {
  network: string;
  healthy: boolean;
  lastError: string | null;
}

describe.each(backends)(
  'node URLs with secrets, every route that reaches a node failing, on %s',
  (backend) => {
    let t: TestApp;
    let dir: string;
    let liars: Awaited<ReturnType<typeof startLiars>>;
    let deadPort: number;
    /** Every log line the service wrote (at info). */
    const lines: string[] = [];
    /** Every answer a client got, kept to be searched at the end. */
    const answers: { what: string; text: string }[] = [];
    const ask = async (what: string, method: string, url: string, body?: unknown): Promise<TestResponse> => {
      const answer = await t.request(method, url, body === undefined ? {} : { body });
      answers.push({ what, text: answer.text });
      return answer;
    };
    const subscribe = async (chain: string, address: string): Promise<string> => {
      const created = await ask(`subscribe on ${chain}`, 'POST', '/api/v1/subscription', {
        type: 'ADDRESS_TRANSACTION',
        attr: { address, chain, url: 'http://127.0.0.1:9/hook' },
      });
      expect(created.status, created.text).toBe(201);
      return (created.body as { id: string }).id;
    };

    beforeAll(async () => {
      liars = await startLiars();
      deadPort = await closedPort();
      const liar = `127.0.0.1:${liars.port}`;
      const dead = `127.0.0.1:${deadPort}`;
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-node-secrets-'));
      const configFile = path.join(dir, 'ledgerhook.json');
      fs.writeFileSync(
        configFile,
        JSON.stringify({
          networks: {
            LIAR: {
              family: 'evm',
              chainId: 111_025,
              symbol: 'ETH',
              rpc: [`http://liaruser1:liarpass1@${liar}/v3/LIARPATHKEY01?apikey=LIARQUERYKEY01`],
            },
            DEADETH: {
              family: 'evm',
              chainId: 111_026,
              symbol: 'ETH',
              rpc: [`http://deaduser2:deadpass2@${dead}/v3/DEADPATHKEY02?apikey=DEADQUERYKEY02`],
              ws: [`ws://deaduser2:deadpass2@${dead}/ws/DEADWSKEY002?apikey=DEADQUERYKEY02`],
            },
          },
        }),
      );
      t = await startTestApp(
        backend,
        {
          LEDGERHOOK_CONFIG: configFile,
          LEDGERHOOK_ROLES: 'all',
          LOG_LEVEL: 'info',
          LEDGERHOOK_WATCH_POLL_INTERVAL: '100ms',
          LEDGERHOOK_RPC_BTC: `http://btcuser03:btcpass03@${liar}/esplora/BTCPATHKEY03?apikey=BTCQUERYKEY03`,
          LEDGERHOOK_RPC_ALGO: `http://algouser4:algopass4@${liar}/algod/ALGOPATHKEY04?apikey=ALGOQUERYKEY04`,
          LEDGERHOOK_INDEXER_ALGO: `http://algouser4:algopass4@${liar}/idx/ALGOIDXKEY04?apikey=ALGOIDXQUERY04`,
          LEDGERHOOK_RPC_SOL: `http://soluser05:solpass05@${liar}/sol/SOLPATHKEY05?api-key=SOLQUERYKEY05`,
          // Registries are anchored on the node that refuses connections.
          LEDGERHOOK_ANCHOR_NETWORK: 'DEADETH',
          LEDGERHOOK_ANCHOR_KEY: devAccounts()[9]!.privateKey,
          LEDGERHOOK_ANCHOR_INTERVAL: '200ms',
        },
        {
          alwaysFollow: NETWORKS,
          logDestination: {
            write: (line: string) => {
              lines.push(line);
            },
          },
        },
      );
    });
    afterAll(async () => {
      await t?.close();
      await liars?.close();
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
    });

    test('no answer, page or log line carries a node URL’s user, password, path or query', async () => {
      // The followers in /readyz: each network failing, said by host alone.
      const followers = await waitFor(async () => {
        const ready = await ask('/readyz', 'GET', '/readyz');
        const networks = (ready.body as { networks: FollowerView[] }).networks;
        const failing = NETWORKS.map((name) => networks.find((n) => n.network === name));
        return failing.every((n) => n && !n.healthy && n.lastError) ? (failing as FollowerView[]) : undefined;
      }, 'every follower to report its node failing');
      const byName = Object.fromEntries(followers.map((f) => [f.network, f.lastError!]));
      expect(byName.DEADETH).toMatch(new RegExp(`127\\.0\\.0\\.1:${deadPort} refused the connection`));
      // The operator still learns what the node said, with its secrets blanked out.
      expect(byName.LIAR).toMatch(/JSON-RPC error -32000: cannot serve POST \[redacted\]/);

      // Transaction lookup on every family.
      const ids: Record<string, string> = {
        LIAR: `0x${'ab'.repeat(32)}`,
        DEADETH: `0x${'cd'.repeat(32)}`,
        BTC: 'ef'.repeat(32),
        ALGO: 'A'.repeat(52),
        SOL: '5'.repeat(88),
      };
      for (const [network, id] of Object.entries(ids)) {
        const lookup = await ask(`lookup on ${network}`, 'GET', `/api/v1/transaction/${network}/${id}`);
        expect(lookup.status, `${network}: ${lookup.text}`).toBe(503);
        expect((lookup.body as { detail: string }).detail).toMatch(
          new RegExp(`^The ${network} node is unavailable: `),
        );
      }

      // Backfill: refused at once where the node's head cannot be read...
      const dead = await subscribe('DEADETH', '0x000000000000000000000000000000000000dEaD');
      const refused = await ask('backfill on DEADETH', 'POST', `/api/v1/subscription/${dead}/backfill`, {
        from: 1,
        to: 2,
      });
      expect(refused.status, refused.text).toBe(503);
      expect((refused.body as { detail: string }).detail).toMatch(
        /^The DEADETH node is unavailable: The node refused the connection \(ECONNREFUSED\)$/,
      );
      const btc = await subscribe('BTC', 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq');
      expect(
        (await ask('backfill on BTC', 'POST', `/api/v1/subscription/${btc}/backfill`, { from: 1 })).status,
      ).toBe(503);
      // ...and, where it starts, its progress shows why each chunk fails.
      const liar = await subscribe('LIAR', '0x000000000000000000000000000000000000bEEF');
      const started = await ask('backfill on LIAR', 'POST', `/api/v1/subscription/${liar}/backfill`, {
        from: 1,
        to: 4,
      });
      expect(started.status, started.text).toBe(202);
      const progress = await waitFor(async () => {
        const view = await ask('backfill progress', 'GET', `/api/v1/subscription/${liar}/backfill`);
        return (view.body as { error: string | null }).error ?? undefined;
      }, 'the backfill to report its failing node');
      expect(progress).toMatch(/^The LIAR node is unavailable: The node answered JSON-RPC error -32000$/);

      // Verifying a receipt against the failing nodes.
      const hash = '1f'.repeat(32);
      const receipt = (network: string, type: string, sourceId: string) => ({
        type: 'LedgerhookReceipt/1',
        registryId: '01970000-0000-7000-8000-000000000001',
        targetHash: hash,
        salt: '2e'.repeat(32),
        proof: [],
        merkleRoot: hash,
        anchors: [{ type, network, chain: 'x', sourceId, blockNumber: 1, payload: `4c484b31${hash}` }],
      });
      for (const [network, type, id] of [
        ['LIAR', 'evm-input', ids.LIAR],
        ['DEADETH', 'evm-input', ids.DEADETH],
        ['ALGO', 'algorand-note', ids.ALGO],
      ] as const) {
        const verified = await ask(`verify on ${network}`, 'POST', '/api/v1/registry/verify', {
          receipt: receipt(network, type, id!),
        });
        expect(verified.status, verified.text).toBe(503);
      }

      // A registry waiting for its anchor on the refusing node: its status and proof.
      const registry = await ask('registry create', 'POST', '/api/v1/registry/create', {
        title: 'Anchored nowhere',
        folder_id: 'secrets',
        template: 'STORAGE',
        metadata: [],
      });
      expect(registry.status, registry.text).toBe(201);
      const registryId = (registry.body as { data: { id: string } }).data.id;
      await waitFor(
        () => lines.some((line) => line.includes('anchoring round failed')),
        'the anchorer to fail a round',
      );
      const shown = await ask('registry get', 'GET', `/api/v1/registry/${registryId}`);
      expect((shown.body as { data: { anchor: { status: string } } }).data.anchor.status).toBe('pending');
      expect((await ask('registry proof', 'GET', `/api/v1/registry/${registryId}/proof`)).status).toBe(409);
      await ask('metrics', 'GET', '/metrics');

      for (const { what, text } of answers) {
        for (const secret of ALL_SECRETS) expect(text, `${what} shows ${secret}`).not.toContain(secret);
        expect(text, what).not.toMatch(/viem@|Request body:|Version: /);
      }
      // The log kept what happened, for the operator: where each node is, and what failed.
      const log = lines.join('');
      expect(log).toContain(`127.0.0.1:${liars.port}`);
      expect(log).toMatch(/upstream unavailable/);
      expect(log).toMatch(/node unreachable or failing/);
      expect(log).toContain('[redacted]');
      for (const line of lines) {
        for (const secret of ALL_SECRETS) expect(line, `a log line shows ${secret}`).not.toContain(secret);
      }
    });

    test('the console’s followers view shows no secret', async () => {
      let browser: Browser | undefined;
      try {
        browser = await launchChromium(15_000);
        const page = await browser.newPage();
        page.setDefaultTimeout(15_000);
        await page.goto(`${t.app.url}/console`, { waitUntil: 'load' });
        await page.getByLabel('API token').fill(t.token);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.getByRole('button', { name: 'Sign out' }).waitFor();
        await page.getByRole('link', { name: 'Followers' }).click();
        for (const network of NETWORKS) await page.locator(`tr[data-network="${network}"]`).waitFor();
        const text = await page.locator('main').innerText();
        expect(text).toMatch(/refused the connection/);
        for (const secret of ALL_SECRETS) expect(text).not.toContain(secret);
      } finally {
        await browser?.close();
      }
    });
  },
);
