import { ValidationError } from '../errors.js';

/** A page of a list and the cursor of the next one (null on the last page). */
export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/**
 * The key a cursor stands for. Cursors are opaque to clients (base64url of the last key of the
 * previous page); one this API did not return is a 400 naming the parameter.
 */
export function decodeCursor(cursor: string, isKey: (key: string) => boolean = isUuid): string {
  const key = Buffer.from(cursor, 'base64url').toString('utf8');
  // Only what toPage encodes decodes: base64url skips stray characters and UTF-8 decoding
  // replaces broken bytes, and a NUL (which "AA" decodes to) would reach the database.
  const canonical = Buffer.from(key, 'utf8').toString('base64url') === cursor;
  if (!canonical || key.includes('\u0000') || !isKey(key)) {
    throw new ValidationError('Invalid cursor', [
      { parameter: 'cursor', detail: 'is not a cursor this API returned' },
    ]);
  }
  return key;
}

/**
 * Turns `limit + 1` fetched rows into a page: the extra row only tells that another page exists,
 * whose cursor is the key of this page's last row.
 */
export function toPage<R, T>(
  rows: R[],
  limit: number,
  keyOf: (row: R) => string,
  view: (row: R) => T,
): Page<T> {
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    data: page.map(view),
    next_cursor:
      rows.length > limit && last !== undefined
        ? Buffer.from(keyOf(last), 'utf8').toString('base64url')
        : null,
  };
}

/** What a list route was asked for: a page size, and where to start (a cursor or an offset). */
export interface PageQuery {
  limit: number;
  cursor?: string;
  /** Rows to skip, for clients that page by offset (Tatum's `offset`); never with a cursor. */
  offset?: number;
}

/**
 * The page a list was asked for. `pageSize` and `offset` are Tatum's names for the same idea as
 * `limit` and `cursor`; a request mixing the two ways is ambiguous and refused.
 */
export function pageQuery(query: {
  limit?: number;
  pageSize?: number;
  cursor?: string;
  offset?: number;
}): PageQuery {
  if (query.limit !== undefined && query.pageSize !== undefined) {
    throw new ValidationError('Conflicting page size', [
      { parameter: 'pageSize', detail: 'cannot be combined with limit; send one of them' },
    ]);
  }
  if (query.cursor !== undefined && query.offset !== undefined) {
    throw new ValidationError('Conflicting page start', [
      { parameter: 'offset', detail: 'cannot be combined with cursor; send one of them' },
    ]);
  }
  return {
    limit: query.limit ?? query.pageSize ?? 20,
    ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
    ...(query.offset === undefined ? {} : { offset: query.offset }),
  };
}
