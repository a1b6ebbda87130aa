import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The directory of Ledgerhook's package.json, found by walking up from this module. The service
 * runs from src/ (tsx, tests) and from dist/ as one bundle split into chunks, so a fixed relative
 * path from a module would point elsewhere in each.
 */
export const packageRoot: string = findPackageRoot(path.dirname(fileURLToPath(import.meta.url)));

/** Whether this code runs from the TypeScript sources rather than the built bundle. */
export const runningFromSources: boolean = fileURLToPath(import.meta.url).endsWith('.ts');

function findPackageRoot(start: string): string {
  for (let dir = start; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (fs.existsSync(manifest)) {
      const { name } = JSON.parse(fs.readFileSync(manifest, 'utf8')) as { name?: string };
      if (name === 'ledgerhook') return dir;
    }
    if (path.dirname(dir) === dir) throw new Error(`no ledgerhook package.json above ${start}`);
  }
}
