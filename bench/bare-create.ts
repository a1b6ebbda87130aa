// The floor under registry create on PostgreSQL, for bench/api.ts: fastify and node-postgres alone
// writing what a create writes (folder, registry and leaf, with the statement of
// src/registry/create-batches.ts for one row), each create one statement on its own, committed as
// it runs. None of Ledgerhook's work: no token, validation, leaf hashing, group commit or
// transaction around it, metrics. Listens on HOST:PORT; writes to DATABASE_URL (migrated).
import crypto from 'node:crypto';
import Fastify from 'fastify';
import pg from 'pg';
import { exitWhenStopped } from './child-server.js';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
const accountId = crypto.randomUUID();
await pool.query('INSERT INTO accounts (id, name, created_at) VALUES ($1, $2, now())', [
  accountId,
  `bench-floor-${accountId}`,
]);
const text = `WITH folder AS (
  INSERT INTO folders (account_id, folder_id, created_at) VALUES ($2, $3, $12) ON CONFLICT DO NOTHING
), registry AS (
  INSERT INTO registries (id, account_id, folder_id, title, template, description, metadata,
    callback_url, data_encrypted, ciphertext, wrapped_key, key_id, created_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, $8, $9, $10, $11, $12)
)
INSERT INTO anchor_leaves (registry_id, account_id, leaf, salt, subscription_id, batch_id, position, created_at)
VALUES ($1, $2, $13, $14, NULL, NULL, NULL, $12)`;

interface Body {
  title: string;
  folder_id: string;
  template: string;
  description: string;
  metadata: unknown;
}

const app = Fastify({ logger: { level: process.env.LOG_LEVEL || 'warn' } });
app.get('/', async () => ({ serving: true }));
app.post('/api/v1/registry/create', async (request, reply) => {
  const body = request.body as Body;
  const id = crypto.randomUUID();
  const createdAt = new Date();
  const leaf = crypto.randomBytes(32).toString('hex');
  const salt = crypto.randomBytes(32).toString('hex');
  await pool.query({
    name: 'bench_floor_create',
    text,
    values: [
      id,
      accountId,
      body.folder_id,
      body.title,
      body.template,
      body.description,
      JSON.stringify(body.metadata),
      false,
      null,
      null,
      null,
      createdAt,
      leaf,
      salt,
    ],
  });
  reply.code(201);
  return {
    message: 'Registry created successfully',
    data: { id, title: body.title, created_at: createdAt.toISOString() },
  };
});

const url = await app.listen({ host: process.env.HOST || '127.0.0.1', port: Number(process.env.PORT || 0) });
process.stdout.write(`${JSON.stringify({ msg: 'create floor is serving', url })}\n`);

exitWhenStopped(() => app.close().then(() => pool.end()));
