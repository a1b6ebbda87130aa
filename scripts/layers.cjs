/**
 * The layers of src/, top to bottom: the dependency rules (.dependency-cruiser.cjs) forbid every
 * import that goes up, and the architecture page (scripts/architecture.mjs) draws them. One list,
 * so the drawing and the rules cannot disagree.
 */

/** Each domain may import the domains before it, never one after it (so no folder cycle can form). */
const DOMAINS = [
  'accounts',
  'transactions',
  'console',
  'idempotency',
  'notify',
  'anchor',
  'subscriptions',
  'registry',
  'watch',
  'backfill',
];

/** Layers, top first: a name, what it holds, and the paths (regular expressions) in it. */
const LAYERS = [
  {
    name: 'command line',
    holds: 'parses the command line and runs the commands',
    paths: ['^src/main\\.ts$', '^src/cli/'],
  },
  {
    name: 'composition root',
    holds: 'builds everything, serves the routes, lists the tables for drizzle-kit',
    paths: ['^src/app/', '^src/http/', '^src/tables\\.ts$'],
  },
  {
    name: 'domains',
    holds: 'each owns its tables, services and routes, and imports only the domains listed before it',
    paths: [`^src/(${DOMAINS.join('|')})/`],
  },
  {
    name: 'configuration',
    holds: 'typed settings from the environment and the configuration file; no domain',
    paths: ['^src/(config|risk-config)\\.ts$'],
  },
  { name: 'route kit', holds: 'what every route needs', paths: ['^src/http-kit/'] },
  {
    name: 'the outside world',
    holds: 'chain nodes, the database, sealing; apart from one another',
    paths: ['^src/(chains|store|secrets)/'],
  },
  {
    name: 'floor',
    holds: 'small utilities and the error hierarchy',
    paths: ['^src/(shared/|errors\\.ts$|version\\.ts$)'],
  },
];

module.exports = { DOMAINS, LAYERS };
