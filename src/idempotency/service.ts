import { and, eq, lt } from 'drizzle-orm';
import { ConflictError } from '../errors.js';
import type { Envelope, Sealed } from '../secrets/envelope.js';
import { type Db, isUniqueViolation } from '../store/db.js';
import { idempotencyKeys } from './schema.js';

export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

export interface StoredResponse<T> {
  statusCode: number;
  body: T;
  /** True when this is the remembered response of an earlier request with the same key. */
  replayed: boolean;
}

export interface IdempotentRequest {
  accountId: string;
  key: string;
  /** The operation, e.g. "POST /api/v1/registry/create": a key belongs to one operation. */
  scope: string;
  /** A keyed digest of the canonical request body. */
  requestHash: string;
}

/** JSON with object keys sorted, so equal bodies hash equally whatever their key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value);
}

export function createIdempotency(deps: { db: Db; envelope: Envelope; now?: () => Date }) {
  const { db, envelope } = deps;
  // Remembered responses may hold secrets shown once (a webhook secret), so they are sealed.
  const context = (request: IdempotentRequest) => `idempotency:${request.accountId}:${request.key}`;
  const now = deps.now ?? (() => new Date());

  async function remembered<T>(tx: Db, request: IdempotentRequest): Promise<StoredResponse<T> | undefined> {
    const [row] = await tx
      .select()
      .from(idempotencyKeys)
      .where(and(eq(idempotencyKeys.accountId, request.accountId), eq(idempotencyKeys.key, request.key)));
    if (!row) return undefined;
    if (row.scope !== request.scope || row.requestHash !== request.requestHash) {
      throw new ConflictError(
        'This Idempotency-Key was already used with a different request; use a new key for a new request',
      );
    }
    const body = JSON.parse(envelope.open(row.response as Sealed, context(request))) as T;
    return { statusCode: row.statusCode, body, replayed: true };
  }

  return {
    /**
     * Runs `operation` once per key within 24 hours: its effects and the remembered response are
     * committed together, so a retry after a crash either replays the response or runs afresh.
     */
    async run<T>(
      request: IdempotentRequest,
      operation: (tx: Db) => Promise<{ statusCode: number; body: T }>,
    ): Promise<StoredResponse<T>> {
      try {
        return await db.transaction(async (tx) => {
          await tx
            .delete(idempotencyKeys)
            .where(
              and(
                eq(idempotencyKeys.accountId, request.accountId),
                eq(idempotencyKeys.key, request.key),
                lt(idempotencyKeys.createdAt, new Date(now().getTime() - IDEMPOTENCY_WINDOW_MS)),
              ),
            );
          const earlier = await remembered<T>(tx, request);
          if (earlier) return earlier;
          const result = await operation(tx);
          await tx.insert(idempotencyKeys).values({
            accountId: request.accountId,
            key: request.key,
            scope: request.scope,
            requestHash: request.requestHash,
            statusCode: result.statusCode,
            response: envelope.seal(JSON.stringify(result.body), context(request)),
            createdAt: now(),
          });
          return { ...result, replayed: false };
        });
      } catch (err) {
        // A concurrent request with the same key committed first: answer as it did.
        if (!isUniqueViolation(err)) throw err;
        const winner = await remembered<T>(db, request);
        if (!winner) throw err;
        return winner;
      }
    },
  };
}

export type Idempotency = ReturnType<typeof createIdempotency>;
