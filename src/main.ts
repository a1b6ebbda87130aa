#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { createAdminClient, type TokenAdmin } from './accounts/admin.js';
import { createAccounts, type TokenInfo } from './accounts/service.js';
import {
  announceTokenOnConsole,
  openConfiguredStore,
  packageVersion,
  StartupError,
  startApp,
} from './app.js';
import { type Config, ConfigError, loadConfig, parseRoles } from './config.js';
import { AppError } from './errors.js';
import { DataDirInUseError, dataDirHolder } from './store/lock.js';

const HELP = `Usage: ledgerhook <command> [options]

Commands:
  serve [--role ROLE]            run the service (default); roles: api, dispatcher, watcher (default all)
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

async function serve(config: Config): Promise<void> {
  const app = await startApp(config, { announceToken: announceTokenOnConsole });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      process.exit(1); // a second signal: the operator insists
    }
    stopping = true;
    app.http.log.info({ signal }, 'shutting down');
    app.close().then(
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
      await serve(config);
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
