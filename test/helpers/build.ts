import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/** The compiled CLI that process-level tests run, as `npm start` does. */
export const BUILT_CLI = path.join(repoRoot, 'dist', 'main.js');
const BUILD_STAMP = path.join(repoRoot, 'dist', '.build-stamp');

function newestSource(dir: string, isSource = (name: string) => name.endsWith('.ts')): number {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(file, isSource));
    else if (isSource(entry.name) && !entry.name.endsWith('.test.ts'))
      newest = Math.max(newest, fs.statSync(file).mtimeMs);
  }
  return newest;
}

/**
 * Builds src/ into dist/ (scripts/build.mjs) when a source is newer than the last build. Tests
 * start the service as a process from dist/: through tsx each start cost 1.5-2 s and 3 s of CPU
 * more (measured with `token list` on this machine), and the suite starts about sixty of them.
 */
export function ensureBuilt(): void {
  const built = fs.existsSync(BUILT_CLI) && fs.existsSync(BUILD_STAMP) ? fs.statSync(BUILD_STAMP).mtimeMs : 0;
  if (built >= newestSource(path.join(repoRoot, 'src'))) return;
  execFileSync(process.execPath, [path.join(repoRoot, 'scripts', 'build.mjs')], {
    cwd: repoRoot,
    stdio: 'inherit',
  });
}

const CONSOLE = path.join(repoRoot, 'console');
const CONSOLE_PAGE = path.join(CONSOLE, 'dist', 'index.html');

/**
 * Builds the console (console/dist, which the service serves at /console) when one of its sources
 * is newer than the build, as `npm run build` does; esbuild takes a fraction of a second.
 */
export function ensureConsoleBuilt(): void {
  const built = fs.existsSync(CONSOLE_PAGE) ? fs.statSync(CONSOLE_PAGE).mtimeMs : 0;
  const sources = Math.max(
    newestSource(path.join(CONSOLE, 'src'), () => true),
    fs.statSync(path.join(CONSOLE, 'build.mjs')).mtimeMs,
  );
  if (built >= sources) return;
  execFileSync(process.execPath, [path.join(CONSOLE, 'build.mjs')], { cwd: CONSOLE, stdio: 'inherit' });
}
