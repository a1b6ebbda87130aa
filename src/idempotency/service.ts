import { and, eq, lt, sql } from 'drizzle-orm';
import { ConflictError, ValidationError } from '../errors.js';
import type { Envelope, Sealed } from '../secrets/envelope.js';
import { type Db, isUniqueViolation } from '../store/db.js';
import { idempotencyKeys } from './schema.js';

export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;
/** The first half of the advisory lock that makes requests with one key wait for each other. */
const KEY_LOCK_SPACE = 7_461_005;

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** The `Idempotency-Key` header's value, checked; undefined when the header is absent. */
export function parseIdempotencyKey(value: string | undefined): string | undefined {
  if (value !== undefined && !IDEMPOTENCY_KEY.test(value)) {
    throw new ValidationError('Invalid Idempotency-Key', [
      { header: 'idempotency-key', detail: 'must be 1-255 printable ASCII characters without spaces' },
    ]);
  }
  return value;
}

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
          // A concurrent request with the same key waits here until the first commits, then
          // replays its response: it must not run the operation and meet the first one's effects
          // (a duplicate) instead of its remembered answer.
          await tx.execute(
            sql`SELECT pg_advisory_xact_lock(${KEY_LOCK_SPACE}, hashtext(${`${request.accountId}:${request.key}`}))`,
          );
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
