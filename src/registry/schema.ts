import {
  boolean,
  foreignKey,
  index,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core';
import { accounts } from '../accounts/schema.js';
import type { MetadataItem } from './metadata.js';

const at = (name: string) => timestamp(name, { withTimezone: true, precision: 3, mode: 'date' });

/** A folder is named by the client (`folder_id`) and exists per account. */
export const folders = pgTable(
  'folders',
  {
    accountId: uuid('account_id')
      .notNull()
      .references(() => accounts.id, { onDelete: 'cascade' }),
    folderId: text('folder_id').notNull(),
    createdAt: at('created_at').notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.folderId] })],
);

export type { MetadataItem };

/**
 * A registry. When `dataEncrypted` is set, `metadata` and `description` are null and their JSON
 * lives only in `ciphertext`, sealed with a per-record data key that `wrappedKey` holds under the
 * master key `keyId`.
 */
export const registries = pgTable(
  'registries',
  {
    id: uuid('id').primaryKey(),
    accountId: uuid('account_id').notNull(),
    folderId: text('folder_id').notNull(),
    title: text('title').notNull(),
    template: text('template').notNull(),
    description: text('description'),
    metadata: jsonb('metadata').$type<MetadataItem[]>(),
    callbackUrl: text('callback_url'),
    dataEncrypted: boolean('data_encrypted').notNull().default(false),
    ciphertext: text('ciphertext'),
    wrappedKey: text('wrapped_key'),
    keyId: text('key_id'),
    createdAt: at('created_at').notNull(),
    /** A PASS its owner revoked: shown as revoked everywhere, on its public page too. */
    revokedAt: at('revoked_at'),
  },
  (t) => [
    foreignKey({ columns: [t.accountId, t.folderId], foreignColumns: [folders.accountId, folders.folderId] }),
    index('registries_account_id_idx').on(t.accountId, t.id),
    index('registries_account_folder_id_idx').on(t.accountId, t.folderId, t.id),
  ],
);
