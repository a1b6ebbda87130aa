/**
 * The delivery log, of one subscription or of the whole account: each notification with its
 * state and attempts (status codes, durations, errors, the start of each answer), filtered by
 * state and time, with resend and recover.
 */
import { useState } from 'preact/hooks';
import { api, must, type LoggedNotification as Notification, type Problem, problemOf } from './client';
import { contractLogParts } from './events';
import {
  Badge,
  Excerpt,
  localToIso,
  Pager,
  ProblemAlert,
  shortId,
  shortText,
  Table,
  Time,
  useEvery,
  useLoaded,
  usePages,
  zoneLabel,
} from './ui';

const PAGE_SIZE = 20;
/** How often the first page is read again while "Live" is on. */
const LIVE_MS = 2_000;

interface Filters {
  state: '' | 'pending' | 'delivered' | 'failed';
  /** datetime-local values, in the browser's time zone. */
  since: string;
  until: string;
  /** Account log only: one subscription's notifications. */
  subscription: string;
}

async function loadPage(fixed: string | undefined, filters: Filters, cursor: string | undefined) {
  const query = {
    limit: PAGE_SIZE,
    ...(filters.state ? { state: filters.state } : {}),
    ...(localToIso(filters.since) ? { since: localToIso(filters.since) } : {}),
    ...(localToIso(filters.until) ? { until: localToIso(filters.until) } : {}),
    ...(cursor ? { cursor } : {}),
  };
  if (fixed)
    return must(
      api.GET('/api/v1/subscription/{id}/notifications', { params: { path: { id: fixed }, query } }),
    );
  return must(
    api.GET('/api/v1/notification', {
      params: {
        query: { ...query, ...(filters.subscription ? { subscription: filters.subscription } : {}) },
      },
    }),
  );
}

/** One line saying what a notification is about, from its body. */
function summary(n: Notification): string {
  const body = (n.payload ?? {}) as Record<string, unknown>;
  const text = (key: string) => (typeof body[key] === 'string' ? (body[key] as string) : undefined);
  const parts: string[] = [];
  if (body.test === true) parts.push('test');
  const amount = text('amount');
  const kind = text('type');
  // A fee paid (attr.fees) and value moved by a contract call (from traces) read as what they are.
  if (kind === 'fee') parts.push(body.failed === true ? 'fee of a failed transaction' : 'fee');
  if (body.internal === true) parts.push(`internal transfer (call ${text('traceAddress') ?? '?'})`);
  if (amount) parts.push(`${amount} ${text('asset') ?? ''}`.trim());
  // A contract event: its name, contract and arguments (contract.log, contract.log.reorg, a sample).
  if (text('contractAddress') && Array.isArray(body.topics)) parts.push(...contractLogParts(body));
  const tx = text('txId');
  if (tx) parts.push(`tx ${shortText(tx)}`);
  if (kind?.startsWith('registry.')) parts.push(kind);
  // A pending announcement taken back says what took its place; it is no longer in the mempool.
  if (body.dropped === true) {
    const replacedBy = text('replacedBy');
    parts.push(replacedBy ? `replaced by ${shortText(replacedBy)}` : 'left the mempool');
  } else if (body.mempool === true) parts.push('in mempool');
  else if (typeof body.blockNumber === 'number') parts.push(`block ${body.blockNumber}`);
  if (typeof body.logIndex === 'number') parts.push(`log ${body.logIndex}`);
  if (body.backfill === true) parts.push('backfill');
  return parts.join(' · ');
}

/**
 * The summary cell: a withdrawal marked as such (its block left the chain, or its pending
 * transaction was replaced or dropped), then the line.
 */
function Summary(props: { n: Notification }) {
  const body = (props.n.payload ?? {}) as { reorg?: unknown; dropped?: unknown; replacedBy?: unknown };
  const reorg = body.reorg === true;
  const dropped = body.dropped === true;
  const replacedBy = typeof body.replacedBy === 'string' ? body.replacedBy : undefined;
  return (
    <td class="summary">
      {reorg && (
        <>
          <span
            class="badge badge-reorg"
            title="Its block left the chain: this takes back the earlier notification"
          >
            withdrawn (reorg)
          </span>{' '}
        </>
      )}
      {dropped && (
        <>
          <span
            class="badge badge-dropped"
            title={`Its transaction can no longer be mined as announced: this takes back the pending notification${replacedBy ? `. Replaced by ${replacedBy}` : ''}`}
          >
            withdrawn (dropped)
          </span>{' '}
        </>
      )}
      {summary(props.n)}
    </td>
  );
}

