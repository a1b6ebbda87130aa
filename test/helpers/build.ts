import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/** The compiled CLI that process-level tests run, as `npm start` does. */
export const BUILT_CLI = path.join(repoRoot, 'dist', 'main.js');
const BUILD_STAMP = path.join(repoRoot, 'dist', '.build-stamp');

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(file));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts'))
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
