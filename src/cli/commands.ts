/**
 * The commands themselves (loaded only once the command line has parsed, so that help and usage
 * errors answer at once): serve, migrate and the token commands, and how their failures read.
 */
import fs from 'node:fs';
import path from 'node:path';
import { connectAdmin, ServiceStartingError, type TokenAdmin } from '../accounts/admin.js';
import { createAccounts, type TokenInfo } from '../accounts/service.js';
import { createServiceLogger } from '../app/logger.js';
import { announceTokenOnConsole, type RunningApp, startApp } from '../app/start.js';
import { StartupError } from '../app/startup-error.js';
import { openConfiguredStore, PGLITE_SUBDIR } from '../app/store.js';
import { startAnvil } from '../chains/evm/anvil.js';
import { loadNetworks } from '../chains/networks.js';
import { type Config, ConfigError } from '../config.js';
import { AppError } from '../errors.js';
import { parseAllowCidrs } from '../notify/egress.js';
import { DataDirInUseError, dataDirHolder } from '../store/lock.js';
import { serviceApi } from './service-api.js';
import { type ParsedCommandLine, UsageError } from './usage.js';

/** How long a token command waits for a service that is still starting to publish its admin endpoint. */
const ADMIN_WAIT_MS = 10_000;
/** After the shutdown deadline, the grace for stopping the devnet chain and logging before exiting regardless. */
const EXIT_BACKSTOP_MS = 2_000;

/** What a failure prints (one line) and the exit code: 2 for usage and configuration, else 1. */
export function describeFailure(err: unknown): { line: string; code: number } {
  if (err instanceof UsageError) return { line: `ledgerhook: ${err.message}`, code: 2 };
  if (err instanceof ConfigError)
    return { line: `ledgerhook: invalid configuration: ${err.message}`, code: 2 };
  if (err instanceof DataDirInUseError) {
    return { line: `ledgerhook: ${err.message}; stop it first or use another LEDGERHOOK_DATA_DIR`, code: 1 };
  }
  if (err instanceof StartupError || err instanceof AppError || err instanceof ServiceStartingError)
    return { line: `ledgerhook: ${err.message}`, code: 1 };
  // Unforeseen: still one line; the stack only when asked for.
  const message = ((err as Error | undefined)?.message ?? String(err)).split('\n')[0];
  const verbose = /^(debug|trace)$/.test(process.env.LOG_LEVEL?.trim() ?? '');
  const stack = verbose && err instanceof Error && err.stack ? `\n${err.stack}` : '';
  return {
    line: `ledgerhook: unexpected error: ${message}${verbose ? '' : ' (LOG_LEVEL=debug shows where)'}${stack}`,
    code: 1,
  };
}

/** The dev account that signs the devnet's anchor transactions: the last, apart from those shown. */
function devnetAnchorAccount<T>(accounts: T[]): T {
  return accounts[accounts.length - 1]!;
}

/**
 * `--devnet`: a local anvil chain registered as network DEVNET, loopback callbacks allowed, so
 * everything can be tried offline. Returns what to stop on shutdown.
 */
async function startDevnet(config: Config): Promise<{ stop: () => Promise<void> }> {
  const anvil = await startAnvil();
  config.networks = loadNetworks(process.env, [
    {
      name: 'DEVNET',
      aliases: [],
      family: 'evm',
      chainId: anvil.chainId,
      symbol: 'ETH',
      decimals: 18,
      rpcUrls: [anvil.rpcUrl],
      wsUrls: [anvil.wsUrl],
      indexerUrls: [],
      // anvil answers both trace methods, but its debug_traceBlockByNumber (1.7.1) can hang for
      // good while blocks are being mined (anvil_mine); its trace_block does not.
      traces: 'parity',
    },
  ]);
  config.allowCidrs = [...config.allowCidrs, ...parseAllowCidrs('127.0.0.0/8,::1/128')];
  if (!process.env.LEDGERHOOK_WATCH_POLL_INTERVAL) config.watchPollIntervalMs = 250;
  // Registries are anchored on the devnet by its last funded account, unless configured otherwise.
  const anchorAccount = devnetAnchorAccount(anvil.accounts);
  if (config.anchor.network === undefined) {
    config.anchor.network = 'DEVNET';
    config.anchor.key = anchorAccount.privateKey;
    if (!config.anchor.intervalSet) config.anchor.intervalMs = 2_000;
  }
  const keys = anvil.accounts
    .slice(0, 4)
    .map((a, i) => `  (${i}) ${a.address}  private key ${a.privateKey}`)
    .join('\n');
  process.stdout.write(
    `\nDevnet: a local anvil chain (chain id ${anvil.chainId}) is network DEVNET.\n` +
      `  RPC ${anvil.rpcUrl}   WebSocket ${anvil.wsUrl}\n` +
      `Funded test accounts (10000 ETH each):\n${keys}\n` +
      'Callbacks to loopback addresses are allowed.\n' +
      (config.anchor.network === 'DEVNET'
        ? `Registries are anchored on DEVNET every ${config.anchor.intervalMs / 1000}s by ${anchorAccount.address}.\n\n`
        : '\n'),
  );
  return anvil;
}

/**
 * Runs the service until SIGTERM or SIGINT, then stops it within `config.shutdownTimeoutMs` and
 * exits: 0 when everything stopped, 1 when a part had to be left behind. A signal during startup
 * stops the service as soon as it is up; a second signal exits at once.
 */
