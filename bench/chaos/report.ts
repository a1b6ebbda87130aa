// The chaos run's tables: the numbers, the checks (each passed or not) and the faults with the time
// the deployment took to get over each.
import { formatTable, grouped } from '../lib.js';
import type { CheckResults } from './checks.js';
import type { FaultResult } from './faults.js';
import type { LoadCounts } from './load.js';

export interface Verdict {
  name: string;
  ok: boolean;
  detail: string;
}

const seconds = (ms: number | undefined) => (ms === undefined ? '-' : `${(ms / 1000).toFixed(1)} s`);
const list = (counts: Record<string, number>) =>
  Object.entries(counts)
    .sort()
    .map(([k, v]) => `${k} ${grouped(v)}`)
    .join(', ') || 'none';

/** Each check, passed or failed, with what it found. */
export function verdicts(r: CheckResults, leftovers: string[]): Verdict[] {
  const few = (items: string[]) =>
    items.length ? `: ${items.slice(0, 3).join('; ')}${items.length > 3 ? ' …' : ''}` : '';
  return [
    {
      name: 'every notification in the surviving database acknowledged by a receiver',
      ok: r.lost.length === 0,
      detail: `${grouped(r.dbTotal - r.lost.length)} of ${grouped(r.dbTotal)}${few(r.lost)}`,
    },
    {
      name: 'every transfer on the chains notified (read with viem)',
      ok: r.chainMissingOnReceivers.length === 0 && r.chainMissingInDb.length === 0,
      detail: `${grouped(r.chainExpected - r.chainMissingOnReceivers.length)} of ${grouped(r.chainExpected)} acknowledged, ${grouped(r.chainExpected - r.chainMissingInDb.length)} in the database${few(r.chainMissingOnReceivers)}`,
    },
    {
      name: 'no notification of a transfer that is not on the chains',
      ok: r.chainUnexpected.length === 0,
      detail: `${grouped(r.chainUnexpected.length)}${few(r.chainUnexpected)}`,
    },
    {
      name: 'one id per chain event',
      ok: r.multiIdEvents === 0,
      detail: `${grouped(r.multiIdEvents)} events received under more than one id${r.multiIdExample ? ` (e.g. ${r.multiIdExample})` : ''}`,
    },
    {
      name: 'signatures (a sample, standardwebhooks)',
      ok: r.signaturesBad === 0 && r.signaturesChecked > 0,
      detail: `${grouped(r.signaturesChecked - r.signaturesBad)} of ${grouped(r.signaturesChecked)} valid`,
    },
    {
      name: 'no process left running',
      ok: leftovers.length === 0,
      detail: leftovers.length ? leftovers.join('; ') : 'none',
    },
  ];
}

/** Distinct notifications first acknowledged per second while the load ran, and in its busiest 10 s. */
function ackRates(r: CheckResults, from: number, to: number): { mean: number; peak: number } {
  const seen = new Set<string>();
  const buckets = new Map<number, number>();
  let count = 0;
  for (const line of r.lines) {
    if (line.o !== 200 || seen.has(line.id)) continue;
    seen.add(line.id);
    if (line.t < from || line.t > to) continue;
    count++;
    const bucket = Math.floor((line.t - from) / 10_000);
    buckets.set(bucket, (buckets.get(bucket) ?? 0) + 1);
  }
  const peak = Math.max(0, ...buckets.values());
  return { mean: count / ((to - from) / 1000), peak: Math.round(peak / 10) };
}

export function report(
  r: CheckResults,
  load: LoadCounts,
  faults: FaultResult[],
  checks: Verdict[],
  timing: { loadStart: number; loadEnd: number; settledAt: number; totalMs: number; otherDuplicates: number },
): string {
  const loadSeconds = (timing.loadEnd - timing.loadStart) / 1000;
  const rates = ackRates(r, timing.loadStart, timing.loadEnd);
  const numbers = formatTable(
    ['', 'value'],
    [
      ['notifications in the surviving database', grouped(r.dbTotal)],
      ['  by kind', list(r.dbByKind)],
      ['  by state', list(r.dbByState)],
      [
        'load sent',
        `${grouped(load.transfers)} transfers, ${grouped(load.registries)} registries, ${grouped(load.tests)} tests (${load.failed} failed calls)`,
      ],
      [
        'notifications acknowledged per second',
        `${rates.mean.toFixed(0)} while the load ran (${loadSeconds.toFixed(0)} s, paced), ${rates.peak} in its busiest 10 s`,
      ],
      ['webhook requests', `${grouped(r.requests)} (${list(r.byOutcome)})`],
      [
        'duplicates by id (acknowledged again)',
        `${grouped(r.duplicatesById)} (ids: ${list(r.duplicateIdsByKind)}; outside every fault's window: ${timing.otherDuplicates})`,
      ],
      ['chain events with more than one id', grouped(r.multiIdEvents)],
      ['lost (in the database, never acknowledged)', grouped(r.lost.length)],
      ['acknowledged, then lost with the failover tail', list(r.ackedNotInDb)],
      [
        'drained after the load',
        `${((timing.settledAt - timing.loadStart) / 1000).toFixed(0)} s after the load started`,
      ],
      ['whole run', `${(timing.totalMs / 1000).toFixed(0)} s`],
    ],
  );
  const faultTable = formatTable(
    ['fault', 'at', 'ready again', 'end to end', 'duplicates', 'note'],
    faults.map((f) => [
      f.name,
      `${f.at.toFixed(0)} s`,
      seconds(f.readyMs),
      seconds(f.endToEndMs),
      f.duplicates === undefined ? '-' : grouped(f.duplicates),
      f.note,
    ]),
  );
  const checkTable = formatTable(
    ['check', 'result', 'found'],
    checks.map((c) => [c.name, c.ok ? 'ok' : 'FAILED', c.detail]),
  );
  return `${numbers}\n\n${faultTable}\n\n${checkTable}\n`;
}
