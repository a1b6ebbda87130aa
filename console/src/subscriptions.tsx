/**
 * Subscriptions: the list (filtered by network, type and state), the create form (validated by
 * the API, whose messages are shown at the fields they name) for address transactions and
 * contract events, and one subscription with its actions and delivery log.
 */
import { useState } from 'preact/hooks';
import { api, must, type Problem, problemOf, type Subscription } from './client';
import {
  CONTRACT_LOG_EVENT,
  describeEventSubscription,
  EVENT_POINTERS,
  EventFacts,
  EventFields,
  type EventInput,
  EventWatches,
  eventAttr,
  InputProblem,
} from './events';
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
  if (s.type === CONTRACT_LOG_EVENT) return describeEventSubscription(s.attr);
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
  ...EVENT_POINTERS,
];

type Kind = 'ADDRESS_TRANSACTION' | typeof CONTRACT_LOG_EVENT;

/** The names of the subscription types, for the list, the form and the filter. */
const TYPE_NAMES: Record<string, string> = {
  ADDRESS_TRANSACTION: 'Address transactions',
  CONTRACT_LOG_EVENT: 'Contract event',
  REGISTRY_EVENTS: 'Registry events',
};

/** A field error found before asking the API, shown at its field as the API's are. */
function inputProblem(err: InputProblem): Problem {
  return {
    type: 'about:blank',
    title: 'Invalid subscription',
    status: 400,
    detail: 'Nothing was sent: correct the field below.',
    errors: [{ pointer: err.pointer, detail: err.detail }],
  };
}

/** What signs a subscription's deliveries, as create and rotate answer it: a secret or a public key. */
function signingValues(answer: { secret?: string; publicKey?: string }): [string, string][] {
  return answer.publicKey !== undefined
    ? [['Public key (verifies v1a signatures)', answer.publicKey]]
    : [['Signing secret', answer.secret ?? '']];
}

function CreateSubscription(props: { networks: string[]; onCreated: () => void }) {
  const [kind, setKind] = useState<Kind>('ADDRESS_TRANSACTION');
  const [eventInput, setEventInput] = useState<EventInput>({ event: '', contracts: '', filter: '' });
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
    const events = kind === CONTRACT_LOG_EVENT;
    try {
      const attr = events
        ? eventAttr(eventInput, chain, url)
        : list.length > 1
          ? { chain, url, addresses: list }
          : { chain, url, address: list[0] ?? '' };
      const answer = await must(
        api.POST('/api/v1/subscription', {
          body: {
            type: kind,
            attr,
            ...(confirmations !== '' ? { confirmations: Number(confirmations) } : {}),
            // Contract events come from mined blocks: the mempool choice is not theirs.
            ...(mempool && !events ? { mempool: mempool === 'on' } : {}),
            ack,
            signature,
            ...(callbackToken ? { callbackToken } : {}),
          },
        }),
      );
      setCreated(answer);
      setAddresses('');
      setEventInput({ event: '', contracts: '', filter: '' });
      props.onCreated();
    } catch (err) {
      setProblem(err instanceof InputProblem ? inputProblem(err) : problemOf(err));
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
        <SelectField
          label="Type"
          value={kind}
          onValue={setKind}
          options={[
            ['ADDRESS_TRANSACTION', 'Address transactions'],
            [CONTRACT_LOG_EVENT, 'Contract event (EVM)'],
          ]}
          errors={errorsAt(problem, '#/type')}
          hint={
            kind === CONTRACT_LOG_EVENT
              ? 'An event emitted by contracts, decoded'
              : 'Value moving to or from addresses'
          }
        />
        <Field
          label="Network"
          errors={errorsAt(problem, '#/attr/chain')}
          hint={
            kind === CONTRACT_LOG_EVENT ? 'An EVM network: ETH, BSC, POL, DEVNET…' : 'ETH, BTC, SOL, DEVNET…'
          }
        >
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
        {kind === CONTRACT_LOG_EVENT ? (
          <EventFields value={eventInput} onValue={setEventInput} problem={problem} />
        ) : (
          <TextField
            label="Addresses"
            rows={2}
            verbatim
            value={addresses}
            onValue={setAddresses}
            errors={[...errorsAt(problem, '#/attr/address'), ...errorsAt(problem, '#/attr/addresses')]}
            hint="One address, or several separated by spaces or new lines"
          />
        )}
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
        {kind !== CONTRACT_LOG_EVENT && (
          <SelectField
            label="Mempool"
            value={mempool}
            onValue={setMempool}
            options={[
              ['', 'Default (on for EVM networks, off for Bitcoin)'],
              ['on', 'Notify pending transactions'],
              ['off', 'Included transactions only'],
            ]}
            errors={errorsAt(problem, '#/mempool')}
            hint="EVM and Bitcoin networks; a pending transaction that cannot be mined any more is withdrawn (dropped)"
          />
        )}
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
  const [type, setType] = useState<'' | Kind | 'REGISTRY_EVENTS'>('');
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
              ...(type ? { type } : {}),
              ...(pages.cursor ? { cursor: pages.cursor } : {}),
            },
          },
        }),
      ),
    JSON.stringify([chain, status, type, pages.cursor]),
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
          Type
          <select
            value={type}
            onChange={(e) => {
              setType(e.currentTarget.value as typeof type);
              pages.reset();
            }}
          >
            <option value="">All types</option>
            {Object.entries(TYPE_NAMES).map(([value, name]) => (
              <option key={value} value={value}>
                {name}
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
        columns={['Network', 'Type', 'Watches', 'Callback URL', 'State', 'Created']}
        empty={
          list.data?.data.length === 0 && (
            <>No subscriptions{chain || status || type ? ' match these filters' : ' yet'}.</>
          )
        }
      >
        {list.data?.data.map((s) => (
          <tr key={s.id} data-subscription={s.id}>
            <td>{s.attr.chain ?? '—'}</td>
            <td>{TYPE_NAMES[s.type] ?? s.type}</td>
            <td>
              {s.type === CONTRACT_LOG_EVENT ? (
                <EventWatches s={s} />
              ) : (
                <a href={`#/subscriptions/${s.id}`} class="mono">
                  {s.attr.address ??
                    (s.type === 'REGISTRY_EVENTS'
                      ? `registry ${shortId(s.attr.registryId ?? '')}`
                      : `${s.attr.addressCount ?? 0} addresses`)}
                </a>
              )}
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
              <dd>
                {TYPE_NAMES[s.type] ?? s.type} <span class="muted mono">{s.type}</span>
              </dd>
            </div>
            {s.attr.chain && (
              <div>
                <dt>Network</dt>
                <dd>{s.attr.chain}</dd>
              </div>
            )}
            {s.type === CONTRACT_LOG_EVENT ? (
              <EventFacts attr={s.attr} />
            ) : (
              <div>
                <dt>Watches</dt>
                <dd class="mono">
                  {s.attr.address ??
                    (s.attr.registryId
                      ? `registry ${s.attr.registryId}`
                      : `${s.attr.addressCount} addresses`)}
                </dd>
              </div>
            )}
            <div>
              <dt>Callback URL</dt>
              <dd class="mono">{s.attr.url}</dd>
            </div>
            <div>
              <dt>Confirmations</dt>
              <dd>{s.confirmations}</dd>
            </div>
            {s.type !== CONTRACT_LOG_EVENT && (
              <div>
                <dt>Mempool</dt>
                <dd>{s.mempool ? 'notified' : 'not notified'}</dd>
              </div>
            )}
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
