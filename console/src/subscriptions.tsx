/**
 * Subscriptions: the list (filtered by network and state), the create form (validated by the
 * API, whose messages are shown at the fields they name), and one subscription with its actions
 * and delivery log.
 */
import { useState } from 'preact/hooks';
import { api, must, type Problem, problemOf, type Subscription } from './client';
import { DeliveryLog } from './log';
import {
  Badge,
  ConfirmButton,
  errorsAt,
  Field,
  Pager,
  ProblemAlert,
  SelectField,
  ShownOnce,
  shortId,
  shortText,
  Table,
  TextField,
  Time,
  useLoaded,
  usePages,
} from './ui';

/** A subscription in a few words, for a table cell or a choice: its network and what it watches. */
export function describeSubscription(s: Subscription): string {
  if (s.type === 'REGISTRY_EVENTS') return `registry events ${shortId(s.attr.registryId ?? '')}`;
  const where = s.attr.address ? shortText(s.attr.address) : `${s.attr.addressCount ?? 0} addresses`;
  return `${s.attr.chain ?? ''} ${where}`;
}

/** The account's subscriptions (the first 100, newest first), for labels and filters elsewhere. */
export async function loadSubscriptionLabels(): Promise<{ id: string; label: string }[]> {
  const page = await must(api.GET('/api/v1/subscription', { params: { query: { limit: 100 } } }));
  return page.data.map((s) => ({ id: s.id, label: describeSubscription(s) }));
}

/** Fields the create form shows; a problem's field errors are shown at these pointers. */
const FORM_POINTERS = [
  '#/attr/chain',
  '#/attr/address',
  '#/attr/addresses',
  '#/attr/url',
  '#/confirmations',
  '#/mempool',
  '#/ack',
  '#/callbackToken',
  '#/signature',
];

/** What signs a subscription's deliveries, as create and rotate answer it: a secret or a public key. */
function signingValues(answer: { secret?: string; publicKey?: string }): [string, string][] {
  return answer.publicKey !== undefined
    ? [['Public key (verifies v1a signatures)', answer.publicKey]]
    : [['Signing secret', answer.secret ?? '']];
}

function CreateSubscription(props: { networks: string[]; onCreated: () => void }) {
  const [chain, setChain] = useState('');
  const [addresses, setAddresses] = useState('');
  const [url, setUrl] = useState('');
  const [confirmations, setConfirmations] = useState('');
  const [mempool, setMempool] = useState<'' | 'on' | 'off'>('');
  const [ack, setAck] = useState<'status' | '2xx'>('status');
  const [callbackToken, setCallbackToken] = useState('');
  const [signature, setSignature] = useState<'hmac' | 'ed25519'>('hmac');
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  const [created, setCreated] = useState<
    { id: string; secret?: string; publicKey?: string; callbackToken: string } | undefined
  >();
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setProblem(undefined);
    // One address is sent as Tatum's attr.address, several as a list; the API judges both.
    const list = addresses
      .split(/[\s,]+/)
      .map((a) => a.trim())
      .filter(Boolean);
    const attr = list.length > 1 ? { chain, url, addresses: list } : { chain, url, address: list[0] ?? '' };
    try {
      const answer = await must(
        api.POST('/api/v1/subscription', {
          body: {
            type: 'ADDRESS_TRANSACTION',
            attr,
            ...(confirmations !== '' ? { confirmations: Number(confirmations) } : {}),
            ...(mempool ? { mempool: mempool === 'on' } : {}),
            ack,
            signature,
            ...(callbackToken ? { callbackToken } : {}),
          },
        }),
      );
      setCreated(answer);
      setAddresses('');
      props.onCreated();
    } catch (err) {
      setProblem(problemOf(err));
    } finally {
      setBusy(false);
    }
  };

  if (created)
    return (
      <ShownOnce
        title={`Subscription ${created.id} created`}
        values={[...signingValues(created), ['Callback token', created.callbackToken]]}
        note={
          created.publicKey
            ? 'Copy the callback token now: it will not be shown again. The public key stays on the subscription’s page.'
            : undefined
        }
        onDismiss={() => setCreated(undefined)}
      />
    );
  return (
    <form class="card form" noValidate onSubmit={submit} aria-label="New subscription">
      <h3>New subscription</h3>
      <ProblemAlert
        problem={problem}
        shown={(p) => FORM_POINTERS.some((f) => p === f || p.startsWith(`${f}/`))}
      />
      <div class="grid">
        <Field label="Network" errors={errorsAt(problem, '#/attr/chain')} hint="ETH, BTC, SOL, DEVNET…">
          {(attrs) => (
            <>
              <input
                {...attrs}
                list="known-networks"
                value={chain}
                onInput={(e) => setChain(e.currentTarget.value)}
                autoComplete="off"
              />
              <datalist id="known-networks">
                {props.networks.map((n) => (
                  <option key={n} value={n} />
                ))}
              </datalist>
            </>
          )}
        </Field>
        <TextField
          label="Addresses"
          rows={2}
          verbatim
          value={addresses}
          onValue={setAddresses}
          errors={[...errorsAt(problem, '#/attr/address'), ...errorsAt(problem, '#/attr/addresses')]}
          hint="One address, or several separated by spaces or new lines"
        />
        <TextField
          label="Callback URL"
          type="url"
          value={url}
          onValue={setUrl}
          errors={errorsAt(problem, '#/attr/url')}
        />
        <TextField
          label="Confirmations"
          type="number"
          value={confirmations}
          onValue={setConfirmations}
          errors={errorsAt(problem, '#/confirmations')}
          hint="Empty: the network's default"
        />
        <SelectField
          label="Mempool"
          value={mempool}
          onValue={setMempool}
          options={[
            ['', 'Default (on for EVM networks)'],
            ['on', 'Notify pending transactions'],
            ['off', 'Included transactions only'],
          ]}
          errors={errorsAt(problem, '#/mempool')}
        />
        <SelectField
          label="Acknowledgement"
          value={ack}
          onValue={setAck}
          options={[
            ['status', '2xx with {"status":"success"}'],
            ['2xx', 'Any 2xx'],
          ]}
          errors={errorsAt(problem, '#/ack')}
        />
        <SelectField
          label="Signature"
          value={signature}
          onValue={setSignature}
          options={[
            ['hmac', 'HMAC-SHA256 (v1)'],
            ['ed25519', 'Ed25519 (v1a)'],
          ]}
          errors={errorsAt(problem, '#/signature')}
          hint="Ed25519: receivers verify with a public key, which cannot sign"
        />
        <TextField
          label="Callback token"
          verbatim
          value={callbackToken}
          onValue={setCallbackToken}
          errors={errorsAt(problem, '#/callbackToken')}
          hint="Empty: one is generated"
        />
      </div>
      <button type="submit" class="primary" disabled={busy}>
        Create subscription
      </button>
    </form>
  );
}

