import type { PGlite, QueryOptions, Results } from '@electric-sql/pglite';

/** PGlite or one of its transactions: what a statement is sent to. */
export interface PgliteTarget {
  query<T>(text: string, params?: unknown[], options?: QueryOptions): Promise<Results<T>>;
  exec(text: string, options?: QueryOptions): Promise<Results[]>;
}

/** Only these can be PREPAREd; anything else (DDL, SET, BEGIN …) is sent as it is. */
const PREPARABLE = /^\s*(select|insert|update|delete|with|values)\b/i;
/** A statement is prepared at its second use: many run once (migrations, set-up). */
const PREPARE_AT_USE = 2;

interface Entry {
  uses: number;
  name?: string;
  /** Each parameter's type OID, as PostgreSQL inferred it when preparing. */
  types?: number[];
  /** PREPARE refused it; it is always sent as it is. */
  unpreparable?: boolean;
}

/**
 * Statements sent to PGlite again are planned once: PostgreSQL in WebAssembly parses and plans each
 * on our CPU, and the extended protocol's five messages per query cost as much again
 * (bench/results/2026-12-07-measurements-behind-the-code.md#pglite-statements). One seen before is
 * PREPAREd under a name of ours and run as `EXECUTE name('…', …)`, each parameter serialised as
 * PGlite's bind would (by its inferred type) and quoted: same answers, errors and types. A NUL in a
 * parameter, or a refused PREPARE, goes the usual way. PGlite is one session, so a prepared statement
 * lasts while it is open; PREPARE outlives a rollback, and in a transaction runs under a savepoint.
 */
export function createPlanCache(options: {
  /** The database's own serializers by type OID (`PGlite.serializers`). */
  serializers: PGlite['serializers'];
  maxStatements?: number;
}) {
  const { serializers } = options;
  const maxStatements = options.maxStatements ?? 500;
  const entries = new Map<string, Entry>();
  /** Names of statements let go, deallocated before the next statement is prepared. */
  const forgotten: string[] = [];
  let nextName = 1;

  function literal(type: number, value: unknown): string | undefined {
    if (value === null || value === undefined) return 'NULL';
    const serialize = serializers[type];
    const text = serialize ? serialize(value) : String(value);
    if (text.includes('\u0000')) return undefined;
    return `'${text.replaceAll("'", "''")}'`;
  }

  async function prepare(target: PgliteTarget, text: string, entry: Entry, inTransaction: boolean) {
    const name = `lh_plan_${nextName++}`;
    try {
      if (inTransaction) {
        try {
          // A newline after the text: one ending in a -- comment must not swallow the release.
          await target.exec(`SAVEPOINT lh_plan; PREPARE ${name} AS ${text}\n; RELEASE SAVEPOINT lh_plan`);
        } catch (err) {
          await target.exec('ROLLBACK TO SAVEPOINT lh_plan; RELEASE SAVEPOINT lh_plan');
          throw err;
        }
      } else {
        await target.exec(`PREPARE ${name} AS ${text}`);
      }
      const described = await target.query<{ types: number[] }>(
        'SELECT parameter_types::oid[] AS types FROM pg_prepared_statements WHERE name = $1',
        [name],
      );
      entry.types = described.rows[0]?.types ?? [];
      entry.name = name;
    } catch {
      entry.unpreparable = true;
    }
  }

  function remember(text: string): Entry {
    let entry = entries.get(text);
    if (entry) {
      // Most recently used last, so the first is the one to let go.
      entries.delete(text);
    } else {
      entry = { uses: 0 };
      if (entries.size >= maxStatements) {
        const [oldest, old] = entries.entries().next().value as [string, Entry];
        entries.delete(oldest);
        if (old.name) forgotten.push(old.name);
      }
    }
    entries.set(text, entry);
    return entry;
  }

  return {
    async query<T>(
      target: PgliteTarget,
      text: string,
      params: unknown[],
      queryOptions: QueryOptions,
      inTransaction: boolean,
    ): Promise<Results<T>> {
      if (!PREPARABLE.test(text)) return target.query<T>(text, params, queryOptions);
      const entry = remember(text);
      entry.uses++;
      if (entry.unpreparable || entry.uses < PREPARE_AT_USE)
        return target.query<T>(text, params, queryOptions);
      if (!entry.name) {
        while (forgotten.length > 0) await target.exec(`DEALLOCATE ${forgotten.pop()}`).catch(() => {});
        await prepare(target, text, entry, inTransaction);
        if (!entry.name) return target.query<T>(text, params, queryOptions);
      }
      const types = entry.types!;
      const literals: string[] = [];
      for (let i = 0; i < params.length; i++) {
        const value = literal(types[i] ?? 0, params[i]);
        if (value === undefined) return target.query<T>(text, params, queryOptions);
        literals.push(value);
      }
      const call =
        literals.length > 0 ? `EXECUTE ${entry.name}(${literals.join(',')})` : `EXECUTE ${entry.name}`;
      const [result] = await target.exec(call, queryOptions);
      return result as Results<T>;
    },
    /** Statements prepared now (for tests). */
    preparedCount: () => [...entries.values()].filter((e) => e.name).length,
  };
}

export type PlanCache = ReturnType<typeof createPlanCache>;
