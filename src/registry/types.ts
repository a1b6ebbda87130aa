import type { AnchorView } from '../anchor/leaves.js';
import type { Db } from '../store/db.js';
import type { MetadataItem } from './schema.js';

export type Template = 'STORAGE' | 'PASS';

export interface CreateRegistryInput {
  title: string;
  metadata: MetadataItem[];
  folder_id: string;
  template: Template;
  callback_url?: string;
  data_encrypted?: boolean;
  description?: string;
}

export interface CreatedRegistry {
  message: string;
  data: {
    id: string;
    title: string;
    created_at: string;
    /** With a callback_url: the endpoint's subscription, secret and token (shown once). */
    subscription_id?: string;
    secret?: string;
    callback_token?: string;
  };
}

/** Where registry events go: an endpoint per registry, fed through the notification outbox. */
export interface RegistryCallbacks {
  checkUrl(url: string, pointer: string): Promise<void>;
  createRegistryEndpoint(
    tx: Db,
    accountId: string,
    registryId: string,
    url: string,
  ): Promise<{ id: string; secret: string; callbackToken: string }>;
}

export interface RegistryView {
  id: string;
  title: string;
  description: string | null;
  folder_id: string;
  template: Template;
  metadata: MetadataItem[];
  callback_url: string | null;
  data_encrypted: boolean;
  created_at: string;
  /** Null when the registry is not anchored and anchoring is off. */
  anchor: AnchorView | null;
  revoked_at: string | null;
}

/** What sealing keeps of an encrypted registry. */
export interface SealedContent {
  metadata: MetadataItem[];
  description: string | null;
  /** The leaf's salt (registries created before anchoring have none). */
  salt?: string;
}

export interface FolderView {
  folder_id: string;
  registry_count: number;
  created_at: string;
}

/** A PASS on its public page: what its holder shows, and whether it still holds. */
export interface PassView {
  id: string;
  title: string;
  /** Null when there is none, or when the PASS is encrypted. */
  description: string | null;
  /** The name of the account that issued it. */
  issuer: string;
  created_at: string;
  status: 'valid' | 'revoked';
  revoked_at: string | null;
  data_encrypted: boolean;
  /** Null when the PASS is encrypted: only its owner reads it. */
  metadata: MetadataItem[] | null;
  anchor: AnchorView | null;
}
