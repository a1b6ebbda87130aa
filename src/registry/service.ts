import { and, asc, count, desc, eq, gt, isNull, lt, type SQL, sql } from 'drizzle-orm';
import { v7 as uuidv7 } from 'uuid';
import { accounts } from '../accounts/schema.js';
import { anchoredDocument, leafOf, newSalt } from '../anchor/leaf.js';
import {
  type AnchorView,
  anchorColumns,
  leafJoin,
  REGISTRY_CHANGED_CHANNEL,
  recordLeaf,
  toAnchorView,
} from '../anchor/leaves.js';
import { createProofs } from '../anchor/proofs.js';
import type { Receipt } from '../anchor/receipt.js';
import { anchorLeaves } from '../anchor/schema.js';
import { ConflictError, NotFoundError, ServerMisconfiguredError, ValidationError } from '../errors.js';
import { decodeCursor, isUuid, type Page, toPage } from '../http-kit/pagination.js';
import { canonicalJson, type Idempotency } from '../idempotency/service.js';
import { enqueueNotifications, newNotificationId } from '../notify/outbox.js';
import { type Envelope, EnvelopeKeyMismatchError } from '../secrets/envelope.js';
import type { Db } from '../store/db.js';
import { createReadBatches } from '../store/read-batches.js';
import { createBatches } from './create-batches.js';
import { isHttpUrl, validateMetadata } from './metadata.js';
import { createRegistryRowCache } from './row-cache.js';
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
  /** Null when the registry is not anchored and anchoring is off. */
  anchor: AnchorView | null;
  revoked_at: string | null;
}

/** What sealing keeps of an encrypted registry. */
interface SealedContent {
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

export const CREATE_SCOPE = 'POST /api/v1/registry/create';

type RegistryRow = typeof registries.$inferSelect;
type AnchorColumns = Parameters<typeof toAnchorView>[0];

export function createRegistries(deps: {
  db: Db;
  envelope: Envelope;
  idempotency: Idempotency;
  callbacks: RegistryCallbacks;
  /** The network registries are anchored on; undefined while anchoring is off. */
  anchorNetwork?: string;
  /** How long a registry read by id is served from memory (row-cache.ts); 0 reads every time. */
  rowCacheTtlMs?: number;
  now?: () => Date;
}) {
  const { db, envelope, idempotency, callbacks } = deps;
  const now = deps.now ?? (() => new Date());
  const sealContext = (accountId: string, id: string) => `registry:${accountId}:${id}`;
  const proofs = createProofs(db);
  const batches = createBatches(db);

  /** The registry's content, opened when it is sealed, with its salt when it is sealed with it. */
  function contentOf(row: RegistryRow): SealedContent {
    if (!row.dataEncrypted) return { metadata: row.metadata ?? [], description: row.description };
    try {
      const sealed = {
        ciphertext: row.ciphertext ?? '',
        wrappedKey: row.wrappedKey ?? '',
        keyId: row.keyId ?? '',
      };
      return JSON.parse(envelope.open(sealed, sealContext(row.accountId, row.id))) as SealedContent;
    } catch (err) {
      if (err instanceof EnvelopeKeyMismatchError) {
        throw new ServerMisconfiguredError(
          `Registry ${row.id} is encrypted under another master key (${err.recordKeyId})`,
        );
      }
      throw err;
    }
  }

  function toView(row: RegistryRow, anchor: AnchorColumns): RegistryView {
    const { metadata, description } = contentOf(row);
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
      anchor: toAnchorView(anchor, deps.anchorNetwork),
      revoked_at: row.revokedAt?.toISOString() ?? null,
    };
  }

  /** Registries with their anchoring: each row the registry and its leaf's batch, if any. */
  function selectWithAnchor() {
    return db
      .select({ registry: registries, anchor: anchorColumns })
      .from(registries)
      .leftJoin(leafJoin.leaves, leafJoin.leafOn(registries.id))
      .leftJoin(leafJoin.batches, leafJoin.batchOn);
  }

