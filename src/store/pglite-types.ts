import { type PGlite, type QueryOptions, type Results, types } from '@electric-sql/pglite';

/**
 * The types some statement reads as the text PostgreSQL sent: drizzle's PGlite session passes a
 * parser keeping the text for timestamp, timestamptz, interval, date, numeric[], timestamp[],
 * timestamptz[], interval[] and date[] on every statement, and the registry's hot read keeps its
 * json; json[] is here because PGlite parses its elements with json's parser.
 */
const KEPT = [
  types.TIMESTAMP,
  types.TIMESTAMPTZ,
  types.INTERVAL,
  types.DATE,
  1231,
  1115,
  1185,
  1187,
  1182,
  types.JSON,
  199,
] as const;
const KEPT_SET: ReadonlySet<number> = new Set(KEPT);
/** Those of them that are arrays of another of them: PGlite's parser reads the element's parser. */
const ARRAYS_OF_KEPT: ReadonlySet<number> = new Set([1115, 1185, 1187, 1182, 199]);

type Parser = (value: string, type: number) => unknown;
const keep = (value: string) => value;

export interface TextTypes {
  /**
   * The options to run a statement with, when `asText` (type OIDs) are to stay as text: without
   * parsers, but for a type the database would otherwise parse.
   */
  options(rowMode: QueryOptions['rowMode'], asText: ReadonlySet<number>): QueryOptions;
  /**
   * Makes `result` what PGlite answers with parsers keeping `asText`: a value of a type the
   * database keeps as text, but not in `asText`, is parsed here with PGlite's own parser. Rows
   * change in place.
   */
  finish<T>(result: Results<T>, asText: ReadonlySet<number>): Results<T>;
}

/**
 * Has `db` keep the types above as text, so that statements need not pass parsers: PGlite merges
 * a statement's parsers into a copy of its own ~320 for every result (`{...db.parsers,
 * ...options.parsers}`), which cost 120-250 µs a statement, more than running most of ours
 * (bench/README.md, "PGlite's parsers copied for every result"). Call once, as soon as the database is
 * created, and pass every result through `finish`.
 */
export function keepTextTypes(db: PGlite): TextTypes {
  const parsers = db.parsers as Record<number, Parser>;
  const defaults = types.parsers as Record<number, Parser | undefined>;
  const original = new Map<number, Parser>();
  for (const oid of KEPT) {
    original.set(oid, parsers[oid] ?? defaults[oid] ?? keep);
    parsers[oid] = keep;
  }

  function parseAsBefore(value: string, oid: number): unknown {
    const parser = original.get(oid)!;
    if (!ARRAYS_OF_KEPT.has(oid)) return parser(value, oid);
    // The element's original parser back in place while the array is parsed; nothing else runs.
    for (const [type, p] of original) parsers[type] = p;
    try {
      return parser(value, oid);
    } finally {
      for (const type of KEPT) parsers[type] = keep;
    }
  }

  return {
    options(rowMode, asText) {
      const extra = [...asText].filter((oid) => !KEPT_SET.has(oid));
      if (extra.length === 0) return { rowMode };
      return { rowMode, parsers: Object.fromEntries(extra.map((oid) => [oid, keep])) };
    },
    finish(result, asText) {
      const { fields, rows } = result;
      if (rows.length === 0 || !fields) return result;
      const arrayRows = Array.isArray(rows[0]);
      const parse: number[] = [];
      fields.forEach((field, i) => {
        if (!KEPT_SET.has(field.dataTypeID) || asText.has(field.dataTypeID)) return;
        // Rows as objects hold the last column of each name.
        if (!arrayRows && fields.findLastIndex((f) => f.name === field.name) !== i) return;
        parse.push(i);
      });
      if (parse.length === 0) return result;
      for (const row of rows as Record<string | number, unknown>[]) {
        for (const i of parse) {
          const { name, dataTypeID } = fields[i]!;
          const key = arrayRows ? i : name;
          const value = row[key];
          if (typeof value === 'string') row[key] = parseAsBefore(value, dataTypeID);
        }
      }
      return result;
    },
  };
}
