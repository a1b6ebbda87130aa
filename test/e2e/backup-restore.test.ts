/**
 * `ledgerhook backup` and `ledgerhook restore` on the embedded database, with the real service as a
 * process, a real anvil chain (which outlives the service, as a real chain does) and a real
 * receiver on loopback; and the inputs they refuse.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { PGlite } from '@electric-sql/pglite';
import { Webhook } from 'standardwebhooks';
import { type Hex, parseEther } from 'viem';
import { afterAll, describe, expect, test } from 'vitest';
import { masterKeyId } from '../../src/secrets/envelope.js';
import { BACKUP_FORMAT } from '../../src/store/backup.js';
import { createTestEnvironment, type TestEnvironment } from '../helpers/env.js';
import {
  type CliResult,
  meaningfulLines,
  runCli,
  type ServiceProcess,
  startServiceProcess,
  waitFor,
} from '../helpers/process.js';
import { type ProcessChain, processServiceEnv, startProcessChain } from '../helpers/process-chain.js';
import { type ReceivedRequest, type Receiver, startReceiver } from '../helpers/receiver.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => {});
});

/** A directory of the test's own, removed at the end. */
function scratchDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-backup-'));
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function environment(): Promise<TestEnvironment> {
  const created = await createTestEnvironment('pglite');
  cleanups.push(() => created.cleanup());
  return created;
}

/** An anvil chain of the test's own, configured as network DEVNET: it keeps running while services come and go. */
const devnet = () => startProcessChain(scratchDir(), (cleanup) => cleanups.push(cleanup));

const serviceEnv = (dataDir: string, chain: ProcessChain, extra: Record<string, string> = {}) =>
  processServiceEnv({ LEDGERHOOK_DATA_DIR: dataDir }, chain, extra);

async function start(env: Record<string, string>): Promise<ServiceProcess> {
  const service = await startServiceProcess(env);
  cleanups.push(async () => void (await service.stop('SIGKILL')));
  return service;
}