  // The hot read, built once and prepared by name on each connection, and shared by the gets that
  // arrive while one is in flight (bench/README.md, bench:api): many ids, one statement.
  const selectMany = selectWithAnchor()
    .where(sql`${registries.id} = ANY(${sql.placeholder('ids')}::uuid[])`)
    .prepare('registry_get_many');
  const reads = createReadBatches({
    read: (keys: { accountId: string; id: string }[]) => selectMany.execute({ ids: keys.map((k) => k.id) }),
    // The account is compared here, not in SQL: a registry of another account is not found.
    matches: (key, row) => row.registry.id === key.id && row.registry.accountId === key.accountId,
  });
  type Row = NonNullable<Awaited<ReturnType<typeof reads.get>>>;
  const rows = createRegistryRowCache<Row>({
    ttlMs: deps.rowCacheTtlMs ?? 1_000,
    costOf: ({ registry: r }) =>
      r.title.length +
      (r.description?.length ?? 0) +
      (r.metadata ? JSON.stringify(r.metadata).length : 0) +
      (r.ciphertext?.length ?? 0) +
      512,
  });

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
    const salt = newSalt();
    // The leaf covers the registry as GET shows it, computed over the plaintext before sealing.
    const leaf = leafOf(
      salt,
      anchoredDocument({
        id,
        created_at: createdAt.toISOString(),
        title: input.title,
        description: input.description ?? null,
        folder_id: input.folder_id,
        template: input.template,
        metadata: input.metadata,
        callback_url: input.callback_url ?? null,
        data_encrypted: encrypted,
      }),
    );
    const sealed = encrypted
      ? envelope.seal(
          JSON.stringify({
            metadata: input.metadata,
            description: input.description ?? null,
            salt,
          } satisfies SealedContent),
          sealContext(accountId, id),
        )
      : undefined;
    const data: CreatedRegistry['data'] = { id, title: input.title, created_at: createdAt.toISOString() };
    if (input.callback_url === undefined) {
      // The common create, folder, registry and leaf, in one statement (see create-batches.ts).
      const row = [
        id,
        accountId,
        input.folder_id,
        input.title,
        input.template,
        encrypted ? null : (input.description ?? null),
        encrypted ? null : JSON.stringify(input.metadata),
        encrypted,
        sealed?.ciphertext ?? null,
        sealed?.wrappedKey ?? null,
        sealed?.keyId ?? null,
        createdAt,
        leaf,
        encrypted ? null : salt,
      ];
      // On its own, concurrent creates share a statement; in a transaction, it is written there.
      await (tx === db ? batches.write(row) : batches.writeIn(tx, row));
      return { message: 'Registry created successfully', data };
    }
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
    let subscriptionId: string | null = null;
    {
      const endpoint = await callbacks.createRegistryEndpoint(tx, accountId, id, input.callback_url);
      subscriptionId = endpoint.id;
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
    await recordLeaf(tx, {
      registryId: id,
      accountId,
      leaf,
      salt: encrypted ? null : salt,
      subscriptionId,
      createdAt,
    });
    return { message: 'Registry created successfully', data };
  }

  // ---- PASS: revocation and the public verification view ----

  /** The endpoint told of a registry's events, recorded with its leaf when it was created. */
  async function eventEndpoint(tx: Db, registryId: string): Promise<string | null> {
    const [leaf] = await tx
      .select({ subscriptionId: anchorLeaves.subscriptionId })
      .from(anchorLeaves)
      .where(eq(anchorLeaves.registryId, registryId));
    return leaf?.subscriptionId ?? null;
  }

  /** Revokes in `tx`; a registry already revoked is left as it is, and tells nobody again. */
  async function markRevoked(tx: Db, accountId: string, id: string): Promise<void> {
    const revokedAt = now();
    // Only the update that finds it unrevoked wins: concurrent revokes set one time, send one event.
    const [row] = await tx
      .update(registries)
      .set({ revokedAt })
      .where(
        and(
          eq(registries.accountId, accountId),
          eq(registries.id, id),
          eq(registries.template, 'PASS'),
          isNull(registries.revokedAt),
        ),
      )
      .returning();
    if (row) await tx.execute(sql`SELECT pg_notify(${REGISTRY_CHANGED_CHANNEL}, ${row.id})`);
    if (!row) {
      const [existing] = await tx
        .select({ template: registries.template })
        .from(registries)
        .where(and(eq(registries.accountId, accountId), eq(registries.id, id)));
      if (!existing) throw new NotFoundError(`No registry with id ${id}`);
      if (existing.template !== 'PASS')
        throw new ConflictError(
          `Registry ${id} is a ${existing.template} record, which cannot be revoked: only a PASS can`,
        );
      return;
    }
    if (row.callbackUrl === null) return;
    const subscriptionId = await eventEndpoint(tx, id);
    if (subscriptionId === null) return;
    const notificationId = newNotificationId();
    // Thin, like registry.created: the receiver fetches the registry if it needs more.
    const event = {
      type: 'registry.revoked',
      id: notificationId,
      subscriptionId,
      registry: {
        id,
        title: row.title,
        folder_id: row.folderId,
        template: row.template,
        revoked_at: revokedAt.toISOString(),
      },
    };
    await enqueueNotifications(
      tx,
      [
        {
          id: notificationId,
          accountId,
          subscriptionId,
          eventType: 'registry.revoked',
          body: JSON.stringify(event),
        },
      ],
      revokedAt,
    );
  }

  /** Revokes a PASS of the account (409 for any other template); revoking again changes nothing. */
  async function revoke(accountId: string, id: string): Promise<RegistryView> {
    if (!isUuid(id)) throw new NotFoundError(`No registry with id ${id}`);
    await db.transaction((tx) => markRevoked(tx, accountId, id));
    // Other processes drop it on the NOTIFY; this one at once, so its next get shows the revocation.
    rows.forget(id.toLowerCase());
    const [row] = await selectWithAnchor().where(
      and(eq(registries.accountId, accountId), eq(registries.id, id)),
    );
    if (!row) throw new NotFoundError(`No registry with id ${id}`);
    return toView(row.registry, row.anchor);
  }

