/**
 * The command line's grammar: its commands, their options and arguments, their help, and the
 * parsing that turns argv into one of them or into a one-line usage error.
 */
import { parseArgs } from 'node:util';
import { LedgerhookError } from '../errors.js';

/** A command line that does not fit the grammar; reported as one line, exit code 2. */
export class UsageError extends LedgerhookError {}

interface OptionSpec {
  type: 'string' | 'boolean';
  multiple?: boolean;
  /** The value's placeholder in help (string options). */
  value?: string;
  /** The command cannot run without it. */
  required?: boolean;
  help: string;
}

export type CommandName =
  | 'serve'
  | 'migrate'
  | 'token create'
  | 'token list'
  | 'token revoke'
  | 'verify'
  | 'backfill'
  | 'listen'
  | 'backup'
  | 'restore'
  | 'doctor'
  | 'traces fill';

interface CommandSpec {
  name: CommandName;
  /** Required positional arguments, by their placeholder. */
  args: string[];
  /** The last argument may be repeated. */
  variadic?: boolean;
  summary: string;
  description: string;
  options: Record<string, OptionSpec>;
}

const COMMANDS: CommandSpec[] = [
  {
    name: 'serve',
    args: [],
    summary: 'run the service (the default command)',
    description:
      'Runs the API, the webhook dispatcher and the chain watchers. SIGTERM or Ctrl-C stops it within\n' +
      'LEDGERHOOK_SHUTDOWN_TIMEOUT (8s by default).',
    options: {
      role: {
        type: 'string',
        multiple: true,
        value: 'ROLE',
        help: 'api, dispatcher or watcher; repeat it or give a comma list (default: all, or LEDGERHOOK_ROLES)',
      },
      devnet: {
        type: 'boolean',
        help: 'also start a local anvil chain as network DEVNET, for trying things offline',
      },
    },
  },
  {
    name: 'migrate',
    args: [],
    summary: 'apply database migrations and exit',
    description: 'Applies pending database migrations and exits (serve applies them too).',
    options: {},
  },
  {
    name: 'token create',
    args: [],
    summary: 'issue an API token (creating the account if new)',
    description:
      'Issues an API token, creating the account if it is new. The token is the last line printed and is\n' +
      'not shown again.',
    options: {
      account: {
        type: 'string',
        value: 'NAME',
        help: 'the account: 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit (default: default)',
      },
    },
  },
  {
    name: 'token list',
    args: [],
    summary: 'list API tokens (never their secrets)',
    description: 'Lists API tokens: id, account, prefix, created, last used and whether revoked.',
    options: {},
  },
  {
    name: 'token revoke',
    args: ['ID'],
    summary: 'revoke a token at once',
    description: 'Revokes the token with this id (see token list) at once.',
    options: {},
  },
  {
    name: 'verify',
    args: ['RECEIPT.json'],
    variadic: true,
    summary: 'check anchoring receipts against a node, without the service',
    description:
      'Checks each receipt (from GET /api/v1/registry/{id}/proof, its data or the whole answer) against\n' +
      'the node given: the Merkle path leads to the root, the named transaction carries the root, and\n' +
      'with --content the registry (GET /api/v1/registry/{id}, its data or the whole answer) hashes to\n' +
      'the leaf. Needs no Ledgerhook service or database. Prints a line per receipt; exits 0 when every\n' +
      'receipt verified, 1 otherwise.',
    options: {
      rpc: {
        type: 'string',
        value: 'URL',
        help: "a node of the receipt's network: EVM JSON-RPC, or Algorand algod (required)",
      },
      indexer: {
        type: 'string',
        value: 'URL',
        help: 'Algorand only: an indexer, where the transaction is read',
      },
      content: {
        type: 'string',
        value: 'FILE',
        help: 'the registry content to check against the leaf (one receipt)',
      },
    },
  },
];

/** How a command that talks to the running service reaches it. */
const SERVICE_OPTIONS: Record<string, OptionSpec> = {
  url: { type: 'string', value: 'URL', help: "the service's base URL" },
  token: { type: 'string', value: 'TOKEN', help: 'an API token (default: LEDGERHOOK_TOKEN)' },
};

