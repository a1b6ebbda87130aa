#!/usr/bin/env node
/**
 * The `ledgerhook` command. The command line is parsed, and help, version, usage and configuration
 * errors answered, before the service's modules load: those answers come at once.
 */
import { validateAccountName } from './accounts/names.js';
import { type ParsedCommandLine, parseCommandLine, UsageError } from './cli/usage.js';
import { ValidationError } from './errors.js';
import { packageVersion } from './version.js';

/** The account name rule, checked before anything is loaded or opened. */
function checkAccountName(name: string): void {
  try {
    validateAccountName(name);
  } catch (err) {
    const detail = err instanceof ValidationError ? err.errors[0]?.detail : undefined;
    throw new UsageError(`invalid account name "${name}": it ${detail ?? 'is not allowed'}`);
  }
}

async function main(argv: string[]): Promise<number> {
  let parsed: ParsedCommandLine;
  try {
    parsed = parseCommandLine(argv);
    if (parsed.kind === 'run' && parsed.values.account !== undefined) checkAccountName(parsed.values.account);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`ledgerhook: ${err.message}\n`);
    return 2;
  }
  if (parsed.kind === 'help') {
    process.stdout.write(`${parsed.text}\n`);
    return 0;
  }
  if (parsed.kind === 'version') {
    process.stdout.write(`${packageVersion()}\n`);
    return 0;
  }
  if (parsed.command === 'doctor') {
    // Doctor loads the configuration itself, to report each invalid variable as a check of its own.
    const { doctorCommand } = await import('./cli/doctor.js');
    return doctorCommand(parsed.values);
  }
  // The configuration next (a light module): a mistake in it is reported before the service loads.
  const { ConfigError, loadConfig, parseRoles } = await import('./config.js');
  let config: import('./config.js').Config;
  try {
    config = loadConfig();
    // --role beats LEDGERHOOK_ROLES; repeat it or give a comma list (--role api --role dispatcher).
    if (parsed.values.role) config.roles = parseRoles(parsed.values.role.join(','), '--role');
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`ledgerhook: invalid configuration: ${err.message}\n`);
    return 2;
  }
  if (parsed.command === 'listen') {
    // A client of the running service, started and stopped often while developing: it loads none
    // of the service's modules, so it starts in a fraction of the other commands' time.
    const { listenCommand } = await import('./cli/listen.js');
    try {
      return await listenCommand(parsed.values, config);
    } catch (err) {
      if (!(err instanceof UsageError)) throw err;
      process.stderr.write(`ledgerhook: ${err.message}\n`);
      return 2;
    }
  }
  const { run, describeFailure } = await import('./cli/commands.js');
  try {
    return await run(parsed, config);
  } catch (err) {
    const { line, code } = describeFailure(err);
    process.stderr.write(`${line}\n`);
    return code;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (err: unknown) => {
    // Loading the commands failed: still one line.
    process.stderr.write(`ledgerhook: ${(err as Error)?.message ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
