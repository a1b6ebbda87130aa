/**
 * What one statement costs on embedded PGlite, by the way it is sent: the evidence behind what
 * remains of registry get on PGlite in bench:api (see bench/results/2026-11-24-api-issue-13.md).
 * PGlite runs PostgreSQL compiled to WebAssembly in this thread, so parsing and planning are CPU of ours.
 *
 *   npx tsx bench/pglite-statements.ts
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { openStore } from '../src/store/db.js';

const ROUNDS = 3_000;
const WARMUP = 300;
// The shape of registry get: a registry by account and id, with its leaf and batch (left joins).
const REGISTRY_GET = `SELECT r.*, l.leaf, l.position, b.tx_id, b.root
  FROM registries r
  LEFT JOIN anchor_leaves l ON l.registry_id = r.id
  LEFT JOIN anchor_batches b ON b.id = l.batch_id
  WHERE r.account_id = $1 AND r.id = $2`;
const ACCOUNT = '01a20b6f-f871-7514-8626-60c876e0efad';
const REGISTRY = '01a20b6f-fea6-76dd-b571-9ca4c4facb26';

async function microseconds(run: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < WARMUP; i++) await run();
  const started = performance.now();
  for (let i = 0; i < ROUNDS; i++) await run();
  return ((performance.now() - started) / ROUNDS) * 1000;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ledgerhook-bench-pglite-'));
try {
  const store = await openStore({ pgliteDir: dir, pgliteWorker: false });
  await store.migrate();
  await store.close();
  const db = await PGlite.create(path.join(dir));
  await db.exec(`PREPARE registry_get(uuid, uuid) AS ${REGISTRY_GET}`);
  const literal = `EXECUTE registry_get('${ACCOUNT}', '${REGISTRY}')`;
  const rows: [string, number][] = [
    ['SELECT 1 (query, extended protocol)', await microseconds(() => db.query('SELECT 1'))],
    [
      'registry get: query(text, params), as drizzle sends it',
      await microseconds(() => db.query(REGISTRY_GET, [ACCOUNT, REGISTRY])),
    ],
    ['registry get: EXECUTE of a PREPAREd statement, query()', await microseconds(() => db.query(literal))],
    [
      'registry get: EXECUTE of a PREPAREd statement, exec() (simple protocol)',
      await microseconds(() => db.exec(literal)),
    ],
  ];
  await db.close();
  const width = Math.max(...rows.map(([label]) => label.length));
  process.stdout.write(
    `PGlite, one statement at a time, ${ROUNDS} rounds after ${WARMUP}; µs per statement\n`,
  );
  for (const [label, us] of rows)
    process.stdout.write(`${label.padEnd(width)}  ${us.toFixed(0).padStart(5)}\n`);
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
