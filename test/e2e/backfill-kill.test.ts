/**
 * A backfill survives SIGKILL: the restarted service resumes after the last chunk committed, and
 * every transfer of the range ends notified exactly once.
 */
import { createWalletClient, http, numberToHex, parseEther } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Anvil, startAnvil } from '../../src/chains/evm/anvil.js';
import { anvilNetworksFile } from '../helpers/anchoring.js';
import { backends, createTestEnvironment, type TestEnvironment } from '../helpers/env.js';
import { runCli, type ServiceProcess, startServiceProcess, waitFor } from '../helpers/process.js';

/** Transfers to the watched address, each followed by empty blocks. */
const TRANSFERS = 30;
const GAP = 20;

describe.each(backends)('backfill survives SIGKILL (%s)', (backend) => {
  let anvil: Anvil;
  let environment: TestEnvironment;
  let env: Record<string, string>;
  let service: ServiceProcess | undefined;
  let token = '';
  let first = 0;
  let last = 0;
  const sent: string[] = [];

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${service!.url}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    anvil = await startAnvil();
    environment = await createTestEnvironment(backend);
    env = {
      ...environment.env,
      LOG_LEVEL: 'info',
      LEDGERHOOK_CONFIG: anvilNetworksFile({ DEVNET: anvil }),
      LEDGERHOOK_ROLES: 'api,watcher',
      LEDGERHOOK_ALLOW_CIDRS: '127.0.0.0/8',
      LEDGERHOOK_WATCH_POLL_INTERVAL: '50ms',
      LEDGERHOOK_POLL_INTERVAL: '50ms',
      // Slow enough to be killed mid-way: about 700 requests at 150 a second.
      LEDGERHOOK_BACKFILL_RPS: '150',
      LEDGERHOOK_BACKFILL_BLOCKS: '10',
    };
    const wallet = createWalletClient({
      account: privateKeyToAccount(anvil.accounts[0]!.privateKey),
      transport: http(anvil.rpcUrl),
    });
    const rpc = (method: string, params: unknown[]) =>
      wallet.request({ method: method as never, params: params as never });
    first = Number(await rpc('eth_blockNumber', [])) + 1;
    for (let i = 0; i < TRANSFERS; i++) {
      sent.push(
        await wallet.sendTransaction({
          to: anvil.accounts[1]!.address,
          value: parseEther('0.001'),
          chain: null,
        }),
      );
      await rpc('anvil_mine', [numberToHex(GAP)]);
    }
    last = Number(await rpc('eth_blockNumber', []));
  }, 60_000);

  afterAll(async () => {
    await service?.stop('SIGKILL');
    await anvil?.stop();
    await environment?.cleanup();
  });

  test('killed mid-way, the restarted service resumes and notifies each transfer once', async () => {
    service = await startServiceProcess(env);
    token = service.printedToken!;
    const created = await api('POST', '/subscription', {
      type: 'ADDRESS_TRANSACTION',
      attr: { address: anvil.accounts[1]!.address, chain: 'DEVNET', url: 'http://127.0.0.1:9/hook' },
      mempool: false,
    });
    expect(created.status).toBe(201);
    const sub = created.body.id as string;
    const started = await api('POST', `/subscription/${sub}/backfill`, { from: first, to: last });
    expect(started.status, JSON.stringify(started.body)).toBe(202);

    // Progress shows while it runs; kill it well before the end.
    const before = await waitFor(async () => {
      const v = (await api('GET', `/subscription/${sub}/backfill`)).body;
      return (v.position as number) >= first + 100 ? v : undefined;
    }, 'the backfill a third of the way');
    expect(before.state).toBe('running');
    expect(before.position as number).toBeLessThan(last - 100);
    expect(before.etaSeconds).not.toBeNull();
    await service.stop('SIGKILL');

    service = await startServiceProcess(env);
    const after = await waitFor(
      async () => {
        const v = (await api('GET', `/subscription/${sub}/backfill`)).body;
        return v.state === 'done' ? v : undefined;
      },
      'the resumed backfill done',
      60_000,
    );
    expect(after.position).toBe(last);
    // It resumed after what was committed rather than from the start.
    const resumedAt = service
      .stdout()
      .split('\n')
      .filter((line) => line.includes('backfill running'))
      .map((line) => (JSON.parse(line) as { from: number }).from);
    expect(resumedAt).toHaveLength(1);
    expect(resumedAt[0]).toBeGreaterThan(before.position as number);
    expect(after.found).toBe(TRANSFERS);

    const log = await api('GET', `/subscription/${sub}/notifications?limit=100`);
    const bodies = (log.body.data as { payload: Record<string, unknown> }[]).map((n) => n.payload);
    expect(bodies.map((b) => b.txId).sort()).toEqual([...sent].sort());
    expect(bodies.every((b) => b.backfill === true && b.amount === '-0.001')).toBe(true);

    // The CLI starts one and draws its progress until it ends (a line per step without a terminal).
    const cli = await runCli(
      [
        'backfill',
        sub,
        '--from',
        String(first),
        '--to',
        String(first + 40),
        '--url',
        service.url,
        '--token',
        token,
      ],
      env,
    );
    expect(cli.code, cli.stderr).toBe(0);
    const lines = cli.stderr.split('\n').filter((l) => l.startsWith('['));
    expect(lines.at(-1)).toMatch(
      new RegExp(`^\\[#{30}\\] 100\\.0% block ${first + 40}/${first + 40} found 0 .*done$`),
    );
    // Refused input is one line naming the field, exit 1.
    const bad = await runCli(
      ['backfill', sub, '--from', 'soon', '--url', service.url, '--token', token],
      env,
    );
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/backfill refused \(400\).*\/from/);
  }, 120_000);
});
