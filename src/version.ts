import fs from 'node:fs';

/** The version in package.json (one directory above both src/ and dist/). */
export function packageVersion(): string {
  const pkg = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}
