// Every table, for drizzle-kit when it generates migrations (drizzle.config.ts). Assembled here,
// beside the composition root: each domain owns its tables, and the store knows none of them.
export * from './accounts/schema.js';
export * from './anchor/schema.js';
export * from './backfill/schema.js';
export * from './idempotency/schema.js';
export * from './notify/schema.js';
export * from './registry/schema.js';
export * from './store/schema.js';
export * from './subscriptions/schema.js';
export * from './transactions/schema.js';
export * from './watch/schema.js';
