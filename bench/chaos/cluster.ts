// Throwaway PostgreSQL clusters for the chaos run: a primary and a streaming replica (asynchronous,
// through a replication link the run can cut), each on its own port on 127.0.0.1, in a temporary
// directory owned by the postgres user. Never the shared server. The PostgreSQL tools refuse root,
// so every one runs through `runuser -u postgres`.
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort, onCleanup, sleep } from '../lib.js';

const run = promisify(execFile);

/** The newest installed PostgreSQL's bin directory (Debian's layout). */
function pgBin(): string {
  const root = '/usr/lib/postgresql';
  const versions = fs.existsSync(root)
    ? fs
        .readdirSync(root)
        .filter((v) => fs.existsSync(path.join(root, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0)
    throw new Error(`no PostgreSQL server binaries under ${root} (apt-get install postgresql)`);
  return path.join(root, versions[0]!, 'bin');
}

function postgresIds(): { uid: number; gid: number } {
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  return { uid, gid };
}

export interface Node {
  name: string;
  dir: string;
  port: number;
}

export class Clusters {
  readonly bin = pgBin();
  readonly base: string;
  readonly primary: Node;
  readonly replica: Node;
  /** The node the virtual IP points at: the primary, then the promoted replica. */
  current: Node;
  private readonly ids = postgresIds();

  private constructor(base: string, primaryPort: number, replicaPort: number) {
    this.base = base;
    this.primary = { name: 'primary', dir: path.join(base, 'primary'), port: primaryPort };
    this.replica = { name: 'replica', dir: path.join(base, 'replica'), port: replicaPort };
    this.current = this.primary;
  }

  static async create(): Promise<Clusters> {
    const base = fs.mkdtempSync(path.join(os.tmpdir(), 'lh-chaos-pg-'));
    const clusters = new Clusters(base, await freePort(), await freePort());
    fs.chownSync(base, clusters.ids.uid, clusters.ids.gid);
    onCleanup(() => clusters.destroy());
    return clusters;
  }

  /** A PostgreSQL tool as the postgres user, with a deadline. */
  async tool(name: string, args: string[], timeoutMs = 120_000): Promise<string> {
    try {
      const { stdout } = await run('runuser', ['-u', 'postgres', '--', path.join(this.bin, name), ...args], {
        cwd: this.base,
        timeout: timeoutMs,
        killSignal: 'SIGKILL',
      });
      return stdout;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new Error(`${name} ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`);
    }
  }

  url(node: Node, database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${node.port}/${database}`;
  }

  /** initdb, configuration for streaming replication, start, and the service's database. */
  async startPrimary(database: string): Promise<void> {
    const { dir, port } = this.primary;
    await this.tool('initdb', ['-D', dir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
    fs.appendFileSync(
      path.join(dir, 'postgresql.conf'),
      [
        '',
        "listen_addresses = '127.0.0.1'",
        `port = ${port}`,
        `unix_socket_directories = '${this.base}'`,
        'max_connections = 300',
        'wal_level = replica',
        'max_wal_senders = 10',
        'wal_keep_size = 2GB',
        'hot_standby = on',
        // Throwaway clusters that are never lost with their machine: a crash here is a killed
        // process (pg_ctl -m immediate), after which the kernel still holds every write.
        'fsync = off',
        'full_page_writes = off',
        "log_min_messages = 'warning'",
        '',
      ].join('\n'),
    );
    fs.appendFileSync(
      path.join(dir, 'pg_hba.conf'),
      '\nhost all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n',
    );
    await this.start(this.primary);
    const client = await connect(this.url(this.primary));
    try {
      await client.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
    } finally {
      await client.end();
    }
  }

  /**
   * A base backup of the primary taken through `linkPort` (the replication link, a proxy the run
   * can cut), so the replica's primary_conninfo goes through it; then started as a hot standby.
   */
  async startReplica(linkPort: number): Promise<void> {
    const { dir, port } = this.replica;
    await this.tool(
      'pg_basebackup',
      ['-h', '127.0.0.1', '-p', String(linkPort), '-U', 'postgres'].concat([
        '-D',
        dir,
        '-R',
        '-X',
        'stream',
        '--no-sync',
        '-c',
        'fast',
      ]),
    );
    fs.appendFileSync(path.join(dir, 'postgresql.conf'), `\nport = ${port}\n`);
    await this.start(this.replica);
    await this.waitStreaming();
  }

  async start(node: Node): Promise<void> {
    await this.tool('pg_ctl', [
      '-D',
      node.dir,
      '-l',
      path.join(this.base, `${node.name}.log`),
      '-w',
      '-t',
      '60',
      'start',
    ]);
  }

  private async waitStreaming(): Promise<void> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const rows = await this.query(
        this.primary,
        "SELECT 1 FROM pg_stat_replication WHERE state = 'streaming'",
      );
      if (rows.length > 0) return;
      if (Date.now() > deadline) throw new Error('the replica did not start streaming within 60 s');
      await sleep(200);
    }
  }

  /** Waits until the replica has replayed everything the primary has written so far. */
  async waitReplayed(timeoutMs = 60_000): Promise<void> {
    const [{ lsn }] = (await this.query(this.primary, 'SELECT pg_current_wal_lsn()::text AS lsn')) as [
      { lsn: string },
    ];
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const rows = (await this.query(
        this.primary,
        'SELECT (replay_lsn >= $1::pg_lsn) AS done FROM pg_stat_replication',
        [lsn],
      )) as Array<{ done: boolean }>;
      if (rows.some((r) => r.done)) return;
      if (Date.now() > deadline)
        throw new Error(`the replica did not replay ${lsn} within ${timeoutMs / 1000} s`);
      await sleep(100);
    }
  }

  async currentLsn(node: Node): Promise<string> {
    const [row] = (await this.query(node, 'SELECT pg_current_wal_lsn()::text AS lsn')) as [{ lsn: string }];
    return row.lsn;
  }

  async receivedLsn(node: Node): Promise<string | null> {
    const [row] = (await this.query(node, 'SELECT pg_last_wal_receive_lsn()::text AS lsn')) as [
      { lsn: string | null },
    ];
    return row.lsn;
  }

  /** Bytes of WAL between two LSNs, asked of a running node. */
  async lsnDiff(node: Node, a: string, b: string): Promise<number> {
    const [row] = (await this.query(node, 'SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint AS d', [
      a,
      b,
    ])) as [{ d: string }];
    return Number(row.d);
  }

  /** The primary dies as in a crash (no checkpoint, clients cut off). */
  async killPrimary(): Promise<void> {
    await this.tool('pg_ctl', ['-D', this.primary.dir, '-m', 'immediate', '-w', '-t', '30', 'stop']);
  }

  async promoteReplica(): Promise<void> {
    await this.tool('pg_ctl', ['-D', this.replica.dir, '-w', '-t', '60', 'promote']);
    this.current = this.replica;
  }

  /** A planned restart of the current primary: clients are disconnected, nothing is lost. */
  async restartCurrent(): Promise<void> {
    await this.tool('pg_ctl', [
      '-D',
      this.current.dir,
      '-l',
      path.join(this.base, `${this.current.name}.log`),
      '-m',
      'fast',
      '-w',
      '-t',
      '60',
      'restart',
    ]);
  }

  async query(node: Node, text: string, values: unknown[] = [], database = 'postgres'): Promise<unknown[]> {
    const client = await connect(this.url(node, database));
    try {
      return (await client.query(text, values)).rows;
    } finally {
      await client.end().catch(() => {});
    }
  }

  /** The postmaster pids still alive (read from each cluster's postmaster.pid). */
  postmasterPids(): number[] {
    const pids: number[] = [];
    for (const node of [this.primary, this.replica]) {
      try {
        const pid = Number(fs.readFileSync(path.join(node.dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
        if (pid > 0 && alive(pid)) pids.push(pid);
      } catch {
        // never started, or stopped
      }
    }
    return pids;
  }

  /** Stops both clusters (immediately, with deadlines; SIGKILL as the last resort) and removes them. */
  async destroy(): Promise<void> {
    for (const node of [this.primary, this.replica]) {
      if (!fs.existsSync(path.join(node.dir, 'postmaster.pid'))) continue;
      await this.tool('pg_ctl', ['-D', node.dir, '-m', 'immediate', '-w', '-t', '15', 'stop'], 20_000).catch(
        () => {},
      );
    }
    for (const pid of this.postmasterPids()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    const deadline = Date.now() + 10_000;
    while (this.postmasterPids().length > 0 && Date.now() < deadline) await sleep(100);
    fs.rmSync(this.base, { recursive: true, force: true });
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A pg client with short deadlines (the database may be down on purpose). */
export async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: 5_000,
    query_timeout: 60_000,
  });
  client.on('error', () => {});
  await client.connect();
  return client;
}
