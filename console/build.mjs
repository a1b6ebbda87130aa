/**
 * Builds the console into dist/: one bundled script (Preact and the API client included, so
 * nothing is fetched from elsewhere: it works offline and under the service's strict
 * Content-Security-Policy), its stylesheet, the page and the icon. The service serves exactly the
 * files found here (src/console/routes.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.dirname(fileURLToPath(import.meta.url));
const src = path.join(root, 'src');
const out = path.join(root, 'dist');

// A file removed from the sources must not stay servable from an earlier build.
fs.rmSync(out, { recursive: true, force: true });
await build({
  entryPoints: { app: path.join(src, 'main.tsx') },
  outdir: out,
  bundle: true,
  minify: true,
  sourcemap: 'linked',
  format: 'esm',
  // Browsers of the last few years; nothing here needs a polyfill.
  target: ['es2022', 'chrome111', 'firefox111', 'safari16'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  logLevel: 'warning',
});
for (const file of ['index.html', 'icon.svg']) fs.copyFileSync(path.join(src, file), path.join(out, file));