COMMANDS.push({
  name: 'backfill',
  args: ['SUBSCRIPTION'],
  summary: "replay a subscription's history, with a progress bar",
  description:
    'Starts a backfill of the subscription (POST /api/v1/subscription/{id}/backfill) on the running\n' +
    'service and shows its progress until it ends; exits 0 when done, 1 if it failed or was cancelled.\n' +
    'Without --from, follows the running or latest backfill. A backfill already running is followed.\n' +
    'The service is reached at --url (default http://127.0.0.1:$PORT) with --token or LEDGERHOOK_TOKEN.',
  options: {
    from: { type: 'string', value: 'BLOCK|TIME', help: 'first block, or an ISO 8601 time' },
    to: {
      type: 'string',
      value: 'BLOCK|TIME',
      help: 'last block or time (default: where the live follower stands)',
    },
    ...SERVICE_OPTIONS,
  },
});

COMMANDS.push({
  name: 'listen',
  args: [],
  summary: "forward the account's notifications to a local URL, signed (development)",
  description:
    'Reads the notifications of the account (or of one subscription) from the event feed of the running\n' +
    'service as they are committed, from now on, and POSTs each to --forward-to signed per Standard\n' +
    'Webhooks with a whsec_ secret it prints at start (webhook-id is the notification id), printing a\n' +
    'line per delivery: time, id, event type, status and milliseconds. Needs no inbound port. A receiver\n' +
    'that fails or is down is reported and the next event goes on; nothing is retried. Ctrl-C stops it.\n' +
    'The service is reached at --url (default http://127.0.0.1:$PORT) with --token or LEDGERHOOK_TOKEN.',
  options: {
    'forward-to': {
      type: 'string',
      value: 'URL',
      required: true,
      help: 'where to POST each notification (required), e.g. http://localhost:3000/hooks',
    },
    subscription: { type: 'string', value: 'ID', help: "only this subscription's notifications" },
    secret: {
      type: 'string',
      value: 'whsec_...',
      help: 'sign with this secret instead of a new one, so the receiver keeps its configuration',
    },
    after: {
      type: 'string',
      value: 'CURSOR',
      help: 'start after this feed cursor (printed when listen stops) instead of now',
    },
    ...SERVICE_OPTIONS,
  },
});

COMMANDS.push(
  {
    name: 'backup',
    args: ['FILE'],
    summary: 'write a backup of the embedded database (not the master key) to FILE',
    description:
      'Writes a backup of the embedded database in LEDGERHOOK_DATA_DIR to FILE: while the service runs, a\n' +
      'consistent snapshot taken through it (it keeps serving); otherwise from the data directory itself.\n' +
      'FILE holds the database only, never the master key: keep LEDGERHOOK_MASTER_KEY or master.key apart\n' +
      'from it. FILE is written whole or not at all (mode 0600); an existing FILE is kept unless --force.\n' +
      'With DATABASE_URL, use pg_dump or pg_basebackup instead.',
    options: { force: { type: 'boolean', help: 'replace FILE if it exists' } },
  },
  {
    name: 'restore',
    args: ['FILE'],
    summary: 'restore a backup into an empty LEDGERHOOK_DATA_DIR',
    description:
      'Restores a backup written by ledgerhook backup into LEDGERHOOK_DATA_DIR, which must be missing or\n' +
      'empty (a master.key in it is kept) and used by no service; a failed restore leaves it as it was,\n' +
      'and what a killed one left is removed by the next. The backup is checked as it is unpacked: only\n' +
      'what PostgreSQL keeps in a data directory, no file larger than PostgreSQL writes, no more than\n' +
      'the backup announces (16 GiB at most); anything else is refused.\n' +
      'No master key is restored or created: start the service with the kept one (LEDGERHOOK_MASTER_KEY,\n' +
      'or master.key copied into the directory); another key is refused. What was not yet delivered at the\n' +
      'backup, and what the chains did since, is sent again under the same ids.\n' +
      'With DATABASE_URL, use pg_restore instead.',
    options: {},
  },
);

