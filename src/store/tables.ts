// Every table, for drizzle's typed client and for drizzle-kit when it generates migrations.
export * from '../accounts/schema.js';
export * from '../anchor/schema.js';
export * from '../backfill/schema.js';
export * from '../idempotency/schema.js';
export * from '../notify/schema.js';
export * from '../registry/schema.js';
export * from '../subscriptions/schema.js';
export * from '../transactions/schema.js';
export * from '../watch/schema.js';
export * from './schema.js';
