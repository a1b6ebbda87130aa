#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { createAdminClient, type TokenAdmin } from './accounts/admin.js';
import { createAccounts, type TokenInfo } from './accounts/service.js';
import {
  announceTokenOnConsole,
  openConfiguredStore,
  packageVersion,
  type RunningApp,
  StartupError,
  startApp,
} from './app.js';
import { startAnvil } from './chains/evm/anvil.js';
import { loadNetworks } from './chains/networks.js';
import { type Config, ConfigError, loadConfig, parseRoles } from './config.js';
import { AppError } from './errors.js';
import { parseAllowCidrs } from './notify/egress.js';
import { DataDirInUseError, dataDirHolder } from './store/lock.js';

const HELP = `Usage: ledgerhook <command> [options]

Commands:
  serve [--role ROLE] [--devnet] run the service (default); roles: api, dispatcher, watcher (default all);
                                 --devnet also starts a local anvil chain as network DEVNET
  migrate                        apply database migrations and exit
  token create [--account NAME]  issue an API token (creating the account if new); the token is the last line
  token list                     list API tokens (never their secrets)
  token revoke ID                revoke a token at once

Configuration comes from the environment: PORT, HOST, LEDGERHOOK_DATA_DIR, DATABASE_URL,
LEDGERHOOK_MASTER_KEY, LOG_LEVEL (see README).`;

/** Failures that end the process with one readable line instead of a stack trace. */
function oneLine(err: unknown): string | undefined {
  if (err instanceof ConfigError) return `ledgerhook: invalid configuration: ${err.message}`;
  if (err instanceof DataDirInUseError) {
    return `ledgerhook: ${err.message}; stop it first or use another LEDGERHOOK_DATA_DIR`;
  }
  if (err instanceof StartupError || err instanceof AppError) return `ledgerhook: ${err.message}`;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'EADDRINUSE') return `ledgerhook: ${(err as Error).message}; set PORT to a free port`;
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND')
    return `ledgerhook: cannot reach the database: ${(err as Error).message}`;
  return undefined;
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
    },
  ]);
  config.allowCidrs = [...config.allowCidrs, ...parseAllowCidrs('127.0.0.0/8,::1/128')];
  if (!process.env.LEDGERHOOK_WATCH_POLL_INTERVAL) config.watchPollIntervalMs = 250;
  const keys = anvil.accounts
    .slice(0, 4)
    .map((a, i) => `  (${i}) ${a.address}  private key ${a.privateKey}`)
    .join('\n');
  process.stdout.write(
    `\nDevnet: a local anvil chain (chain id ${anvil.chainId}) is network DEVNET.\n` +
      `  RPC ${anvil.rpcUrl}   WebSocket ${anvil.wsUrl}\n` +
      `Funded test accounts (10000 ETH each):\n${keys}\n` +
      'Callbacks to loopback addresses are allowed.\n\n',
  );
  return anvil;
}

async function serve(config: Config, devnet: boolean): Promise<void> {
  const chain = devnet ? await startDevnet(config) : undefined;
  let app: RunningApp;
  try {
    app = await startApp(config, {
      announceToken: announceTokenOnConsole,
      alwaysFollow: devnet ? ['DEVNET'] : [],
    });
  } catch (err) {
    await chain?.stop();
    throw err;
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      process.exit(1); // a second signal: the operator insists
    }
    stopping = true;
    app.http.log.info({ signal }, 'shutting down');
    app
      .close()
      .then(() => chain?.stop())
      .then(
        () => process.exit(0),
        (err) => {
          app.http.log.error({ err }, 'shutdown failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

/** Runs `work` against the running service's admin endpoint, or on the database directly when none runs. */
async function withTokenAdmin<T>(config: Config, work: (admin: TokenAdmin) => Promise<T>): Promise<T> {
  if (!config.databaseUrl && dataDirHolder(config.dataDir) !== undefined) {
    return work(createAdminClient(config.dataDir));
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

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      account: { type: 'string' },
      role: { type: 'string', multiple: true },
      devnet: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean' },
    },
  });
  if (values.help) {
    process.stdout.write(`${HELP}\n`);
    return 0;
  }
  if (values.version) {
    process.stdout.write(`${packageVersion()}\n`);
    return 0;
  }
  const [command = 'serve', sub, arg] = positionals;
  const config = loadConfig();
  // --role beats LEDGERHOOK_ROLES; repeat it or give a comma list (--role api --role dispatcher).
  if (values.role) config.roles = parseRoles(values.role.join(','), '--role');
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
    case 'token':
      if (sub === 'create') {
        const issued = await withTokenAdmin(config, (admin) => admin.issueToken(values.account));
        process.stdout.write(
          `Created token ${issued.info.id} for account ${issued.info.accountName}. It is shown only once:\n${issued.token}\n`,
        );
        return 0;
      }
      if (sub === 'list') {
        process.stdout.write(
          `${formatTokens(await withTokenAdmin(config, (admin) => admin.listTokens()))}\n`,
        );
        return 0;
      }
      if (sub === 'revoke' && arg) {
        const info = await withTokenAdmin(config, (admin) => admin.revokeToken(arg));
        process.stdout.write(`Revoked token ${info.id} of account ${info.accountName}\n`);
        return 0;
      }
      process.stderr.write(
        'usage: ledgerhook token create [--account NAME] | token list | token revoke ID\n',
      );
      return 2;
    default:
      process.stderr.write(`ledgerhook: unknown command "${command}"\n\n${HELP}\n`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (err: unknown) => {
    const line = oneLine(err);
    process.stderr.write(`${line ?? `ledgerhook: ${(err as Error)?.stack ?? String(err)}`}\n`);
    process.exitCode = err instanceof ConfigError ? 2 : 1;
  },
);