COMMANDS.push({
  name: 'doctor',
  args: [],
  summary: 'check the configuration, database, data directory and nodes',
  description:
    'Checks the configuration (each invalid variable named), the database (reachable, a primary, its\n' +
    'migrations applied, its master key), the admin files of the data directory, and the node of every\n' +
    'network in use (used by a subscription, the anchor network, or with a node configured): reachable,\n' +
    'on the expected chain, traces available (EVM), and how far the follower is behind its head. Prints a\n' +
    'line per check, with what to do about a failure. While a service holds the embedded database, it is\n' +
    'read through that service. Exits 0 when nothing failed, 1 when a check failed, 2 when the command\n' +
    'line or the configuration is invalid.',
  options: {
    timeout: {
      type: 'string',
      value: 'DURATION',
      help: 'how long a node or the database may take to answer (default 3s)',
    },
  },
});

COMMANDS.push({
  name: 'traces fill',
  args: [],
  summary: 'fill trace gaps now: internal transfers of blocks the node could not trace',
  description:
    'Reads again, with their traces, the EVM blocks committed without their internal transfers (trace\n' +
    'gaps: the node no longer had their state, or its traces kept failing), oldest first, and notifies\n' +
    'the internal transfers that were missed, with the ids they would have had. A gap whose block left\n' +
    'the chain is closed; one the node still cannot trace stays open and is listed with why. The\n' +
    'service fills gaps in the background once its node traces again; this fills them now, optionally\n' +
    'from another node (--rpc, an archive node). While a service holds the embedded database, it runs\n' +
    'through that service. Exits 0 when no gap of the range is left open, 1 otherwise.',
  options: {
    network: { type: 'string', value: 'NAME', help: 'one EVM network (default: every EVM network)' },
    rpc: {
      type: 'string',
      value: 'URL',
      help: "trace with this node (default: the network's tracesRpc, else its rpc); needs --network",
    },
    from: { type: 'string', value: 'BLOCK', help: 'first block of the gaps to fill' },
    to: { type: 'string', value: 'BLOCK', help: 'last block of the gaps to fill' },
  },
});

const TOKEN_DESCRIPTION =
  'Manages API tokens. While the service runs, the CLI goes through its admin endpoint on loopback;\n' +
  'otherwise it opens the database itself. With the embedded database it needs the data directory\n' +
  'of a service that has run (LEDGERHOOK_DATA_DIR).';

function usageLine(spec: CommandSpec): string {
  const options = Object.entries(spec.options).map(([name, o]) =>
    o.type === 'string' ? (o.required ? `--${name} ${o.value}` : `[--${name} ${o.value}]`) : `[--${name}]`,
  );
  const args = spec.variadic ? [...spec.args, '...'] : spec.args;
  return ['ledgerhook', spec.name, ...options, ...args].join(' ');
}

function table(rows: [string, string][]): string {
  const width = Math.max(...rows.map(([left]) => left.length)) + 3;
  return rows.map(([left, right]) => `  ${left.padEnd(width)}${right}`).join('\n');
}

const commandRows = (specs: CommandSpec[]): [string, string][] =>
  specs.map((spec) => [[spec.name, ...spec.args].join(' '), spec.summary]);

export function generalHelp(): string {
  return [
    'Usage: ledgerhook [COMMAND] [OPTIONS]',
    '',
    'Self-hostable blockchain webhooks, registries and transaction lookup.',
    '',
    'Commands:',
    table([...commandRows(COMMANDS), ['help [COMMAND]', 'show the help of a command']]),
    '',
    'Every command takes --help (-h); ledgerhook --version prints the version.',
    'Configuration comes from the environment: PORT, HOST, LEDGERHOOK_DATA_DIR, DATABASE_URL,',
    'LEDGERHOOK_MASTER_KEY, LOG_LEVEL and more (see docs/configuration.md).',
    'Exit codes: 0 done, 1 failed, 2 invalid command line or configuration.',
  ].join('\n');
}

