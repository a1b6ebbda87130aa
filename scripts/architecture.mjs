// The folders of src/ and their imports, drawn from the code by dependency-cruiser (the tool that
// checks the layering rules) as a Mermaid graph in docs/architecture.md, grouped by the layers of
// scripts/layers.cjs. `node scripts/architecture.mjs` rewrites the drawing; `--check` (run by
// `npm run lint`) fails when the committed one is not what the code gives.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const { LAYERS } = createRequire(import.meta.url)('./layers.cjs');
const PAGE = path.join(root, 'docs', 'architecture.md');
const BEGIN = '<!-- architecture:begin (npm run architecture writes this block) -->';
const END = '<!-- architecture:end -->';

/** Folder-level imports of src/, as dependency-cruiser finds them: `from → to`, each once. */
function folderImports() {
  const depcruise = path.join(root, 'node_modules', '.bin', 'depcruise');
  const json = execFileSync(
    depcruise,
    ['src', '--config', '.dependency-cruiser.cjs', '--output-type', 'json', '--collapse', '^src/([^/]+)/'],
    { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  );
  const edges = new Set();
  const names = new Set();
  for (const module of JSON.parse(json).modules) {
    names.add(module.source);
    for (const dependency of module.dependencies)
      if (dependency.resolved !== module.source) edges.add(`${module.source} ${dependency.resolved}`);
  }
  return { names: [...names].sort(), edges: [...edges].sort() };
}

const label = (name) => name.replace(/^src\//, '').replace(/\/$/, '/');
const id = (name) => label(name).replace(/[^a-zA-Z0-9]/g, '_');

function layerOf(name) {
  const layer = LAYERS.find((l) => l.paths.some((p) => new RegExp(p).test(name)));
  if (!layer)
    throw new Error(`${name} is in no layer of scripts/layers.cjs: add it there (and to the rules)`);
  return layer;
}

/** The Mermaid graph: a subgraph per layer, top first, an arrow per folder-level import. */
function diagram() {
  const { names, edges } = folderImports();
  const lines = ['```mermaid', 'flowchart TB'];
  LAYERS.forEach((layer, i) => {
    const members = names.filter((name) => layerOf(name) === layer);
    if (members.length === 0) return;
    lines.push(`  subgraph L${i}["${layer.name}"]`);
    for (const name of members) lines.push(`    ${id(name)}["${label(name)}"]`);
    lines.push('  end');
  });
  for (const edge of edges) {
    const [from, to] = edge.split(' ');
    lines.push(`  ${id(from)} --> ${id(to)}`);
  }
  lines.push('```');
  return lines.join('\n');
}

const page = fs.readFileSync(PAGE, 'utf8');
const start = page.indexOf(BEGIN);
const end = page.indexOf(END);
if (start < 0 || end < start) throw new Error(`${PAGE} lacks the markers of its diagram (${BEGIN} … ${END})`);
const drawn = `${BEGIN}\n${diagram()}\n${END}`;
const current = page.slice(start, end + END.length);
if (process.argv.includes('--check')) {
  if (current !== drawn) {
    process.stderr.write(
      'docs/architecture.md: its diagram is not what the code imports; run npm run architecture and commit it\n',
    );
    process.exit(1);
  }
} else if (current !== drawn) {
  fs.writeFileSync(PAGE, page.slice(0, start) + drawn + page.slice(end + END.length));
  process.stdout.write('docs/architecture.md: diagram updated\n');
}