function Attempts(props: { n: Notification }) {
  const { n } = props;
  return (
    <div class="details">
      <Table
        class="attempts"
        caption={`Attempts of notification ${n.id}`}
        columns={['#', 'Trigger', 'Started', 'Duration', 'Status code', 'Outcome', 'Error', 'Response']}
        empty={
          n.attempts.length === 0 && <>No attempt yet{n.nextAttemptAt ? '; the first is due now' : ''}.</>
        }
      >
        {n.attempts.map((a) => (
          <tr key={a.attempt}>
            <td>{a.attempt}</td>
            <td>{a.trigger}</td>
            <td>
              <Time at={a.startedAt} />
            </td>
            <td>{a.durationMs} ms</td>
            <td>{a.statusCode ?? '—'}</td>
            <td>
              <Badge value={a.outcome} />
            </td>
            <td>
              <Excerpt text={a.error} />
            </td>
            <td>
              <Excerpt text={a.response} />
            </td>
          </tr>
        ))}
      </Table>
      {n.nextAttemptAt && (
        <p>
          Next attempt: <Time at={n.nextAttemptAt} />
        </p>
      )}
      <h4>Body</h4>
      <pre class="json">{JSON.stringify(n.payload, null, 2)}</pre>
    </div>
  );
}

function Recover(props: { subscriptionId: string; onDone: () => void }) {
  const [since, setSince] = useState('');
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  const [done, setDone] = useState<string | undefined>(undefined);
  return (
    <form
      class="inline-form"
      noValidate
      onSubmit={async (event) => {
        event.preventDefault();
        setDone(undefined);
        setProblem(undefined);
        try {
          // An empty field is sent as is, so the API's own message says what is missing.
          const result = await must(
            api.POST('/api/v1/subscription/{id}/recover', {
              params: { path: { id: props.subscriptionId } },
              body: { since: localToIso(since) ?? since },
            }),
          );
          setDone(
            result.resent === 1
              ? '1 failed notification is queued again.'
              : `${result.resent} failed notifications are queued again.`,
          );
          props.onDone();
        } catch (err) {
          setProblem(problemOf(err));
        }
      }}
    >
      <label>
        Recover failed notifications created since ({zoneLabel()})
        <input
          type="datetime-local"
          step={1}
          value={since}
          onInput={(e) => setSince(e.currentTarget.value)}
        />
      </label>
      <button type="submit">Recover</button>
      {done && (
        <p class="notice" role="status">
          {done}
        </p>
      )}
      <ProblemAlert problem={problem} />
    </form>
  );
}

