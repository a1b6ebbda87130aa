import { and, asc, count, desc, eq, gt, lt, type SQL } from 'drizzle-orm';
import { v7 as uuidv7 } from 'uuid';
import { NotFoundError, ServerMisconfiguredError, ValidationError } from '../errors.js';
import { decodeCursor, isUuid, type Page, toPage } from '../http/pagination.js';
import { canonicalJson, type Idempotency } from '../idempotency/service.js';
import { enqueueNotifications, newNotificationId } from '../notify/outbox.js';
import { type Envelope, EnvelopeKeyMismatchError } from '../secrets/envelope.js';
import type { Db } from '../store/db.js';
import { isHttpUrl, validateMetadata } from './metadata.js';
import { folders, type MetadataItem, registries } from './schema.js';

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
}

export interface FolderView {
  folder_id: string;
  registry_count: number;
  created_at: string;
}

export const CREATE_SCOPE = 'POST /api/v1/registry/create';

type RegistryRow = typeof registries.$inferSelect;

export function createRegistries(deps: {
  db: Db;
  envelope: Envelope;
  idempotency: Idempotency;
  callbacks: RegistryCallbacks;
  now?: () => Date;
}) {
  const { db, envelope, idempotency, callbacks } = deps;
  const now = deps.now ?? (() => new Date());
  const sealContext = (accountId: string, id: string) => `registry:${accountId}:${id}`;

  function toView(row: RegistryRow): RegistryView {
    let metadata = row.metadata ?? [];
    let description = row.description;
    if (row.dataEncrypted) {
      try {
        const sealed = {
          ciphertext: row.ciphertext ?? '',
          wrappedKey: row.wrappedKey ?? '',
          keyId: row.keyId ?? '',
        };
        const plain = JSON.parse(envelope.open(sealed, sealContext(row.accountId, row.id))) as {
          metadata: MetadataItem[];
          description: string | null;
        };
        metadata = plain.metadata;
        description = plain.description;
      } catch (err) {
        if (err instanceof EnvelopeKeyMismatchError) {
          throw new ServerMisconfiguredError(
            `Registry ${row.id} is encrypted under another master key (${err.recordKeyId})`,
          );
        }
        throw err;
      }
    }
    return {
      id: row.id,
      title: row.title,
      description,
      folder_id: row.folderId,
      template: row.template as Template,
      metadata,
      callback_url: row.callbackUrl,
      data_encrypted: row.dataEncrypted,
      created_at: row.createdAt.toISOString(),
    };
  }

  function validate(input: CreateRegistryInput): void {
    const errors = validateMetadata(input.metadata);
    if (input.callback_url !== undefined && !isHttpUrl(input.callback_url)) {
      errors.push({ pointer: '#/callback_url', detail: 'must be an absolute http(s) URL' });
    }
    if (errors.length > 0) throw new ValidationError('Invalid registry', errors);
  }

  async function insert(tx: Db, accountId: string, input: CreateRegistryInput): Promise<CreatedRegistry> {
    const id = uuidv7();
    const createdAt = now();
    const encrypted = input.data_encrypted === true;
    const sealed = encrypted
      ? envelope.seal(
          JSON.stringify({ metadata: input.metadata, description: input.description ?? null }),
          sealContext(accountId, id),
        )
      : undefined;
    // A folder_id not seen before creates the folder, so clients that only know create still work.
    await tx
      .insert(folders)
      .values({ accountId, folderId: input.folder_id, createdAt })
      .onConflictDoNothing();
    await tx.insert(registries).values({
      id,
      accountId,
      folderId: input.folder_id,
      title: input.title,
      template: input.template,
      description: encrypted ? null : (input.description ?? null),
      metadata: encrypted ? null : input.metadata,
      callbackUrl: input.callback_url ?? null,
      dataEncrypted: encrypted,
      ciphertext: sealed?.ciphertext ?? null,
      wrappedKey: sealed?.wrappedKey ?? null,
      keyId: sealed?.keyId ?? null,
      createdAt,
    });
    const data: CreatedRegistry['data'] = { id, title: input.title, created_at: createdAt.toISOString() };
    if (input.callback_url !== undefined) {
      const endpoint = await callbacks.createRegistryEndpoint(tx, accountId, id, input.callback_url);
      const notificationId = newNotificationId();
      // A thin event: no metadata, which may be encrypted at rest; the receiver fetches the registry.
      const event = {
        type: 'registry.created',
        id: notificationId,
        subscriptionId: endpoint.id,
        registry: {
          id,
          title: input.title,
          folder_id: input.folder_id,
          template: input.template,
          data_encrypted: encrypted,
          created_at: data.created_at,
        },
      };
      await enqueueNotifications(
        tx,
        [
          {
            id: notificationId,
            accountId,
            subscriptionId: endpoint.id,
            eventType: 'registry.created',
            body: JSON.stringify(event),
          },
        ],
        createdAt,
      );
      Object.assign(data, {
        subscription_id: endpoint.id,
        secret: endpoint.secret,
        callback_token: endpoint.callbackToken,
      });
    }
    return { message: 'Registry created successfully', data };
  }

  return {
    async create(
      accountId: string,
      input: CreateRegistryInput,
      idempotencyKey?: string,
    ): Promise<{ body: CreatedRegistry; replayed: boolean }> {
      validate(input);
      if (input.callback_url !== undefined) await callbacks.checkUrl(input.callback_url, '#/callback_url');
      if (idempotencyKey === undefined)
        return { body: await db.transaction((tx) => insert(tx, accountId, input)), replayed: false };
      const result = await idempotency.run<CreatedRegistry>(
        {
          accountId,
          key: idempotencyKey,
          scope: CREATE_SCOPE,
          // Keyed digest: the body may hold data that is to be encrypted at rest.
          requestHash: envelope.digest(`${CREATE_SCOPE}\n${canonicalJson(input)}`),
        },
        async (tx) => ({ statusCode: 201, body: await insert(tx, accountId, input) }),
      );
      return { body: result.body, replayed: result.replayed };
    },

    async get(accountId: string, id: string): Promise<RegistryView> {
      const [row] = isUuid(id)
        ? await db
            .select()
            .from(registries)
            .where(and(eq(registries.accountId, accountId), eq(registries.id, id)))
        : [];
      if (!row) throw new NotFoundError(`No registry with id ${id}`);
      return toView(row);
    },

    /** Newest first; `cursor` continues after the last registry of the previous page. */
    async list(
      accountId: string,
      query: { folderId?: string; limit: number; cursor?: string },
    ): Promise<Page<RegistryView>> {
      const conditions: SQL[] = [eq(registries.accountId, accountId)];
      if (query.folderId !== undefined) conditions.push(eq(registries.folderId, query.folderId));
      if (query.cursor !== undefined) conditions.push(lt(registries.id, decodeCursor(query.cursor)));
      const rows = await db
        .select()
        .from(registries)
        .where(and(...conditions))
        .orderBy(desc(registries.id))
        .limit(query.limit + 1);
      return toPage(rows, query.limit, (r) => r.id, toView);
    },

    /** Folders by name, with how many registries each holds. */
    async listFolders(
      accountId: string,
      query: { limit: number; cursor?: string },
    ): Promise<Page<FolderView>> {
      const conditions: SQL[] = [eq(folders.accountId, accountId)];
      if (query.cursor !== undefined)
        conditions.push(
          gt(
            folders.folderId,
            decodeCursor(query.cursor, (v) => v.length > 0),
          ),
        );
      const rows = await db
        .select({
          folderId: folders.folderId,
          createdAt: folders.createdAt,
          registryCount: count(registries.id),
        })
        .from(folders)
        .leftJoin(
          registries,
          and(eq(registries.accountId, folders.accountId), eq(registries.folderId, folders.folderId)),
        )
        .where(and(...conditions))
        .groupBy(folders.accountId, folders.folderId, folders.createdAt)
        .orderBy(asc(folders.folderId))
        .limit(query.limit + 1);
      return toPage(
        rows,
        query.limit,
        (r) => r.folderId,
        (r) => ({
          folder_id: r.folderId,
          registry_count: Number(r.registryCount),
          created_at: r.createdAt.toISOString(),
        }),
      );
    },
  };
}

export type Registries = ReturnType<typeof createRegistries>;
