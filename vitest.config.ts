import os from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // TEST_CPU_PROFILE=DIR: a CPU profile per test file (bench/test-cpu.ts sums them up).
    setupFiles: process.env.TEST_CPU_PROFILE ? ['test/profile/cpu-profile-setup.ts'] : [],
    pool: 'forks',
    // One file more than there are cores: most of the suite waits on processes, chains, receivers
    // and retry schedules. On two cores one worker took 10 minutes and two 6-7 with the CPU 23% idle;
    // three keep it 95% busy and ran the whole suite (88 files) in 370 s where two took 418.
    maxWorkers: Math.max(3, os.availableParallelism() + 1),
    // A worker keeps its modules between files (no test mocks modules or mutates the environment):
    // importing fastify, viem and PGlite once per file cost a minute of CPU per run.
    isolate: false,
    // A young generation of 64 MB (V8's default is 16): tests that parse big bodies, blocks and lists
    // of 100,000 addresses spent a tenth of their CPU in scavenges. Three A/B pairs of address-lists
    // and the Solana files: 6-11% less CPU with it (bench/results/2026-11-26-test-suite-cpu.md).
    execArgv: ['--max-semi-space-size=64'],
    // Process-level end-to-end tests start real services; their waits carry their own deadlines.
    testTimeout: 90_000,
    hookTimeout: 60_000,
  },
});
