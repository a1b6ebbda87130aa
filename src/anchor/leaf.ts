/**
 * A registry's leaf: SHA-256 over its 32-byte random salt followed by the UTF-8 of its anchored
 * document in RFC 8785 canonical JSON. The salt keeps a short record from being found by hashing
 * guesses; the document is every field the owner gave (defaults filled in) plus `id` and
 * `created_at`, exactly the fields of the same names that `GET /api/v1/registry/{id}` returns.
 */
import { randomBytes } from 'node:crypto';
import canonicalize from 'canonicalize';
import { LedgerhookError } from '../errors.js';
import { sha256 } from './merkle.js';

/** The fields of a registry that its leaf covers; any other field of a given object is ignored. */
export const ANCHORED_FIELDS = [
  'id',
  'created_at',
  'title',
  'description',
  'folder_id',
  'template',
  'metadata',
  'callback_url',
  'data_encrypted',
] as const;

export type AnchoredDocument = Record<(typeof ANCHORED_FIELDS)[number], unknown>;

/** The anchored document of a registry as the API shows it (extra fields, such as `anchor`, dropped). */
export function anchoredDocument(registry: Record<string, unknown>): AnchoredDocument {
  const document = {} as AnchoredDocument;
  for (const field of ANCHORED_FIELDS) {
    if (!Object.hasOwn(registry, field)) throw new AnchoredDocumentError(field);
    document[field] = registry[field];
  }
  return document;
}

/** A document to hash lacks a field the leaf covers. */
export class AnchoredDocumentError extends LedgerhookError {
  constructor(readonly field: string) {
    super(`the registry content has no "${field}"`);
  }
}

const SALT_BYTES = 32;
/** Salts drawn from the CSPRNG 128 at a time: one call for 32 bytes costs about what one for 4 KiB does. */
const SALTS_PER_DRAW = 128;
let drawn = Buffer.alloc(0);
let next = 0;

/** A fresh 32-byte random salt (hex); no bytes are ever handed out twice. */
export function newSalt(): string {
  if (next === drawn.length) {
    drawn = randomBytes(SALT_BYTES * SALTS_PER_DRAW);
    next = 0;
  }
  const salt = drawn.toString('hex', next, next + SALT_BYTES);
  next += SALT_BYTES;
  return salt;
}

/** RFC 8785 JSON of the document; throws on what has no canonical form (a lone surrogate, NaN). */
export function canonicalDocument(document: AnchoredDocument): string {
  const json = canonicalize(document);
  if (json === undefined) throw new TypeError('the registry content has no JSON form');
  return json;
}

/** The leaf (hex) of a document under a salt (hex). */
export function leafOf(saltHex: string, document: AnchoredDocument): string {
  return sha256(Buffer.from(saltHex, 'hex'), Buffer.from(canonicalDocument(document), 'utf8')).toString(
    'hex',
  );
}
