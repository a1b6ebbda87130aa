import os from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // At least two files at once: most of the suite waits on processes, chains and receivers, so
    // on two cores two workers finish the run in 6 minutes where vitest's default (one) takes 10.
    maxWorkers: Math.max(2, os.availableParallelism() - 1),
    // A worker keeps its modules between files (no test mocks modules or mutates the environment):
    // importing fastify, viem and PGlite once per file cost a minute of CPU per run.
    isolate: false,
    // Process-level end-to-end tests start real services; their waits carry their own deadlines.
    testTimeout: 90_000,
    hookTimeout: 60_000,
  },
});
