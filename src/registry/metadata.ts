import type { FieldError } from '../errors.js';

export const METADATA_TYPES = ['TEXT', 'NUMBER', 'DATE', 'BOOLEAN', 'URL', 'EMAIL', 'FILE'] as const;
export type MetadataType = (typeof METADATA_TYPES)[number];

/** One entry of a registry's metadata, as stored (registry/schema.ts) and validated here. */
export interface MetadataItem {
  type: MetadataType;
  key: string;
  value?: string;
  title?: string;
  file?: string;
}

const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})T([01]\d|2[0-3]):([0-5]\d)(:([0-5]\d)(\.\d{1,9})?)?(Z|[+-]([01]\d|2[0-3]):?[0-5]\d)$/;
// Deliberately permissive (RFC 5322 allows far more); it catches the mistakes people make.
// Control characters are never part of an address (and a NUL cannot be stored).
const EMAIL =
  /^[^\s@"<>(),;:\p{Cc}]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/u;
const DATA_URI =
  /^data:([a-zA-Z0-9!#$&^_.+-]+\/[a-zA-Z0-9!#$&^_.+-]+)?((;[a-zA-Z0-9!#$&^_.+-]+=[^;,]*)*)(;base64)?,(.*)$/s;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function isCalendarDate(year: number, month: number, day: number): boolean {
  const d = new Date(Date.UTC(year, month - 1, day));
  return d.getUTCFullYear() === year && d.getUTCMonth() === month - 1 && d.getUTCDate() === day;
}

export function isIsoDate(value: string): boolean {
  const m = DATE_ONLY.exec(value) ?? DATE_TIME.exec(value);
  return m !== null && isCalendarDate(Number(m[1]), Number(m[2]), Number(m[3]));
}

/** An absolute http(s) URL with a host. */
export function isHttpUrl(value: string): boolean {
  if (value.length > 2048 || /\s/.test(value)) return false;
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

export function isDataUri(value: string): boolean {
  const m = DATA_URI.exec(value);
  if (!m) return false;
  return m[4] === undefined || BASE64.test((m[5] ?? '').replace(/\s/g, ''));
}

const VALUE_RULES: Record<MetadataType, { test: (v: string) => boolean; expected: string }> = {
  TEXT: { test: () => true, expected: 'text' },
  NUMBER: {
    test: (v) => NUMBER.test(v) && Number.isFinite(Number(v)),
    expected: 'a decimal number such as "42" or "-1.5e3"',
  },
  DATE: {
    test: isIsoDate,
    expected: 'an ISO 8601 date ("2026-11-21") or date-time with offset ("2026-11-21T10:00:00Z")',
  },
  BOOLEAN: { test: (v) => v === 'true' || v === 'false', expected: '"true" or "false"' },
  URL: { test: isHttpUrl, expected: 'an absolute http(s) URL' },
  EMAIL: { test: (v) => v.length <= 254 && EMAIL.test(v), expected: 'an email address' },
  FILE: { test: (v) => isHttpUrl(v) || isDataUri(v), expected: 'an http(s) URL or a data: URI' },
};

/**
 * Checks what the JSON schema cannot: each value parses as its declared type, `file` is a URL or
 * data: URI, and keys are unique within the registry.
 */
export function validateMetadata(items: MetadataItem[], pointer = '#/metadata'): FieldError[] {
  const errors: FieldError[] = [];
  const firstIndexOfKey = new Map<string, number>();
  items.forEach((item, index) => {
    const rule = VALUE_RULES[item.type as MetadataType];
    if (rule && item.value !== undefined && !rule.test(item.value)) {
      errors.push({
        pointer: `${pointer}/${index}/value`,
        detail: `must be ${rule.expected} for type ${item.type}`,
      });
    }
    if (item.file !== undefined && !(isHttpUrl(item.file) || isDataUri(item.file))) {
      errors.push({ pointer: `${pointer}/${index}/file`, detail: 'must be an http(s) URL or a data: URI' });
    }
    const earlier = firstIndexOfKey.get(item.key);
    if (earlier !== undefined) {
      errors.push({
        pointer: `${pointer}/${index}/key`,
        detail: `duplicates the key of metadata item ${earlier}`,
      });
    } else {
      firstIndexOfKey.set(item.key, index);
    }
  });
  return errors;
}
