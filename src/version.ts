import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from './shared/package-root.js';

/** The version in package.json. */
export function packageVersion(): string {
  const pkg = JSON.parse(fs.readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}
