/**
 * The chain followers as /readyz reports them, read again every few seconds: each network's last
 * block processed, its node's head, how far behind it is, and what went wrong while it is not
 * healthy. The service's state, not an account's: every token sees the same.
 */
import { useState } from 'preact/hooks';
import { api, type Follower, must } from './client';
import { Badge, ProblemAlert, Table, useEvery, useLoaded } from './ui';

const REFRESH_MS = 2_000;

/** The networks followed now, for the other views' network choices. */
export async function loadFollowedNetworks(): Promise<string[]> {
  const ready = await must(api.GET('/readyz'));
  return ready.networks.map((n) => n.network);
}

function health(f: Follower): string {
  if (f.standby) return 'standby';
  return f.healthy ? 'healthy' : 'unhealthy';
}

export function FollowersView() {
  const [updated, setUpdated] = useState<Date | undefined>(undefined);
  const ready = useLoaded(async () => {
    const answer = await must(api.GET('/readyz'));
    setUpdated(new Date());
    return answer;
  }, 'readyz');
  useEvery(REFRESH_MS, () => void ready.reload());
  const networks = ready.data?.networks ?? [];

  return (
    <section aria-labelledby="followers-heading">
      <div class="heading">
        <h2 id="followers-heading">Followers</h2>
        <p class="muted" aria-live="polite">
          {updated ? `Updated ${updated.toLocaleTimeString()} · every ${REFRESH_MS / 1000} s` : 'Loading…'}
        </p>
      </div>
      <p class="muted">
        Height is the last block this service processed, head the latest its node knows, lag the difference.
        On EVM networks, internal transfers (value moved by contract calls) are notified only where the node
        answers trace methods. A network is followed once it has a subscription; these are the service's, the
        same for every account.
      </p>
      <ProblemAlert problem={ready.problem} />
      <Table
        caption="Chain followers of this service"
        columns={['Network', 'Height', 'Head', 'Lag', 'Health', 'Internal transfers', 'Last error']}
        empty={
          ready.data &&
          networks.length === 0 && (
            <>No network is followed by this process yet: a network is followed once it has a subscription.</>
          )
        }
      >
        {networks.map((f) => (
          <tr key={f.network} data-network={f.network}>
            <th scope="row">{f.network}</th>
            <td>{f.height ?? '—'}</td>
            <td>{f.head ?? '—'}</td>
            <td>{f.height !== null && f.head !== null ? Math.max(0, f.head - f.height) : '—'}</td>
            <td>
              <Badge value={health(f)} />
            </td>
            <td>
              {f.internalTransfers === undefined ? (
                <span class="muted">—</span>
              ) : f.internalTransfers ? (
                'read from traces'
              ) : (
                <span title={f.internalTransfersReason ?? undefined}>
                  not notified{f.internalTransfersReason ? `: ${f.internalTransfersReason}` : ''}
                </span>
              )}
              {f.traceGaps && f.traceGaps.count > 0 && (
                <div class="muted" data-trace-gaps={f.traceGaps.count}>
                  {f.traceGaps.count === 1 ? '1 block' : `${f.traceGaps.count} blocks`} without them (trace
                  gaps,{' '}
                  {f.traceGaps.first === f.traceGaps.last
                    ? `block ${f.traceGaps.first}`
                    : `blocks ${f.traceGaps.first}–${f.traceGaps.last}`}
                  ): the node could not trace them
                </div>
              )}
            </td>
            <td>{f.lastError ?? <span class="muted">—</span>}</td>
          </tr>
        ))}
      </Table>
    </section>
  );
}
