import type { BackfillView } from '../backfill/jobs.js';

/**
 * `ledgerhook backfill SUBSCRIPTION --from … [--to …]`: starts a backfill through the service's
 * API and draws its progress until it ends. A backfill already running for the subscription is
 * followed instead of refused, so the command can be run again after an interruption.
 */

export interface BackfillCliOptions {
  url: string;
  token: string;
  from?: string;
  to?: string;
  /** Where the bar is drawn; a terminal redraws one line, anything else gets a line per step. */
  out: { write(text: string): void; isTTY?: boolean };
  pollMs?: number;
}

const BAR = 30;

/** One line: a bar, the blocks done of the range, what was found and the time left. */
export function progressLine(v: BackfillView): string {
  const filled = Math.round(Math.min(1, v.progress) * BAR);
  const eta = v.etaSeconds === null ? '' : ` eta ${formatSeconds(v.etaSeconds)}`;
  return (
    `[${'#'.repeat(filled)}${'.'.repeat(BAR - filled)}] ${(v.progress * 100).toFixed(1)}% ` +
    `block ${Math.max(v.position, v.from - 1)}/${v.to} found ${v.found}${eta} ${v.state}` +
    (v.error ? ` (${v.error})` : '')
  );
}

function formatSeconds(s: number): string {
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** The bound as the API takes it: a block number as a number, anything else as given. */
const bound = (value: string) => (/^\d+$/.test(value) ? Number(value) : value);

export async function runBackfill(subscription: string, o: BackfillCliOptions): Promise<number> {
  const base = `${o.url.replace(/\/$/, '')}/api/v1/subscription/${encodeURIComponent(subscription)}/backfill`;
  const headers = { authorization: `Bearer ${o.token}`, 'content-type': 'application/json' };
  const describe = (body: { detail?: string; errors?: { detail: string; pointer?: string }[] }) =>
    [body.detail, ...(body.errors ?? []).map((e) => `${e.pointer ?? ''} ${e.detail}`.trim())]
      .filter(Boolean)
      .join('; ');

  if (o.from !== undefined) {
    const res = await fetch(base, {
      method: 'POST',
      headers,
      body: JSON.stringify({ from: bound(o.from), ...(o.to === undefined ? {} : { to: bound(o.to) }) }),
    });
    const body = (await res.json()) as BackfillView & { detail?: string; errors?: [] };
    if (res.status === 409)
      o.out.write(
        `a backfill is already running (${String((body as { existingId?: string }).existingId)}); following it\n`,
      );
    else if (res.status !== 202) {
      o.out.write(`ledgerhook: backfill refused (${res.status}): ${describe(body)}\n`);
      return 1;
    }
  }
  let lastStep = -1;
  for (;;) {
    const res = await fetch(base, { headers: { authorization: headers.authorization } });
    const view = (await res.json()) as BackfillView & { detail?: string };
    if (res.status !== 200) {
      o.out.write(`ledgerhook: ${describe(view)}\n`);
      return 1;
    }
    const line = progressLine(view);
    if (o.out.isTTY) o.out.write(`\r${line}\u001b[K`);
    else {
      // Without a terminal, a line per tenth, so that logs stay short.
      const step = Math.floor(view.progress * 10);
      if (step !== lastStep || view.state !== 'running') o.out.write(`${line}\n`);
      lastStep = step;
    }
    if (view.state !== 'running') {
      if (o.out.isTTY) o.out.write('\n');
      return view.state === 'done' ? 0 : 1;
    }
    await new Promise((resolve) => setTimeout(resolve, o.pollMs ?? 500));
  }
}
