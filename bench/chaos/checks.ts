// What the chaos run checks at the end, from outside the service: the surviving database's outbox
// against what the receivers acknowledged, the transfers on the chains (read independently with
// viem) against the notifications, one id per chain event, duplicates by id, signatures.
import fs from 'node:fs';
import { Webhook } from 'standardwebhooks';
import { sleep } from '../lib.js';
import type { ChaosChain } from './chains.js';
import { connect } from './cluster.js';
import { bodyKey } from './keys.js';
import type { Setup } from './load.js';
import type { ReceivedLine } from './receivers-child.js';

async function queryOnce<T>(url: string, text: string): Promise<T[]> {
  const client = await connect(url);
  try {
    return (await client.query(text)).rows as T[];
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Waits until every chain's cursor has reached its head and nothing is left to send: no pending or
 * held notification in the database (read through the virtual IP, like the service).
 */
export async function waitSettled(
  databaseUrl: string,
  heads: Map<string, number>,
  timeoutMs: number,
  log: (line: string) => void,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastLog = 0;
  for (;;) {
    let state = 'database unreachable';
    try {
      const cursors = await queryOnce<{ network: string; height: string }>(
        databaseUrl,
        'SELECT network, height FROM chain_cursors',
      );
      const behind = [...heads].filter(
        ([name, head]) => Number(cursors.find((c) => c.network === name)?.height ?? -1) < head,
      );
      const [outbox] = await queryOnce<{ pending: string; held: string }>(
        databaseUrl,
        "SELECT count(*) FILTER (WHERE state = 'pending') AS pending, count(*) FILTER (WHERE state = 'held') AS held FROM notifications WHERE state IN ('pending', 'held')",
      );
      if (behind.length === 0 && Number(outbox!.pending) === 0 && Number(outbox!.held) === 0) return;
      state = `${behind.length ? `followers behind: ${behind.map(([n]) => n).join(', ')}; ` : ''}pending ${outbox!.pending}, held ${outbox!.held}`;
    } catch (err) {
      state = `database: ${err instanceof Error ? err.message : String(err)}`;
    }
    if (Date.now() > deadline) throw new Error(`not settled within ${timeoutMs / 1000} s: ${state}`);
    if (Date.now() - lastLog > 10_000) {
      log(`  waiting for the outbox to drain: ${state}`);
      lastLog = Date.now();
    }
    await sleep(500);
  }
}

interface Row {
  id: string;
  subscription_id: string;
  event_type: string;
  state: string;
  body: string | null;
}

export interface CheckResults {
  dbTotal: number;
  dbByKind: Record<string, number>;
  dbByState: Record<string, number>;
  requests: number;
  byOutcome: Record<string, number>;
  ackedDistinct: number;
  duplicatesById: number;
  /** Ids acknowledged more than once, by kind. */
  duplicateIdsByKind: Record<string, number>;
  /** In the surviving database, never acknowledged by a receiver. */
  lost: string[];
  chainExpected: number;
  chainMissingOnReceivers: string[];
  chainMissingInDb: string[];
  /** Acknowledged chain notifications of no transfer on the chains. */
  chainUnexpected: string[];
  /** Chain events received under more than one id, and an example. */
  multiIdEvents: number;
  multiIdExample: string | undefined;
  /** Acknowledged, but not in the surviving database (lost with the failover's tail), by kind. */
  ackedNotInDb: Record<string, number>;
  signaturesChecked: number;
  signaturesBad: number;
  firstAck: number;
  lastAck: number;
  lines: ReceivedLine[];
}

function kindOf(eventType: string): string {
  if (eventType.startsWith('address.transaction')) return 'chain';
  if (eventType.startsWith('registry.')) return 'registry';
  return eventType || 'unknown';
}

function count<T>(items: Iterable<T>, key: (item: T) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
}

export function readReceived(file: string): ReceivedLine[] {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as ReceivedLine);
}

/** Signatures of the sampled requests, recomputed with standardwebhooks from the known secrets. */
function checkSignatures(
  lines: ReceivedLine[],
  secrets: Map<string, string>,
): { checked: number; bad: number } {
  let checked = 0;
  let bad = 0;
  for (const line of lines) {
    if (!line.sig || !line.sub) continue;
    const secret = secrets.get(line.sub);
    if (!secret) continue;
    checked++;
    const expected = new Webhook(secret).sign(line.id, new Date(Number(line.sig.ts) * 1000), line.sig.body);
    if (!line.sig.sig.split(' ').includes(expected)) bad++;
  }
  return { checked, bad };
}

export async function check(
  databaseUrl: string,
  receivedFile: string,
  chains: ChaosChain[],
  heads: Map<string, number>,
  setup: Setup,
): Promise<CheckResults> {
  const rows = await queryOnce<Row>(
    databaseUrl,
    "SELECT id::text, subscription_id::text, event_type, state, CASE WHEN event_type LIKE 'address.transaction%' THEN body END AS body FROM notifications",
  );
  const lines = readReceived(receivedFile);
  const acked = new Map<string, number>();
  const idsByEvent = new Map<string, Set<string>>();
  const kindById = new Map<string, string>();
  const ackedChainKeys = new Set<string>();
  for (const line of lines) {
    kindById.set(line.id, kindOf(line.ty));
    if (line.k) {
      const ids = idsByEvent.get(line.k) ?? new Set<string>();
      ids.add(line.id);
      idsByEvent.set(line.k, ids);
    }
    if (line.o !== 200) continue;
    acked.set(line.id, (acked.get(line.id) ?? 0) + 1);
    if (line.k) ackedChainKeys.add(line.k);
  }
  const inDb = new Set(rows.map((r) => r.id));
  const dbChainKeys = new Set<string>();
  for (const row of rows) {
    if (!row.body) continue;
    const key = bodyKey(JSON.parse(row.body) as Record<string, unknown>);
    if (key) dbChainKeys.add(key);
  }

  // The chains, read independently: every transfer touching a watched address, per subscription.
  const watched = new Map<string, string[]>();
  for (const sub of [...setup.lists, ...setup.probes.values()]) {
    for (const address of sub.addresses) {
      const key = `${sub.chain}|${address.toLowerCase()}`;
      watched.set(key, [...(watched.get(key) ?? []), sub.id]);
    }
  }
  const expected = new Set<string>();
  for (const chain of chains) {
    const mine = new Map(
      [...watched].filter(([k]) => k.startsWith(`${chain.name}|`)).map(([k, v]) => [k.split('|')[1]!, v]),
    );
    for (const key of (await chain.expectedEvents(mine, heads.get(chain.name)!, 'ETH')).keys())
      expected.add(key);
  }
  const multi = [...idsByEvent].filter(([, ids]) => ids.size > 1);
  const duplicateIds = [...acked].filter(([, n]) => n > 1);
  const ackTimes = lines.filter((l) => l.o === 200).map((l) => l.t);
  const signatures = checkSignatures(lines, setup.secrets);
  return {
    dbTotal: rows.length,
    dbByKind: count(rows, (r) => kindOf(r.event_type)),
    dbByState: count(rows, (r) => r.state),
    requests: lines.length,
    byOutcome: count(lines, (l) => (l.o === 0 ? 'no answer' : String(l.o))),
    ackedDistinct: acked.size,
    duplicatesById: [...acked.values()].reduce((sum, n) => sum + n - 1, 0),
    duplicateIdsByKind: count(duplicateIds, ([id]) => kindById.get(id) ?? 'unknown'),
    lost: rows
      .filter((r) => r.state !== 'cancelled' && !acked.has(r.id))
      .map((r) => `${r.id} (${r.event_type}, ${r.state})`),
    chainExpected: expected.size,
    chainMissingOnReceivers: [...expected].filter((k) => !ackedChainKeys.has(k)),
    chainMissingInDb: [...expected].filter((k) => !dbChainKeys.has(k)),
    chainUnexpected: [...ackedChainKeys].filter((k) => !expected.has(k)),
    multiIdEvents: multi.length,
    multiIdExample: multi[0]
      ? `${multi[0][0].split('|')[2]!.slice(0, 12)}… on ${multi[0][0].split('|')[1]} as ${[...multi[0][1]].join(' and ')}`
      : undefined,
    ackedNotInDb: count(
      [...acked.keys()].filter((id) => !inDb.has(id)),
      (id) => kindById.get(id) ?? 'unknown',
    ),
    signaturesChecked: signatures.checked,
    signaturesBad: signatures.bad,
    firstAck: ackTimes.reduce((a, b) => Math.min(a, b), Number.POSITIVE_INFINITY),
    lastAck: ackTimes.reduce((a, b) => Math.max(a, b), 0),
    lines,
  };
}
