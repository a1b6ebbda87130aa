/**
 * The layering of docs/architecture.md, checked by `npm run lint` (dependency-cruiser): every import of
 * src/ goes down this list, never up or around.
 *
 *   main.ts, cli/                 the command line
 *   app/, http/, tables.ts        the composition root: builds everything, serves the routes,
 *                                 assembles the table list for drizzle-kit
 *   the domains, in DOMAINS order a domain imports only those before it
 *   config.ts, risk-config.ts     typed configuration (plain data and its parsing; no domain)
 *   http-kit/                     what every route needs: problem details, validation,
 *                                 pagination, rate limits, response schemas
 *   chains/, store/, secrets/     the bottom: chain clients, the database handle, sealing
 *   shared/, errors.ts, version.ts  below everything
 *
 * Tests are not cruised: they may reach across layers to set a scene up.
 */

const { DOMAINS } = require('./scripts/layers.cjs');

const TOP = '^src/(main\\.ts|cli/|app\\.ts|http/|tables\\.ts)';
const CONFIG = '^src/(config|risk-config)\\.ts$';
const KIT = '^src/http-kit/';
const DOMAIN = `^src/(${DOMAINS.join('|')})/`;
const folder = (name) => `^src/${name}/`;

const domainOrder = DOMAINS.map((domain, i) => ({
  name: `domain-order-${domain}`,
  comment: `${domain} may import only the domains listed before it in DOMAINS (.dependency-cruiser.cjs)`,
  severity: 'error',
  from: { path: folder(domain) },
  to: { path: `^src/(${DOMAINS.slice(i + 1).join('|') || '$^'})/` },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No module imports itself back, through any path (inside a folder or across folders)',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'domain-not-on-top',
      comment: 'Domains import neither the HTTP server, the composition root nor the command line',
      severity: 'error',
      from: { path: DOMAIN },
      to: { path: TOP },
    },
    ...domainOrder,
    {
      name: 'config-knows-no-domain',
      comment: 'config.ts holds configuration; each domain reads its part of it, not the other way round',
      severity: 'error',
      from: { path: CONFIG },
      to: { path: [TOP, DOMAIN] },
    },
    {
      name: 'kit-knows-no-domain',
      comment: 'http-kit serves every route and so may know none of them',
      severity: 'error',
      from: { path: KIT },
      to: { path: [TOP, DOMAIN, CONFIG] },
    },
    {
      name: 'bottom-imports-nothing-above',
      comment: 'chains/, store/ and secrets/ import only each themselves, shared/ and errors.ts',
      severity: 'error',
      from: { path: '^src/(chains|store|secrets)/' },
      to: { path: [TOP, DOMAIN, CONFIG, KIT] },
    },
    {
      name: 'bottom-stays-apart',
      comment: 'chains/, store/ and secrets/ do not import one another',
      severity: 'error',
      from: { path: '^src/(chains|store|secrets)/' },
      to: { path: '^src/(chains|store|secrets)/', pathNot: '^src/$1/' },
    },
    {
      name: 'shared-is-the-floor',
      comment: 'shared/, errors.ts and version.ts import only shared/ and errors.ts',
      severity: 'error',
      from: { path: '^src/(shared/|errors\\.ts$|version\\.ts$)' },
      to: { path: '^src/', pathNot: '^src/(shared/|errors\\.ts$)' },
    },
  ],
  options: {
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '\\.test\\.ts$' },
    includeOnly: '^src/',
    reporterOptions: {
      dot: {
        collapsePattern: '^src/([^/]+)/',
        theme: {
          graph: { rankdir: 'TB', splines: 'true' },
        },
      },
    },
  },
};
