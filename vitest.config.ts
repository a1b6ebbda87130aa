import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // Process-level end-to-end tests start real services; their waits carry their own deadlines.
    testTimeout: 90_000,
    hookTimeout: 60_000,
  },
});
