import { v7 as uuidv7 } from 'uuid';
import { anchoredDocument, leafOf, newSalt } from '../anchor/leaf.js';
import { recordLeaf } from '../anchor/leaves.js';
import { enqueueNotifications, newNotificationId } from '../notify/outbox.js';
import type { Db } from '../store/db.js';
import type { RegistryContext } from './context.js';
import { createBatches } from './create-batches.js';
import { folders, registries } from './schema.js';
import type { CreatedRegistry, CreateRegistryInput, SealedContent } from './types.js';

/**
 * The write of one create (create.ts validates and wraps it): its leaf, its sealed content, then
 * without a callback_url folder, registry and leaf in one statement batched with concurrent creates
 * (create-batches.ts); with one, in `tx`, also the endpoint and its registry.created event.
 */
export function createRegistryInsert(ctx: RegistryContext) {
  const { db, envelope, callbacks, now, sealContext } = ctx;
  const batches = createBatches(db);

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

  return insert;
}
