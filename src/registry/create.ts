import { ValidationError } from '../errors.js';
import { canonicalJson } from '../idempotency/service.js';
import type { RegistryContext } from './context.js';
import { createRegistryInsert } from './insert.js';
import { isHttpUrl, validateMetadata } from './metadata.js';
import type { CreatedRegistry, CreateRegistryInput } from './types.js';

export const CREATE_SCOPE = 'POST /api/v1/registry/create';

/**
 * Creating registries: validation, the callback URL's check, and the write (insert.ts) on its own,
 * in a transaction, or under an Idempotency-Key.
 */
export function createRegistryCreation(ctx: RegistryContext) {
  const { db, envelope, idempotency, callbacks } = ctx;
  const insert = createRegistryInsert(ctx);

  function validate(input: CreateRegistryInput): void {
    const errors = validateMetadata(input.metadata);
    if (input.callback_url !== undefined && !isHttpUrl(input.callback_url)) {
      errors.push({ pointer: '#/callback_url', detail: 'must be an absolute http(s) URL' });
    }
    if (errors.length > 0) throw new ValidationError('Invalid registry', errors);
  }

  async function create(
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
  }

  return { create };
}