async function api(
  url: string,
  method: string,
  route: string,
  token: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${url}${route}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Subscribes `address` on DEVNET and waits until its follower has read a head, so no transfer is history. */
async function subscribe(
  service: ServiceProcess,
  token: string,
  address: Hex,
  url: string,
): Promise<{ id: string; secret: string }> {
  const created = await api(service.url, 'POST', '/api/v1/subscription', token, {
    type: 'ADDRESS_TRANSACTION',
    attr: { address, chain: 'DEVNET', url },
  });
  expect(created.status).toBe(201);
  await waitFor(async () => {
    const ready = (await (await fetch(`${service.url}/readyz`)).json()) as {
      networks?: { network: string; height: number | null }[];
    };
    return ready.networks?.some((n) => n.network === 'DEVNET' && n.height !== null) ? true : undefined;
  }, 'the DEVNET follower to start');
  return created.body as unknown as { id: string; secret: string };
}

interface Delivered {
  /** Its place among the receiver's requests. */
  index: number;
  webhookId: string;
  id: string;
  txId: string;
  mempool: boolean;
}

/** Every request the receiver got, its signature verified with the subscription's secret. */
function delivered(receiver: Receiver, secret: string): Delivered[] {
  const webhook = new Webhook(secret);
  return receiver.requests.map((r: ReceivedRequest, index) => {
    const headers = {
      'webhook-id': r.headers['webhook-id'] as string,
      'webhook-timestamp': r.headers['webhook-timestamp'] as string,
      'webhook-signature': r.headers['webhook-signature'] as string,
    };
    webhook.verify(r.body, headers);
    const body = JSON.parse(r.body) as { id: string; txId: string; mempool?: boolean };
    return {
      index,
      webhookId: headers['webhook-id'],
      id: body.id,
      txId: body.txId,
      mempool: body.mempool === true,
    };
  });
}

/** Every transfer to `address` the chain holds from block `from` on, read from the chain itself. */
async function transfersOnChain(chain: ProcessChain, address: Hex, from: bigint): Promise<Set<string>> {
  const head = await chain.client.getBlockNumber();
  const hashes = new Set<string>();
  for (let n = from; n <= head; n++) {
    const block = await chain.client.getBlock({ blockNumber: n, includeTransactions: true });
    for (const tx of block.transactions)
      if (tx.to?.toLowerCase() === address.toLowerCase()) hashes.add(tx.hash.toLowerCase());
  }
  return hashes;
}

describe('ledgerhook backup and restore (embedded PGlite, a real service process)', () => {
  test('a backup taken while notifications are delivered restores with nothing lost, the later notifications sent again under their ids, and the encrypted registry readable with the kept key only', async () => {
    const chain = await devnet();
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    const masterKey = crypto.randomBytes(32).toString('hex');
    const keyId = masterKeyId(Buffer.from(masterKey, 'hex'));
    const original = await environment();
    const first = await start(serviceEnv(original.dataDir, chain, { LEDGERHOOK_MASTER_KEY: masterKey }));
    const token = first.printedToken!;

    const registry = await api(first.url, 'POST', '/api/v1/registry/create', token, {
      title: 'Vault',
      metadata: [{ type: 'TEXT', key: 'holder', value: 'Ada Lovelace' }],
      folder_id: 'backups',
      template: 'STORAGE',
      data_encrypted: true,
    });
    expect(registry.status).toBe(201);
    const registryId = (registry.body.data as { id: string }).id;
    const watched = chain.anvil.accounts[5]!.address;
    const startBlock = await chain.client.getBlockNumber();
    const subscription = await subscribe(first, token, watched, receiver.url);
    const minedIds = () => delivered(receiver, subscription.secret).filter((d) => !d.mempool);

    /** One transfer, mined at once (automine), and waited for until it is notified. */
    const sent: Hex[] = [];
    const transferNotified = async (): Promise<Hex> => {
      const hash = await chain.wallet.sendTransaction({
        to: watched,
        value: parseEther('0.001'),
        account: chain.wallet.account!,
        chain: null,
      });
      sent.push(hash);
      await waitFor(
        () => (minedIds().some((d) => d.txId.toLowerCase() === hash.toLowerCase()) ? true : undefined),
        `the notification of ${hash}`,
      );
      return hash;
    };

    // Delivered well before the backup: these must not come again.
    const early: Hex[] = [];
    for (let i = 0; i < 4; i++) early.push(await transferNotified());

    // A stream of transfers, each notified before the next, with the backup taken in its middle.
    const backupFile = path.join(scratchDir(), 'ledgerhook.backup');
    let backupEnded: number | undefined;
    // First delivered after the backup command ended: the backup cannot know them.
    const deliveredAfterBackup = () =>
      backupEnded === undefined ? [] : minedIds().filter((d) => d.index >= backupEnded!);
    const stream = (async () => {
      while (deliveredAfterBackup().length < 5) await transferNotified();
    })();
    await waitFor(() => (sent.length >= early.length + 2 ? true : undefined), 'the stream to flow');
    const backup = await runCli(['backup', backupFile], { LEDGERHOOK_DATA_DIR: original.dataDir });
    backupEnded = receiver.requests.length;
    expect(backup.code, backup.stderr).toBe(0);
    expect(meaningfulLines(backup.stdout)).toHaveLength(1);
    expect(backup.stdout).toContain(`written to ${backupFile}`);
    expect(backup.stdout).toContain(`a snapshot of the running service (pid ${first.child.pid})`);
    expect(backup.stdout).toContain(`not the master key (its records use master key ${keyId})`);
    expect(fs.statSync(backupFile).mode & 0o777).toBe(0o600);
    expect(fs.readFileSync(backupFile).includes(Buffer.from(masterKey))).toBe(false);
    await stream;

    const later = deliveredAfterBackup();
    expect(later.length).toBeGreaterThanOrEqual(5);
    expect(await first.stop()).toBe(0);

    // Into a new data directory (missing: restore creates it), with no master key in it.
    const restoredDir = path.join(scratchDir(), 'restored');
    const restored = await runCli(['restore', backupFile], { LEDGERHOOK_DATA_DIR: restoredDir });
    expect(restored.code, restored.stderr).toBe(0);
    expect(meaningfulLines(restored.stdout)).toHaveLength(1);
    expect(restored.stdout).toContain(`the one its records use (id ${keyId})`);
    expect(fs.readdirSync(restoredDir)).toEqual(['pglite']);
    // Restored beside another master.key, it says at once that the service will refuse it.
    const besideOtherKey = path.join(scratchDir(), 'other-key');
    fs.mkdirSync(besideOtherKey);
    fs.writeFileSync(path.join(besideOtherKey, 'master.key'), `${'ef'.repeat(32)}\n`, { mode: 0o600 });
    const warned = await runCli(['restore', backupFile], { LEDGERHOOK_DATA_DIR: besideOtherKey });
    expect(warned.code, warned.stderr).toBe(0);
    expect(meaningfulLines(warned.stderr)).toEqual([
      expect.stringMatching(
        new RegExp(`^ledgerhook: warning: the configured master key .* is not the one .* \\(id ${keyId}\\)`),
      ),
    ]);

    // Without the kept key, or with another one, the service refuses in one line (exit 2), creating no key.
    const restoredEnv = serviceEnv(restoredDir, chain);
    const keyless = await runCli(['serve'], restoredEnv);
    expect(keyless.code, keyless.stderr).toBe(2);
    expect(meaningfulLines(keyless.stderr)).toHaveLength(1);
    expect(keyless.stderr).toMatch(
      new RegExp(
        `^ledgerhook: invalid configuration: LEDGERHOOK_MASTER_KEY is not set .*master key ${keyId}`,
      ),
    );
    expect(fs.existsSync(path.join(restoredDir, 'master.key'))).toBe(false);
    const wrongKey = crypto.randomBytes(32).toString('hex');
    const wrong = await runCli(['serve'], { ...restoredEnv, LEDGERHOOK_MASTER_KEY: wrongKey });
    expect(wrong.code, wrong.stderr).toBe(2);
    expect(meaningfulLines(wrong.stderr)).toHaveLength(1);
    expect(wrong.stderr).toMatch(
      /^ledgerhook: invalid configuration: LEDGERHOOK_MASTER_KEY does not match this database/,
    );

    // With the kept key: the same chain and receiver; what the backup had not delivered comes again.
    const restartedAt = receiver.requests.length;
    const second = await start({ ...restoredEnv, LEDGERHOOK_MASTER_KEY: masterKey });
    const resent = () => minedIds().filter((d) => d.index >= restartedAt);
    await waitFor(
      () => {
        const txs = new Set(resent().map((d) => d.txId.toLowerCase()));
        return later.every((d) => txs.has(d.txId.toLowerCase())) ? true : undefined;
      },
      'the notifications first delivered after the backup to come again',
      60_000,
    );
    // The same ids, as webhook-id and in the body.
    const laterTxs = new Set(later.map((d) => d.txId.toLowerCase()));
    const again = resent().filter((d) => laterTxs.has(d.txId.toLowerCase()));
    const byTx = (list: Delivered[]) =>
      Object.fromEntries(list.map((d) => [d.txId.toLowerCase(), { webhookId: d.webhookId, id: d.id }]));
    expect(byTx(again)).toEqual(byTx(later));
    for (const d of minedIds()) expect(d.webhookId).toBe(d.id);

    // And it goes on: a transfer after the restore is notified.
    await transferNotified();
    // Nothing lost: every transfer the chain holds was notified; each always under one id; those
    // delivered long before the backup were not sent again.
    const onChain = await transfersOnChain(chain, watched, startBlock);
    expect(onChain.size).toBe(sent.length);
    const idsByTx = new Map<string, Set<string>>();
    for (const d of minedIds()) {
      const ids = idsByTx.get(d.txId.toLowerCase()) ?? new Set();
      ids.add(d.id);
      idsByTx.set(d.txId.toLowerCase(), ids);
    }
    for (const tx of onChain) expect(idsByTx.get(tx)?.size, `notifications of ${tx}`).toBe(1);
    const earlyTxs = new Set(early.map((h) => h.toLowerCase()));
    expect(resent().filter((d) => earlyTxs.has(d.txId.toLowerCase()))).toEqual([]);

    // The encrypted registry reads back decrypted with the kept key.
    const read = await api(second.url, 'GET', `/api/v1/registry/${registryId}`, token);
    expect(read.status).toBe(200);
    expect(read.body.data).toMatchObject({
      title: 'Vault',
      data_encrypted: true,
      metadata: [{ type: 'TEXT', key: 'holder', value: 'Ada Lovelace' }],
    });
    expect(await second.stop()).toBe(0);
  }, 240_000);
});

/** An archive as ledgerhook backup writes it, around any bytes (to dress up what is not a backup). */
function archiveAround(tarball: Uint8Array): Buffer {
  const manifest = {
    format: BACKUP_FORMAT,
    createdAt: new Date().toISOString(),
    ledgerhook: '0.0.0',
    database: 'pglite',
    masterKeyId: null,
    tarballBytes: tarball.length,
    tarballSha256: crypto.createHash('sha256').update(tarball).digest('hex'),
  };
  return Buffer.concat([Buffer.from(`${JSON.stringify(manifest)}\n`), tarball]);
}

function expectOneLine(result: CliResult, code: number, pattern: RegExp): void {
  expect(result.code, result.stderr).toBe(code);
  const lines = meaningfulLines(result.stderr);
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
}

/** A directory's entries and their contents, to show a refused restore changed nothing. */
function contentsOf(dir: string): Record<string, string> | 'missing' {
  if (!fs.existsSync(dir)) return 'missing';
  return Object.fromEntries(
    fs.readdirSync(dir).map((name) => {
      const file = path.join(dir, name);
      return [name, fs.statSync(file).isDirectory() ? 'dir' : fs.readFileSync(file, 'hex')];
    }),
  );
}

describe('what backup and restore refuse', () => {
  test('backup: an existing FILE (unless --force), a missing directory, DATABASE_URL, a data directory without data', async () => {
    const data = await environment();
    const dir = scratchDir();
    const file = path.join(dir, 'first.backup');
    // No service runs: the CLI opens the data directory itself.
    const offline = await runCli(['backup', file], data.env);
    expect(offline.code, offline.stderr).toBe(0);
    expect(offline.stdout).toContain('no service was running');
    const before = fs.readFileSync(file);

    expectOneLine(await runCli(['backup', file], data.env), 1, /exists already; .*--force/);
    expect(fs.readFileSync(file).equals(before)).toBe(true);
    const forced = await runCli(['backup', file, '--force'], data.env);
    expect(forced.code, forced.stderr).toBe(0);
    expectOneLine(
      await runCli(['backup', path.join(dir, 'nowhere', 'x.backup')], data.env),
      1,
      /the directory .*nowhere does not exist/,
    );
    expectOneLine(
      await runCli(['backup', path.join(dir, 'pg.backup')], {
        ...data.env,
        DATABASE_URL: 'postgres://u@127.0.0.1:1/db',
      }),
      2,
      /^ledgerhook: backup is for the embedded database; .*pg_dump/,
    );
    expectOneLine(
      await runCli(['backup', path.join(dir, 'empty.backup')], { LEDGERHOOK_DATA_DIR: scratchDir() }),
      2,
      /LEDGERHOOK_DATA_DIR .* holds no Ledgerhook data/,
    );
    // Nothing half-written was left beside the backups.
    expect(fs.readdirSync(dir).sort()).toEqual(['first.backup']);
  });

  test('backup through a service whose database runs on the main thread (LEDGERHOOK_PGLITE_WORKER=off) restores', async () => {
    const data = await environment();
    const service = await start({ ...data.env, LEDGERHOOK_PGLITE_WORKER: 'off', LEDGERHOOK_ROLES: 'api' });
    const file = path.join(scratchDir(), 'main-thread.backup');
    const backup = await runCli(['backup', file], data.env);
    expect(backup.code, backup.stderr).toBe(0);
    expect(backup.stdout).toContain('a snapshot of the running service');
    expect(await service.stop()).toBe(0);
    const restored = await runCli(['restore', file], { LEDGERHOOK_DATA_DIR: path.join(scratchDir(), 'r') });
    expect(restored.code, restored.stderr).toBe(0);
  });

  test('restore: what is not a whole Ledgerhook backup, a data directory in use or not empty, DATABASE_URL; each leaves the target as it was', async () => {
    const data = await environment();
    const dir = scratchDir();
    const good = path.join(dir, 'good.backup');
    expect((await runCli(['backup', good], data.env)).code).toBe(0);
    const bytes = fs.readFileSync(good);

    const emptyPglite = await PGlite.create(path.join(dir, 'empty-pglite'));
    const emptyTarball = new Uint8Array(await (await emptyPglite.dumpDataDir('gzip')).arrayBuffer());
    await emptyPglite.close();
    const inputs: [string, Uint8Array, RegExp][] = [
      ['random', crypto.randomBytes(200_000), /is not a Ledgerhook backup/],
      [
        'truncated',
        bytes.subarray(0, Math.floor(bytes.length / 2)),
        /is truncated: it holds \d+ of the \d+ bytes/,
      ],
      ['damaged', Buffer.concat([bytes.subarray(0, -10), Buffer.alloc(10)]), /is damaged: .*checksum/],
      ['not-gzip', archiveAround(crypto.randomBytes(50_000)), /is damaged: .*not a readable gzip stream/],
      [
        'gzip-of-noise',
        archiveAround(zlib.gzipSync(crypto.randomBytes(50_000))),
        /is damaged|is not a PGlite data directory/,
      ],
      ['empty-pglite', archiveAround(emptyTarball), /holds a database without Ledgerhook tables/],
    ];
    // A target that exists, holding only the kept master.key, and one that does not exist.
    const withKey = path.join(dir, 'with-key');
    fs.mkdirSync(withKey);
    fs.writeFileSync(path.join(withKey, 'master.key'), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
    const missing = path.join(dir, 'missing', 'data');
    for (const [name, content, pattern] of inputs) {
      const file = path.join(dir, `${name}.backup`);
      fs.writeFileSync(file, content);
      for (const target of [withKey, missing]) {
        const before = contentsOf(target);
        expectOneLine(
          await runCli(['restore', file], { LEDGERHOOK_DATA_DIR: target }),
          1,
          new RegExp(`^ledgerhook: ${file} ${pattern.source}.*; nothing was restored$`),
        );
        expect(contentsOf(target), `${name} into ${target}`).toEqual(before);
      }
    }
    expect(fs.existsSync(path.join(dir, 'missing'))).toBe(false);

    expectOneLine(
      await runCli(['restore', path.join(dir, 'no-such.backup')], { LEDGERHOOK_DATA_DIR: missing }),
      1,
      /cannot read .*no-such\.backup: no such file/,
    );
    expectOneLine(
      await runCli(['restore', good], { LEDGERHOOK_DATA_DIR: data.dataDir }),
      2,
      new RegExp(`LEDGERHOOK_DATA_DIR ${data.dataDir} is not empty \\(it holds pglite\\)`),
    );
    expectOneLine(
      await runCli(['restore', good], {
        LEDGERHOOK_DATA_DIR: missing,
        DATABASE_URL: 'postgres://u@127.0.0.1:1/db',
      }),
      2,
      /^ledgerhook: restore is for the embedded database; .*pg_restore/,
    );
    // A service holds the directory (a live pid in its lock file): refused, as the service itself refuses.
    const held = path.join(dir, 'held');
    fs.mkdirSync(held);
    fs.writeFileSync(path.join(held, 'ledgerhook.pid'), String(process.pid));
    expectOneLine(
      await runCli(['restore', good], { LEDGERHOOK_DATA_DIR: held }),
      1,
      new RegExp(`data directory ${held} is in use by another Ledgerhook process \\(pid ${process.pid}\\)`),
    );

    // The good one into the directory holding the kept key: the key stays, and is named as the one in use.
    const restored = await runCli(['restore', good], { LEDGERHOOK_DATA_DIR: withKey });
    expect(restored.code, restored.stderr).toBe(0);
    expect(fs.readdirSync(withKey).sort()).toEqual(['master.key', 'pglite']);
  }, 120_000);
});
