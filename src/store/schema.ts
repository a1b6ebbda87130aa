import { pgTable, text } from 'drizzle-orm/pg-core';

/** Facts about the database itself, such as which master key its encrypted records use. */
export const settings = pgTable('settings', {
  key: text('key').primaryKey(),
  value: text('value').notNull(),
});