export function DeliveryLog(props: {
  /** One subscription's log; the account's otherwise. */
  subscriptionId?: string;
  /** Labels of the account's subscriptions, for the account log's filter and its rows. */
  subscriptions?: { id: string; label: string }[];
}) {
  const fixed = props.subscriptionId;
  const [filters, setFilters] = useState<Filters>({ state: '', since: '', until: '', subscription: '' });
  const pages = usePages();
  const [open, setOpen] = useState<Set<string>>(new Set());
  const [live, setLive] = useState(true);
  const [message, setMessage] = useState<string | undefined>(undefined);
  const [actionProblem, setActionProblem] = useState<Problem | undefined>(undefined);
  const log = useLoaded(
    () => loadPage(fixed, filters, pages.cursor),
    JSON.stringify([fixed, filters, pages.cursor]),
  );
  useEvery(LIVE_MS, () => void log.reload(), live && pages.first);

  const update = (change: Partial<Filters>) => {
    setFilters({ ...filters, ...change });
    pages.reset();
  };
  const labelOf = (id: string) => props.subscriptions?.find((s) => s.id === id)?.label ?? shortId(id);
  const recoverFor = fixed ?? (filters.subscription || undefined);
  const columns = [
    'Created',
    ...(fixed ? [] : ['Subscription']),
    'Event',
    'Summary',
    'State',
    'Attempts',
    'Last status',
    'Actions',
  ];

  const resend = async (id: string) => {
    setMessage(undefined);
    setActionProblem(undefined);
    try {
      await must(api.POST('/api/v1/notification/{id}/resend', { params: { path: { id } } }));
      setMessage(`Notification ${id} is queued for another attempt.`);
      await log.reload();
    } catch (err) {
      setActionProblem(problemOf(err));
    }
  };

  return (
    <section class="log" aria-label={fixed ? 'Delivery log of this subscription' : 'Delivery log'}>
      <form class="filters" noValidate onSubmit={(e) => e.preventDefault()}>
        <label>
          State
          <select
            value={filters.state}
            onChange={(e) => update({ state: e.currentTarget.value as Filters['state'] })}
          >
            <option value="">Any</option>
            <option value="pending">Pending</option>
            <option value="delivered">Delivered</option>
            <option value="failed">Failed</option>
          </select>
        </label>
        {!fixed && (
          <label>
            Subscription
            <select
              value={filters.subscription}
              onChange={(e) => update({ subscription: e.currentTarget.value })}
            >
              <option value="">All</option>
              {(props.subscriptions ?? []).map((s) => (
                <option key={s.id} value={s.id}>
                  {s.label}
                </option>
              ))}
            </select>
          </label>
        )}
        <label>
          Created since ({zoneLabel()})
          <input
            type="datetime-local"
            step={1}
            value={filters.since}
            onChange={(e) => update({ since: e.currentTarget.value })}
          />
        </label>
        <label>
          Created before
          <input
            type="datetime-local"
            step={1}
            value={filters.until}
            onChange={(e) => update({ until: e.currentTarget.value })}
          />
        </label>
        <label class="check">
          <input type="checkbox" checked={live} onChange={(e) => setLive(e.currentTarget.checked)} />
          Live
        </label>
        <button type="button" onClick={() => void log.reload()}>
          Refresh
        </button>
      </form>
      {recoverFor && <Recover subscriptionId={recoverFor} onDone={() => void log.reload()} />}
      {message && (
        <p class="notice" role="status">
          {message}
        </p>
      )}
      <ProblemAlert problem={actionProblem ?? log.problem} />
      <Table
        class="notifications"
        caption={fixed ? 'Notifications of this subscription, newest first' : 'Notifications, newest first'}
        columns={columns}
        empty={
          log.data?.data.length === 0 && (
            <>
              No notifications
              {filters.state || filters.since || filters.until ? ' match these filters' : ' yet'}.
            </>
          )
        }
      >
        {log.data?.data.flatMap((n) => {
          const expanded = open.has(n.id);
          const rows = [
            <tr key={n.id} data-notification={n.id}>
              <td>
                <Time at={n.createdAt} />
              </td>
              {!fixed && (
                <td>
                  <a href={`#/subscriptions/${n.subscriptionId}`}>{labelOf(n.subscriptionId)}</a>
                </td>
              )}
              <td>{n.eventType}</td>
              <Summary n={n} />
              <td>
                <Badge value={n.state} />
              </td>
              <td>{n.attemptCount}</td>
              <td class="nowrap">
                {n.lastStatusCode ?? '—'}
                {n.attempts.length > 0 && <span class="muted"> · {n.attempts.at(-1)?.durationMs} ms</span>}
              </td>
              <td class="actions">
                <button
                  type="button"
                  class="small"
                  aria-expanded={expanded}
                  onClick={() => {
                    const next = new Set(open);
                    if (expanded) next.delete(n.id);
                    else next.add(n.id);
                    setOpen(next);
                  }}
                >
                  {expanded ? 'Hide' : 'Details'}
                </button>
                <button type="button" class="small" onClick={() => void resend(n.id)}>
                  Resend
                </button>
              </td>
            </tr>,
          ];
          if (expanded)
            rows.push(
              <tr key={`${n.id}-details`} class="expanded">
                <td colSpan={columns.length}>
                  <Attempts n={n} />
                </td>
              </tr>,
            );
          return rows;
        })}
      </Table>
      <Pager label="Pages of the log" pages={pages} next={log.data?.next_cursor} />
    </section>
  );
}
