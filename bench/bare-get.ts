// The floor under registry get among many, for bench/api.ts: fastify and node-postgres (or PGlite)
// alone reading what a get reads (the registry, its leaf and its batch, as one JSON array: the
// statement src/registry/reads.ts prepares for one id), a prepared statement per get on a pool of
// ten connections, the row sent back as it came. None of Ledgerhook's work: no token, no batching of
// concurrent gets, no row cache, no mapping to the API's view, no metrics. Listens on HOST:PORT;
// reads DATABASE_URL (migrated, with the registries bench/api.ts created), or with PGLITE_DIR that
// PGlite data directory, opened on the event loop's thread, a statement at a time (PGlite runs one).

import { PGlite } from '@electric-sql/pglite';
import { inArray, sql } from 'drizzle-orm';
import { QueryBuilder } from 'drizzle-orm/pg-core';
import Fastify from 'fastify';
import pg from 'pg';
import { leafJoin } from '../src/anchor/leaves.js';
import { anchoredRowColumns } from '../src/registry/context.js';
import { registries } from '../src/registry/schema.js';
import { exitWhenStopped } from './child-server.js';

// The columns of reads.ts's hot read, in its order: the registry's, then the anchoring's.
const columns = sql.join(
  anchoredRowColumns.map(([, , column]) => column),
  sql`, `,
);
const text = new QueryBuilder()
  .select({ row: sql<string>`json_build_array(${columns})` })
  .from(registries)
  .leftJoin(leafJoin.leaves, leafJoin.leafOn(registries.id))
  .leftJoin(leafJoin.batches, leafJoin.batchOn)
  .where(inArray(registries.id, [sql.placeholder('id')]))
  .toSQL().sql;

/** The row of `id` as the JSON text the database wrote (its one column, unnamed), or undefined. */
type ReadRow = (id: string) => Promise<string | undefined>;
// The JSON as text, sent as it came (json's type id, 114): no parse, no mapping.
const asText = (value: string) => value;

async function openDatabase(): Promise<{ read: ReadRow; close(): Promise<void> }> {
  const pgliteDir = process.env.PGLITE_DIR;
  if (pgliteDir) {
    const db = await PGlite.create(pgliteDir);
    return {
      read: async (id) =>
        (await db.query<[string]>(text, [id], { rowMode: 'array', parsers: { 114: asText } })).rows[0]?.[0],
      close: () => db.close(),
    };
  }
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
  return {
    read: async (id) =>
      (
        await pool.query<[string]>({
          name: 'bench_floor_get',
          text,
          values: [id],
          rowMode: 'array',
          types: { getTypeParser: () => asText },
        })
      ).rows[0]?.[0],
    close: () => pool.end(),
  };
}

const database = await openDatabase();

const app = Fastify({ logger: { level: process.env.LOG_LEVEL || 'warn' } });
app.get('/', async () => ({ serving: true }));
app.get<{ Params: { id: string } }>('/api/v1/registry/:id', async (request, reply) => {
  const row = await database.read(request.params.id);
  if (row === undefined) return reply.code(404).send({ title: 'Not Found' });
  return reply.type('application/json').send(`{"data":${row}}`);
});

const url = await app.listen({ host: process.env.HOST || '127.0.0.1', port: Number(process.env.PORT || 0) });
process.stdout.write(`${JSON.stringify({ msg: 'get floor is serving', url })}\n`);

exitWhenStopped(() => app.close().then(() => database.close()));
