/**
 * `ledgerhook doctor`: checks the configuration, the database, the data directory's files and
 * the nodes of the networks in use, printing one line per check with what to do about a failure.
 * Exit code 0 when nothing failed (warnings allowed), 1 when a check failed, 2 when the
 * configuration is invalid (each invalid variable is a line of its own; nothing else is checked,
 * since what it would check depends on the configuration). Every check has a deadline.
 */
import { type Config, ConfigError, loadConfig } from '../config.js';
import { parseDuration } from '../shared/durations.js';
import { urlSecretRedactor } from '../shared/url-secrets.js';
import { checkDatabase, databaseLocation } from './doctor-database.js';
import { checkAdminFiles, checkMasterKey } from './doctor-files.js';
import { checkNetwork, selectNetworks } from './doctor-networks.js';
import { type Check, formatCheck, formatDuration } from './doctor-report.js';
import { UsageError } from './usage.js';

type Env = Record<string, string | undefined>;

export const DEFAULT_DOCTOR_TIMEOUT_MS = 3_000;

/** After the checks, the longest doctor waits for what it opened to let go before exiting anyway. */
const EXIT_BACKSTOP_MS = 2_000;

/**
 * The configuration, with every invalid variable: loadConfig stops at the first, so each one
 * found is left out (its default taken) and the configuration read again.
 */
function loadConfigReportingEach(env: Env): { config: Config | undefined; errors: ConfigError[] } {
  const remaining = { ...env };
  const errors: ConfigError[] = [];
  for (let round = 0; round < 64; round++) {
    try {
      const config = loadConfig(remaining);
      return { config: errors.length === 0 ? config : undefined, errors };
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      errors.push(err);
      // "LEDGERHOOK_CONFIG networks.X.rpc" is the file's: the variable is its first word.
      const variable = err.variable.split(/[ .]/)[0]!;
      if (remaining[variable] === undefined) break;
      delete remaining[variable];
    }
  }
  return { config: undefined, errors };
}

function parseTimeout(text: string | undefined): number {
  if (text === undefined) return DEFAULT_DOCTOR_TIMEOUT_MS;
  let ms: number;
  try {
    ms = parseDuration(text, '--timeout');
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (ms < 100 || ms > 60_000) throw new UsageError('--timeout must be from 100ms to 60s');
  return ms;
}

/** Node URL variables, read even when the configuration is not valid (its lines may quote them). */
const NODE_URL_VARIABLE = /^LEDGERHOOK_(RPC|WS|INDEXER)_|^LEDGERHOOK_RISK_URL$/;

/**
 * Blanks what the service's log blanks (createServiceLogger): the secret parts of node URLs and
 * of the risk service's, and DATABASE_URL's password.
 */
function redactorFor(env: Env, config: Config | undefined): (line: string) => string {
  const urls = Object.entries(env)
    .filter(([name, value]) => NODE_URL_VARIABLE.test(name) && value)
    .flatMap(([, value]) => value!.split(','))
    .map((u) => u.trim());
  // Of DATABASE_URL only the password is secret (lines name the host and the database).
  if (config?.databaseUrl) {
    const database = new URL(config.databaseUrl);
    if (database.password) urls.push(`postgres://:${database.password}@${database.host}`);
  }
  for (const n of config?.networks.list() ?? []) urls.push(...n.rpcUrls, ...n.wsUrls, ...n.indexerUrls);
  return urlSecretRedactor(urls) ?? ((line) => line);
}

function configurationLine(config: Config): Check {
  const database = config.databaseUrl
    ? `PostgreSQL at ${databaseLocation(config.databaseUrl)}`
    : `the embedded database in ${config.dataDir}`;
  return { outcome: 'ok', subject: 'configuration', detail: `valid; ${database}` };
}

/** The checks after the configuration's, each line printed as soon as its turn comes. */
async function runChecks(config: Config, env: Env, timeoutMs: number, print: (check: Check) => void) {
  const { check: database, health } = await checkDatabase(config, timeoutMs);
  print(database);
  print(checkMasterKey(config, health ? health.database.masterKeyId : null));
  if (!config.databaseUrl) print(checkAdminFiles(config));

  const selection = selectNetworks(config, health?.follow?.inUse);
  // Asked all at once, printed in order.
  const lines = selection.checked.map(({ network, why }) =>
    checkNetwork(network, why, health?.follow, timeoutMs, env),
  );
  for (const line of lines) print(await line);
  for (const name of selection.unknownInUse)
    print({
      outcome: 'warn',
      subject: `network ${name}`,
      detail: 'subscriptions use it, but this configuration has no such network: not checked',
      fix: 'with --devnet that is expected; otherwise add it back to LEDGERHOOK_CONFIG, or delete those subscriptions',
    });
  const unknown = health?.follow
    ? ''
    : ` (the networks subscriptions use are unknown: ${health?.followError ?? 'the database could not be read'})`;
  if (selection.checked.length === 0 && selection.notChecked.length === 0)
    print({ outcome: 'skip', subject: 'networks', detail: `none in use and no node configured${unknown}` });
  if (selection.notChecked.length > 0)
    print({
      outcome: 'skip',
      subject: 'networks',
      detail: `${selection.notChecked.join(', ')} not contacted: no subscription uses them and their node is the catalog's default${unknown}`,
    });
}

/** Runs doctor; resolves with the exit code. */
export async function doctorCommand(
  values: { timeout?: string },
  env: Env = process.env,
  write: (line: string) => void = (line) => process.stdout.write(`${line}\n`),
): Promise<number> {
  let timeoutMs: number;
  try {
    timeoutMs = parseTimeout(values.timeout);
  } catch (err) {
    process.stderr.write(`ledgerhook: ${(err as Error).message}; see ledgerhook help doctor\n`);
    return 2;
  }
  const { config, errors } = loadConfigReportingEach(env);
  const redact = redactorFor(env, config);
  const counts = { checks: 0, failed: 0, warned: 0 };
  const print = (check: Check) => {
    counts.checks++;
    if (check.outcome === 'FAIL') counts.failed++;
    if (check.outcome === 'warn') counts.warned++;
    write(redact(formatCheck(check)));
  };
  if (!config) {
    for (const err of errors)
      print({
        outcome: 'FAIL',
        subject: 'configuration',
        detail: err.message,
        fix: `correct ${err.variable}`,
      });
    print({
      outcome: 'skip',
      subject: 'database, files and networks',
      detail: 'not checked until the configuration is valid',
    });
    return 2;
  }
  print(configurationLine(config));
  await runChecks(config, env, timeoutMs, print);
  write(
    counts.failed > 0
      ? `doctor: ${counts.failed} of ${counts.checks} checks failed`
      : `doctor: all ${counts.checks} checks passed${counts.warned > 0 ? ` (${counts.warned} with a warning)` : ''} (node timeout ${formatDuration(timeoutMs)})`,
  );
  // Whatever a check abandoned at its deadline (a node's socket, a database still opening) must
  // not hold the command: it ends once it has said everything.
  const code = counts.failed > 0 ? 1 : 0;
  setTimeout(() => process.exit(code), EXIT_BACKSTOP_MS).unref();
  return code;
}
