// What the strict JSON body parser (src/http/json-body.ts) costs per request, against JSON.parse
// and against what Fastify's default parser (secure-json-parse) did, on request bodies.
// Usage: npx tsx bench/json-body.ts [--rounds 30 --ms 50]
import { isUtf8 } from 'node:buffer';
import { parseArgs } from 'node:util';
import secureJson from 'secure-json-parse';
import { parseJsonBody } from '../src/http/json-body.js';
import { formatTable, machineLine, numberOption } from './lib.js';

/** The body `npm run bench:api` creates registries with: five typed metadata items. */
const TYPICAL = JSON.stringify({
  title: 'Invoice 2026-0042',
  description: 'Supplier invoice for Q3 hosting, approved by finance',
  folder_id: 'bench-invoices',
  template: 'STORAGE',
  metadata: [
    { type: 'TEXT', key: 'supplier', title: 'Supplier', value: 'Northwind Hosting GmbH' },
    { type: 'NUMBER', key: 'amount', title: 'Amount (EUR)', value: '12480.50' },
    { type: 'DATE', key: 'due', title: 'Due date', value: '2026-11-21' },
    { type: 'EMAIL', key: 'contact', title: 'Billing contact', value: 'billing@northwind.example' },
    {
      type: 'URL',
      key: 'document',
      title: 'Original PDF',
      value: 'https://files.example.com/inv/2026-0042.pdf',
    },
  ],
});

/** Clients that escape every non-ASCII character (Python's json.dumps does by default). */
const ESCAPED = TYPICAL.replace(
  'Northwind Hosting GmbH',
  'Nordwind H\\u00f6sting GmbH \\u2014 M\\u00fcnchen',
);

/** The largest registry the API takes: 1000 metadata items (about 100 KB). */
const LARGEST = JSON.stringify({
  title: 'Inventory',
  folder_id: 'bench',
  template: 'STORAGE',
  metadata: Array.from({ length: 1000 }, (_, i) => ({
    type: 'TEXT',
    key: `item-${i}`,
    title: `Item ${i}`,
    value: `Pallet ${i} of widgets, aisle ${i % 40}`,
  })),
});

const { values } = parseArgs({ options: { rounds: { type: 'string' }, ms: { type: 'string' } } });
const rounds = numberOption(values.rounds, 'BENCH_ROUNDS', 30, 1);
const sliceMs = numberOption(values.ms, 'BENCH_MS', 50, 5);

/** Nanoseconds per call of one run of about `sliceMs`. */
function slice(fn: () => unknown): number {
  let n = 0;
  const start = process.hrtime.bigint();
  const deadline = start + BigInt(sliceMs) * 1_000_000n;
  let now = start;
  while (now < deadline) {
    for (let i = 0; i < 20; i++) fn();
    n += 20;
    now = process.hrtime.bigint();
  }
  return Number(now - start) / n;
}

/**
 * Nanoseconds per call of each function: runs take turns, round after round, so that all see the
 * same machine, and each keeps its fastest run (the least disturbed by other processes).
 */
function measure(fns: (() => unknown)[]): number[] {
  const best = fns.map(() => Number.POSITIVE_INFINITY);
  for (let r = 0; r < rounds; r++) {
    for (const [i, fn] of fns.entries()) best[i] = Math.min(best[i]!, slice(fn));
  }
  return best;
}

const rows: string[][] = [];
for (const [name, text] of [
  ['typical (bench:api create)', TYPICAL],
  ['typical, non-ASCII escaped', ESCAPED],
  ['largest (1000 items)', LARGEST],
] as const) {
  const buffer = Buffer.from(text, 'utf8');
  const [reference, before, strict, after] = measure([
    () => JSON.parse(text),
    () => secureJson.parse(buffer.toString('utf8'), { protoAction: 'error', constructorAction: 'error' }),
    () => parseJsonBody(text),
    () => isUtf8(buffer) && parseJsonBody(buffer.toString('utf8')),
  ]) as [number, number, number, number];
  const us = (ns: number) => (ns / 1000).toFixed(2);
  rows.push([
    `${name}, ${buffer.length} B`,
    us(reference),
    us(before),
    us(strict),
    us(after),
    `${(after / before).toFixed(2)}×`,
    `${after >= before ? '+' : ''}${us(after - before)}`,
  ]);
}

process.stdout.write(`${machineLine()}\n`);
process.stdout.write(
  `${formatTable(
    [
      'body',
      'JSON.parse µs',
      'before: buffer → secure-json-parse µs',
      'parseJsonBody µs',
      'after: buffer → UTF-8 check → parseJsonBody µs',
      'after / before',
      'added µs per request',
    ],
    rows,
  )}\n`,
);
