/**
 * Sums up the per-file CPU profiles of a test run made with TEST_CPU_PROFILE=DIR (see
 * test/profile/cpu-profile-setup.ts): each file's busy time on its worker's main thread with its
 * four largest packages, then the run's time by package or module and by function.
 *
 *   TEST_CPU_PROFILE=/tmp/prof npm test && npx tsx bench/test-cpu.ts /tmp/prof
 */
import fs from 'node:fs';
import path from 'node:path';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const dir = process.argv[2];
if (!dir) throw new Error('usage: npx tsx bench/test-cpu.ts DIR');
const root = `file://${process.cwd()}/`;

/** npm:<package>, a file of ours, node-internal, or the native frame's name. */
function moduleOf(frame: Node['callFrame']): string {
  const url = frame.url.replace(root, '');
  const pkg = /node_modules\/((@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return `npm:${pkg[1]}`;
  if (url.startsWith('node:')) return 'node-internal';
  if (url.startsWith('wasm:')) return 'wasm';
  return url || frame.functionName;
}

const add = <K>(map: Map<K, number>, key: K, ms: number) => map.set(key, (map.get(key) ?? 0) + ms);
const top = (map: Map<string, number>, n: number) => [...map].sort((a, b) => b[1] - a[1]).slice(0, n);
const byModule = new Map<string, number>();
const byFunction = new Map<string, number>();
const files: { name: string; busy: number; modules: Map<string, number> }[] = [];

for (const name of fs.readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
  const profile = JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8')) as Profile;
  const ms = new Map<number, number>();
  for (const [i, id] of profile.samples.entries()) add(ms, id, (profile.timeDeltas[i] ?? 0) / 1000);
  const file = { name: name.replace('.cpuprofile', '').replaceAll('__', '/'), busy: 0, modules: new Map() };
  for (const node of profile.nodes) {
    const t = ms.get(node.id) ?? 0;
    if (t === 0 || node.callFrame.functionName === '(idle)') continue;
    const mod = moduleOf(node.callFrame);
    file.busy += t;
    add(file.modules, mod, t);
    add(byModule, mod, t);
    const where = `${node.callFrame.url.replace(root, '')}:${node.callFrame.lineNumber}`;
    add(byFunction, `${node.callFrame.functionName || '(anonymous)'} ${where}`, t);
  }
  files.push(file);
}

const s = (ms: number) => (ms / 1000).toFixed(1).padStart(7);
files.sort((a, b) => b.busy - a.busy);
console.log(
  `${s(files.reduce((sum, f) => sum + f.busy, 0))} s busy on the workers' main threads, ${files.length} files`,
);
console.log('\nby file (s), with its largest parts');
for (const f of files.slice(0, 25))
  console.log(
    `${s(f.busy)}  ${f.name}  ${top(f.modules, 4)
      .map(([m, t]) => `${m} ${(t / 1000).toFixed(1)}`)
      .join(', ')}`,
  );
console.log('\nby package or module (s)');
for (const [m, t] of top(byModule, 25)) console.log(`${s(t)}  ${m}`);
console.log('\nby function, self time (s)');
for (const [f, t] of top(byFunction, 25)) console.log(`${s(t)}  ${f}`);
