/**
 * With TEST_CPU_PROFILE=DIR (vitest.config.ts adds this file then), each test file's CPU profile
 * of its worker's main thread is written to DIR/<file>.cpuprofile: `--cpu-prof` on the workers
 * writes nothing for the main thread, which the pool ends before Node can. `npx tsx
 * bench/test-cpu.ts DIR` sums them up. The profiler's own stop shows as `dispatch`.
 */
import fs from 'node:fs';
import inspector from 'node:inspector';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';

const dir = process.env.TEST_CPU_PROFILE;
const state = globalThis as { ledgerhookProfiler?: inspector.Session };
// One session per worker: with isolate off, this file runs again for every test file.
if (!state.ledgerhookProfiler) {
  state.ledgerhookProfiler = new inspector.Session();
  state.ledgerhookProfiler.connect();
}
const session = state.ledgerhookProfiler;

function post<T>(method: string, params: object = {}): Promise<T> {
  return new Promise((resolve, reject) =>
    session.post(method, params, (err, result) => (err ? reject(err) : resolve(result as T))),
  );
}

beforeAll(async () => {
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 1000 });
  await post('Profiler.start');
});

afterAll(async () => {
  const { profile } = await post<{ profile: unknown }>('Profiler.stop');
  if (!dir) return;
  const file = path.relative(process.cwd(), expect.getState().testPath ?? 'unknown').replaceAll('/', '__');
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, `${file}.cpuprofile`), JSON.stringify(profile));
});
