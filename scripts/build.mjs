// Builds the service into dist/: one ES-module bundle split into chunks (the CLI loads what each
// command needs), plus the PGlite worker thread's own entry. Loading ~2,000 files from
// node_modules cost 1.75 s of CPU at every start; the bundle starts in 0.8 s
// (bench/results/2026-11-24-process-start.md).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const outdir = path.join(root, 'dist');

// Kept out of the bundle: packages that read their own files at run time (PGlite's WebAssembly
// and data, swagger-ui's static assets, pino's worker-thread transports) and optional native
// add-ons that are loaded only when installed.
const external = [
  '@electric-sql/pglite',
  '@fastify/swagger-ui',
  'pino',
  'pino-pretty',
  'pg-native',
  'bufferutil',
  'utf-8-validate',
];

fs.rmSync(outdir, { recursive: true, force: true });
await build({
  absWorkingDir: root,
  entryPoints: ['src/main.ts', 'src/store/pglite-worker.ts'],
  outbase: 'src',
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20.19',
  external,
  chunkNames: 'chunks/[name]-[hash]',
  // Bundled CommonJS packages call require() and read __dirname, which an ES module lacks.
  banner: {
    js: [
      "import { createRequire as __lhCreateRequire } from 'node:module';",
      "import { fileURLToPath as __lhFileURLToPath } from 'node:url';",
      "import { dirname as __lhDirname } from 'node:path';",
      'const require = __lhCreateRequire(import.meta.url);',
      'const __filename = __lhFileURLToPath(import.meta.url);',
      'const __dirname = __lhDirname(__filename);',
    ].join(' '),
  },
  // Not minified, so names stay as written in stacks and logs (keepNames would wrap every closure
  // created at run time in a defineProperty call: 1.1% of a busy API process's CPU).
  legalComments: 'none',
  logLevel: 'warning',
});
fs.writeFileSync(path.join(outdir, '.build-stamp'), new Date().toISOString());