function commandHelp(spec: CommandSpec): string {
  const options: [string, string][] = Object.entries(spec.options).map(([name, o]) => [
    o.type === 'string' ? `--${name} ${o.value}` : `--${name}`,
    o.help,
  ]);
  options.push(['-h, --help', 'show this help']);
  return [`Usage: ${usageLine(spec)}`, '', spec.description, '', 'Options:', table(options)].join('\n');
}

function tokenHelp(): string {
  const tokens = COMMANDS.filter((c) => c.name.startsWith('token '));
  return [
    'Usage: ledgerhook token create|list|revoke ...',
    '',
    TOKEN_DESCRIPTION,
    '',
    'Commands:',
    table(tokens.map((spec) => [usageLine(spec).replace(/^ledgerhook /, ''), spec.summary])),
    '',
    'ledgerhook help token <command> shows the options of each.',
  ].join('\n');
}

/** The help for `topic` (words after `help`); the general help without one. */
export function helpFor(topic: string[]): string {
  if (topic.length === 0) return generalHelp();
  const name = topic.join(' ');
  if (name === 'token') return tokenHelp();
  if (name === 'help') return generalHelp();
  const spec = COMMANDS.find((c) => c.name === name);
  if (!spec) throw new UsageError(`no such command "${name}"; the commands are ${commandList()}`);
  return commandHelp(spec);
}

function commandList(): string {
  return `${COMMANDS.map((c) => c.name).join(', ')} and help`;
}

export type ParsedCommandLine =
  | { kind: 'help'; text: string }
  | { kind: 'version' }
  | {
      kind: 'run';
      command: CommandName;
      values: {
        role?: string[];
        devnet?: boolean;
        account?: string;
        rpc?: string;
        indexer?: string;
        content?: string;
        from?: string;
        to?: string;
        url?: string;
        token?: string;
        'forward-to'?: string;
        subscription?: string;
        secret?: string;
        after?: string;
        force?: boolean;
        timeout?: string;
        network?: string;
      };
      args: string[];
    };

/** The closest known option, if it is close enough to be what was meant. */
function suggestion(given: string, known: string[]): string | undefined {
  const distance = (a: string, b: string): number => {
    const row = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      let previous = row[0]!;
      row[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const current = row[j]!;
        row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, previous + (a[i - 1] === b[j - 1] ? 0 : 1));
        previous = current;
      }
    }
    return row[b.length]!;
  };
  const ranked = known.map((name) => ({ name, d: distance(given, name) })).sort((x, y) => x.d - y.d);
  return ranked[0] && ranked[0].d <= 2 ? ranked[0].name : undefined;
}

function optionsOf(spec: CommandSpec | undefined): string[] {
  return spec ? Object.keys(spec.options).map((name) => `--${name}`) : [];
}

/** Turns node's parseArgs errors into a line that names the option and what the command takes. */
function parseFailure(err: unknown, spec: CommandSpec | undefined): UsageError {
  const e = err as { code?: string; message?: string };
  const where = spec ? spec.name : 'ledgerhook';
  const helpHint = spec ? `see ledgerhook help ${spec.name}` : 'see ledgerhook --help';
  const option = /'(-{1,2}[^' ]+)/.exec(e.message ?? '')?.[1] ?? '';
  if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const known = optionsOf(spec);
    const close = suggestion(option, known);
    const takes = known.length > 0 ? `it takes ${known.join(', ')}` : 'it takes no options';
    return new UsageError(
      `unknown option ${option} for ${where}${close ? ` (did you mean ${close}?)` : ''}; ${takes}; ${helpHint}`,
    );
  }
  if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const name = option.replace(/^-+/, '');
    const placeholder = spec?.options[name]?.value;
    return new UsageError(
      placeholder
        ? `option ${option} of ${where} needs a value: ${option} ${placeholder}`
        : `option ${option} of ${where} takes no value; ${helpHint}`,
    );
  }
  return new UsageError(`${(e.message ?? String(err)).split('\n')[0]}; ${helpHint}`);
}