  /**
   * A PASS as anyone may see it, without a token. Whatever is not a PASS (no such id, a malformed
   * one, a STORAGE record) is the same not-found, so the page tells nothing of other records.
   * An encrypted PASS is never opened here: its metadata and description stay with its owner.
   */
  async function pass(id: string): Promise<PassView> {
    const [row] = isUuid(id)
      ? await db
          .select({ registry: registries, anchor: anchorColumns, issuer: accounts.name })
          .from(registries)
          .innerJoin(accounts, eq(accounts.id, registries.accountId))
          .leftJoin(leafJoin.leaves, leafJoin.leafOn(registries.id))
          .leftJoin(leafJoin.batches, leafJoin.batchOn)
          .where(and(eq(registries.id, id), eq(registries.template, 'PASS')))
      : [];
    if (!row) throw new NotFoundError(PASS_NOT_FOUND);
    const r = row.registry;
    const sealed = r.dataEncrypted;
    return {
      id: r.id,
      title: r.title,
      description: sealed ? null : r.description,
      issuer: row.issuer,
      created_at: r.createdAt.toISOString(),
      status: r.revokedAt ? 'revoked' : 'valid',
      revoked_at: r.revokedAt?.toISOString() ?? null,
      data_encrypted: sealed,
      metadata: sealed ? null : (r.metadata ?? []),
      anchor: toAnchorView(row.anchor, deps.anchorNetwork),
    };
  }

  return {
    revoke,
    pass,

    async create(
      accountId: string,
      input: CreateRegistryInput,
      idempotencyKey?: string,
    ): Promise<{ body: CreatedRegistry; replayed: boolean }> {
      validate(input);
      if (input.callback_url !== undefined) await callbacks.checkUrl(input.callback_url, '#/callback_url');
      if (idempotencyKey === undefined) {
        // Without a callback_url the insert is one statement, atomic without a transaction.
        const body =
          input.callback_url === undefined
            ? await insert(db, accountId, input)
            : await db.transaction((tx) => insert(tx, accountId, input));
        return { body, replayed: false };
      }
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
      if (!isUuid(id)) throw new NotFoundError(`No registry with id ${id}`);
      // PostgreSQL reads a UUID in any case and gives it back in lower case.
      const key = id.toLowerCase();
      let row = rows.get(key);
      if (row === undefined) {
        const generation = rows.generation();
        row = await reads.get({ accountId, id: key });
        if (row) rows.set(key, row, generation);
      }
      // A cached row of another account's registry is not found, as the read would not find it.
      if (!row || row.registry.accountId !== accountId) throw new NotFoundError(`No registry with id ${id}`);
      return toView(row.registry, row.anchor);
    },

    /**
     * What arrives on REGISTRY_CHANGED_CHANNEL: a changed registry's id; '' when anchoring changed
     * (any registry); nothing after the listener reconnected (anything may have changed meanwhile).
     */
    onRegistryChanged(id?: string): void {
      if (id) rows.forget(id);
      else rows.clear();
    },

    /** The receipt proving the registry's leaf is anchored (409 while it is not yet). */
    async proof(accountId: string, id: string): Promise<Receipt> {
      const [row] = isUuid(id)
        ? await db
            .select()
            .from(registries)
            .where(and(eq(registries.accountId, accountId), eq(registries.id, id)))
        : [];
      if (!row) throw new NotFoundError(`No registry with id ${id}`);
      const leaf = await proofs.leafOf(id);
      // The salt of an encrypted registry is sealed with its content.
      const salt = leaf?.salt ?? (leaf ? contentOf(row).salt : undefined);
      if (!leaf || salt === undefined) {
        throw new ConflictError(`Registry ${id} was created before anchoring existed and has no proof`);
      }
      const answer = await proofs.receipt(id, salt);
      if (answer.state !== 'anchored') {
        throw new ConflictError(
          `Registry ${id} is not anchored yet; its receipt is ready once anchor.status is anchored`,
        );
      }
      return answer.receipt;
    },

    /** Newest first; `cursor` continues after the last registry of the previous page. */
    async list(
      accountId: string,
      query: { folderId?: string; limit: number; cursor?: string },
    ): Promise<Page<RegistryView>> {
      const conditions: SQL[] = [eq(registries.accountId, accountId)];
      if (query.folderId !== undefined) conditions.push(eq(registries.folderId, query.folderId));
      if (query.cursor !== undefined) conditions.push(lt(registries.id, decodeCursor(query.cursor)));
      const rows = await selectWithAnchor()
        .where(and(...conditions))
        .orderBy(desc(registries.id))
        .limit(query.limit + 1);
      return toPage(
        rows,
        query.limit,
        (r) => r.registry.id,
        (r) => toView(r.registry, r.anchor),
      );
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

/** The one answer for any id that is not a PASS (see `pass`). */
export const PASS_NOT_FOUND = 'No pass with this id';

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

export type Registries = ReturnType<typeof createRegistries>;