async function serve(config: Config, devnet: boolean): Promise<void> {
  const logger = createServiceLogger(config);
  let app: RunningApp | undefined;
  let chain: { stop: () => Promise<void> } | undefined;
  let signalled = false;
  let started = false;

  const finish = async () => {
    const begun = Date.now();
    let late: string[] = [];
    try {
      late = (await app?.close()) ?? [];
      await chain?.stop();
    } catch (err) {
      logger.error({ err }, 'shutdown failed');
      late.push('shutdown');
    }
    const ms = Date.now() - begun;
    if (late.length > 0) logger.warn({ ms, leftBehind: late }, 'stopped, leaving parts behind');
    else logger.info({ ms }, 'stopped');
    process.exit(late.length > 0 ? 1 : 0);
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) {
      logger.warn({ signal }, 'second signal: exiting at once');
      process.exit(1);
    }
    signalled = true;
    logger.info({ signal, deadlineMs: config.shutdownTimeoutMs }, 'shutting down');
    // Every part of stopping is bounded; this bounds the whole, whatever happens. Unref'd: it
    // must not hold a process that ends by itself (a start that failed after the signal).
    setTimeout(() => {
      logger.error('shutdown did not end in time; exiting');
      process.exit(1);
    }, config.shutdownTimeoutMs + EXIT_BACKSTOP_MS).unref();
    if (started) void finish();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  try {
    chain = devnet ? await startDevnet(config) : undefined;
    app = await startApp(config, {
      logger,
      announceToken: announceTokenOnConsole,
      alwaysFollow: devnet ? ['DEVNET'] : [],
    });
  } catch (err) {
    await chain?.stop();
    throw err;
  }
  started = true;
  if (signalled) void finish();
}

/**
 * Runs `work` against the running service's admin endpoint, or on the database directly when
 * none runs. Refuses a data directory without data rather than creating an empty database there.
 */
async function withTokenAdmin<T>(config: Config, work: (admin: TokenAdmin) => Promise<T>): Promise<T> {
  if (!config.databaseUrl) {
    const holder = dataDirHolder(config.dataDir);
    if (holder !== undefined) {
      const admin = await connectAdmin(config.dataDir, holder, ADMIN_WAIT_MS);
      if (admin) return work(admin);
      // The service stopped while we waited: the database is ours now.
    }
    if (!fs.existsSync(path.join(config.dataDir, PGLITE_SUBDIR, 'PG_VERSION'))) {
      throw new ConfigError(
        'LEDGERHOOK_DATA_DIR',
        `${config.dataDir} holds no Ledgerhook data; point it at the data directory of your service, or start one there first (ledgerhook serve)`,
      );
    }
  }
  const { store, lock } = await openConfiguredStore(config);
  try {
    return await work(createAccounts({ db: store.db }));
  } finally {
    await store.close();
    lock?.release();
  }
}

function formatTokens(tokens: TokenInfo[]): string {
  const rows = [['ID', 'ACCOUNT', 'PREFIX', 'CREATED', 'LAST USED', 'STATUS']];
  for (const t of tokens) {
    rows.push([
      t.id,
      t.accountName,
      `${t.prefix}…`,
      t.createdAt.toISOString(),
      t.lastUsedAt?.toISOString() ?? '-',
      t.revokedAt ? `revoked ${t.revokedAt.toISOString()}` : 'active',
    ]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** Runs a parsed command; resolves with the exit code, or -1 for a service that keeps running. */
export async function run(
  parsed: Extract<ParsedCommandLine, { kind: 'run' }>,
  config: Config,
): Promise<number> {
  const { command, values, args } = parsed;
  switch (command) {
    case 'serve':
      await serve(config, values.devnet === true);
      return -1; // keeps running
    case 'migrate': {
      const { store, lock } = await openConfiguredStore(config);
      await store.close();
      lock?.release();
      process.stdout.write(`migrations applied (${store.kind})\n`);
      return 0;
    }
    case 'token create': {
      const issued = await withTokenAdmin(config, (admin) => admin.issueToken(values.account));
      process.stdout.write(
        `Created token ${issued.info.id} for account ${issued.info.accountName}. It is shown only once:\n${issued.token}\n`,
      );
      return 0;
    }
    case 'token list':
      process.stdout.write(`${formatTokens(await withTokenAdmin(config, (admin) => admin.listTokens()))}\n`);
      return 0;
    case 'backfill': {
      const { runBackfill } = await import('./backfill.js');
      return runBackfill(args[0]!, {
        ...serviceApi(command, values, config.port),
        from: values.from,
        to: values.to,
        out: process.stderr,
      });
    }
    case 'listen': {
      // main.ts runs listen before this module loads; this keeps run() whole.
      const { listenCommand } = await import('./listen.js');
      return listenCommand(values, config);
    }
    case 'verify': {
      const { runVerify } = await import('./verify.js');
      return runVerify(args, values, (line) => process.stdout.write(`${line}\n`));
    }
    case 'backup': {
      const { backupCommand } = await import('./backup.js');
      return backupCommand(args[0]!, values.force === true, config);
    }
    case 'restore': {
      const { restoreCommand } = await import('./backup.js');
      return restoreCommand(args[0]!, config);
    }
    case 'doctor': {
      // main.ts runs doctor before the configuration is loaded (it reports an invalid one itself).
      const { doctorCommand } = await import('./doctor.js');
      return doctorCommand(values);
    }
    case 'traces fill': {
      const { tracesFillCommand } = await import('./traces.js');
      return tracesFillCommand(values, config);
    }
    case 'token revoke': {
      const info = await withTokenAdmin(config, (admin) => admin.revokeToken(args[0]!));
      process.stdout.write(`Revoked token ${info.id} of account ${info.accountName}\n`);
      return 0;
    }
  }
}