export function SubscriptionsView(props: { networks: string[] }) {
  const [chain, setChain] = useState('');
  const [status, setStatus] = useState<'' | 'active' | 'disabled' | 'deleted'>('');
  const pages = usePages();
  const [creating, setCreating] = useState(false);
  const list = useLoaded(
    () =>
      must(
        api.GET('/api/v1/subscription', {
          params: {
            query: {
              limit: 50,
              ...(chain ? { chain } : {}),
              ...(status ? { status } : {}),
              ...(pages.cursor ? { cursor: pages.cursor } : {}),
            },
          },
        }),
      ),
    JSON.stringify([chain, status, pages.cursor]),
  );
  const networks = [...new Set([...props.networks, ...(chain ? [chain] : [])])].sort();

  return (
    <section aria-labelledby="subscriptions-heading">
      <div class="heading">
        <h2 id="subscriptions-heading">Subscriptions</h2>
        <button type="button" class="primary" aria-expanded={creating} onClick={() => setCreating(!creating)}>
          {creating ? 'Close the form' : 'New subscription'}
        </button>
      </div>
      {creating && <CreateSubscription networks={props.networks} onCreated={() => void list.reload()} />}
      <form class="filters" noValidate onSubmit={(e) => e.preventDefault()}>
        <label>
          Network
          <select
            value={chain}
            onChange={(e) => {
              setChain(e.currentTarget.value);
              pages.reset();
            }}
          >
            <option value="">All networks</option>
            {networks.map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </label>
        <label>
          State
          <select
            value={status}
            onChange={(e) => {
              setStatus(e.currentTarget.value as typeof status);
              pages.reset();
            }}
          >
            <option value="">Active and disabled</option>
            <option value="active">Active</option>
            <option value="disabled">Disabled</option>
            <option value="deleted">Deleted</option>
          </select>
        </label>
      </form>
      <ProblemAlert problem={list.problem} />
      <Table
        caption="Subscriptions, newest first"
        columns={['Network', 'Watches', 'Callback URL', 'State', 'Created']}
        empty={
          list.data?.data.length === 0 && (
            <>No subscriptions{chain || status ? ' match these filters' : ' yet'}.</>
          )
        }
      >
        {list.data?.data.map((s) => (
          <tr key={s.id}>
            <td>{s.attr.chain ?? (s.type === 'REGISTRY_EVENTS' ? 'registry events' : '—')}</td>
            <td>
              <a href={`#/subscriptions/${s.id}`} class="mono">
                {s.attr.address ??
                  (s.type === 'REGISTRY_EVENTS'
                    ? `registry ${shortId(s.attr.registryId ?? '')}`
                    : `${s.attr.addressCount ?? 0} addresses`)}
              </a>
            </td>
            <td class="mono">{s.attr.url}</td>
            <td>
              <Badge value={s.status} />
            </td>
            <td>
              <Time at={s.createdAt} />
            </td>
          </tr>
        ))}
      </Table>
      <Pager label="Pages of subscriptions" pages={pages} next={list.data?.next_cursor} />
    </section>
  );
}

export function SubscriptionView(props: { id: string }) {
  const { id } = props;
  const sub = useLoaded(() => must(api.GET('/api/v1/subscription/{id}', { params: { path: { id } } })), id);
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  const [message, setMessage] = useState<string | undefined>(undefined);
  const [rotatedKey, setRotatedKey] = useState<{ secret?: string; publicKey?: string } | undefined>(
    undefined,
  );

  const act = async (what: () => Promise<string>) => {
    setProblem(undefined);
    setMessage(undefined);
    try {
      const done = await what();
      // The view shows the subscription as the action left it before saying it is done.
      await sub.reload();
      setMessage(done);
    } catch (err) {
      setProblem(problemOf(err));
    }
  };
  const path = { params: { path: { id } } };
  const s = sub.data;

  return (
    <section aria-labelledby="subscription-heading">
      <p class="crumbs">
        <a href="#/subscriptions">Subscriptions</a> /
      </p>
      <h2 id="subscription-heading">Subscription {id}</h2>
      <ProblemAlert problem={sub.problem} />
      {s && (
        <>
          <dl class="facts">
            <div>
              <dt>State</dt>
              <dd>
                <Badge value={s.status} />
                {s.disabledReason && <span class="muted"> {s.disabledReason}</span>}
              </dd>
            </div>
            <div>
              <dt>Type</dt>
              <dd>{s.type}</dd>
            </div>
            {s.attr.chain && (
              <div>
                <dt>Network</dt>
                <dd>{s.attr.chain}</dd>
              </div>
            )}
            <div>
              <dt>Watches</dt>
              <dd class="mono">
                {s.attr.address ??
                  (s.attr.registryId ? `registry ${s.attr.registryId}` : `${s.attr.addressCount} addresses`)}
              </dd>
            </div>
            <div>
              <dt>Callback URL</dt>
              <dd class="mono">{s.attr.url}</dd>
            </div>
            <div>
              <dt>Confirmations</dt>
              <dd>{s.confirmations}</dd>
            </div>
            <div>
              <dt>Mempool</dt>
              <dd>{s.mempool ? 'notified' : 'not notified'}</dd>
            </div>
            <div>
              <dt>Signature</dt>
              <dd>{s.signature === 'ed25519' ? 'Ed25519 (v1a)' : 'HMAC-SHA256 (v1)'}</dd>
            </div>
            {s.publicKey && (
              <div>
                <dt>Public key</dt>
                <dd class="mono">{s.publicKey}</dd>
              </div>
            )}
            <div>
              <dt>Acknowledgement</dt>
              <dd>{s.ack === '2xx' ? 'any 2xx' : '2xx with {"status":"success"}'}</dd>
            </div>
            <div>
              <dt>Created</dt>
              <dd>
                <Time at={s.createdAt} />
              </dd>
            </div>
            {s.previousSecretExpiresAt && (
              <div>
                <dt>Earlier secrets sign until</dt>
                <dd>
                  <Time at={s.previousSecretExpiresAt} />
                </dd>
              </div>
            )}
            {s.deletedAt && (
              <div>
                <dt>Deleted</dt>
                <dd>
                  <Time at={s.deletedAt} />
                </dd>
              </div>
            )}
          </dl>
          {s.status !== 'deleted' && (
            <div class="toolbar">
              <button
                type="button"
                onClick={() =>
                  void act(async () => {
                    const r = await must(api.POST('/api/v1/subscription/{id}/test', path));
                    return `Test notification ${r.notificationId} is queued.`;
                  })
                }
              >
                Send test notification
              </button>
              {s.status === 'disabled' && (
                <button
                  type="button"
                  onClick={() =>
                    void act(async () => {
                      await must(api.POST('/api/v1/subscription/{id}/enable', path));
                      return 'The subscription is enabled again.';
                    })
                  }
                >
                  Enable
                </button>
              )}
              <button
                type="button"
                onClick={() =>
                  void act(async () => {
                    const rotated = await must(api.POST('/api/v1/subscription/{id}/rotate-secret', path));
                    setRotatedKey(rotated);
                    return `A new ${rotated.publicKey ? 'key pair' : 'signing secret'} was issued; the earlier ones keep signing beside it until ${new Date(rotated.previousSecretExpiresAt).toLocaleString()}.`;
                  })
                }
              >
                {s.signature === 'ed25519' ? 'Rotate key' : 'Rotate secret'}
              </button>
              <ConfirmButton
                label="Delete"
                confirm="Delete for good"
                onConfirm={() =>
                  void act(async () => {
                    await must(api.DELETE('/api/v1/subscription/{id}', path));
                    return 'The subscription is deleted; its log stays readable.';
                  })
                }
              />
            </div>
          )}
          {message && (
            <p class="notice" role="status">
              {message}
            </p>
          )}
          <ProblemAlert problem={problem} />
          {rotatedKey && (
            <ShownOnce
              title={rotatedKey.publicKey ? 'New public key' : 'New signing secret'}
              values={signingValues(rotatedKey)}
              note={rotatedKey.publicKey ? 'Give it to your receivers; it stays on this page.' : undefined}
              onDismiss={() => setRotatedKey(undefined)}
            />
          )}
          <h3>Delivery log</h3>
          <DeliveryLog subscriptionId={id} />
        </>
      )}
    </section>
  );
}