/**
 * Parses the command line. The command comes first (`serve` when there is none); `token` takes
 * a subcommand. Options are checked against the command's own, so a typo is an error, not ignored.
 */
/** Commands that take a second word. */
const GROUPS = new Set(['token', 'traces']);

export function parseCommandLine(argv: string[]): ParsedCommandLine {
  const words: string[] = [];
  let rest = argv;
  while (words.length < 2 && rest[0] !== undefined && !rest[0].startsWith('-')) {
    // `token` and `traces` take a second word; every other command is one word.
    if (words.length === 1 && !GROUPS.has(words[0]!) && words[0] !== 'help') break;
    words.push(rest[0]);
    rest = rest.slice(1);
  }
  const [first, second] = words;

  if (first === 'help') {
    // `help token create`: every remaining word names the topic.
    const topic = [...words.slice(1), ...rest.filter((a) => !a.startsWith('-'))];
    return { kind: 'help', text: helpFor(topic) };
  }
  if (first === 'version') return { kind: 'version' };

  let spec: CommandSpec | undefined;
  if (first === undefined) {
    spec = undefined; // no command: global options, or serve's
  } else if (first === 'token') {
    if (second === undefined) {
      if (rest.includes('--help') || rest.includes('-h')) return { kind: 'help', text: tokenHelp() };
      throw new UsageError('token needs a command: token create, token list or token revoke ID');
    }
    spec = COMMANDS.find((c) => c.name === `token ${second}`);
    if (!spec)
      throw new UsageError(
        `unknown command "token ${second}"; use token create, token list or token revoke ID`,
      );
  } else if (first === 'traces') {
    spec = COMMANDS.find((c) => c.name === `traces ${second}`);
    if (!spec)
      throw new UsageError(
        second === undefined
          ? 'traces needs a command: traces fill'
          : `unknown command "traces ${second}"; use traces fill`,
      );
  } else {
    spec = COMMANDS.find((c) => c.name === first);
    if (!spec) throw new UsageError(`unknown command "${first}"; the commands are ${commandList()}`);
  }

  const effective = spec ?? COMMANDS[0]!;
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = {
    help: { type: 'boolean', short: 'h' },
  };
  if (spec === undefined) options.version = { type: 'boolean', short: 'V' };
  for (const [name, o] of Object.entries(effective.options))
    options[name] = { type: o.type, ...(o.multiple ? { multiple: true } : {}) };

  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: rest, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw parseFailure(err, effective);
  }
  const values = parsed.values as Record<string, unknown>;
  if (values.help) return { kind: 'help', text: spec ? commandHelp(spec) : generalHelp() };
  if (values.version) return { kind: 'version' };

  const args = parsed.positionals;
  const missing = Object.entries(effective.options).find(
    ([name, o]) => o.required && values[name] === undefined,
  );
  if (missing) {
    throw new UsageError(
      `${effective.name} needs --${missing[0]} ${missing[1].value}: ${usageLine(effective)}`,
    );
  }
  if (args.length < effective.args.length) {
    throw new UsageError(
      `${effective.name} needs ${effective.args.slice(args.length).join(' ')}: ${usageLine(effective)}`,
    );
  }
  if (args.length > effective.args.length && !effective.variadic) {
    const extra = args[effective.args.length]!;
    if (spec !== undefined)
      throw new UsageError(`unexpected argument "${extra}" for ${effective.name}: ${usageLine(effective)}`);
    const known = COMMANDS.some((c) => c.name.split(' ')[0] === extra);
    throw new UsageError(
      known
        ? `the command comes before its options: ledgerhook ${extra} [OPTIONS]`
        : `unknown command "${extra}"; the commands are ${commandList()}`,
    );
  }
  return {
    kind: 'run',
    command: effective.name,
    values: values as Extract<ParsedCommandLine, { kind: 'run' }>['values'],
    args,
  };
}
